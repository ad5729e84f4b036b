"""What holds back a frontier behind a loop nested in a loop, on several workers: the capability, and nothing else.

A nested scope's output, seen from its parent, is counted by each worker's tracker
from that worker's own copy of the scope, and no worker sends it to the others.
The explainer compared that count with what the workers had sent (nothing) and
added, for each worker and each enclosing scope, "worker N has not yet heard that
1 capability(ies) for time 0 at 'Outer' output 0 were retired: the progress update
is on its way to it": a false reason, for a program stuck for good on a capability
its operator never drops.  ``viz dot --stuck`` and the viewer's stuck pane printed it too.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from helpers import loop_mains

from runtime import WorkerFailed, execute
from runtime.instrument import Event, Recorder
from viz import explain
from viz.model import Model
from viz.tui.app import TimelyApp
from viz.tui.sources import Replay


@pytest.fixture(scope="module")
def held() -> list[Event]:
    """The recording of ``held_in_nested_loop`` on 2 worker threads, stopped by the stall timeout."""
    with Recorder() as recording, pytest.raises(WorkerFailed, match="'Holder'"):
        execute(loop_mains.held_in_nested_loop, workers=2, stall_timeout=1.0)
    return recording.events


def test_the_probe_is_held_by_each_workers_capability_and_nothing_else(held: list[Event]) -> None:
    model = Model.from_events(held)
    probe = model.locate("Probe")
    assert model.view().frontier(probe) == [0]
    blockers = explain(model, probe, 0)
    assert [(b.kind, b.worker) for b in blockers] == [("capability", 0), ("capability", 1)], [
        b.description for b in blockers
    ]
    for blocker in blockers:
        assert "operator 'Holder'" in blocker.description and "Product(Product(0, 0), 0)" in blocker.description
        assert "loop_mains.py:" in blocker.description  # where it was built and where retained


def test_the_stuck_pane_says_the_same(held: list[Event]) -> None:
    async def run() -> None:
        replay = Replay(held)
        replay.seek(len(replay))
        app = TimelyApp(replay=replay, clock=lambda: 0.0)
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.press("2")
            rows: Any = app.query_one("#op-table")
            keys = [str(key.value) for key in rows.rows]
            rows.move_cursor(row=keys.index("0.3"))  # the probe
            await pilot.press("x")
            await pilot.pause()
            text = str(app.query_one("#stuck-text").render())
            assert "'Holder'" in text and "not yet heard" not in text, text
            assert app.errors == []

    asyncio.run(run())
