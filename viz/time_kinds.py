"""What two times must share for the viewer to order and compare them: their kind.

The runtime records one kind of time per scope (``int`` at the top, a
:class:`~scopes.progress.timestamp.Product` per nested loop, a user's own
timestamp type as its ``repr``).  A recording's checksums prove nothing about
that, and a frontier holding an ``int`` and a ``str`` cannot even be sorted, so
the model applies only events whose times are of their scope's kind.
"""

from __future__ import annotations

from collections.abc import Hashable
from functools import lru_cache
from typing import Any

from runtime.instrument import (
    CapabilitySite,
    Event,
    FrontiersChanged,
    InputChanged,
    LocalPointstampsChanged,
    PointstampsChanged,
)
from scopes.progress.timestamp import Product

__all__ = ["TIME_DEPTH", "scope_and_times", "time_fits", "time_kind", "time_less_equal"]

TIME_DEPTH = 32
"""Products nest at most this deep in a time the viewer applies (one level per nested scope)."""


def time_kind(time: Any, depth: int = 0) -> Hashable | None:
    """What must agree between two times for the viewer to order and compare them, or ``None`` for no time.

    ``int``, ``float`` and ``str`` (a user's own timestamp type, recorded as its
    ``repr``) are kinds of their own; a :class:`~scopes.progress.timestamp.Product`
    has the kinds of its outer and inner parts, nested at most :data:`TIME_DEPTH`
    deep.  Anything else (a tuple, ``None``) is no time the runtime records.
    """
    cls = time.__class__
    if cls is int or cls is float or cls is str:
        return cls
    if cls is Product and depth < TIME_DEPTH:
        outer, inner = time_kind(time.outer, depth + 1), time_kind(time.inner, depth + 1)
        if outer is not None and inner is not None:
            return (Product, outer, inner)
    return None


def time_less_equal(a: Any, b: Any, depth: int = 0) -> bool:
    """Whether ``a <= b`` in the partial order of times, for any two values the model holds; never raises.

    Numbers compare by ``<=``, a :class:`~scopes.progress.timestamp.Product`
    coordinate by coordinate (nested at most :data:`TIME_DEPTH` deep).  A
    ``str`` is a user's own timestamp recorded as its ``repr``, whose order the
    viewer cannot know: it is only ``<=`` itself.  Values of different kinds
    are not ordered (``False``).
    """
    a_cls, b_cls = a.__class__, b.__class__
    if (a_cls is int or a_cls is float) and (b_cls is int or b_cls is float):
        return bool(a <= b)
    if a_cls is Product and b_cls is Product:
        return (
            depth < TIME_DEPTH
            and time_less_equal(a.outer, b.outer, depth + 1)
            and time_less_equal(a.inner, b.inner, depth + 1)
        )
    return a_cls is str and b_cls is str and a == b


@lru_cache(maxsize=256)
def _numbers_alike(kind: Hashable | None) -> Hashable | None:
    """``kind`` with ``float`` read as ``int``: a bound of either kind compares with times of the other."""
    if kind is float:
        return int
    if isinstance(kind, tuple):
        return tuple(_numbers_alike(part) for part in kind)
    return kind


def time_fits(time: Any, kind: Hashable | None) -> bool:
    """Whether ``time`` can be compared with times of ``kind``: a :func:`time_kind` of it, or ``None`` (unknown).

    Numbers fit numbers whether ``int`` or ``float``.  Any hashable value fits
    an unknown kind (a live snapshot of a user's own timestamp type holds no
    kind: its times are objects, not their repr).
    """
    if kind is None:
        try:
            hash(time)
        except TypeError:
            return False
        return True
    mine = time_kind(time)
    return mine is not None and _numbers_alike(mine) == _numbers_alike(kind)


def scope_and_times(event: Event) -> tuple[tuple[int, ...], list[Any]] | None:
    """The scope whose kind of time ``event``'s times must have, and those times; ``None`` for an event without."""
    if isinstance(event, (PointstampsChanged, LocalPointstampsChanged, FrontiersChanged)):
        return event.scope, [change[1] for change in event.changes]
    if isinstance(event, (InputChanged, CapabilitySite)):
        return event.address[:-1], [event.time]
    return None
