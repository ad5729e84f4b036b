"""The terminal UI against real programs: scc live on 2 workers, a stuck input, and bad input on the command line."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import msgpack  # type: ignore[import-untyped]
import pytest
from helpers.failing_accept import FailingAccept
from helpers.tui_helpers import ROOT, wait_until, write_recording
from textual.widgets import Static

from viz.tui.adapter import operator_rows, walk
from viz.tui.app import TimelyApp
from viz.tui.sources import LiveListener


def start_logged(args: list[str], port: int) -> subprocess.Popen[bytes]:
    """Start a Python program through viz.tui.logged with logging pointed at ``port``."""
    env = dict(os.environ, PYTIMELY_LOG=f"tcp://127.0.0.1:{port}", PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "viz.tui.logged", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def test_scc_live_on_two_workers_ends_with_every_frontier_empty() -> None:
    async def run() -> None:
        listener = LiveListener("127.0.0.1", 0)
        app = TimelyApp(listener=listener, refresh_interval=0.1)
        async with app.run_test(size=(120, 40)) as pilot:
            assert "waiting for a program" in str(app.query_one("#status2", Static).render())
            program = start_logged(["examples/scc.py", "-w", "2", "--limit-edges", "3000"], listener.port)
            try:
                assert program.wait(timeout=120) == 0, program.stdout.read() if program.stdout else ""
                await wait_until(
                    pilot,
                    lambda: (
                        listener.connections
                        and not any(c.open for c in listener.connections)
                        and not listener.lag
                        and len(app.state.model.workers) == 2
                        and all(v.shut_down for v in app.state.model.workers.values())
                    ),
                    30,
                    "the program's events",
                )
            finally:
                program.kill()
                program.wait()
            await pilot.pause(0.3)
            model = app.state.model
            assert model.dropped == 0
            names = {info.name for info in walk(model)}
            assert {"scc", "Forward", "Backward", "Gate"} <= names
            view = app.current_view()
            rows = operator_rows(model, view)
            assert rows and all(set(row.frontiers) <= set("{} -") for row in rows), [
                (r.name, r.frontiers) for r in rows if set(r.frontiers) - set("{} -")
            ]
            assert not any(row.busy for row in rows)
            # a scope counts the records that crossed its boundary once, not once per worker
            by_name = {row.name: row for row in rows}
            assert by_name["Rounds"].records_in == by_name["ReadEdges"].records_out == 3000
            status = str(app.query_one("#status2", Static).render())
            assert "all dataflows done" in status and "program ended" in status
            # what the tree shows: every line is finished and every frontier empty
            for node in app._tree_nodes.values():
                label = str(node.label)
                assert label.startswith("✓"), label
            await pilot.press("2")
            assert app.errors == []

    asyncio.run(run())


STUCK_PROGRAM = textwrap.dedent(
    """
    import time
    from runtime import execute

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input("numbers")
            return handle, stream.map(lambda n: n + 1, name="AddOne").probe(name="Watch")
        handle, probe = worker.dataflow(build, name="stuck")
        handle.send_batch([1, 2, 3])
        handle.advance_to(1)
        deadline = time.monotonic() + 60  # the test kills it long before
        while time.monotonic() < deadline:
            worker.step_or_park(0.05)

    execute(main, workers=2)
    """
)


def test_an_input_never_closed_opens_the_stuck_view_by_itself_and_is_named(tmp_path: Path) -> None:
    script = tmp_path / "stuck_program.py"
    script.write_text(STUCK_PROGRAM)

    async def run() -> None:
        listener = LiveListener("127.0.0.1", 0)
        app = TimelyApp(listener=listener, refresh_interval=0.1, idle_after=1.0)
        async with app.run_test(size=(120, 40)) as pilot:
            program = start_logged([str(script)], listener.port)
            try:
                await wait_until(pilot, lambda: app.auto_stuck_opened > 0, 30, "the stuck view to open by itself")
                await pilot.pause(0.2)
                assert app.query_one("TabbedContent").active == "stuck"  # type: ignore[attr-defined]
                text = str(app.query_one("#stuck-text", Static).render())
                assert "'Watch' input 0" in text
                assert re.search(
                    r"input handle: input 'numbers' \(\w+\.py:\d+\) has not advanced past time 1 and was never closed",
                    text,
                ), text
                assert "numbers.out0 → AddOne.in0" in text
            finally:
                program.kill()
                program.wait()
            await wait_until(
                pilot, lambda: not any(c.open for c in listener.connections), 10, "the connection to close"
            )
            await pilot.pause(0.3)
            # the program was killed: the viewer shows the dropped connection and keeps the last state
            status = str(app.query_one("#status2", Static).render())
            assert "1 dropped" in status
            assert "unfinished: stuck" in status
            assert app.errors == []

    asyncio.run(run())


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m viz tui ARGS`` in a subprocess (never reaching the screen on bad input)."""
    return subprocess.run(
        [sys.executable, "-m", "viz", "tui", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )


def assert_clean_error(result: subprocess.CompletedProcess[str], *phrases: str) -> None:
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m viz tui: error: "), result.stderr
    for phrase in phrases:
        assert phrase in lines[0], lines[0]


def test_cli_refuses_a_missing_file(tmp_path: Path) -> None:
    assert_clean_error(run_cli("--replay", str(tmp_path / "nope.msgpack")), "nope.msgpack", "no such file")


def test_cli_refuses_a_file_that_is_not_a_recording(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello, I am not a recording\n")
    assert_clean_error(run_cli("--replay", str(path)), "not a pytimely recording")


def test_cli_refuses_a_newer_format_version(tmp_path: Path) -> None:
    path = tmp_path / "future.msgpack"
    write_recording(path, [], version=99)
    assert_clean_error(run_cli("--replay", str(path)), "version 99 is newer", "upgrade")


def test_cli_refuses_an_empty_recording(tmp_path: Path) -> None:
    from runtime.instrument import END_FRAME, encode_header

    path = tmp_path / "empty.msgpack"
    path.write_bytes(encode_header(0) + END_FRAME)
    assert_clean_error(run_cli("--replay", str(path)), "holds no events")


def test_cli_says_why_a_recording_cut_in_its_first_frame_holds_no_events(tmp_path: Path) -> None:
    """A recording cut short inside its first frame of events (its program killed) said only 'the recording holds
    no events', where 'viz dot' says that it is truncated and where (found by the debugging audit)."""
    from runtime.instrument import K_MARK, encode_events, encode_header

    header = encode_header(0)
    path = tmp_path / "cut.msgpack"
    path.write_bytes((header + encode_events([(K_MARK, 0, 1, 1.0, "x" * 100)]))[: len(header) + 50])
    assert_clean_error(run_cli("--replay", str(path)), "holds no events", "is truncated", f"byte offset {len(header)}")


def test_cli_refuses_a_recording_of_format_1_unless_asked(tmp_path: Path) -> None:
    path = tmp_path / "old.msgpack"
    write_recording(path, [])
    assert_clean_error(run_cli("--replay", str(path)), "format version 1", "no checksums", "--allow-format-1")


def test_cli_refuses_a_port_in_use() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert_clean_error(run_cli("--listen", f"127.0.0.1:{port}"), f"127.0.0.1:{port}", "in use")


def test_cli_refuses_bad_arguments() -> None:
    assert_clean_error(run_cli(), "--replay LOG, --listen HOST:PORT")
    assert_clean_error(run_cli("--listen", "nowhere"), "expected HOST:PORT")
    assert_clean_error(run_cli("--listen", "127.0.0.1:0", "--", "/no/such/program"), "cannot start")


@pytest.mark.parametrize("idle", ["nan", "0", "-1"])
def test_cli_refuses_an_idle_time_that_is_no_positive_number(idle: str) -> None:
    """Found by the viewer audit: ``--idle nan`` passed the check (NaN compares false with 0) and opened the
    stuck view at the first moment of quiet."""
    from viz.__main__ import _parser
    from viz.errors import VizError
    from viz.tui.cli import _build

    with pytest.raises(VizError, match=f"--idle {idle}"):
        _build(_parser().parse_args(["tui", "--listen", "127.0.0.1:0", "--idle", idle]))


def test_a_program_that_cannot_start_leaves_no_output_file(tmp_path: Path) -> None:
    """The viewer makes a file for the program's output before it starts it; a failed start removes it."""
    result = subprocess.run(
        [sys.executable, "-m", "viz", "tui", "--listen", "127.0.0.1:0", "--", "/no/such/program"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp_path)),
    )
    assert_clean_error(result, "cannot start")
    assert list(tmp_path.iterdir()) == []


RATE = 100_000
SECONDS = 3.0


def test_live_keeps_up_with_100000_events_per_second() -> None:
    """The issue asks for at most 1 s behind at 100,000 events/s; the lag is measured two ways.

    ``tests/helpers/tui_load.py`` runs the viewer in a process of its own (as a real
    viewer runs) against ``tests/helpers/tui_flood.py`` and reports:

    * ``reported``: how far behind the viewer says it is (the header shows it);
    * ``true_lags``: now minus the newest event time on screen (the flood stamps
      each chunk with ``time.monotonic()`` as it leaves, the viewer's clock too),
      which also counts what waits in the kernel's socket buffers.

    The flood's achieved rate is checked as well, and the time its ``sendall``
    calls waited: a viewer that does not read fast enough would make the sender
    wait and hide its lag.  On a 2-core
    machine shared with other jobs both lags stay under 0.4 s, and the viewer
    spends about 1.3 s of CPU on the 300,000 events.

    The bound is the issue's 1 s when the viewer gets most of a core.  A machine
    so overloaded that it does not (seven test suites on two cores) cannot give
    any viewer the CPU it needs, so there the bound grows with the shortfall,
    measured by a busy loop before and after the flood.  The CPU the viewer
    spends is bounded too: at most 2.2 s for the 3 s flood (100,000 events/s on
    three quarters of a core) when it gets most of a core.  Sharing a core
    inflates the CPU time of the same work (a CI run gave 2.35 s with 0.68 of
    a core), so that bound grows by the same factor as the lag's.  So does the
    time the sender may take: it shares the starved cores too (a run of the
    suite beside other work gave the whole flood 0.14 of a core, and the sender
    reached 71,000 events/s without ever waiting for the viewer).
    """
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "helpers" / "tui_load.py"), str(RATE), str(SECONDS)],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    sent, elapsed, share = result["sent"], result["elapsed"], result["share"]
    reported, true_lags, viewer_cpu = result["reported"], result["true_lags"], result["viewer_cpu"]
    shortfall = max(1.0, 0.9 / max(share, 0.1))  # 1 with 90% of a core or more, larger in proportion below
    bound, cpu_bound = shortfall * 1.0, shortfall * 2.2
    in_send = result["in_send"]
    measured = (
        f"rate {sent / elapsed:,.0f}/s over {elapsed:.2f} s; lag reported max {max(reported):.3f} s, "
        f"true max {max(true_lags, default=-1):.3f} s ({len(true_lags)} samples); viewer CPU "
        f"{viewer_cpu:.2f} s; share of a core available {share:.2f}, so the bounds are {bound:.2f} s "
        f"behind and {cpu_bound:.2f} s of CPU; the sender waited {in_send:.3f} s in sendall"
    )
    print(measured)
    assert result["sender_status"] == 0, measured
    assert in_send < 0.25 * shortfall, measured  # the viewer read as fast as the events came
    assert sent / elapsed >= 0.95 * RATE / shortfall and elapsed < SECONDS + 0.5 * shortfall, measured
    assert len(true_lags) >= 5, measured
    assert max(reported) < bound and max(true_lags) < bound, measured
    assert viewer_cpu < cpu_bound, measured
    assert result["applied"] == sent and result["dropped"] == 0, measured
    assert result["errors"] == []


