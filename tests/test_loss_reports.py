"""Which process a cluster process names when it stops: the one that was lost, not a peer that relayed the loss.

Process 1 finds process 2 lost, relays the loss to process 0 (a ``STOP`` frame), and ends; process 0 then sees
process 1's connection close too.  Process 0 must report process 2, as process 1 did: an operator reading its
error otherwise looks for a fault in process 1, which was healthy.  Found running a 3-process cluster from the
command line and killing process 2 (SIGKILL): about one run in six, process 0 said "lost process 1".
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from helpers import eventually
from helpers.ports import free_ports

import runtime.communication.tcp as tcp
from runtime.cluster_member import _stopped
from runtime.communication.process_fabric import STOP, ProcessFabric
from runtime.communication.tcp import Endpoint, Mesh, PeerLost
from runtime.communication.wire import frame
from runtime.errors import ClusterStopped

ENDPOINTS = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.2:3"]


class RecordingMesh:
    """The part of a mesh a fabric uses when it stops: it records what the fabric relays."""

    def __init__(self) -> None:
        self.endpoints = ENDPOINTS
        self.last_heard: dict[int, float] = {}
        self.sent: list[tuple[int, bytes]] = []

    def send(self, process: int, data: bytes) -> None:
        self.sent.append((process, data))

    def offer(self, process: int, data: bytes) -> bool:
        return False


def loss(process: int, why: str) -> PeerLost:
    """The error a mesh reports for ``process``, worded as the real one."""
    return PeerLost(f"lost process {process} ({ENDPOINTS[process]}): {why}; the other processes stop", process, "")


def test_a_peer_that_relayed_a_loss_and_then_closed_is_not_named_as_the_lost_process() -> None:
    mesh: Any = RecordingMesh()
    fabric = ProcessFabric(0, 3, 1, mesh)
    relayed = str(loss(2, "the connection closed"))
    fabric.on_frame(1, [STOP, "lost", None, relayed], b"")  # process 1 tells process 0 that process 2 is lost
    fabric.on_lost(loss(1, "the connection closed"))  # then process 1 ends, and its connection closes
    assert fabric.stop_reason is not None
    error = _stopped(fabric, fabric.stop_reason)
    assert isinstance(error, ClusterStopped), error
    assert "lost process 2 (127.0.0.2:3)" in str(error) and "process 1 (" not in str(error), error
    assert mesh.sent == []  # the first reason came from a peer: it is not relayed back


def test_a_loss_this_process_saw_first_is_the_one_it_reports_and_relays() -> None:
    mesh: Any = RecordingMesh()
    fabric = ProcessFabric(0, 3, 1, mesh)
    fabric.on_lost(loss(2, "the connection closed"))
    fabric.on_lost(loss(1, "the connection closed"))
    assert fabric.stop_reason is not None
    error = _stopped(fabric, fabric.stop_reason)
    assert isinstance(error, PeerLost) and error.process == 2, error
    assert sorted(process for process, _ in mesh.sent) == [1, 2]


def test_a_failed_send_leaves_the_report_to_the_reader_which_first_reads_why_the_peer_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Process 1 says why it stops (a ``stop`` frame) and closes; process 0's reader has not read that yet when one
    of its workers' sends to process 1 fails.  The failed send must not report process 1 lost: the reader reads the
    ``stop`` frame first, then the end.  Found killing process 0 of a 4-process cluster (two hosts, SIGKILL): about
    one run in five, process 1 said "lost process 2 ...: sending failed: [Errno 32] Broken pipe", process 2 having
    stopped and closed because process 0 was lost."""
    failures: list[OSError] = []
    send_all = tcp._send_all

    def recording_send_all(sock: Any, views: Any) -> None:
        try:
            send_all(sock, views)
        except OSError as error:
            failures.append(error)
            raise

    monkeypatch.setattr(tcp, "_send_all", recording_send_all)
    events: list[str] = []
    holding = threading.Event()
    release = threading.Event()

    def on_frame(peer: int, header: list[Any], payload: Any) -> None:
        if header == ["hold"]:
            holding.set()
            release.wait(10)  # the reader reads nothing more meanwhile
        events.append(f"frame {header[0]}")

    endpoints = [Endpoint("127.0.0.1", port) for port in free_ports(2)]
    first = Mesh(0, endpoints, "token", on_frame, lambda error: events.append(f"lost {error.process}"))
    second = Mesh(1, endpoints, "token", lambda *_: None, lambda _: None)
    connecting = threading.Thread(target=second.connect, args=(10.0,), daemon=True)
    connecting.start()
    first.connect(10.0)
    connecting.join(10.0)
    try:
        second.send(0, frame(["hold"]) + frame(["why"]))  # "why" stands for the stop frame
        eventually(holding.is_set, 10, "process 0's reader holding")
        second.close()

        def a_send_failed() -> bool:
            first.send(1, frame(["data"], b"x" * 1000))
            return bool(failures)

        eventually(a_send_failed, 10, "a send to the closed process failing")
        assert events == [], "a failed send reported the loss before the reader read what the peer sent"
        release.set()
        eventually(lambda: len(events) == 3, 10, "the reader reporting the loss")
        assert events == ["frame hold", "frame why", "lost 1"], events
    finally:
        release.set()
        first.close()
        second.close()


