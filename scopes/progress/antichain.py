"""Antichains: sets of mutually incomparable elements, the shape of a frontier.

An :class:`Antichain` holds the minimal elements of the set it was built from.
A :class:`MutableAntichain` keeps counts for any number of times and maintains
the antichain of minimal times with positive count, reporting how that frontier
changes with each batch of updates.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Generic, TypeVar

from scopes.progress.mypyc_attrs import mypyc_attr
from scopes.progress.order import less_equal, less_than

T = TypeVar("T")


@mypyc_attr(allow_interpreted_subclasses=True)  # probe.frontier's ProbeFrontier subclasses it
class Antichain(Generic[T]):
    """A set of mutually incomparable elements under a partial order.

    ``insert`` keeps only minimal elements: an element greater than or equal to one
    already present is refused, and inserting an element removes those greater than it.
    """

    __slots__ = ("_elements",)

    @classmethod
    def of_minimal(cls, elements: Iterable[T]) -> Antichain[T]:
        """An antichain of ``elements``, which must already be mutually incomparable (not checked)."""
        chain: Antichain[T] = cls.__new__(cls)
        chain._elements = list(elements)
        return chain

    def __init__(self, elements: Iterable[T] = ()) -> None:
        """Create the antichain of the minimal elements of ``elements``."""
        self._elements: list[T] = []
        for element in elements:
            self.insert(element)

    def insert(self, element: T) -> bool:
        """Add ``element`` unless something already present is ``<=`` it; return whether it was added."""
        elements = self._elements
        for present in elements:
            if less_equal(present, element):
                return False
        if elements:
            self._elements = [x for x in elements if not less_equal(element, x)]
        self._elements.append(element)
        return True

    def extend(self, elements: Iterable[T]) -> bool:
        """Insert each element; return whether any was added."""
        added = False
        for element in elements:
            added |= self.insert(element)
        return added

    def less_equal(self, time: T) -> bool:
        """Whether some element is ``<=`` ``time``: ``time`` is at or beyond this frontier."""
        for element in self._elements:
            if less_equal(element, time):
                return True
        return False

    def less_than(self, time: T) -> bool:
        """Whether some element is strictly ``<`` ``time``."""
        for element in self._elements:
            if less_than(element, time):
                return True
        return False

    def dominates(self, other: Antichain[T]) -> bool:
        """Whether every element of ``other`` is ``>=`` some element of ``self`` (``self <= other``)."""
        return all(self.less_equal(element) for element in other._elements)

    def is_empty(self) -> bool:
        """Whether the antichain has no elements (as a frontier: nothing can happen any more)."""
        return not self._elements

    @property
    def elements(self) -> tuple[T, ...]:
        """The elements, in insertion order."""
        return tuple(self._elements)

    def clear(self) -> None:
        """Remove every element."""
        self._elements.clear()

    def __iter__(self) -> Iterator[T]:
        return iter(tuple(self._elements))

    def __len__(self) -> int:
        return len(self._elements)

    def __contains__(self, element: object) -> bool:
        return element in self._elements

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Antichain):
            return NotImplemented
        mine, theirs = self._elements, other._elements
        return len(mine) == len(theirs) and all(x in theirs for x in mine)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Antichain({_sorted(self._elements)!r})"


class MutableAntichain(Generic[T]):
    """Counts per time, and the antichain of minimal times whose count is positive.

    Counts may be transiently negative; only positive counts shape the frontier.
    :meth:`update_iter` applies a batch of ``(time, diff)`` updates and returns the
    changes to the frontier: ``(time, +1)`` for a time that joined it and
    ``(time, -1)`` for a time that left it.
    """

    __slots__ = ("_counts", "_frontier")

    def __init__(self, updates: Iterable[tuple[T, int]] = ()) -> None:
        """Create an empty accumulation and apply ``updates`` to it."""
        self._counts: dict[T, int] = {}
        self._frontier: list[T] = []
        self.update_iter(updates)

    def update_iter(self, updates: Iterable[tuple[T, int]]) -> list[tuple[T, int]]:
        """Apply ``updates`` and return the resulting changes to the frontier.

        While the frontier is empty or a single int (a totally ordered time), the
        least positive time is tracked through the batch without a rebuild: a
        lower time turning positive replaces it, and only that time itself
        dropping to zero or below forces a scan of the counts.
        """
        counts = self._counts
        old = self._frontier
        if not old or (len(old) == 1 and type(old[0]) is int):
            least: Any = old[0] if old else None
            scan = False
            general = False
            for time, diff in updates:
                if not diff:
                    continue
                value = counts.get(time, 0) + diff
                if value:
                    counts[time] = value
                else:
                    del counts[time]
                if scan or general:
                    continue
                if type(time) is not int:
                    general = True
                elif least is None or time < least:
                    if value > 0:
                        least = time
                elif time == least and value <= 0:
                    scan = True
            if general:
                return self._rebuild()
            if scan:
                least = None
                for time, count in counts.items():
                    if count > 0 and (least is None or time < least):
                        least = time
            if old:
                previous = old[0]
                if least is None:
                    self._frontier = []
                    return [(previous, -1)]
                if previous == least:
                    return []
                self._frontier = [least]
                return [(previous, -1), (least, 1)]
            if least is None:
                return []
            self._frontier = [least]
            return [(least, 1)]
        rebuild = False
        for time, diff in updates:
            if not diff:
                continue
            value = counts.get(time, 0) + diff
            if value:
                counts[time] = value
            else:
                del counts[time]
            if not rebuild:
                # A change at `time` can alter the frontier only if no frontier
                # element is strictly less than `time`.
                if type(time) is int:
                    for element in old:
                        if element < time:  # type: ignore[operator]
                            break
                    else:
                        rebuild = True
                else:
                    for element in old:
                        if less_than(element, time):
                            break
                    else:
                        rebuild = True
        if not rebuild:
            return []
        return self._rebuild()

    def update(self, time: T, diff: int) -> list[tuple[T, int]]:
        """Apply one update and return the resulting changes to the frontier.

        The returned list may be shared and must not be modified.  No rebuild
        happens unless the update can move the frontier; with a frontier of at
        most one element the new frontier is found without one, except when
        that element's own count drops to zero or below while two or more other
        times hold counts (a loop's frontier moving on from one round to the next
        leaves at most one: the next round's).
        """
        counts = self._counts
        value = counts.get(time, 0) + diff
        if value:
            counts[time] = value
        else:
            counts.pop(time, None)
        frontier = self._frontier
        if not frontier:
            # nothing was positive: `time` is the only candidate
            if value > 0:
                self._frontier = [time]
                return [(time, 1)]
            return _NO_CHANGES
        if len(frontier) == 1:
            least = frontier[0]
            if type(time) is int:
                if least < time:  # type: ignore[operator]
                    return _NO_CHANGES
                if least != time:  # time < least: it leads if it is positive
                    if value > 0:
                        self._frontier = [time]
                        return [(least, -1), (time, 1)]
                    return _NO_CHANGES
            elif least != time:
                # Every positive time is >= the only minimal one, `least`; a time
                # not >= it was not positive before, so it matters only if it is now.
                if less_equal(least, time) or value <= 0:
                    return _NO_CHANGES
                if less_equal(time, least):
                    self._frontier = [time]
                    return [(least, -1), (time, 1)]
                self._frontier = [least, time]
                return [(time, 1)]
            if value > 0:
                return _NO_CHANGES
            if len(counts) < 2:  # the only element retired, and at most one time left: no rebuild
                for other, count in counts.items():
                    if count > 0:  # `time` itself is not positive, so this is another time, alone
                        self._frontier = [other]
                        return [(least, -1), (other, 1)]
                self._frontier = []
                return [(least, -1)]
            return self._rebuild()
        if type(time) is int:
            if frontier[0] < time:  # type: ignore[operator]
                return _NO_CHANGES
        else:
            for element in frontier:
                if less_than(element, time):
                    return _NO_CHANGES
        return self._rebuild()

    def _rebuild(self) -> list[tuple[T, int]]:
        old = self._frontier
        counts = self._counts
        new: list[T]
        if not counts:
            new = []
        else:
            first = next(iter(counts))
            if type(first) is int:
                best: Any = None
                for time, count in counts.items():
                    if count > 0 and (best is None or time < best):
                        best = time
                new = [] if best is None else [best]
            else:
                positive = [time for time, count in counts.items() if count > 0]
                try:  # noqa: SIM105 - contextlib.suppress costs a context manager (a microsecond) at every rebuild
                    positive.sort()
                except TypeError:  # unorderable: insertion still finds the minima
                    pass
                new = []
                for time in positive:  # as Antichain.insert: keep the minimal times
                    for present in new:
                        if less_equal(present, time):
                            break
                    else:
                        if new:
                            new = [x for x in new if not less_equal(time, x)]
                        new.append(time)
        self._frontier = new
        if len(old) == 1:
            if len(new) == 1:
                if old[0] == new[0]:
                    return []
                return [(old[0], -1), (new[0], 1)]
            if not new:
                return [(old[0], -1)]
        elif not old:
            return [(time, 1) for time in new]
        changes: list[tuple[T, int]] = [(time, -1) for time in old if time not in new]
        changes.extend((time, 1) for time in new if time not in old)
        return changes

    def frontier(self) -> Antichain[T]:
        """The minimal times with positive count, as a new :class:`Antichain`."""
        return Antichain.of_minimal(self._frontier)

    @property
    def elements(self) -> tuple[T, ...]:
        """The frontier's elements."""
        return tuple(self._frontier)

    def less_equal(self, time: T) -> bool:
        """Whether some frontier element is ``<=`` ``time``."""
        for element in self._frontier:
            if type(element) is int:
                if element <= time:  # type: ignore[operator]
                    return True
            elif less_equal(element, time):
                return True
        return False

    def less_than(self, time: T) -> bool:
        """Whether some frontier element is strictly ``<`` ``time``."""
        for element in self._frontier:
            if type(element) is int:
                if element < time:  # type: ignore[operator]
                    return True
            elif less_than(element, time):
                return True
        return False

    def count_for(self, time: T) -> int:
        """The accumulated count at exactly ``time``."""
        return self._counts.get(time, 0)

    def counts(self) -> dict[T, int]:
        """A copy of every non-zero count."""
        return dict(self._counts)

    def is_empty(self) -> bool:
        """Whether the frontier is empty: no time has a positive count."""
        return not self._frontier

    def __repr__(self) -> str:
        return f"MutableAntichain(frontier={_sorted(self._frontier)!r})"


_NO_CHANGES: list[Any] = []


def _sorted(items: list[Any]) -> list[Any]:
    try:
        return sorted(items)
    except TypeError:
        return list(items)
