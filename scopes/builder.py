"""Building a dataflow: :class:`ScopeBuilder`, inputs, sources, probes and loops, by one name.

``worker.dataflow(build)`` calls ``build(scope)`` with a :class:`ScopeBuilder` for a
new top-level scope.  Nested scopes (:meth:`ScopeBuilder.iterative`,
:meth:`ScopeBuilder.scoped`, :meth:`ScopeBuilder.region`) are
:class:`~scopes.progress.subgraph.Subgraph` objects of their own, with builders of their own.

The names live where they are made: ``ScopeBuilder`` beside ``Stream`` in
:mod:`scopes.stream` (each names the other), the scope's data and
:class:`BuildContext` in :mod:`scopes.core`, :class:`InputHandle` in
:mod:`scopes.input_handle`, :func:`source` and :func:`to_stream` in
:mod:`scopes.sources`, :class:`LoopHandle` in :mod:`scopes.loops`, probes in
:mod:`scopes.probes`.  This module gathers them for the runtime and for users.
"""

from __future__ import annotations

from scopes.core import BuildContext
from scopes.input_handle import BATCH_SIZE, InputHandle
from scopes.loops import LoopHandle
from scopes.probes import ProbeHandle, ProbeOperator
from scopes.sources import source, to_stream
from scopes.stream import ScopeBuilder

__all__ = [
    "BATCH_SIZE",
    "BuildContext",
    "InputHandle",
    "LoopHandle",
    "ProbeHandle",
    "ProbeOperator",
    "ScopeBuilder",
    "source",
    "to_stream",
]