def stepping(worker: Any) -> None:
    """A worker that steps until its process is stopped."""
    while True:
        worker.step_or_park(0.01)


def test_a_process_stopped_by_a_relayed_loss_says_why_before_it_closes_its_connections() -> None:
    """Process 2 tells process 1 that process 3 was lost; process 1 stops and closes its connections.  Process 0
    must read a ``stop`` frame from process 1 before that connection closes, else it names process 1, which was
    healthy, as the lost one (found with the cluster of the test above: process 1 said "lost process 3 ...: the
    connection closed" after process 3 had stopped on process 2's relay and closed)."""
    from runtime.cluster_member import run_process

    hosts = ["127.0.0.2", "127.0.0.1", "127.0.0.3"]  # no two on one host: no shared-memory offers to answer
    endpoints = [Endpoint(host, free_ports(1, host)[0]) for host in hosts]
    from_1: list[str] = []
    first = Mesh(
        0,
        endpoints,
        "token",
        lambda peer, header, payload: from_1.append(f"frame {header[0]}") if peer == 1 else None,
        lambda error: from_1.append("closed") if error.process == 1 else None,
    )
    third = Mesh(2, endpoints, "token", lambda *_: None, lambda _: None)
    outcome: list[BaseException] = []

    def run_process_1() -> None:
        try:
            run_process(stepping, 1, endpoints, 1, "token", None, 10.0)
        except BaseException as error:  # noqa: BLE001 - inspected by the test
            outcome.append(error)

    threads = [
        threading.Thread(target=first.connect, args=(10.0,), daemon=True),
        threading.Thread(target=run_process_1, daemon=True),
    ]
    for thread in threads:
        thread.start()
    third.connect(10.0)
    threads[0].join(10.0)
    try:
        detail = "lost process 3 (127.0.0.4:1): the connection closed; the other processes stop"
        third.send(1, frame([STOP, "lost", None, detail]))
        threads[1].join(10.0)
        assert outcome and isinstance(outcome[0], ClusterStopped), outcome
        eventually(lambda: "closed" in from_1, 10, "process 1's connection to process 0 closing")
        assert f"frame {STOP}" in from_1[: from_1.index("closed")], from_1
    finally:
        first.close()
        third.close()


def test_a_process_that_refuses_what_a_peer_sent_can_still_tell_that_peer_why() -> None:
    """Process 1 refuses a frame from process 0 (over process 1's frame limit: process 0 was started with a higher
    PYTIMELY_MAX_FRAME_BYTES).  Over TCP, process 1 shut the connection down before telling anyone, so process 0 saw
    it close unexplained and said "lost process 1 ...: the connection closed", naming the healthy process that had
    refused its data (over shared memory, the TCP connection stayed and the stop frame told process 0 why).  The stop
    that ``on_lost`` relays now reaches the refused process too, before the connection is shut down."""
    import struct

    from runtime.communication.wire import MAX_FRAME

    events: list[str] = []
    endpoints = [Endpoint("127.0.0.1", port) for port in free_ports(2)]
    first = Mesh(
        0,
        endpoints,
        "token",
        lambda peer, header, payload: events.append(f"frame {header[0]}"),
        lambda error: events.append(f"lost {error.process}"),
    )
    second: Mesh

    def relay(error: PeerLost) -> None:  # what ProcessFabric.stop does: tell every other process why
        second.send(0, frame(["why"]))

    second = Mesh(1, endpoints, "token", lambda *_: None, relay)
    connecting = threading.Thread(target=second.connect, args=(10.0,), daemon=True)
    connecting.start()
    first.connect(10.0)
    connecting.join(10.0)
    try:
        first.send(1, struct.pack("!II", MAX_FRAME + 1, 1))  # a frame longer than process 1 takes
        eventually(lambda: "lost 1" in events, 10, "process 1's connection to process 0 ending")
        assert events == ["frame why", "lost 1"], events
    finally:
        first.close()
        second.close()
