"""The live viewer keeps each program that connects as a run of its own (issue 17, item 5)."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

from helpers.tui_helpers import wait_until
from test_tui_live import start_logged
from textual.widgets import Footer, Static

from viz.tui.adapter import walk
from viz.tui.app import TimelyApp
from viz.tui.sources import LiveListener

PROGRAM = textwrap.dedent(
    """
    from runtime import execute

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input("{input}")
            return handle, stream.map(lambda n: n * 2, name="{op}").probe(name="Seen")
        handle, probe = worker.dataflow(build, name="{flow}")
        handle.send_batch([1, 2, 3])
        handle.close()
        while worker.step():
            pass

    if __name__ == "__main__":
        execute(main, workers={workers})
    """
)


def test_two_programs_one_after_the_other_are_two_runs_and_the_viewer_switches(tmp_path: Path) -> None:
    first = tmp_path / "first.py"
    first.write_text(PROGRAM.format(input="numbers", op="Double", flow="first", workers=2))
    second = tmp_path / "second.py"
    second.write_text(PROGRAM.format(input="words", op="Triple", flow="second", workers=1))

    async def run() -> None:
        listener = LiveListener("127.0.0.1", 0)
        app = TimelyApp(listener=listener, refresh_interval=0.05)
        async with app.run_test(size=(120, 30)) as pilot:
            for number, script in ((1, first), (2, second)):
                program = start_logged([str(script)], listener.port)
                try:
                    assert program.wait(timeout=120) == 0, program.stdout.read() if program.stdout else ""
                    await wait_until(
                        pilot,
                        lambda number=number: (
                            len(app.runs) == number
                            and not any(c.open for c in listener.connections)
                            and not listener.queued
                            and app.state.model.workers
                            and all(v.shut_down for v in app.state.model.workers.values())
                        ),
                        30,
                        f"program {number}'s events",
                    )
                finally:
                    program.kill()
                    program.wait()
            await pilot.pause(0.2)
            # the newest run is on screen, alone: nothing of the first program is grafted onto it
            assert len(app.runs) == 2 and app.run_index == 1
            names = {info.name for info in walk(app.state.model)}
            assert {"second", "words", "Triple", "Seen"} <= names
            assert not {"first", "numbers", "Double"} & names
            assert sorted(app.state.model.workers) == [0]
            header = str(app.query_one("#status", Static).render())
            assert "run 2/2" in header and "1 worker" in header, header
            shown = app.screen.active_bindings["right_square_bracket"]
            assert shown.enabled and shown.binding.show and shown.binding.description == "Next run"
            assert app.query_one(Footer).display

            await pilot.press("left_square_bracket")
            await pilot.pause(0.2)
            assert app.run_index == 0
            names = {info.name for info in walk(app.state.model)}
            assert {"first", "numbers", "Double", "Seen"} <= names and not {"second", "Triple"} & names
            assert sorted(app.state.model.workers) == [0, 1]
            header = str(app.query_one("#status", Static).render())
            assert "run 1/2" in header and "2 workers" in header, header
            assert "1 newer" in str(app.query_one("#status2", Static).render())

            await pilot.press("right_square_bracket")
            await pilot.pause(0.2)
            assert app.run_index == 1 and "run 2/2" in str(app.query_one("#status", Static).render())
            assert app.errors == []

    asyncio.run(run())


def test_replay_start_shows_nothing_done_before_the_dataflow_starts() -> None:
    """Issue 17, item 6: at the start of a recording nothing is done, and the header never says so."""
    from helpers.tui_helpers import replay_app

    from runtime.instrument import FrontiersChanged
    from viz.tui.adapter import operator_rows, tree_label, unfinished_dataflows

    async def run() -> None:
        app = replay_app(at_end=False)
        replay = app.replay
        assert replay is not None
        first_frontier = next(i for i, e in enumerate(replay.events) if isinstance(e, FrontiersChanged))
        async with app.run_test(size=(120, 30)) as pilot:
            for position in range(first_frontier + 1):
                replay.seek(position)
                app._replay_moved()
                await pilot.pause()
                model = app.state.model
                status = str(app.query_one("#status2", Static).render())
                assert "all dataflows done" not in status, (position, status)
                if model.scopes:
                    assert unfinished_dataflows(model), position
                view = app.current_view()
                assert all(row.busy for row in operator_rows(model, view)), position
                for info in walk(model):
                    assert tree_label(model, view, info)[1], (position, info.name)
            await pilot.press("G")
            await pilot.pause()
            assert "all dataflows done" not in str(app.query_one("#status2", Static).render())  # stuck at the end

    asyncio.run(run())


def test_a_reconnection_from_the_same_process_stays_in_its_run() -> None:
    """A sink that lost its viewer connects again: same process id, same run; another program: a new run."""
    import socket

    from helpers.viz_synthetic import running

    from runtime import codec
    from runtime.framing import RECORDING_MAGIC, frame
    from runtime.instrument import FORMAT, VERSION, encode_events

    def header(pid: int) -> bytes:
        fields = {"format": FORMAT, "version": VERSION, "process": 0, "pid": pid}
        return RECORDING_MAGIC + frame(codec.pack_recording(fields))

    async def run() -> None:
        listener = LiveListener("127.0.0.1", 0)
        app = TimelyApp(listener=listener, refresh_interval=0.05)
        raws = running(workers=1).raw
        async with app.run_test(size=(100, 24)) as pilot:
            for index, (pid, part) in enumerate(((111, raws[:10]), (111, raws[10:]), (222, raws))):
                sock = socket.create_connection(("127.0.0.1", listener.port))
                sock.sendall(header(pid) + encode_events(part))
                sock.close()
                await wait_until(
                    pilot,
                    lambda index=index: (
                        sum(1 for c in listener.connections if c.events and not c.open) == index + 1
                        and not listener.queued
                    ),
                    10,
                    f"connection {index + 1}",
                )
                await pilot.pause(0.2)
            assert [len(r.connections) for r in app.runs] == [2, 1]
            assert app.runs[0].state.model.events == len(raws) == app.runs[1].state.model.events

    asyncio.run(run())


def test_going_back_in_a_replay_drops_tree_rows_of_operators_not_built_yet() -> None:
    """After the end of a recording, `g` shows the start: no row keeps the state it showed at the end."""
    from helpers.tui_helpers import replay_app
    from textual.widgets import Tree

    def rows(app: TimelyApp) -> list[str]:
        tree = app.query_one("#scope-tree", Tree)
        found: list[str] = []

        def visit(node: Any) -> None:
            for child in node.children:
                found.append(str(child.label))
                visit(child)

        visit(tree.root)
        return found

    async def run() -> None:
        app = replay_app(at_end=True)
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.pause()
            at_end = rows(app)
            assert at_end
            await pilot.press("g")
            await pilot.pause()
            assert rows(app) == []  # nothing was built at event 0
            for _ in range(5):
                await pilot.press("n")
            await pilot.pause()
            shown = rows(app)
            built = {info.address for info in walk(app.state.model)}
            assert len(shown) == len(built), (shown, built)
            await pilot.press("G")
            await pilot.pause()
            assert rows(app) == at_end

    asyncio.run(run())
