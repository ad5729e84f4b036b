"""The state of the dataflows as one worker saw it (:class:`View`), and all workers' views combined.

:class:`viz.model.Model` keeps a view per worker, folding each event into its
worker's; :func:`combine` makes the view of all workers together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scopes.progress.order import Time
from viz.time_kinds import time_less_equal

Address = tuple[int, ...]
Loc = tuple[Address, int, int, bool]
"""``(scope address, node, port, is_source)``: a location as a scope's tracker names it."""


@dataclass
class InputState:
    """What an input handle has done: its name, time, whether it advanced and closed."""

    address: Address
    name: str
    time: Time
    advanced: bool = False
    closed: bool = False
    site: str | None = None
    """Where the user's code created the handle (``file.py:LINE``), when the recording says."""


def add(counts: dict[Any, int], time: Time, diff: int) -> None:
    """Add ``diff`` to the count of ``time`` in ``counts``, forgetting a count that reaches 0."""
    value = counts.get(time, 0) + diff
    if value:
        counts[time] = value
    else:
        counts.pop(time, None)


class View:
    """The state of the dataflows as one worker saw it (or all workers combined)."""

    def __init__(self) -> None:
        """An empty state."""
        self.tracked: dict[Loc, dict[Any, int]] = {}
        """What this worker's tracker counts: every worker's pointstamps, as far as it has heard."""
        self.own: dict[Loc, dict[Any, int]] = {}
        """The pointstamp changes this worker originated, summed (local mode)."""
        self.local_mode = False
        """Whether :attr:`pointstamps` is :attr:`own` (the recording has local events) or :attr:`tracked`."""
        self.combined = False
        """Whether this view combines all workers (see :meth:`Model.view`)."""
        self.frontier_counts: dict[Loc, dict[Any, int]] = {}
        self.received: dict[tuple[Address, int], list[int]] = {}
        """``(operator, input) -> [messages, records]``."""
        self.sent: dict[tuple[Address, int], list[int]] = {}
        """``(operator, output) -> [messages, records]``."""
        self.scheduled: dict[Address, list[float]] = {}
        """``operator -> [times scheduled, seconds]``."""
        self.inputs: dict[Address, InputState] = {}
        self.capability_sites: dict[Loc, dict[Any, dict[tuple[str, str], int]]] = {}
        """Per output location and time: how and where (``(action, "file.py:LINE")``) the user's code took
        capabilities there, with the number still held (recordings with ``CapabilitySite`` events only)."""
        self.completed: set[int] = set()
        self.started: set[Address] = set()
        """Scopes whose tracker has reported frontiers: before that, nothing in them is done."""
        self.shut_down = False
        self.events = 0
        self.last_t: float | None = None

    @property
    def pointstamps(self) -> dict[Loc, dict[Any, int]]:
        """Pointstamp counts per location and time: :attr:`own` in local mode, else :attr:`tracked`."""
        return self.own if self.local_mode else self.tracked

    def frontier(self, loc: Loc) -> list[Any]:
        """The frontier at ``loc``: the times that may still arrive there (sorted)."""
        counts = self.frontier_counts.get(loc)
        if not counts:
            return []
        return sorted(time for time, count in counts.items() if count > 0)

    def positive(self, loc: Loc) -> dict[Any, int]:
        """The positive pointstamp counts at ``loc``."""
        return {time: count for time, count in self.pointstamps.get(loc, {}).items() if count > 0}

    def sites(self, loc: Loc, time: Time) -> list[tuple[str, str]]:
        """Where the user's code took the capabilities held at ``loc`` for ``time``: ``(action, site)`` pairs.

        The places whose capabilities are still held, or, when the recording
        says all were let go, the place of the last one let go: a capability
        is dropped at once but its pointstamp only goes when the operator next
        reports progress (never, when the worker stopped first), so the count
        the explainer sees can outlive the capabilities' own events.
        """
        seen = self.capability_sites.get(loc, {}).get(time, {})
        held = [where for where, count in seen.items() if count > 0]
        return sorted(held) if held else list(seen)[-1:]

    def records_in(self, address: Address) -> int:
        """Records received at all inputs of ``address``."""
        return sum(v[1] for (a, _), v in self.received.items() if a == address)

    def records_out(self, address: Address) -> int:
        """Records sent at all outputs of ``address``."""
        return sum(v[1] for (a, _), v in self.sent.items() if a == address)


def combine(views: list[View], local_mode: bool) -> View:
    """All workers' views combined into one (see :meth:`viz.model.Model.view`)."""
    combined = View()
    combined.local_mode = local_mode
    combined.combined = True
    for view in views:
        for loc, counts in view.tracked.items():
            target = combined.tracked.setdefault(loc, {})
            for time, count in counts.items():
                if count > target.get(time, 0):
                    target[time] = count
        for loc, counts in view.own.items():
            target = combined.own.setdefault(loc, {})
            for time, count in counts.items():
                add(target, time, count)
        for loc, counts in view.frontier_counts.items():
            target = combined.frontier_counts.setdefault(loc, {})
            for time, count in counts.items():
                if count > 0:
                    target[time] = 1
        for key, value in view.received.items():
            entry = combined.received.setdefault(key, [0, 0])
            entry[0] += value[0]
            entry[1] += value[1]
        for key, value in view.sent.items():
            entry = combined.sent.setdefault(key, [0, 0])
            entry[0] += value[0]
            entry[1] += value[1]
        for address, sched in view.scheduled.items():
            total = combined.scheduled.setdefault(address, [0, 0.0])
            total[0] += sched[0]
            total[1] += sched[1]
        for address, state in view.inputs.items():
            known = combined.inputs.get(address)
            if known is None:
                combined.inputs[address] = InputState(
                    address, state.name, state.time, state.advanced, state.closed, state.site
                )
            else:
                known.advanced = known.advanced or state.advanced
                known.closed = known.closed and state.closed
                if not state.closed and (known.closed or time_less_equal(state.time, known.time)):
                    known.time = state.time
        for loc, per_time in view.capability_sites.items():
            into = combined.capability_sites.setdefault(loc, {})
            for time, sites in per_time.items():
                into_time = into.setdefault(time, {})
                for where, count in sites.items():
                    into_time[where] = into_time.pop(where, 0) + count
        combined.events += view.events
    combined.completed = set.intersection(*(v.completed for v in views)) if views else set()
    combined.started = set.intersection(*(v.started for v in views)) if views else set()
    combined.shut_down = all(v.shut_down for v in views)
    for loc, counts in combined.frontier_counts.items():
        times = list(counts)
        for time in times:
            if any(other != time and time_less_equal(other, time) for other in times):
                del counts[time]
        combined.frontier_counts[loc] = counts
    return combined
