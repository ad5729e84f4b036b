"""Accumulations of ``(key, diff)`` updates."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Generic, TypeVar

K = TypeVar("K")


class ChangeBatch(Generic[K]):
    """A compacted collection of ``(key, diff)`` updates, typically ``(time, diff)``.

    Updates to the same key accumulate; keys whose accumulated diff is zero
    disappear.  Accumulations may be negative: a report that retires something
    may arrive before the report that created it.
    """

    __slots__ = ("counts",)

    def __init__(self, updates: Iterable[tuple[K, int]] = ()) -> None:
        """Create a batch, optionally from initial updates."""
        self.counts: dict[K, int] = {}
        """The accumulations, never zero: public so that the progress path can test, drain and hand
        them over without a call per batch (``if batch.counts:``, exchanging the dict whole).

        Whoever writes to it directly must keep zeros out, as the methods do; and
        since a batch may be given another dict, do not hold on to this one."""
        for key, diff in updates:
            self.update(key, diff)

    def update(self, key: K, diff: int) -> None:
        """Add ``diff`` to the accumulation at ``key``."""
        counts = self.counts
        value = counts.get(key, 0) + diff
        if value:
            counts[key] = value
        else:
            counts.pop(key, None)

    def extend(self, updates: Iterable[tuple[K, int]]) -> None:
        """Apply each of ``updates``."""
        counts = self.counts
        for key, diff in updates:
            value = counts.get(key, 0) + diff
            if value:
                counts[key] = value
            else:
                counts.pop(key, None)

    def drain(self) -> list[tuple[K, int]]:
        """Return the non-zero accumulations and empty the batch."""
        counts = self.counts
        if not counts:
            return []
        items = list(counts.items())
        counts.clear()
        return items

    def drain_into(self, other: ChangeBatch[K]) -> None:
        """Move every accumulation into ``other``."""
        counts = self.counts
        if not counts:
            return
        if other.counts:
            other.extend(counts.items())
            counts.clear()
        else:  # the usual case: the dicts change places, nothing is copied
            self.counts, other.counts = other.counts, counts

    def shift(self, old: K, new: K) -> None:
        """Move one unit of accumulation from ``old`` to ``new`` (a capability's downgrade)."""
        counts = self.counts
        value = counts.get(new, 0) + 1
        if value:
            counts[new] = value
        else:
            del counts[new]
        value = counts.get(old, 0) - 1
        if value:
            counts[old] = value
        else:
            del counts[old]

    def items(self) -> list[tuple[K, int]]:
        """Return the non-zero accumulations without removing them."""
        return list(self.counts.items())

    def get(self, key: K) -> int:
        """Return the accumulation at ``key`` (zero when absent)."""
        return self.counts.get(key, 0)

    def is_empty(self) -> bool:
        """Whether every accumulation is zero."""
        return not self.counts

    def clear(self) -> None:
        """Discard every accumulation."""
        self.counts.clear()

    def __len__(self) -> int:
        return len(self.counts)

    def __iter__(self) -> Iterator[tuple[K, int]]:
        return iter(list(self.counts.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChangeBatch) and self.counts == other.counts

    def __repr__(self) -> str:
        items: list[Any] = list(self.counts.items())
        try:
            items.sort()
        except TypeError:  # keys with only a partial order (or none): sort by their text
            items.sort(key=repr)
        return f"ChangeBatch({items!r})"
