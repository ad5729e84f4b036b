"""The ``tui`` subcommand of ``python -m viz``: open a recording, listen for a live run, or start one.

    python -m viz tui --replay LOG [LOG ...]      play back a recording (one file per process)
    python -m viz tui --listen HOST:PORT          show programs run with --log tcp://HOST:PORT, live
    python -m viz tui [--listen HOST:PORT] -- python examples/scc.py -w 2
                                                  start a program with logging pointed at the viewer

Bad input (a missing file, a file that is not a recording, a newer format, a
port in use, a program that cannot start) is one line on standard error and
exit status 1, before any screen is drawn.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

from runtime.errors import UncheckedRecordingWarning
from viz.errors import VizError
from viz.tui.program_errors import ERROR_LINES, TAIL_BYTES, last_error

ENV = "PYTIMELY_LOG"
ROOT = Path(__file__).resolve().parent.parent.parent


def add_tui_parser(commands: Any) -> None:
    """Add the ``tui`` subcommand to ``python -m viz``'s subparsers."""
    tui = commands.add_parser(
        "tui",
        help="terminal UI: live or replayed view of scopes, operators, channels and stuck frontiers",
        description="The pytimely terminal viewer. Press ? inside for the keys.",
    )
    tui.add_argument("--replay", nargs="+", metavar="LOG", help="recording file(s) to play back")
    tui.add_argument(
        "--allow-format-1",
        action="store_true",
        help="also play back recordings of format version 1, which have no checksums (damage reads as other data)",
    )
    tui.add_argument("--listen", metavar="HOST:PORT", help="listen for programs run with --log tcp://HOST:PORT")
    tui.add_argument("--idle", type=float, default=3.0, help="seconds of silence before the stuck view opens")
    tui.add_argument("--diagram-dir", default=".", help="where the d key writes diagrams (default: here)")
    tui.add_argument("program", nargs="*", help="after --: a program to start with logging pointed at the viewer")


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``tcp://HOST:PORT``) as a pair; raise :class:`VizError` when malformed."""
    spec = text[len("tcp://") :] if text.startswith("tcp://") else text
    host, _, port = spec.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise VizError(f"--listen {text!r}: expected HOST:PORT, for example 127.0.0.1:51317")
    return host, int(port)


class Program:
    """A program the viewer started, with its output going to a file."""

    def __init__(self, command: list[str], log_spec: str) -> None:
        """Start ``command`` with ``PYTIMELY_LOG=log_spec``; Python programs run through ``viz.tui.logged``."""
        if Path(command[0]).name.startswith("python") and command[1:2] != ["-c"]:
            command = [command[0], "-m", "viz.tui.logged", *command[1:]]
        env = dict(os.environ)
        env[ENV] = log_spec
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        handle, path = tempfile.mkstemp(prefix="pytimely-program-", suffix=".log")
        self.output = path
        try:
            self.process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
        except OSError as error:
            os.close(handle)
            os.unlink(path)  # nothing ran, so there is no output to keep
            raise VizError(f"cannot start {command[0]!r}: {error.strerror or error}") from None
        os.close(handle)

    def describe(self) -> str:
        """``program running (pid N)`` or ``program exited with status S``, and where its output is."""
        code = self.process.poll()
        state = f"program running (pid {self.process.pid})" if code is None else f"program exited with status {code}"
        return f"{state}, output in {self.output}"

    def error_lines(self, limit: int = ERROR_LINES) -> list[str]:
        """The last error the program printed: its final exception and message, at most ``limit`` lines.

        Read from the end of its output (at most :data:`TAIL_BYTES`): the lines
        after the last traceback's frames, else the last non-empty lines.
        """
        try:
            with open(self.output, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(handle.tell() - TAIL_BYTES, 0))
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            return []
        return last_error(text.splitlines(), limit)

    def stop(self) -> None:
        """Terminate the program if it still runs (bounded wait, then kill)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def run_tui(args: argparse.Namespace) -> int:
    """Run the ``tui`` subcommand; return the exit status."""
    try:
        app, program = _build(args)
    except VizError as error:
        print(f"python -m viz tui: error: {error}", file=sys.stderr)
        return 1
    try:
        app.run()
    finally:
        if program is not None:
            program.stop()
            print(f"python -m viz tui: {program.describe()}", file=sys.stderr)
    return app.return_code or 0


def _build(args: argparse.Namespace) -> tuple[Any, Program | None]:
    from viz.tui.sources import LiveListener, Replay, load_recording

    command = list(args.program or [])
    if args.replay and (args.listen or command):
        raise VizError("--replay plays a recording; it cannot be combined with --listen or a program")
    if not args.replay and not args.listen and not command:
        raise VizError("give --replay LOG, --listen HOST:PORT, or -- followed by a program to start")
    if not args.idle > 0:  # also NaN, which compares false with everything
        raise VizError(f"--idle {args.idle}: expected a positive number of seconds")
    if not Path(args.diagram_dir).is_dir():
        raise VizError(f"--diagram-dir {args.diagram_dir!r}: no such directory")
    from viz.tui.app import TimelyApp

    if args.replay:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UncheckedRecordingWarning)
            events, truncated = load_recording(args.replay, allow_format_1=args.allow_format_1)
        for warning in caught:
            print(f"python -m viz tui: warning: {warning.message}", file=sys.stderr)
        replay = Replay(events, truncated=truncated)
        replay.seek(len(replay))
        return TimelyApp(replay=replay, diagram_dir=args.diagram_dir), None
    host, port = parse_listen(args.listen) if args.listen else ("127.0.0.1", 0)
    listener = LiveListener(host, port)
    program = None
    if command:
        try:
            program = Program(command, f"tcp://{host}:{listener.port}")
        except VizError:
            listener.close()
            raise
    app = TimelyApp(listener=listener, idle_after=args.idle, diagram_dir=args.diagram_dir, program=program)
    return app, program
