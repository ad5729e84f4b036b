"""The terminal UI driven by Textual's pilot: navigation, filter, sort, stuck view, replay stepping, diagrams."""

from __future__ import annotations

import asyncio
from pathlib import Path

from helpers.tui_helpers import replay_app, synthetic_events
from textual.widgets import DataTable, OptionList, Static, TabbedContent, Tree

from runtime.instrument import FrontiersChanged
from viz.tui.adapter import TuiState, operator_rows, sparkline, stuck_places
from viz.tui.app import HelpScreen, TimelyApp
from viz.tui.sources import Replay


def text_of(app: TimelyApp, selector: str) -> str:
    """The plain text a Static shows."""
    return str(app.query_one(selector, Static).render())


def table_keys(app: TimelyApp, selector: str = "#op-table") -> list[str]:
    """Row keys of a table, top to bottom."""
    table = app.query_one(selector, DataTable)
    return [str(row.key.value) for row in table.ordered_rows]


def test_navigation_between_panes_and_help() -> None:
    async def run() -> None:
        app = replay_app()
        async with app.run_test(size=(100, 30)) as pilot:
            tabs = app.query_one(TabbedContent)
            assert tabs.active == "tree"
            tree = app.query_one("#scope-tree", Tree)
            shown = {node.data for node in app._tree_nodes.values()}
            assert shown == {(0,), (0, 1), (0, 2), (0, 2, 1), (0, 2, 2), (0, 3)}
            for key, pane in (("2", "operators"), ("3", "channels"), ("4", "stuck"), ("1", "tree")):
                await pilot.press(key)
                assert tabs.active == pane
            assert tree.has_focus
            await pilot.press("down", "down")
            assert tree.cursor_node is not None and tree.cursor_node.data in ((0, 1), (0, 2))
            tree.move_cursor(app._tree_nodes[(0, 2)])
            await pilot.press("enter")  # fold the loop scope
            assert tree.cursor_node is not None and tree.cursor_node.data == (0, 2)
            assert not tree.cursor_node.is_expanded
            await pilot.press("enter")
            assert tree.cursor_node.is_expanded
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            assert not isinstance(app.screen, HelpScreen)
            await pilot.click("#tabs-list Tab#--content-tab-channels")
            assert tabs.active == "channels"
            assert app.errors == []

    asyncio.run(run())


def test_filter_and_sort_the_operator_table() -> None:
    async def run() -> None:
        app = replay_app()
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("2")
            assert table_keys(app) == ["0.1", "0.2", "0.2.1", "0.2.2", "0.3"]
            await pilot.press("slash", *"step", "enter")
            assert table_keys(app) == ["0.2.2"]
            assert "filter 'step'" in text_of(app, "#op-caption")
            await pilot.press("slash", "ctrl+u", *"loop", "enter")  # the scope path matches too
            assert table_keys(app) == ["0.2", "0.2.1", "0.2.2"]
            await pilot.press("slash", "ctrl+u", "enter")
            await pilot.press("s")  # by name
            assert table_keys(app) == ["0.2.1", "0.2", "0.1", "0.3", "0.2.2"]
            await pilot.press("r")
            assert table_keys(app) == ["0.2.2", "0.3", "0.1", "0.2", "0.2.1"]
            await pilot.click("#op-table", offset=(2, 0))  # the header of the first column: by name again
            assert app.sort_column == "name"
            assert app.errors == []

    asyncio.run(run())


