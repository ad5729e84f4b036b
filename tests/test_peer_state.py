"""Judging a silent process on this host from /proc: busy, stopped, ended, replaced or blocked.

Real processes: a CPU loop (busy), ``sleep`` (asleep, no CPU: blocked), one
stopped with SIGSTOP, one killed and not yet reaped (a zombie), one reaped (no
such process), and an identity whose start time is not the process's (its pid
was reused).  And a process whose own heartbeat came late (it could not run
its threads, e.g. a call held the GIL) does not count that time as a peer's
silence: what the peer sent meanwhile waits unread.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import eventually

from runtime.communication import process_fabric
from runtime.communication.peer_state import ACTIVITY_WINDOW, Identity, SilenceJudge, identify, look, process_state
from runtime.communication.process_fabric import ProcessFabric

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def running(command: list[str]) -> Iterator[subprocess.Popen[bytes]]:
    """``command`` running for the test, killed after it."""
    process = subprocess.Popen(command)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    yield from running(["sleep", "60"])


@pytest.fixture
def spinner() -> Iterator[subprocess.Popen[bytes]]:
    yield from running([sys.executable, "-c", "while True: pass"])


def judged(pid: int, silent_for: float = 10.0, identity: Identity | None = None) -> tuple[bool, str | None]:
    """The verdict on process ``pid`` (as process 1), silent for ``silent_for`` s and watched twice."""
    if identity is None:
        identity = identify(pid)
        assert identity is not None
    judge = SilenceJudge({1: identity})
    now = time.monotonic()
    judge.watch(1, now - silent_for, now)
    time.sleep(0.05)
    judge.watch(1, now - silent_for, time.monotonic())
    return judge.lost(1, time.monotonic())


def test_a_process_using_the_cpu_is_busy(spinner: subprocess.Popen[bytes]) -> None:
    eventually(lambda: (seen := look(spinner.pid)) is not None and seen.cpu > 5, 10, "the loop to run")
    assert judged(spinner.pid) == (False, None)


def test_a_process_asleep_using_no_cpu_is_blocked(sleeper: subprocess.Popen[bytes]) -> None:
    eventually(lambda: process_state(sleeper.pid) == "S", 10, "sleep to sleep")
    lost, how = judged(sleeper.pid, silent_for=ACTIVITY_WINDOW + 1)
    assert lost and how is not None
    assert f"its process (pid {sleeper.pid}) has been asleep (state S) using no CPU for" in how
    assert "blocked" in how
    assert judged(sleeper.pid, silent_for=ACTIVITY_WINDOW / 2) == (False, None)  # not asleep long enough yet


def test_a_stopped_process_is_lost(spinner: subprocess.Popen[bytes]) -> None:
    spinner.send_signal(signal.SIGSTOP)
    eventually(lambda: process_state(spinner.pid) == "T", 10, "the process to stop")
    assert judged(spinner.pid) == (True, f"its process (pid {spinner.pid}) is stopped (state T: SIGSTOP?)")


def test_a_process_that_ended_is_lost(sleeper: subprocess.Popen[bytes]) -> None:
    identity = identify(sleeper.pid)
    assert identity is not None
    sleeper.kill()
    eventually(lambda: process_state(sleeper.pid) == "Z", 10, "a zombie")
    assert judged(sleeper.pid, identity=identity) == (True, f"its process (pid {sleeper.pid}) has exited (state Z)")
    sleeper.wait()
    assert judged(sleeper.pid, identity=identity) == (
        True,
        f"its process (pid {sleeper.pid}) no longer exists: it exited or was killed",
    )


def test_a_process_whose_pid_was_reused_is_lost(spinner: subprocess.Popen[bytes]) -> None:
    identity = identify(spinner.pid)
    assert identity is not None
    earlier = Identity(spinner.pid, identity.started - 1)  # the process that had this pid before
    assert judged(spinner.pid, identity=earlier) == (
        True,
        f"its process (pid {spinner.pid}) has ended: that pid now belongs to another process",
    )


def test_no_identity_for_a_pid_of_another_namespace() -> None:
    assert identify(0) is None


class ListeningMesh:
    """A mesh to process 1, whose frames are read at every heartbeat (as a reader thread would)."""

    def __init__(self) -> None:
        self.endpoints = ["127.0.0.1:1", "127.0.0.1:2"]
        self.last_heard = {1: time.monotonic()}
        self.reported: list[tuple[int, float, str | None]] = []
        self.beats = 0
        self.deaf = threading.Event()

    def offer(self, process: int, data: bytes) -> bool:
        self.beats += 1
        self.last_heard[process] = time.monotonic()
        return True

    def send(self, process: int, data: bytes) -> None:
        pass

    def report_silence(self, process: int, seconds: float, how: str | None = None) -> None:
        self.reported.append((process, seconds, how))


class DeafOnce:
    """The heartbeat thread's timer: once asked, one wait lasts 2 s (its process could not run its threads)."""

    def __init__(self, mesh: ListeningMesh) -> None:
        self.mesh = mesh
        self.stopped = threading.Event()
        self.slow = threading.Event()

    def wait(self, timeout: float) -> bool:
        if self.slow.is_set():
            self.slow.clear()
            time.sleep(2.0)  # meanwhile process 1's frames arrived and wait, unread, in the socket
        return self.stopped.wait(timeout)

    def set(self) -> None:
        self.stopped.set()


def test_time_this_process_could_not_listen_is_not_a_peers_silence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process_fabric, "SILENCE_LIMIT", 1.0)
    mesh = ListeningMesh()
    fabric = ProcessFabric(0, 2, 1, mesh)  # type: ignore[arg-type]
    timer = DeafOnce(mesh)
    fabric._beating = timer  # type: ignore[assignment]
    fabric.start_heartbeats()
    try:
        eventually(lambda: mesh.beats >= 2, 10, "heartbeats")
        timer.slow.set()
        eventually(lambda: not timer.slow.is_set(), 10, "the slow beat")
        beats = mesh.beats
        eventually(lambda: mesh.beats >= beats + 4 or mesh.reported, 10, "beats after the slow one")
    finally:
        fabric.stop_heartbeats()
    assert mesh.reported == []


def test_a_silent_peer_is_still_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process_fabric, "SILENCE_LIMIT", 1.0)
    mesh: Any = ListeningMesh()
    mesh.offer = lambda process, data: True  # nothing arrives from process 1 any more
    fabric = ProcessFabric(0, 2, 1, mesh)
    fabric.start_heartbeats()
    try:
        eventually(lambda: mesh.reported, 10, "the silent peer reported")
    finally:
        fabric.stop_heartbeats()
    assert mesh.reported[0][0] == 1 and mesh.reported[0][1] > 1.0 and mesh.reported[0][2] is None
