"""Silence is reported even while data is in flight, and a pause shorter than the silence limit is not a fault.

- Two processes started separately (no launcher watches them) stream bulk
  data from process 0 to process 1 with the default send window; process 1
  is suspended (SIGSTOP).  Process 0's worker then blocks sending to it, and
  its heartbeat thread must still find the silence: process 0 ends within
  10 s of the pause with :class:`~runtime.communication.tcp.PeerLost` naming
  process 1, and saying that it is stopped (on the same host, process 0
  looks at it before it declares it lost: a busy process would be waited for).
- Under ``execute(main, processes=2)``, a child paused for 4 s (below the
  6 s silence limit) and resumed is not killed: the run gives its answer.
"""

from __future__ import annotations

import os
import signal
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

from helpers import eventually, start_program
from helpers.cluster_scripts import REPORT_CLUSTER_ERROR, end_all, start_by_hand, wait_for_line
from helpers.ports import free_ports

from runtime.communication.process_fabric import SILENCE_LIMIT, ProcessFabric
from runtime.communication.tcp import PeerLost
from runtime.launcher import SUSPENDED_LIMIT

ROOT = Path(__file__).resolve().parent.parent


BULK = (
    textwrap.dedent(
        """
    import sys
    sys.path.insert(0, {root!r})
    from runtime import execute_from_args
    from runtime.errors import ClusterError

    CHUNK = b"x" * 65536

    def main(worker):
        received = [0]
        def build(scope):
            handle, stream = scope.new_input()
            def count(time, batch):
                if received[0] < 200 <= received[0] + len(batch):
                    print("streaming", flush=True)
                received[0] += len(batch)
            probe = stream.exchange(lambda record: 1).inspect_batch(count).probe()
            return handle, probe
        handle, probe = worker.dataflow(build)
        epoch = 0
        while True:
            if worker.index == 0:
                handle.send_batch([CHUNK] * 16)
                epoch += 1
                handle.advance_to(epoch)
            worker.step()
    """
    )
    + REPORT_CLUSTER_ERROR
)


def test_a_peer_suspended_during_a_bulk_stream_is_reported_within_ten_seconds(tmp_path: Path) -> None:
    ports = free_ports(2)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("".join(f"127.0.0.1:{port}\n" for port in ports))
    script = tmp_path / "bulk.py"
    script.write_text(BULK.format(root=str(ROOT)))
    env = dict(os.environ, PYTIMELY_TOKEN="secret", PYTHONHASHSEED="0")
    env.pop("PYTIMELY_SEND_WINDOW", None)  # the default window
    processes = start_by_hand(script, hostfile, 2, env)
    sender, receiver = processes
    try:
        wait_for_line(receiver, "streaming\n", "process 1 to receive the stream")
        receiver.send_signal(signal.SIGSTOP)
        paused = time.monotonic()
        out, err = sender.communicate(timeout=40)
        seconds = time.monotonic() - paused
        assert out.startswith("failed PeerLost lost process 1 (127.0.0.1:"), out + err
        assert "nothing arrived from it for" in out, out
        pid = receiver.pid
        assert f"and its process (pid {pid}) is stopped (state T: SIGSTOP?)" in out, out  # same host: looked at
        assert seconds < 10.0, f"reported after {seconds:.1f} s: {out}"
    finally:
        end_all(processes)


PAUSED = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    from runtime import execute

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()
            return handle, stream.exchange(lambda x: x).probe()
        handle, probe = worker.dataflow(build)
        started = time.monotonic()
        epoch = 0
        while time.monotonic() - started < 8.0:
            handle.send_batch(list(range(10)))
            epoch += 1
            handle.advance_to(epoch)
            worker.step_while(lambda: probe.less_than(epoch))
            time.sleep(0.01)
        return "done"

    if __name__ == "__main__":
        print("results", execute(main, processes=2, stall_timeout=None), flush=True)
    """
)


def children_of(parent: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes() if int(fields[1]) == parent else b""
            if b"child_main" in cmdline:
                found.append(int(entry))
    return found


def test_a_launched_child_paused_below_the_silence_limit_goes_on(tmp_path: Path) -> None:
    assert SUSPENDED_LIMIT >= SILENCE_LIMIT  # the launcher kills no sooner than the peers would report
    script = tmp_path / "paused.py"
    script.write_text(PAUSED.format(root=str(ROOT)))
    parent = start_program(script)
    try:
        children: list[int] = []

        def both_running() -> bool:
            children[:] = children_of(parent.pid)
            return len(children) == 2

        eventually(both_running, 30, "two children")
        victim = children[1]
        os.kill(victim, signal.SIGSTOP)
        resume = threading.Timer(4.0, os.kill, args=(victim, signal.SIGCONT))  # the fault: a 4 s pause
        resume.start()
        out, err = parent.communicate(timeout=60)
        resume.join()
        assert parent.returncode == 0 and out.endswith("results ['done', 'done']\n"), out + err
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.communicate()


class StuckMesh:
    """A mesh to processes 1 and 2, both silent; a send to process 2 blocks until it is reported lost (as the
    real mesh's shutdown of a lost peer's connection ends a send blocked on it)."""

    def __init__(self) -> None:
        self.endpoints = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
        self.last_heard = {1: time.monotonic() - 60, 2: time.monotonic() - 60}
        self.reported: list[int] = []
        self.unblocked = threading.Event()
        self.fabric: Any = None

    def offer(self, process: int, data: bytes) -> bool:
        return False  # a data send is under way to each

    def send(self, process: int, data: bytes) -> None:
        if process == 2:
            self.unblocked.wait(30)

    def report_silence(self, process: int, seconds: float, how: str | None = None) -> None:
        if process in self.reported:
            return
        self.reported.append(process)
        if process == 2:
            self.unblocked.set()
        self.fabric.on_lost(PeerLost(f"lost process {process}: nothing arrived", process, self.endpoints[process]))


def test_two_silent_peers_are_both_reported_though_telling_one_about_the_other_blocks() -> None:
    mesh = StuckMesh()
    fabric = ProcessFabric(0, 3, 1, mesh)  # type: ignore[arg-type]
    mesh.fabric = fabric
    fabric.start_heartbeats()
    try:
        eventually(lambda: sorted(mesh.reported) == [1, 2], 10, "both silent processes reported")
    finally:
        mesh.unblocked.set()
        fabric.stop_heartbeats()
    assert fabric.lost is not None and fabric.stop_reason is not None
