"""Faults in a cluster started by hand (``-h HOSTFILE -p I``, no launcher), its processes on one host.

- A killed peer is named with its pid.  Two processes on 127.0.0.1, linked through shared memory (so each knows the
other's pid: the kernel's word, passed with the rings), stream records to each
other; process 1 is killed with SIGKILL.  Process 0 must end within 10 s with
:class:`~runtime.communication.tcp.PeerLost` naming process 1, its address and
its pid, saying that the process ended, and what to do.  Before, it said only
"the connection closed" (or "sending failed: [Errno 32] Broken pipe"): no pid,
not whether the process had died, and nothing about what to do.
- A suspended process, resumed after the others counted it as lost and
  stopped, says so.  Process 1 of 2 or 3 is suspended (SIGSTOP) until the
  others have ended (naming it), then resumed: it must end within 10 s saying
  that it could not run for longer than the silence limit, so that the others
  counted it as lost.  Before, it named a healthy process as the lost one
  ("lost process 0 (...): the connection closed"), or itself as a lost peer
  ("process 1 stopped because a peer was lost: lost process 1 ...").
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers.cluster_scripts import REPORT_CLUSTER_ERROR, end_all, exchange_loop, start_by_hand, wait_for_line
from helpers.ports import free_ports

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a process is looked at in /proc")

ROOT = Path(__file__).resolve().parent.parent

STREAM = (
    textwrap.dedent(
        """
        import sys
        sys.path.insert(0, {root!r})
        from runtime import execute_from_args
        from runtime.errors import ClusterError

        """
    )
    + exchange_loop(
        100,
        """
        if epoch == 20 and worker.index == 1:
            print("streaming", flush=True)
        """,
    )
    + REPORT_CLUSTER_ERROR
)


def start_cluster(tmp_path: Path, count: int) -> tuple[list[int], list[subprocess.Popen[str]]]:
    """Start ``count`` processes of :data:`STREAM` on 127.0.0.1 by hand; return their ports and the processes."""
    ports = free_ports(count)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("".join(f"127.0.0.1:{port}\n" for port in ports))
    script = tmp_path / "stream.py"
    script.write_text(STREAM.format(root=str(ROOT)))
    env = dict(os.environ, PYTIMELY_TOKEN="secret", PYTHONHASHSEED="0")
    env.pop("PYTIMELY_TRANSPORT", None)  # shared memory between them: each learns the others' pids
    return ports, start_by_hand(script, hostfile, count, env)


def wait_until_streaming(process: subprocess.Popen[str]) -> None:
    """Wait until ``process`` (worker 1) prints ``streaming``."""
    wait_for_line(process, "streaming\n", "process 1 to stream")


def test_a_killed_same_host_peer_is_named_with_its_pid_and_how_it_ended(tmp_path: Path) -> None:
    ports, processes = start_cluster(tmp_path, 2)
    survivor, victim = processes
    try:
        wait_until_streaming(victim)
        pid = victim.pid
        victim.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        out, err = survivor.communicate(timeout=40)
        seconds = time.monotonic() - killed
        assert out.startswith(f"failed PeerLost lost process 1 (127.0.0.1:{ports[1]}): "), out + err
        assert f", and its process (pid {pid}) " in out, out
        assert "no longer exists: it exited or was killed" in out or "has exited (state Z)" in out, out
        assert out.rstrip().endswith(
            "start every process of the cluster again (a job with a CheckpointStore resumes "
            "from its last complete epoch)"
        ), out
        assert seconds < 10.0, f"reported after {seconds:.1f} s: {out}"
    finally:
        end_all(processes)


@pytest.mark.parametrize("count", [2, 3])
def test_a_process_resumed_after_the_others_counted_it_lost_says_so(tmp_path: Path, count: int) -> None:
    ports, processes = start_cluster(tmp_path, count)
    victim = processes[1]
    try:
        wait_until_streaming(victim)
        victim.send_signal(signal.SIGSTOP)
        for index, process in enumerate(processes):
            if index != 1:
                out, err = process.communicate(timeout=40)
                assert f"lost process 1 (127.0.0.1:{ports[1]}): nothing arrived from it for" in out, out + err
        victim.send_signal(signal.SIGCONT)
        resumed = time.monotonic()
        out, err = victim.communicate(timeout=40)
        seconds = time.monotonic() - resumed
        prefix = f"failed PeerLost process 1 (127.0.0.1:{ports[1]}, pid {victim.pid}) could not run its threads for "
        assert out.startswith(prefix), out + err
        assert "longer than the silence limit (6 s) after which the other processes count a process as lost" in out
        assert "Resume a paused process within 6 s" in out, out
        assert seconds < 10.0, f"ended {seconds:.1f} s after it was resumed: {out}"
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.kill()
            process.communicate()