def test_stuck_view_names_the_input_never_closed_and_follows_the_selection() -> None:
    async def run() -> None:
        app = replay_app()
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("4")
            text = text_of(app, "#stuck-text")
            assert "'Probe' input 0" in text
            assert "input 'numbers' was never advanced past time 0 and never closed" in text
            assert "numbers.out0 → Loop.in0" in text
            # pick another location: the loop's feedback input, held back by records in flight too
            places = stuck_places(app.state.model, app.current_view())
            index = next(i for i, p in enumerate(places) if p.loc == ((0, 2), 2, 1, False))
            options = app.query_one("#stuck-places", OptionList)
            options.focus()
            options.highlighted = index
            await pilot.pause()
            text = text_of(app, "#stuck-text")
            assert "'Step' input 1" in text
            assert "messages in flight" in text and "3 record(s)" in text
            # explain from the tree: the cursor on the Step operator, then x
            await pilot.press("1")
            tree = app.query_one("#scope-tree", Tree)
            tree.select_node(app._tree_nodes[(0, 2, 2)])
            tree.move_cursor(app._tree_nodes[(0, 2, 2)])
            await pilot.press("x")
            assert app.query_one(TabbedContent).active == "stuck"
            assert app.stuck_loc == ((0, 2), 2, 0, False)
            assert "'Step' input 0" in text_of(app, "#stuck-text")
            assert app.errors == []

    asyncio.run(run())


def test_explain_from_the_operator_table_with_enter() -> None:
    async def run() -> None:
        app = replay_app()
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("2", "down", "down", "down", "down", "enter")  # the Probe row
            assert app.query_one(TabbedContent).active == "stuck"
            assert app.stuck_loc == ((0,), 3, 0, False)

    asyncio.run(run())


def test_replay_stepping_frontier_jumps_and_ends() -> None:
    async def run() -> None:
        events = synthetic_events(done=True)
        app = TimelyApp(replay=Replay(events), clock=lambda: 0.0)
        replay = app.replay
        assert replay is not None
        first_change = next(i for i, e in enumerate(events) if isinstance(e, FrontiersChanged)) + 1
        async with app.run_test(size=(100, 30)) as pilot:
            assert replay.position == 0
            assert "event 0/" in text_of(app, "#status")
            await pilot.press("n", "n", "n")
            assert replay.position == 3
            await pilot.press("b")
            assert replay.position == 2
            await pilot.press("f")
            assert replay.position == first_change
            await pilot.press("f")
            second = replay.position
            assert second > first_change and isinstance(events[second - 1], FrontiersChanged)
            await pilot.press("F")
            assert replay.position == first_change
            await pilot.press("G")
            assert replay.position == len(events)
            assert "all dataflows done" in text_of(app, "#status2")
            await pilot.press("g")
            assert replay.position == 0
            # the slider seeks where it is clicked
            await pilot.click("#slider", offset=(50, 0))
            assert 0 < replay.position < len(events)
            assert app.errors == []

    asyncio.run(run())


def test_replay_plays_at_the_chosen_speed() -> None:
    async def run() -> None:
        now = [0.0]
        events = synthetic_events(done=True)
        app = TimelyApp(replay=Replay(events), clock=lambda: now[0])
        replay = app.replay
        assert replay is not None
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("minus", "minus", "minus", "minus")  # x0.01
            await pilot.press("p")
            assert app.playing
            now[0] = 1.0  # one second of wall time: 0.01 s of the recording, 10 of its 1 ms steps
            await pilot.pause(0.2)
            assert 8 <= replay.position <= 12
            await pilot.press("plus", "plus", "plus", "plus", "plus", "plus", "plus")  # x10
            now[0] = 2.0
            await pilot.pause(0.2)
            assert replay.position == len(events)
            assert not app.playing

    asyncio.run(run())


def test_worker_selection_changes_every_pane() -> None:
    async def run() -> None:
        app = replay_app()
        async with app.run_test(size=(100, 30)) as pilot:
            assert "showing all workers" in text_of(app, "#status2")
            await pilot.press("w")
            assert app.worker == 0 and "showing worker 0" in text_of(app, "#status2")
            await pilot.press("w")
            assert app.worker == 1
            await pilot.press("w")
            assert app.worker is None

    asyncio.run(run())


