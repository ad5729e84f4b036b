"""Names that mean one thing: ``scopes.Scope`` is the seed's Scope interface, and no two public classes share a name."""

from __future__ import annotations

import warnings

import pytest

import scopes
from scopes import capture, core
from scopes.batches import Batch as DataBatch
from scopes.progress.operate import Operate
from scopes.progress.subgraph import Subgraph


def test_scope_is_the_seeds_scope_interface_operate() -> None:
    assert scopes.Scope is Operate
    assert issubclass(Subgraph, scopes.Scope)
    assert "Scope" in scopes.__all__


def test_the_scope_being_built_is_scope_core_and_its_old_name_warns() -> None:
    assert "Scope" not in core.__all__ and "ScopeCore" in core.__all__
    with pytest.warns(DeprecationWarning, match="ScopeCore"):
        old = core.Scope
    assert old is core.ScopeCore
    assert issubclass(scopes.ScopeBuilder, core.ScopeCore)
    assert core.ScopeCore is not scopes.Scope


def test_a_captured_batch_is_not_named_like_the_data_plane_batch() -> None:
    assert capture.CapturedBatch.__name__ == "CapturedBatch"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert capture.Batch is capture.CapturedBatch  # the old name still imports
    assert capture.CapturedBatch is not DataBatch
