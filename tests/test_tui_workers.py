"""The per-worker selection (w) shows each worker's own state, through viz.model's per-worker views."""

from __future__ import annotations

import asyncio

from test_viz_workers import before_marks, record_held_on_worker_one
from textual.widgets import DataTable, Static

from viz.tui.app import TimelyApp
from viz.tui.sources import Replay


def cell(app: TimelyApp, table_id: str, row_key: str, column: str) -> str:
    """The text of one cell of a table."""
    table = app.query_one(table_id, DataTable)
    return str(table.get_cell(row_key, column))


def test_worker_selection_shows_the_capabilities_each_worker_holds() -> None:
    """Only worker 1 holds the source's capability at time 0: the table says so per worker, and for all."""
    events = before_marks(record_held_on_worker_one())
    replay = Replay(events)
    replay.seek(len(replay))
    app = TimelyApp(replay=replay, clock=lambda: 0.0)
    model = replay.state.model
    assert model.local_mode
    (source,) = model.find("OnlyOnWorkerOne")
    key = ".".join(map(str, source.address))

    async def run() -> None:
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.press("2")
            assert cell(app, "#op-table", key, "capabilities") == "out0: 0×1"  # all workers: worker 1's
            await pilot.press("w")
            assert app.worker == 0
            assert cell(app, "#op-table", key, "capabilities") == ""  # worker 0 dropped its own
            assert "worker 0 (its own capabilities" in str(app.query_one("#op-caption", Static).render())
            await pilot.press("w")
            assert app.worker == 1
            assert cell(app, "#op-table", key, "capabilities") == "out0: 0×1"
            # the stuck view, on worker 0's frontier, names the capability held on worker 1
            await pilot.press("w", "w")
            assert app.worker == 0
            await pilot.press("4")
            text = str(app.query_one("#stuck-text", Static).render())
            assert "'OnlyOnWorkerOne'" in text and "on worker 1" in text, text
            # channels: one worker's view cannot count records in flight, and says so
            await pilot.press("3")
            assert "in flight n/a" in str(app.query_one("#channel-caption", Static).render())
            await pilot.press("w", "w")
            assert app.worker is None
            assert "in flight n/a" not in str(app.query_one("#channel-caption", Static).render())
            assert app.errors == []

    asyncio.run(run())
