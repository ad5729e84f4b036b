"""``KeyboardInterrupt`` raised by the program's own code ends a run alike at every worker mode.

Found by an audit: with threads, a user function (in an operator, or ``main``
itself) that raises ``KeyboardInterrupt`` stopped the run with one line and
status 130, as Ctrl-C does; with ``execute(main, processes=2)`` the parent
printed ``ClusterError: process 0 failed: SystemExit: 130`` with a traceback
and exited with status 1, after each child had printed its own line.  Now
the parent ends the run as a Ctrl-C would: one line, status 130, no
traceback, and the children say nothing.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

MODES = [("workers", 1), ("workers", 2), ("processes", 2)]

PROGRAM = """
import sys
sys.path.insert(0, {root!r})
from runtime import execute


def leave(record):
    if record == 2:
        raise KeyboardInterrupt
    return record


def in_an_operator(worker):
    def build(scope):
        handle, stream = scope.new_input()
        stream.map(leave, name="Quitter").probe()
        return handle

    handle = worker.dataflow(build)
    handle.advance_to(4)
    if worker.index == worker.peers - 1:
        handle.send_batch([1, 2, 3])


def in_main(worker):
    worker.dataflow(lambda scope: scope.to_stream([1, 2, 3]).probe())
    if worker.index == worker.peers - 1:
        raise KeyboardInterrupt


if __name__ == "__main__":
    kind, count, where = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    main = in_an_operator if where == "operator" else in_main
    execute(main, stall_timeout=20, **{{kind: count}})
    print("returned")
"""


def run_program(tmp_path: Path, mode: tuple[str, int], where: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "interrupts.py"
    script.write_text(textwrap.dedent(PROGRAM.format(root=str(ROOT))))
    kind, count = mode
    return subprocess.run(
        [sys.executable, str(script), kind, str(count), where],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=tmp_path,
    )


@pytest.mark.parametrize("where", ["operator", "main"])
@pytest.mark.parametrize("mode", MODES, ids=lambda mode: f"{mode[1]} {mode[0]}")
def test_keyboard_interrupt_from_user_code_ends_with_one_line_and_status_130(tmp_path, mode, where):
    done = run_program(tmp_path, mode, where)
    lines = done.stderr.splitlines()
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr and "ClusterError" not in done.stderr, done.stderr
    assert len(lines) == 1, done.stderr
    unit = "process(es)" if mode[0] == "processes" else "worker(s)"
    assert lines[0] == f"pytimely: interrupted (Ctrl-C); stopped {mode[1]} {unit}", done.stderr
    assert done.stdout == "", done.stdout  # execute did not return