def test_header_shows_dropped_events_and_lag_and_a_bad_stream_is_shown_not_fatal() -> None:
    """A sink's drop report reaches the header; a newer format or garbage on a connection is shown, not fatal."""
    from helpers.recording_v1 import header as _header
    from helpers.recording_v1 import pack as _pack
    from helpers.viz_synthetic import running

    from runtime.instrument import K_DROPPED

    async def run() -> None:
        listener = LiveListener("127.0.0.1", 0)
        app = TimelyApp(listener=listener, refresh_interval=0.05)
        async with app.run_test(size=(80, 24)) as pilot:
            script = running(workers=2)
            good = socket.create_connection(("127.0.0.1", listener.port))
            good.sendall(_header(0) + b"".join(_pack(raw) for raw in script.raw))
            good.sendall(_pack((K_DROPPED, -1, 0, time.monotonic(), 7)))
            await wait_until(pilot, lambda: app.state.model.dropped == 7, 10, "the drop report")
            await pilot.pause(0.2)
            header = str(app.query_one("#status", Static).render())
            assert header.startswith("LIVE 127.0.0.1:") and "2 workers" in header
            assert "events/s" in header and "behind 0.0 s" in header and "dropped 7" in header
            assert len(header) <= 80, header  # it all fits at 80 columns

            newer = socket.create_connection(("127.0.0.1", listener.port))
            newer.sendall(msgpack.packb({"format": "pytimely-events", "version": 99, "process": 1}))
            garbage = socket.create_connection(("127.0.0.1", listener.port))
            garbage.sendall(b"GET / HTTP/1.1\r\n\r\n")
            await wait_until(
                pilot, lambda: sum(1 for c in listener.connections if c.dropped_early) == 2, 10, "the bad streams"
            )
            await pilot.pause(0.2)
            status = str(app.query_one("#status2", Static).render())
            assert "1 connection(s) open" in status and "2 dropped" in status, status
            reasons = sorted(c.error or "" for c in listener.connections if c.error)
            assert any("version 99 is newer" in r for r in reasons), reasons
            assert any("no header" in r or "not a pytimely" in r for r in reasons), reasons
            assert app.state.model.dropped == 7 and len(app.state.model.workers) == 2  # the good one goes on
            for sock in (good, newer, garbage):
                sock.close()
            assert app.errors == []

    asyncio.run(run())


