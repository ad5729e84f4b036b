"""Faults named truthfully: a local cluster's process killed or suspended at any moment, start-up included.

Each test runs ``execute(main, processes=2)`` in a script of its own (real
processes), finds the two children the script starts, and kills or suspends
one of them at a chosen moment.  The script must end within 10 s of the fault
with a :class:`~runtime.communication.tcp.PeerLost` that names the process it happened to,
says how, and what to do.
"""

from __future__ import annotations

import os
import signal
import textwrap
import threading
import time
from pathlib import Path

import pytest
from helpers import start_program
from helpers.cluster_scripts import exchange_loop

pytestmark = pytest.mark.usefixtures("transport")  # every test over shared memory and over TCP

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = (
    textwrap.dedent(
        """
        import sys, time
        sys.path.insert(0, {root!r})
        from runtime import execute
        from runtime.communication.tcp import PeerLost

        """
    )
    + exchange_loop(10, "time.sleep(0.01)")
    + textwrap.dedent(
        """
        if __name__ == "__main__":
            try:
                execute(main, processes=2, stall_timeout=None)
            except PeerLost as error:
                print("PeerLost", error.process, error, flush=True)
                sys.exit(3)
        """
    )
)


def start_time(pid: int) -> int:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def children_in_order(parent: int, seen: list[int]) -> list[int]:
    """Add ``parent``'s new children to ``seen`` in the order they were started; return ``seen``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in seen:
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == parent:
                found.append((start_time(int(entry)), int(entry)))
        except (OSError, IndexError, ValueError):
            continue
    seen.extend(pid for _, pid in sorted(found))
    return seen


def shared_memory_segments() -> set[str]:
    """The pytimely entries of /dev/shm (none is ever made: rings are memfds, freed with their last process)."""
    return {name for name in os.listdir("/dev/shm") if "pytimely" in name} if os.path.isdir("/dev/shm") else set()


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def ended(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie waiting for its parent, or gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def watch_ends(parent: int, seen: list[int], faulted: float, ends: dict[int, float], done: threading.Event) -> None:
    """Note in ``ends`` how many seconds after ``faulted`` each of ``parent``'s two children ended, until ``done``."""
    while not done.is_set() and len(ends) < 2:
        for index, pid in enumerate(children_in_order(parent, seen)[:2]):
            if index not in ends and ended(pid):
                ends[index] = time.monotonic() - faulted
        done.wait(0.005)


def run_with_fault(
    tmp_path: Path, victim: int, after: float, sig: signal.Signals
) -> tuple[float, str, str, dict[int, float]]:
    """Start the script, send ``sig`` to child ``victim`` ``after`` seconds after it appeared.

    Returns the seconds from the fault to the script's end, its output and error
    output, and for each child (by index) the seconds from the fault to its end.
    """
    script = tmp_path / "faulty_cluster.py"
    script.write_text(SCRIPT.format(root=str(ROOT)))
    segments = shared_memory_segments()
    parent = start_program(script)
    try:
        seen: list[int] = []
        deadline = time.monotonic() + 30
        while len(children_in_order(parent.pid, seen)) <= victim:
            assert time.monotonic() < deadline, "the cluster's processes did not start"
            time.sleep(0.002)
        # A fault "at start-up" hits the new process, not the launcher's fork of itself before exec: a fork
        # stopped before exec holds subprocess.Popen in the launcher (it waits for the exec to report).
        while _cmdline(seen[victim]) == _cmdline(parent.pid):
            assert time.monotonic() < deadline, "the victim never ran its own program"
            time.sleep(0.001)
        time.sleep(after)
        os.kill(seen[victim], sig)
        faulted = time.monotonic()
        ends: dict[int, float] = {}
        done = threading.Event()
        watcher = threading.Thread(target=watch_ends, args=(parent.pid, seen, faulted, ends, done))
        watcher.start()
        try:
            out, err = parent.communicate(timeout=30)
        finally:
            done.set()
            watcher.join()
        assert shared_memory_segments() - segments == set()  # the rings have no name: nothing is left behind
        return time.monotonic() - faulted, out, err, ends
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.communicate()


# start-up (still starting Python, importing, joining the mesh) and running
MOMENTS = [0.0, 0.3, 0.8, 1.5, 4.0]


@pytest.mark.parametrize("after", MOMENTS)
@pytest.mark.parametrize("victim", [0, 1])
def test_a_process_killed_at_any_moment_is_named_within_ten_seconds(tmp_path: Path, victim: int, after: float) -> None:
    seconds, out, err, _ = run_with_fault(tmp_path, victim, after, signal.SIGKILL)
    assert out.startswith(f"PeerLost {victim} process {victim} (127.0.0.1:"), out + err
    assert "was killed by SIGKILL" in out and "launcher" not in out, out
    assert "find out what killed it (the system log names the out-of-memory killer); then run the program again" in out
    assert seconds < 10.0, f"reported after {seconds:.1f} s: {out}\n{err[-3000:]}"


@pytest.mark.parametrize("after", [0.0, 4.0])
@pytest.mark.parametrize("victim", [0, 1])
def test_a_suspended_process_is_reported_as_no_longer_answering(tmp_path: Path, victim: int, after: float) -> None:
    seconds, out, err, ends = run_with_fault(tmp_path, victim, after, signal.SIGSTOP)
    assert out.startswith(f"PeerLost {victim} process {victim} (127.0.0.1:"), out + err
    assert "stopped answering" in out and "suspended" in out, out
    assert "the launcher then killed it (killed by SIGKILL)" in out, out
    assert "resume a paused one sooner" in out and "then run the program again" in out, out
    assert seconds < 10.0, f"reported after {seconds:.1f} s: {out}\n{err[-3000:]}"
    # The other process ends promptly once the launcher killed the suspended one, even while it is still
    # joining the cluster (it waited 3 s, 2 for a report that could not come and 1 for SIGTERM to work).
    other = 1 - victim
    assert ends[other] - ends[victim] < 1.5, f"process {other} ended {ends[other] - ends[victim]:.2f} s after"
