"""The live viewer's bulk ingest: coalescing raw wire events gives the state that applying them one by one gives.

Also: a viewer that stops drawing never slows the program, its queue stays bounded.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from helpers.tui_helpers import synthetic_events
from test_viz_recorded import record_countdown

from runtime.instrument import (
    K_DROPPED,
    K_FRONTIERS,
    K_LOCAL_POINTSTAMPS,
    K_MESSAGES,
    K_POINTSTAMPS,
    K_SCHEDULE,
    Event,
    RecordingStream,
    TcpSink,
    encode_events,
    encode_header,
)
from viz.tui.adapter import TuiState
from viz.tui.ingest import apply_raw
from viz.tui.sources import LiveListener


def wire(events: list[Event]) -> list[tuple[Any, ...]]:
    """The events as the viewer's reader gets them: encoded, then unpacked into raw arrays."""
    from runtime.instrument import _CLASSES

    kinds = {cls: kind for kind, cls in _CLASSES.items()}
    data = encode_header(0) + encode_events(
        [(kinds[type(e)], *(getattr(e, f) for f in e.__dataclass_fields__)) for e in events]
    )
    return RecordingStream("test").feed(data)


def snapshot(state: TuiState) -> dict[str, Any]:
    """Everything the panes read from the state, comparable with ``==``."""
    model = state.model

    def nonzero(table: dict[Any, dict[Any, int]]) -> dict[Any, dict[Any, int]]:
        return {loc: {t: c for t, c in counts.items() if c} for loc, counts in table.items() if any(counts.values())}

    workers = {
        worker: (
            nonzero(view.tracked),
            nonzero(view.own),
            view.local_mode,
            nonzero(view.frontier_counts),
            view.received,
            view.sent,
            {a: (s[0], round(s[1], 9)) for a, s in view.scheduled.items()},
            {a: vars(i) for a, i in view.inputs.items()},
            view.completed,
            view.shut_down,
            view.events,
            view.last_t,
        )
        for worker, view in model.workers.items()
    }
    return {
        "workers": workers,
        "local_mode": model.local_mode,
        "events": model.events,
        "first": model.first_t,
        "last": model.last_t,
        "dropped": model.dropped,
        "operators": model.operators,
        "edges": {a: s.edges for a, s in model.scopes.items()},
        "rates": state.rates.counts,
        "frontier_changes": state.frontier_changes,
    }


def one_by_one(events: list[Event], bucket: float) -> TuiState:
    state = TuiState(bucket)
    state.apply_all(events)
    return state


@pytest.mark.parametrize("chunk", [1, 3, 64, 10_000])
def test_bulk_ingest_equals_one_by_one_on_a_real_recording(chunk: int) -> None:
    events, _ = record_countdown()
    raws = wire(events)
    assert len(raws) == len(events) > 500
    assert {K_POINTSTAMPS, K_LOCAL_POINTSTAMPS, K_FRONTIERS, K_MESSAGES, K_SCHEDULE} <= {raw[0] for raw in raws}
    state = TuiState(0.001)
    for start in range(0, len(raws), chunk):
        apply_raw(state, raws[start : start + chunk])
    assert snapshot(state) == snapshot(one_by_one(events, 0.001))


def test_bulk_ingest_equals_one_by_one_on_the_synthetic_recording_with_drops() -> None:
    events = synthetic_events(done=True)
    raws = wire(events)
    raws.insert(30, (K_DROPPED, -1, 0, raws[29][3], 7))
    expected = one_by_one(events[:30], 0.01)
    from runtime.instrument import decode

    expected.apply(decode(raws[30]))
    expected.apply_all(events[30:])
    state = TuiState(0.01)
    apply_raw(state, raws)
    assert state.model.dropped == 7
    assert snapshot(state) == snapshot(expected)


def test_bulk_ingest_refuses_an_array_that_is_not_an_event() -> None:
    state = TuiState()
    with pytest.raises((ValueError, TypeError, IndexError)):
        apply_raw(state, [(6, 0, 1, 1.0, (0,))])  # a pointstamp event without its changes


def test_a_viewer_that_stops_reading_never_slows_the_program(tmp_path: Path) -> None:
    """The screen is frozen (nobody takes from the queue): the listener stops at its capacity, the sink drops."""
    listener = LiveListener("127.0.0.1", 0, capacity=20_000)
    listener.start()
    sink = TcpSink("127.0.0.1", listener.port)
    try:
        deadline = time.monotonic() + 5
        while not sink.connected and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sink.connected
        events = [(6, 0, i, 1.0, (0, 2), ((5, i, 1),)) for i in range(1000)]
        encoded = encode_events(events)
        slowest = 0.0
        started = time.monotonic()
        while time.monotonic() - started < 2.0:
            before = time.perf_counter()
            sink.write(events, encoded)
            slowest = max(slowest, time.perf_counter() - before)
            time.sleep(0.001)
        assert sink.dropped > 0, "the frozen viewer should have made the sink drop"
        assert slowest < 0.05, f"a write took {slowest:.3f} s"
        # bounded: the capacity plus what one read can add
        assert listener.queued <= 20_000 + (1 << 18), listener.queued
        assert listener.connections and listener.connections[0].open
    finally:
        sink.close()
        listener.close()