FINISHING_PROGRAM = textwrap.dedent(
    """
    from runtime import execute

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input("numbers")
            return handle, stream.map(lambda n: n * 2, name="Double").probe(name="Seen")
        handle, probe = worker.dataflow(build, name="small")
        handle.send_batch([1, 2, 3])
        handle.close()
        while worker.step():
            pass

    execute(main, workers=2)
    """
)


def test_the_viewer_starts_the_program_after_double_dash_and_keeps_its_final_state(tmp_path: Path) -> None:
    """``python -m viz tui -- python prog.py``: the program logs to the viewer, ends, and its final state stays."""
    import argparse

    from viz.tui.cli import _build

    script = tmp_path / "small_program.py"
    script.write_text(FINISHING_PROGRAM)
    args = argparse.Namespace(
        replay=None, listen=None, idle=3.0, diagram_dir=str(tmp_path), program=[sys.executable, str(script)]
    )
    app, program = _build(args)
    assert program is not None

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            try:
                await wait_until(pilot, lambda: program.process.poll() is not None, 60, "the program to end")
                assert program.process.returncode == 0, Path(program.output).read_text()
                await wait_until(
                    pilot,
                    lambda: "all dataflows done" in str(app.query_one("#status2", Static).render()),
                    10,
                    "the final state",
                )
                await pilot.pause(0.3)
                status = str(app.query_one("#status2", Static).render())
                assert "program ended" in status and "program exited with status 0" in status, status
                names = {info.name for info in walk(app.state.model)}
                assert {"small", "numbers", "Double", "Seen"} <= names
                assert app.state.model.dropped == 0
                assert app.errors == []
            finally:
                program.stop()
                Path(program.output).unlink()

    asyncio.run(run())


