"""Accumulations of ``(key, diff)`` updates."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

K = TypeVar("K")


class ChangeBatch(Generic[K]):
    """A compacted collection of ``(key, diff)`` updates, typically ``(time, diff)``.

    Updates to the same key accumulate; keys whose accumulated diff is zero
    disappear.  Accumulations may be negative: a report that retires something
    may arrive before the report that created it.
    """

    __slots__ = ("_counts",)

    def __init__(self, updates: Iterable[tuple[K, int]] = ()) -> None:
        """Create a batch, optionally from initial updates."""
        self._counts: dict[K, int] = {}
        for key, diff in updates:
            self.update(key, diff)

    def update(self, key: K, diff: int) -> None:
        """Add ``diff`` to the accumulation at ``key``."""
        counts = self._counts
        value = counts.get(key, 0) + diff
        if value:
            counts[key] = value
        else:
            counts.pop(key, None)

    def extend(self, updates: Iterable[tuple[K, int]]) -> None:
        """Apply each of ``updates``."""
        counts = self._counts
        for key, diff in updates:
            value = counts.get(key, 0) + diff
            if value:
                counts[key] = value
            else:
                counts.pop(key, None)

    def drain(self) -> list[tuple[K, int]]:
        """Return the non-zero accumulations and empty the batch."""
        counts = self._counts
        if not counts:
            return []
        items = list(counts.items())
        counts.clear()
        return items

    def drain_into(self, other: ChangeBatch[K]) -> None:
        """Move every accumulation into ``other``."""
        counts = self._counts
        if counts:
            self._counts = other.swap(counts)

    def shift(self, old: K, new: K) -> None:
        """Move one unit of accumulation from ``old`` to ``new`` (a capability's downgrade)."""
        counts = self._counts
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

    def swap(self, counts: dict[K, int]) -> dict[K, int]:
        """Absorb ``counts`` (non-zero accumulations) and return an empty dict for the caller to keep.

        When the batch is empty (the usual case) the dicts change places and
        nothing is copied; otherwise ``counts`` is added in and cleared.  Either
        way the caller must replace its dict with the one returned.
        """
        mine = self._counts
        if mine:
            self.extend(counts.items())
            counts.clear()
            return counts
        self._counts = counts
        return mine

    def take(self) -> Mapping[K, int]:
        """Hand over the non-zero accumulations, leaving the batch empty (without copying them)."""
        counts = self._counts
        if counts:
            self._counts = {}
        return counts

    def items(self) -> list[tuple[K, int]]:
        """Return the non-zero accumulations without removing them."""
        return list(self._counts.items())

    def get(self, key: K) -> int:
        """Return the accumulation at ``key`` (zero when absent)."""
        return self._counts.get(key, 0)

    def is_empty(self) -> bool:
        """Whether every accumulation is zero."""
        return not self._counts

    def clear(self) -> None:
        """Discard every accumulation."""
        self._counts.clear()

    def __len__(self) -> int:
        return len(self._counts)

    def __iter__(self) -> Iterator[tuple[K, int]]:
        return iter(list(self._counts.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChangeBatch) and self._counts == other._counts

    def __repr__(self) -> str:
        items: list[Any] = list(self._counts.items())
        try:
            items.sort()
        except TypeError:  # keys with only a partial order (or none): sort by their text
            items.sort(key=repr)
        return f"ChangeBatch({items!r})"
