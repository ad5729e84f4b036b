"""How the tasks of a gang learn each other's addresses: through the driver, in one round trip.

``BarrierTaskContext.allGather`` does this too, but Spark's barrier sync
polls once a second, so it costs a second per job.  Instead the driver's
:class:`Rendezvous` listens for the ``N`` tasks of an attempt: each sends
its index and ``"host:port"`` once it has proved the job's token (see
:mod:`runtime.spark.gate`: the token is proved before anything else is read,
and the connections and their threads are bounded); once all ``N`` have, each
gets ``["peers", [address of task 0, ..., task N - 1]]``.  A connection with
another token, a bad index or a malformed frame is dropped; every wait has a
deadline.  Set ``spark.pytimely.rendezvous=barrier`` to use ``allGather``
where the executors cannot reach the driver on an arbitrary port.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Any

from runtime.communication.wire import FrameReader, WireError, frame
from runtime.spark.errors import RETRY_MARKER
from runtime.spark.errors import RendezvousFailed as RendezvousFailed
from runtime.spark.gate import Gate, GateRefused, prove

_MAX_FRAME = 1 << 20
_POLL = 0.2


class Rendezvous:
    """The driver's side: collects the ``tasks`` addresses of one attempt and sends each task the list."""

    def __init__(self, host: str, token: str, tasks: int) -> None:
        """Listen on ``host`` (an ephemeral port); :meth:`close` when the attempt is over."""
        self._tasks = tasks
        self._waiting: dict[int, tuple[socket.socket, str]] = {}
        self._lock = threading.Lock()
        # a proven task's thread ends once its address is stored: ``tasks`` proven connections at most wait
        self._gate = Gate(host, token, "pytimely-rendezvous", self._hello, max_proven=max(16, tasks))
        self.address = f"{host}:{self._gate.port}"

    @property
    def gate(self) -> Gate:
        """The listener's :class:`~runtime.spark.gate.Gate` (its limits and refusals)."""
        return self._gate

    def _hello(self, conn: socket.socket, fields: list[Any]) -> None:
        """A task proved the token and sent ``[index, "host:port"]``; once all have, send each the list."""
        valid = (
            len(fields) == 2
            and isinstance(fields[0], int)
            and 0 <= fields[0] < self._tasks
            and isinstance(fields[1], str)
            and len(fields[1]) < 300
        )
        if not valid:
            conn.close()
            return
        with self._lock:
            old = self._waiting.pop(fields[0], None)
            if old is not None:
                old[0].close()
            self._waiting[fields[0]] = (conn, fields[1])
            if len(self._waiting) < self._tasks:
                return
            waiting, self._waiting = self._waiting, {}
        peers = frame(["peers", [waiting[index][1] for index in range(self._tasks)]])
        for task_conn, _ in waiting.values():
            with contextlib.suppress(OSError):
                task_conn.settimeout(_POLL * 25)
                task_conn.sendall(peers)
            task_conn.close()

    def close(self) -> None:
        """Stop listening and drop the tasks still waiting."""
        self._gate.close()
        with self._lock:
            for conn, _ in self._waiting.values():
                conn.close()
            self._waiting.clear()


def _read_frame(conn: socket.socket, deadline: float) -> list[Any]:
    reader = FrameReader(_MAX_FRAME, plain=True)  # the task reads the proven driver's answer: plain values only
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RendezvousFailed("timed out")
        conn.settimeout(min(remaining, _POLL * 5))
        try:
            data = conn.recv(1 << 16)
        except TimeoutError:
            continue
        if not data:
            raise RendezvousFailed("the connection closed")
        for header, _ in reader.feed(data):
            return header


def gather(rendezvous: str, token: str, index: int, address: str, tasks: int, timeout: float) -> list[str]:
    """The task's side: send ``address`` to the driver's rendezvous; return every task's address in order."""
    host, _, port = rendezvous.rpartition(":")
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((host, int(port)), timeout=min(timeout, 10.0)) as conn:
            prove(conn, token, deadline, index, address)
            header = _read_frame(conn, deadline)
    except (OSError, WireError, RendezvousFailed, GateRefused) as error:
        raise RendezvousFailed(
            f"{RETRY_MARKER} task {index} could not learn its peers' addresses from the driver at {rendezvous} "
            f"within {timeout:.0f} s ({type(error).__name__}: {error}); if executors cannot reach the driver on "
            f"that port, set spark.pytimely.rendezvous=barrier"
        ) from error
    peers = header[1] if len(header) == 2 and header[0] == "peers" else None
    if not isinstance(peers, list) or len(peers) != tasks or not all(isinstance(peer, str) for peer in peers):
        raise RendezvousFailed(f"{RETRY_MARKER} task {index} got a malformed peer list from {rendezvous}")
    return peers
