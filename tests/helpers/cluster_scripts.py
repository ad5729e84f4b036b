"""Pieces of the scripts that the cluster tests run in processes of their own.

The fault tests start a cluster whose ``main`` streams records through an
exchange for ever (:func:`exchange_loop`), then kill, stop or lose one of its
processes while records are in flight; each adds its own lines at the end of
the loop (a pause, a line printed once the processes stream).  Scripts started
by hand end with :data:`REPORT_CLUSTER_ERROR`.  The pieces go into script
templates that the tests fill with ``str.format`` (``{root}``, say).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from helpers import eventually

EXCHANGE_LOOP = """\
def main(worker):
    def build(scope):
        handle, stream = scope.new_input()
        return handle, stream.exchange(lambda x: x).probe()
    handle, probe = worker.dataflow(build)
    epoch = 0
    while True:
        handle.send_batch(list(range({records})))
        epoch += 1
        handle.advance_to(epoch)
        worker.step_while(lambda: probe.less_than(epoch))
"""

REPORT_CLUSTER_ERROR = """
if __name__ == "__main__":
    try:
        execute_from_args(main, stall_timeout=None)
    except ClusterError as error:
        print("failed", type(error).__name__, error, flush=True)
        sys.exit(3)
"""
"""The main guard of a script started by hand (``-h HOSTFILE -p I``): a ``ClusterError`` is printed on one line
(``failed NAME message``) and the process exits with 3; it needs ``sys``, ``execute_from_args`` and ``ClusterError``."""


def exchange_loop(records: int, then: str = "") -> str:
    """``main``'s source, for a template: every epoch sends ``records`` numbers through an exchange and waits for
    them; ``then`` (statements at the loop's indentation, dedented here, a template's text like the rest: its
    braces are format fields) ends each round."""
    loop = EXCHANGE_LOOP.format(records=records).replace("{", "{{").replace("}", "}}")
    return loop + textwrap.indent(textwrap.dedent(then).strip("\n"), " " * 8) + "\n"


def start_by_hand(script: Path, hostfile: Path, count: int, env: dict[str, str]) -> list[subprocess.Popen[str]]:
    """Start processes ``0 .. count - 1`` of ``script`` as a cluster started by hand (``-n COUNT -h HOSTFILE -p I``),
    in the script's directory, with ``env`` and their output piped as text."""
    return [
        subprocess.Popen(
            [sys.executable, str(script), "-n", str(count), "-h", str(hostfile), "-p", str(index)],
            cwd=script.parent,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(count)
    ]


def wait_for_line(process: subprocess.Popen[str], expected: str, what: str, timeout: float = 60) -> None:
    """Wait until ``process`` prints its first line, which must be ``expected`` (``what`` names the wait)."""
    assert process.stdout is not None
    line: list[str] = []
    reading = threading.Thread(target=lambda: line.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reading.start()
    eventually(lambda: bool(line), timeout, what)
    assert line == [expected]


def end_all(processes: list[subprocess.Popen[str]]) -> None:
    """A test's cleanup: kill each of ``processes`` that still runs, and wait for every one (its pipes read)."""
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.communicate()
