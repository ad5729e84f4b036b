"""The orders in which a :class:`~scopes.progress.reachability.Tracker` visits its propagation work.

The tracker has one propagation loop: take a location and the changes that
reached it, apply them to the frontier implied there, and offer the frontier's
changes to the locations it leads to.  What differs between graphs is only the
order of the visits, and each order here is an iterable of ``(location,
updates)`` that also takes new work (:meth:`offer`) while it is iterated:

* :class:`Topological`, for a graph without cycles: every location once, after
  everything before it, with all the changes that reached it summed.
* :class:`EarliestFirst`, for a graph with cycles and times that have ``<``:
  one ``(location, time)`` at a time, earliest time first, so that changes at
  equal times meet and cancel before they travel.
* :class:`InRounds`, for times without ``<``: rounds of equally early times
  (by the timestamp type's sort key, or else of times no other pending time
  precedes), never handling a time earlier than one already handled.

Offered changes must have distinct times.  An order is
empty again once iterated to the end, so a tracker keeps and reuses one.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable, Iterator
from heapq import heappush
from typing import Any

from scopes.progress.order import less_than

Work = tuple[int, Any, int, Collection[tuple[Any, int]] | None]
"""A visit: ``(location, time, diff, None)`` for one change, or ``(location, None, 0, updates)``
for several ``(time, diff)`` changes (distinct times) waiting at one location."""


class Topological:
    """Visit each location once, in topological order, with every change that reached it.

    The first changes offered at a location are kept as they are (read, never
    changed: a frontier's changes, offered along an edge); only a second offer
    at the same location sums them into a dict.  The tracker drives it through
    its public state (:attr:`ranks`, :attr:`by_rank`, :attr:`incoming`), as
    :meth:`next_location` and :meth:`take` do, without a call per visit.
    """

    __slots__ = ("rank", "by_rank", "incoming", "ranks")

    def __init__(self, rank: list[int], by_rank: list[int]) -> None:
        """Order by ``rank[location]``; ``by_rank[r]`` is the location of rank ``r``."""
        self.rank = rank
        self.by_rank = by_rank
        self.incoming: dict[int, Any] = {}
        """The changes offered at each location waiting for its visit: as offered, or a dict once summed."""
        self.ranks: list[int] = []
        """A heap of the ranks of the locations waiting."""

    def offer(self, loc: int, changes: Collection[tuple[Any, int]]) -> None:
        """Add ``changes`` (distinct times; kept, not copied, so not to be changed after) to those at ``loc``."""
        incoming = self.incoming
        batch = incoming.get(loc)
        if batch is None:
            incoming[loc] = changes
            heappush(self.ranks, self.rank[loc])
            return
        if batch.__class__ is not dict:
            summed: dict[Any, int] = {}
            for time, diff in batch:  # a loop, not dict(batch): faster for a few changes, compiled or not
                summed[time] = diff
            incoming[loc] = batch = summed
        for time, diff in changes:
            batch[time] = batch.get(time, 0) + diff

    def next_location(self) -> int:
        """The next location to visit (``-1``: none); :meth:`take` its changes before offering more."""
        ranks = self.ranks
        if not ranks:
            return -1
        return self.by_rank[heapq.heappop(ranks)]

    def take(self, loc: int) -> Collection[tuple[Any, int]]:
        """Remove and return the changes waiting at ``loc`` (distinct times; some may be zero)."""
        incoming = self.incoming
        batch = incoming[loc]
        del incoming[loc]  # not pop(): compiled, indexing and del are native, pop() a generic method call
        return taken(batch)

    def __iter__(self) -> Iterator[Work]:
        while (loc := self.next_location()) >= 0:
            yield loc, None, 0, self.take(loc)


def taken(batch: Any) -> Collection[tuple[Any, int]]:
    """The changes of a batch waiting in :attr:`Topological.incoming`, as ``(time, diff)`` pairs."""
    if batch.__class__ is dict:
        items: Collection[tuple[Any, int]] = batch.items()
        return items
    changes: Collection[tuple[Any, int]] = batch
    return changes


class EarliestFirst:
    """Visit one ``(location, time)`` at a time, earliest time first (times with a natural ``<``)."""

    __slots__ = ("_heap",)

    def __init__(self) -> None:
        """Start with no work."""
        self._heap: list[tuple[Any, int, int]] = []

    def offer(self, loc: int, changes: Iterable[tuple[Any, int]]) -> None:
        """Queue each of ``changes`` at ``loc``."""
        heap = self._heap
        push = heapq.heappush
        for time, diff in changes:
            push(heap, (time, loc, diff))

    def __iter__(self) -> Iterator[Work]:
        heap = self._heap
        pop = heapq.heappop
        while heap:
            time, loc, diff = pop(heap)
            while heap and heap[0][1] == loc and heap[0][0] == time:
                diff += pop(heap)[2]
            if diff:
                yield loc, time, diff, None


class InRounds:
    """Visit the work in rounds of equally early times, for times without ``<``.

    With a ``key`` (the timestamp type's sort key) a round takes every pending
    time with the least key; without one, every pending time that no other
    pending time is strictly less than (quadratic in the number of pending
    times).  Changes only travel to later-or-equal times, so no round handles a
    time strictly earlier than one already handled, and all changes at one
    ``(location, time)`` are summed before they are visited.
    """

    __slots__ = ("_key", "_pending", "_levels", "_heap")

    def __init__(self, key: Callable[[Any], Any] | None) -> None:
        """Order rounds by ``key(time)`` (``None``: by the partial order itself)."""
        self._key = key
        self._pending: dict[Any, dict[int, int]] = {}  # time -> location -> diff
        self._levels: dict[Any, list[Any]] = {}  # key -> times with that key (keyed rounds only)
        self._heap: list[Any] = []

    def offer(self, loc: int, changes: Iterable[tuple[Any, int]]) -> None:
        """Add each of ``changes`` at ``loc`` to the work of its time."""
        pending = self._pending
        key = self._key
        for time, diff in changes:
            at = pending.get(time)
            if at is not None:
                at[loc] = at.get(loc, 0) + diff
                continue
            pending[time] = {loc: diff}
            if key is not None:
                level = key(time)
                times = self._levels.get(level)
                if times is None:
                    self._levels[level] = [time]
                    heapq.heappush(self._heap, level)
                else:
                    times.append(time)

    def _round(self) -> list[Any]:
        if self._key is not None:
            return self._levels.pop(heapq.heappop(self._heap))
        times = list(self._pending)
        return [t for t in times if not any(less_than(u, t) for u in times)]

    def __iter__(self) -> Iterator[Work]:
        pending = self._pending
        while pending:
            for time in self._round():
                # taken only now: work offered at this time earlier in the round joins it
                for loc, diff in pending.pop(time).items():
                    if diff:
                        yield loc, time, diff, None