DIES_STUCK_PROGRAM = textwrap.dedent(
    """
    from runtime import execute_from_args

    def main(worker):
        def build(scope):
            def constructor(capability, info):
                held = [capability]  # never downgraded or dropped

                def logic(output):
                    assert held

                return logic

            return scope.source("Forever", constructor).map(lambda x: x, name="After").probe()

        worker.dataflow(build, name="never-ends")

    if __name__ == "__main__":
        execute_from_args(main, stall_timeout=0.5)
    """
)


def test_a_program_that_dies_stuck_shows_its_error_and_opens_the_stuck_view(tmp_path: Path) -> None:
    """``viz tui -- python prog.py -w 2`` where the program fails with DataflowStuck: its error is on screen."""
    import argparse

    from textual.widgets import TabbedContent

    from viz.tui.cli import _build

    script = tmp_path / "stuck_program.py"
    script.write_text(DIES_STUCK_PROGRAM)
    args = argparse.Namespace(
        replay=None, listen=None, idle=60.0, diagram_dir=str(tmp_path), program=[sys.executable, str(script), "-w", "2"]
    )
    app, program = _build(args)
    assert program is not None

    async def run() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            try:
                await wait_until(pilot, lambda: program.process.poll() is not None, 60, "the program to end")
                assert program.process.returncode == 1, Path(program.output).read_text()
                error = app.query_one("#program-error", Static)
                await wait_until(pilot, lambda: error.has_class("shown"), 10, "the program's error")
                shown = str(error.render())
                assert shown.startswith("program exited with status 1:"), shown
                assert "DataflowStuck" in shown and "never-ends" in shown, shown
                assert app.query_one(TabbedContent).active == "stuck"  # opened by itself, long before --idle
                assert app.errors == []
            finally:
                program.stop()
                Path(program.output).unlink()

    asyncio.run(run())


