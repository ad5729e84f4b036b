"""Processes started by hand (``-p``) report a peer that joined and then died while the cluster formed, promptly.

Found by an audit: a process that had joined (proved the token) and then ended
before every process had joined was reported only at the connect deadline
(30 s), as if it had never started.  Nothing reads a joined connection before
the cluster has formed, and a process that has joined cannot join again (its
index is refused as already joined), so once its connection closes the cluster
cannot form: the processes that kept it now stop within seconds, naming it.
A process that has not joined yet (a slow starter) is still awaited.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from helpers import eventually
from helpers.ports import free_ports

ROOT = Path(__file__).resolve().parent.parent

CONNECT_TIMEOUT = 30.0
"""The connect deadline of processes started by hand (the default of execute_from_args)."""

SCRIPT = textwrap.dedent(
    """
    import logging, sys
    sys.path.insert(0, {root!r})
    from runtime import execute_from_args

    handler = logging.StreamHandler(sys.stderr)  # says when this process has joined a peer
    handler.setFormatter(logging.Formatter("%(message)s"))
    tcp = logging.getLogger("runtime.communication.tcp")
    tcp.addHandler(handler)
    tcp.setLevel(logging.INFO)

    def main(worker):
        return worker.index

    if __name__ == "__main__":
        print("results", execute_from_args(main), flush=True)
    """
)


class Started:
    """A process of the cluster started by hand, its stderr collected line by line as it comes."""

    def __init__(self, tmp_path: Path, hosts: Path, index: int, env: dict[str, str] | None = None) -> None:
        script = tmp_path / "forming.py"
        script.write_text(SCRIPT.format(root=str(ROOT)))
        env = dict(os.environ, PYTIMELY_TOKEN="forming-secret", PYTHONHASHSEED="0", **(env or {}))
        self.index = index
        self.popen = subprocess.Popen(
            [sys.executable, str(script), "-n", "3", "-h", str(hosts), "-p", str(index)],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.ended: float | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stderr is not None
        for line in self.popen.stderr:
            self.lines.append(line)
        self.popen.wait()
        self.ended = time.monotonic()

    def joined(self, peer: int) -> bool:
        """Whether this process has said it joined ``peer`` (either side of their connection)."""
        return any(f"process {self.index} joined process {peer} " in line for line in self.lines)

    @property
    def stderr(self) -> str:
        self._reader.join(10.0)
        return "".join(self.lines)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.communicate()
        self._reader.join(10.0)


@pytest.fixture
def hosts(tmp_path: Path) -> tuple[Path, list[str]]:
    addresses = [f"127.0.0.1:{port}" for port in free_ports(3)]
    path = tmp_path / "hosts"
    path.write_text("".join(f"{address}\n" for address in addresses))
    return path, addresses


@pytest.mark.parametrize(
    ("survivor", "victim"),
    [(0, 2), (1, 0), (2, 0)],
    ids=["accepted-then-closed", "joined-by-a-middle-process", "connected-to-then-closed"],
)
def test_a_peer_that_joined_and_died_while_forming_is_named_promptly(
    tmp_path: Path, hosts: tuple[Path, list[str]], survivor: int, victim: int
) -> None:
    """Two of three processes started; they join each other, the third never starts; one of the two is killed."""
    path, addresses = hosts
    started = {index: Started(tmp_path, path, index) for index in (survivor, victim)}
    try:
        eventually(
            lambda: started[survivor].joined(victim) and started[victim].joined(survivor),
            20,
            f"processes {survivor} and {victim} joining each other",
        )
        started[victim].popen.kill()
        killed = time.monotonic()
        eventually(lambda: started[survivor].ended is not None, 20, f"process {survivor} ending")
        ended = started[survivor].ended
        assert ended is not None and ended - killed < CONNECT_TIMEOUT / 2, "it waited for the connect deadline"
        err = started[survivor].stderr
        assert started[survivor].popen.returncode != 0, err
        assert f"process {victim} ({addresses[victim]})" in err, err
        assert "closed its connection while the cluster was forming" in err, err
        assert f"still awaited: process {3 - survivor - victim} ({addresses[3 - survivor - victim]})" in err, err
    finally:
        for process in started.values():
            process.stop()


@pytest.mark.parametrize(("early", "late"), [((0, 2), 1), ((1, 2), 0)], ids=["middle-last", "first-last"])
def test_a_slow_starter_is_still_awaited(
    tmp_path: Path, hosts: tuple[Path, list[str]], early: tuple[int, int], late: int
) -> None:
    """Two processes join each other and wait; the third starts only then: the cluster forms and runs.

    With process 0 last: process 2 connected to its lower peers one after another, so it tried process 1 only once
    process 0 had joined it, and until then the two never met (nor compared their settings). It now tries both at
    once."""
    path, _ = hosts
    low, high = (Started(tmp_path, path, index) for index in early)
    started = [low, high]
    try:
        eventually(lambda: low.joined(early[1]) and high.joined(early[0]), 20, f"processes {early} joining each other")
        started.append(Started(tmp_path, path, late))
        for process in started:
            out, _ = process.popen.communicate(timeout=60)
            assert process.popen.returncode == 0 and out == "results [0, 1, 2]\n", process.stderr
    finally:
        for process in started:
            process.stop()


def test_a_process_that_saw_a_peer_close_still_tells_a_late_peer_what_they_disagree_on(
    tmp_path: Path, hosts: tuple[Path, list[str]]
) -> None:
    """Process 2 joins process 0, which is then killed; process 1 starts only then, with another send window.

    Process 2 used to stop as soon as it saw process 0 close, so process 1 waited for it until the connect deadline,
    told nothing (in a run of three processes of which one differs, the one that had finished handshaking raised
    its mismatch and closed, and this left another waiting for 30 s about one run in four).  It now goes on
    handshaking for :data:`~runtime.communication.formation.FORMING_GRACE` seconds first: process 1 and it learn
    that they disagree, and process 2's error says both what differs and that process 0 closed."""
    path, addresses = hosts
    zero, two = Started(tmp_path, path, 0), Started(tmp_path, path, 2)
    started = [zero, two]
    try:
        eventually(lambda: two.joined(0) and zero.joined(2), 20, "processes 0 and 2 joining each other")
        zero.popen.kill()
        started.append(Started(tmp_path, path, 1, {"PYTIMELY_SEND_WINDOW": "64K"}))
        eventually(lambda: two.ended is not None, 20, "process 2 ending")
        err = two.stderr
        assert "runtime.errors.SettingsMismatch: " in err, err
        message = err.rsplit("runtime.errors.SettingsMismatch: ", 1)[1]
        assert f"process 1 ({addresses[1]})" in message and "$PYTIMELY_SEND_WINDOW" in message, message
        assert f"besides, process 2 lost process 0 ({addresses[0]})" in message, message
        assert "closed its connection while the cluster was forming" in message, message
    finally:
        for process in started:
            process.stop()
