"""Which process a cluster process names when it stops: the one that was lost, not a peer that relayed the loss.

Process 1 finds process 2 lost, relays the loss to process 0 (a ``STOP`` frame), and ends; process 0 then sees
process 1's connection close too.  Process 0 must report process 2, as process 1 did: an operator reading its
error otherwise looks for a fault in process 1, which was healthy.  Found running a 3-process cluster from the
command line and killing process 2 (SIGKILL): about one run in six, process 0 said "lost process 1".
"""

from __future__ import annotations

from typing import Any

from runtime.cluster_member import _stopped
from runtime.communication.process_fabric import STOP, ProcessFabric
from runtime.communication.tcp import PeerLost
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
