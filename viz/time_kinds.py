"""What two times must share for the viewer to order and compare them: their kind.

The runtime records one kind of time per scope (``int`` at the top, a
:class:`~scopes.progress.timestamp.Product` per nested loop, a user's own
timestamp type as its ``repr``).  A recording's checksums prove nothing about
that, and a frontier holding an ``int`` and a ``str`` cannot even be sorted, so
the model applies only events whose times are of their scope's kind.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from scopes.progress.timestamp import Product

__all__ = ["TIME_DEPTH", "time_kind"]

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
