"""Partial orders.

Timestamps and path summaries are *partially* ordered: two elements may be
incomparable.  Types take part by implementing :class:`PartialOrder`; Python
integers take part as they are, ordered by ``<=``.

Python's rich comparisons (``<``, ``sorted``) on a :class:`~scopes.progress.timestamp.Product`
are lexicographic: a total order that extends the partial order, which is the
order in which Naiad delivers notifications.  Use :func:`less_equal` and
:func:`less_than` for the partial order itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeAlias

from scopes.progress.partial_order import PartialOrder

__all__ = ["PartialOrder", "Time", "in_time_order", "less_equal", "less_than", "natural_order"]

Time: TypeAlias = "int | PartialOrder"
"""A timestamp: a Python ``int``, or a value of a type that implements :class:`PartialOrder`
(:class:`~scopes.progress.timestamp.Product`, or a user's own)."""


def less_equal(a: Any, b: Any) -> bool:
    """Return whether ``a <= b`` in the partial order of their type."""
    if type(a) is int:
        return bool(a <= b)
    return bool(a.less_equal(b))


def less_than(a: Any, b: Any) -> bool:
    """Return whether ``a < b`` in the partial order of their type."""
    if type(a) is int:
        return bool(a < b)
    return bool(a.less_than(b))


def natural_order(time: Any) -> Any:
    """The sort key meaning "compare the times themselves with ``<``" (see :meth:`TimestampType.sort_key`)."""
    return time


def in_time_order(times: Iterable[Any], key: Callable[[Any], Any] | None = natural_order) -> list[Any]:
    """``times`` ordered so that no time comes after one it is strictly less than.

    ``key`` is the timestamp type's :meth:`~scopes.progress.timestamp.TimestampType.sort_key`: a function
    whose ``<`` extends the partial order (:func:`natural_order`, the default, uses the values' own ``<``, as
    for ``int`` and ``Product``), or ``None`` when only the partial order may be used (a type whose ``<`` is
    not such an order).  Without a usable ``<`` it repeatedly takes the times that no remaining time is
    strictly less than.
    """
    pending = list(times)
    if key is not None:
        try:
            return sorted(pending) if key is natural_order else sorted(pending, key=key)
        except TypeError:
            pass
    ordered: list[Any] = []
    while pending:
        minimal = [t for t in pending if not any(less_than(other, t) for other in pending)]
        ordered.extend(minimal)
        pending = [t for t in pending if all(t is not m for m in minimal)]
    return ordered
