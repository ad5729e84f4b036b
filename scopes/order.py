"""Partial orders.

Timestamps and path summaries are *partially* ordered: two elements may be
incomparable.  Types take part by implementing :class:`PartialOrder`; Python
integers take part as they are, ordered by ``<=``.

Python's rich comparisons (``<``, ``sorted``) on a :class:`~scopes.timestamp.Product`
are lexicographic: a total order that extends the partial order, which is the
order in which Naiad delivers notifications.  Use :func:`less_equal` and
:func:`less_than` for the partial order itself.
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


def less_equal(a: Any, b: Any) -> bool:
    """Return whether ``a <= b`` in the partial order of their type."""
    if a.__class__ is int:
        return bool(a <= b)
    return bool(a.less_equal(b))


def less_than(a: Any, b: Any) -> bool:
    """Return whether ``a < b`` in the partial order of their type."""
    if a.__class__ is int:
        return bool(a < b)
    return bool(a.less_than(b))
