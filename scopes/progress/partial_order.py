"""The :class:`PartialOrder` protocol: what a timestamp type implements to take part in the progress model.

It lives apart from :mod:`scopes.progress.order`, which re-exports it, so that
the functions there can be compiled (:mod:`scopes.native`): a compiled module
cannot define a ``runtime_checkable`` protocol.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class PartialOrder(Protocol):
    """A type whose values are partially ordered."""

    def less_equal(self, other: Any) -> bool:
        """Return whether ``self`` is less than or equal to ``other`` in the partial order."""
        ...

    def less_than(self, other: Any) -> bool:
        """Return whether ``self`` is strictly less than ``other`` in the partial order."""
        ...