def test_diagram_key_writes_svg_and_shows_its_path(tmp_path: Path) -> None:
    async def run() -> None:
        app = replay_app(diagram_dir=tmp_path)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("4", "d")
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert app.last_diagram == str(tmp_path / "pytimely-diagram-1.svg")
            assert (tmp_path / "pytimely-diagram-1.svg").read_text().lstrip().startswith("<?xml")
            assert "pytimely-diagram-1.svg" in text_of(app, "#status2")

    asyncio.run(run())


def test_diagrams_are_numbered_past_existing_files_and_never_overwrite_them(tmp_path: Path) -> None:
    (tmp_path / "pytimely-diagram-1.svg").write_text("an earlier session's")
    (tmp_path / "pytimely-diagram-3.svg").write_text("another viewer's")

    async def session(presses: int) -> tuple[str, str]:
        app = replay_app(diagram_dir=tmp_path)
        async with app.run_test(size=(100, 30)) as pilot:
            for _ in range(presses):
                await pilot.press("d")
                await app.workers.wait_for_complete()
            await pilot.pause()
            assert app.errors == []
            return str(app.last_diagram), text_of(app, "#footer-note")

    first, footer = asyncio.run(session(2))
    assert first == str(tmp_path / "pytimely-diagram-5.svg")
    assert footer == f"diagram written to {first}"
    second, _ = asyncio.run(session(1))  # a second session in the same directory
    assert second == str(tmp_path / "pytimely-diagram-6.svg")
    assert (tmp_path / "pytimely-diagram-1.svg").read_text() == "an earlier session's"
    assert (tmp_path / "pytimely-diagram-3.svg").read_text() == "another viewer's"
    for number in (4, 5, 6):
        assert (tmp_path / f"pytimely-diagram-{number}.svg").read_text().lstrip().startswith("<?xml")


def test_operator_rows_and_sparklines() -> None:
    state = TuiState(0.001)
    state.apply_all(synthetic_events(done=True))
    rows = {row.name: row for row in operator_rows(state.model, state.model.view())}
    assert rows["Step"].records_out == 14 and rows["Step"].frontiers == "{} {}" and not rows["Step"].busy
    assert sparkline([0, 1, 2, 4]) == " ▂▄█"
    assert sparkline([0, 0]) == "  "


def test_a_port_the_explainer_does_not_know_is_said_in_the_stuck_view_not_a_display_error() -> None:
    """Found by the viewer audit: an operator at address (0, -1) met the model's key for frontier changes at a
    location index past the scope's table ((0,), -1, index, False): the stuck view listed that port, and picking
    it made the explainer raise SelectionError, shown as a display error with the explanation left stale."""
    from runtime.instrument import FrontiersChanged, LocationsDefined, OperatorCreated

    events = [
        OperatorCreated(0, 1, 0.0, (0,), "dataflow", 0, 0, (), "integer"),
        OperatorCreated(0, 2, 0.0, (0, -1), "Negative", 8, 1, ((0,),), None),
        OperatorCreated(0, 3, 0.0, (0, 1), "Map", 1, 1, ((0,),), None),
        LocationsDefined(0, 4, 0.0, (0,), ((1, 0, True), (1, 0, False))),
        FrontiersChanged(0, 5, 0.1, (0,), ((0, 3, 1), (1, 3, 1), (5, 3, 1))),
    ]
    replay = Replay(events)
    replay.seek(len(replay))

    async def run() -> None:
        app = TimelyApp(replay=replay, clock=lambda: 0.0)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("4")
            places = stuck_places(app.state.model, app.current_view())
            index = next(i for i, p in enumerate(places) if p.loc == ((0,), -1, 5, False))
            options = app.query_one("#stuck-places", OptionList)
            options.focus()
            options.highlighted = index
            await pilot.pause()
            assert "Negative.in5 [0.-1] {3}: cannot be explained" in text_of(app, "#stuck-text")
            options.highlighted = next(i for i, p in enumerate(places) if p.loc == ((0,), 1, 0, False))
            await pilot.pause()
            assert "'Map' input 0" in text_of(app, "#stuck-text")
            assert app.errors == []

    asyncio.run(run())
