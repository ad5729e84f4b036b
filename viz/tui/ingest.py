"""Fold raw wire events into a :class:`~viz.tui.adapter.TuiState` in bulk, for the live viewer.

A live program can send 100,000 events per second.  Decoding each one into its
dataclass and applying it alone costs about 5 µs, half of a core at that rate.
:func:`apply_raw` takes the raw arrays as msgpack delivers them
(``(kind, worker, seq, t, *fields)``) and coalesces the frequent kinds within
a batch before touching the model:

* pointstamp changes (tracked and originated) and frontier changes of one
  worker and scope are summed into one change set (counts only add up, so the order inside a batch does not matter,
  and changes that cancel out disappear);
* the records an operator consumed and produced are concatenated per port into
  one ``Messages`` event per worker and operator;
* schedulings are counted and timed per worker and operator.

The merged events go through :meth:`viz.model.Model.apply`, so the model stays
the one authority on what an event means; schedulings (a count and a sum) are
added to :attr:`viz.model.View.scheduled` directly.  Every other kind of event
(structure, inputs, completion, drops) first flushes what was coalesced, so it
is applied in stream order, decoded, one by one.  The state after a batch
equals the state after applying its events one at a time; the event counters
and times (``Model.events``, ``View.events``, ``last_t``) are kept exact.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from runtime.instrument import (
    K_FRONTIERS,
    K_LOCAL_POINTSTAMPS,
    K_MESSAGES,
    K_POINTSTAMPS,
    K_SCHEDULE,
    FrontiersChanged,
    LocalPointstampsChanged,
    Messages,
    PointstampsChanged,
    RecordingError,
    decode,
)
from runtime.instrumentation.events import problem
from viz import limits
from viz.model import Address
from viz.tui.adapter import TuiState

Raw = Sequence[Any]
"""One event as the wire carries it: ``(kind, worker, seq, t, *fields)``."""


def apply_raw(state: TuiState, raws: Sequence[Raw]) -> None:
    """Fold ``raws`` (in stream order) into ``state``, coalescing the frequent kinds.

    Raises :class:`runtime.instrument.RecordingError` (or ``ValueError``,
    ``TypeError``, ``IndexError``) for an array that is not an event; the
    events before its run of frequent events are applied.
    """
    start = 0
    for index, raw in enumerate(raws):
        if raw[0] not in HOT:
            if index > start:
                _apply_run(state, raws[start:index])
            state.apply(decode(raw))
            start = index + 1
    if start < len(raws):
        _apply_run(state, raws[start:] if start else raws)


HOT = frozenset((K_SCHEDULE, K_MESSAGES, K_POINTSTAMPS, K_LOCAL_POINTSTAMPS, K_FRONTIERS))
"""The kinds a running program sends all the time, which :func:`apply_raw` coalesces."""


MERGED: dict[int, type[PointstampsChanged | LocalPointstampsChanged | FrontiersChanged]] = {
    K_POINTSTAMPS: PointstampsChanged,
    K_LOCAL_POINTSTAMPS: LocalPointstampsChanged,
    K_FRONTIERS: FrontiersChanged,
}
"""The kinds whose changes are summed per worker and scope, and the event that carries the sum."""


_Changes = dict[int, dict[tuple[int, Address], dict[tuple[int, Any], int]]]
"""Per merged kind, per ``(worker, scope)``: the summed diff of each ``(location, time)``."""
_Merged = dict[tuple[int, Address], tuple[list[list[Any]], list[list[Any]]]]
"""Per ``(worker, operator)``: the ``(time, records)`` entries consumed and produced, per port."""
_Schedulings = dict[tuple[int, Address], list[float]]
"""Per ``(worker, operator)``: how many schedulings, and their total seconds."""


def _apply_run(state: TuiState, run: Sequence[Raw]) -> None:
    """Fold a run of frequent events (no structure among them) into ``state``.

    Raises :class:`~runtime.instrument.RecordingError` before changing the
    model if a merged event is not one (a live stream's fields are not
    checked as they arrive: one bad field must not reach the model, where it
    would fail later, outside the feed's care).
    """
    model = state.model
    per_worker = Counter(raw[1] for raw in run)
    times_run = [raw[3] for raw in run]
    new = [worker for worker in per_worker if worker not in model.workers]
    room = max(limits.MAX_WORKERS - len(model.workers), 0)
    if len(new) > room:  # as Model.apply does: past the limit, a new worker's events are counted, not applied
        refused = set(new[room:])
        model.over_limit += sum(per_worker.pop(worker) for worker in refused)
        model.events += len(run) - sum(per_worker.values())
        run = [raw for raw in run if raw[1] not in refused]
        if not run:
            return
    scheduled, changes_of, messages, frontier_events = _coalesce(state, run)
    _check_merged(scheduled, changes_of, messages)
    last_seen: dict[int, float] = {}
    for raw in reversed(run):  # each worker's newest event time: usually found near the end
        if raw[1] not in last_seen:
            last_seen[raw[1]] = raw[3]
            if len(last_seen) == len(per_worker):
                break
    for worker in per_worker:
        model.worker_view(worker)
    events_before, first_before, last_before = model.events, model.first_t, model.last_t
    view_events = {worker: model.workers[worker].events for worker in per_worker}

    for kind, cls in MERGED.items():
        for (worker, scope), table in changes_of[kind].items():
            changes = tuple((loc, time, diff) for (loc, time), diff in table.items() if diff)
            if changes:
                model.apply(cls(worker, 0, 0.0, scope, changes))
    for (worker, address), (consumed, produced) in messages.items():
        model.apply(Messages(worker, 0, 0.0, address, tuple(map(tuple, consumed)), tuple(map(tuple, produced))))
    for (worker, address), (count, seconds) in scheduled.items():
        entry = model.workers[worker].scheduled.setdefault(address, [0, 0.0])
        entry[0] += count
        entry[1] += seconds
    state.frontier_changes += frontier_events

    # The merged events above counted once each and carried no time: set the counters and times right.
    first, last = min(times_run), max(times_run)
    model.events = events_before + len(run)
    model.first_t = first if first_before is None else min(first_before, first)
    model.last_t = last if last_before is None else max(last_before, last)
    for worker, events in per_worker.items():
        view = model.workers[worker]
        view.events = view_events[worker] + events
        view.last_t = last_seen[worker]


def _check_merged(scheduled: _Schedulings, changes_of: _Changes, messages: _Merged) -> None:
    """Raise :class:`~runtime.instrument.RecordingError` unless every merged event has the fields of its kind.

    The merged events are few (one per worker and scope, or operator), so
    checking them costs little next to checking every event of the run.
    """
    merged: list[tuple[Any, ...]] = [
        (K_SCHEDULE, worker, 0, 0.0, address, 0.0, seconds) for (worker, address), (_, seconds) in scheduled.items()
    ]
    for kind, tables in changes_of.items():
        for (worker, scope), table in tables.items():
            changes = tuple((loc, time, diff) for (loc, time), diff in table.items())
            merged.append((kind, worker, 0, 0.0, scope, changes))
    for (worker, address), (consumed, produced) in messages.items():
        merged.append((K_MESSAGES, worker, 0, 0.0, address, tuple(map(tuple, consumed)), tuple(map(tuple, produced))))
    for raw in merged:
        wrong = problem(raw)
        if wrong is not None:
            raise RecordingError(f"not a pytimely event: {wrong}")


def _coalesce(state: TuiState, run: Sequence[Raw]) -> tuple[_Schedulings, _Changes, _Merged, int]:
    """Sum, concatenate and count the run's events per worker and place; add the records to the rate history.

    Returns the schedulings, the merged pointstamp and frontier changes, the
    merged messages, and how many frontier events the run held.
    """
    bucket = state.rates.bucket
    # Events that differ only in their sequence number and time count as one, with a multiplicity.
    same: Counter[tuple[Any, ...]] = Counter(
        (raw[0], raw[1], raw[4:], int(raw[3] / bucket)) if raw[0] == K_MESSAGES else (raw[0], raw[1], raw[4:])
        for raw in run
        if raw[0] != K_SCHEDULE
    )
    scheduled: _Schedulings = {}
    for raw in run:
        if raw[0] == K_SCHEDULE:
            _, worker, _, _, address, _, duration = raw
            entry = scheduled.get((worker, address))
            if entry is None:
                scheduled[(worker, address)] = [1, duration]
            else:
                entry[0] += 1
                entry[1] += duration
    changes_of: _Changes = {K_POINTSTAMPS: {}, K_LOCAL_POINTSTAMPS: {}, K_FRONTIERS: {}}
    messages: _Merged = {}
    rates = state.rates
    frontier_events = 0
    for key, times in same.items():
        kind, worker = key[0], key[1]
        if kind == K_MESSAGES:
            (address, consumed, produced), slot = key[2], key[3]
            merged = messages.get((worker, address))
            if merged is None:
                merged = messages[(worker, address)] = ([], [])
            for is_output, ports, target in ((False, consumed, merged[0]), (True, produced, merged[1])):
                while len(target) < len(ports):
                    target.append([])
                for port, entries in enumerate(ports):
                    if entries:
                        target[port].extend(entries * times)
                        rates.add_records((address, port, is_output), slot, times * sum(count for _, count in entries))
        else:
            scope, changes = key[2]
            tables = changes_of[kind]
            table = tables.get((worker, scope))
            if table is None:
                table = tables[(worker, scope)] = {}
            for loc, time, diff in changes:
                table[(loc, time)] = table.get((loc, time), 0) + diff * times
            if kind == K_FRONTIERS:
                frontier_events += times
    return scheduled, changes_of, messages, frontier_events