def test_the_last_error_is_the_final_exception_of_the_output() -> None:
    from viz.tui.program_errors import died_stuck, last_error

    output = [
        "some output",
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in <module>',
        "    f()",
        "ValueError: first",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "a.py", line 3, in <module>',
        "    main()",
        "runtime.errors.WorkerFailed: worker 0 of 2 failed: DataflowStuck: no worker can make progress:",
        "  dataflow 'never-ends' holds time 0",
    ]
    lines = last_error(output)
    assert lines == output[-2:]
    assert died_stuck(lines)
    assert not died_stuck(last_error(output[:5]))
    assert last_error(["a", "", "b", "c"], limit=2) == ["b", "c"]  # no traceback: the last lines
    assert last_error([*output, *[f"  more {i}" for i in range(20)]], limit=4)[-1] == "…"


BAD_FIELDS = [
    (6, 0, 9, 0.0, (0,), (("a", 3, 1),)),  # a text location in a tracker batch, which waits for the next event
    (7, 0, 9, 0.0, (0,), ((1.5, 3, 1),)),  # a float location
    (6, 0, 9, 0.0, "abc", ((0, 3, 1),)),  # a text scope
]


@pytest.mark.parametrize("bad", BAD_FIELDS, ids=["text location", "float location", "text scope"])
def test_one_bad_field_in_a_live_stream_ends_that_connection_not_the_viewer(bad: tuple[object, ...]) -> None:
    """Found by the viewer audit: the live listener checks only an event's kind, worker, sequence number and time
    as it arrives; the bulk ingest passed a pointstamp batch with a text location (or a text scope) to the model,
    which kept it for the worker's next event, and the viewer died when it fell idle and settled it (TypeError
    from a timer: the whole TUI exited)."""
    from runtime.instrument import encode_events, encode_header

    async def run() -> None:
        listener = LiveListener("127.0.0.1", 0)
        app = TimelyApp(listener=listener, refresh_interval=0.05, idle_after=0.1)
        async with app.run_test(size=(80, 24)) as pilot:
            sock = socket.create_connection(("127.0.0.1", listener.port))
            now = time.monotonic()
            structure = [
                (1, 0, 1, now, (0,), "dataflow", 0, 0, (), "integer"),
                (1, 0, 2, now, (0, 1), "map", 1, 1, ((0,),), None),
                (3, 0, 3, now, (0,), ((1, 0, True), (1, 0, False))),
            ]
            sock.sendall(encode_header(0) + encode_events([*structure, (*bad[:3], now, *bad[4:])]))
            await wait_until(pilot, lambda: any(c.error for c in listener.connections), 10, "the bad event's report")
            await pilot.pause(0.5)  # idle for five times idle_after: the viewer settles the workers' last batches
            for pane in "12345":
                await pilot.press(pane)
                await pilot.pause()
            assert "not a pytimely event" in (listener.connections[0].error or "")
            assert list(app.state.model.operators) == [(0,), (0, 1)] and app.errors == []
            sock.close()

    asyncio.run(run())


def test_the_listener_accepts_again_after_accept_fails() -> None:
    """Found by the hostile-input audit (the same defect as the Spark gate's): one failed ``accept`` (EMFILE in a
    flood) ended the live viewer's accepting thread for good; now it is counted as refused and accepting goes on."""
    from helpers import eventually

    listener = LiveListener("127.0.0.1", 0)
    failing = FailingAccept(listener._server)  # noqa: SLF001 - the accepting thread reads it on every call
    listener._server = failing  # type: ignore[assignment]  # noqa: SLF001
    listener.start()
    try:
        eventually(lambda: failing.failures == 0, 10, "accept to fail once")
        with socket.create_connection(("127.0.0.1", listener.port)):
            eventually(lambda: len(listener.connections) == 1, 10, "the connection after the failure")
        assert listener.refused == 1 and "Too many open files" in (listener.last_refused or "")
    finally:
        listener.close()


@pytest.mark.parametrize("value", ["soon", "nan", "-1", "1e9", "inf"])
def test_a_bad_log_wait_is_refused_in_one_line(value: str) -> None:
    """Found by the hostile-input audit: ``float(PYTIMELY_LOG_WAIT)`` raised a bare ValueError, and NaN was taken."""
    from viz.tui.logged import log_wait

    with pytest.raises(SystemExit, match="PYTIMELY_LOG_WAIT must be a number of seconds"):
        log_wait(value)
    assert log_wait(None) == 5.0 and log_wait(" 2.5 ") == 2.5 and log_wait("0") == 0.0
