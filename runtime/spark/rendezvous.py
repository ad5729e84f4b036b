"""How the tasks of a gang learn each other's addresses: through the driver, in one round trip.

``BarrierTaskContext.allGather`` does this too, but Spark's barrier sync
polls once a second, so it costs a second per job.  Instead the driver's
:class:`Rendezvous` listens for the ``N`` tasks of an attempt: each sends
``["hello", token, index, "host:port"]``; once all ``N`` have, each gets
``["peers", [address of task 0, ..., task N - 1]]``.  A connection with
another token, a bad index or a malformed frame is dropped; every wait has a
deadline.  Set ``spark.pytimely.rendezvous=barrier`` to use ``allGather``
where the executors cannot reach the driver on an arbitrary port.
"""

from __future__ import annotations

import contextlib
import hmac
import socket
import threading
import time
from typing import Any

from runtime.communication.wire import FrameReader, WireError, frame
from runtime.spark.errors import RETRY_MARKER
from runtime.spark.errors import RendezvousFailed as RendezvousFailed

_MAX_FRAME = 1 << 20
_POLL = 0.2


class Rendezvous:
    """The driver's side: collects the ``tasks`` addresses of one attempt and sends each task the list."""

    def __init__(self, host: str, token: str, tasks: int) -> None:
        """Listen on ``host`` (an ephemeral port); :meth:`close` when the attempt is over."""
        self._token = token
        self._tasks = tasks
        self._sock = socket.create_server((host, 0), backlog=max(16, tasks))
        self._sock.settimeout(_POLL)
        self.address = f"{host}:{self._sock.getsockname()[1]}"
        self._waiting: dict[int, tuple[socket.socket, str]] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="pytimely-rendezvous", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._hello, args=(conn,), name="pytimely-rendezvous-task", daemon=True).start()

    def _hello(self, conn: socket.socket) -> None:
        try:
            header = _read_frame(conn, time.monotonic() + 30.0)
        except (OSError, WireError, RendezvousFailed):
            conn.close()
            return
        valid = (
            len(header) == 4
            and header[0] == "hello"
            and isinstance(header[1], str)
            and hmac.compare_digest(header[1], self._token)
            and isinstance(header[2], int)
            and 0 <= header[2] < self._tasks
            and isinstance(header[3], str)
            and len(header[3]) < 300
        )
        if not valid:
            conn.close()
            return
        with self._lock:
            old = self._waiting.pop(header[2], None)
            if old is not None:
                old[0].close()
            self._waiting[header[2]] = (conn, header[3])
            if len(self._waiting) < self._tasks:
                return
            waiting, self._waiting = self._waiting, {}
        peers = frame(["peers", [waiting[index][1] for index in range(self._tasks)]])
        for task_conn, _ in waiting.values():
            with contextlib.suppress(OSError):
                task_conn.sendall(peers)
            task_conn.close()

    def close(self) -> None:
        """Stop listening and drop the tasks still waiting."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread now, not at its next poll
        with contextlib.suppress(OSError):
            self._sock.close()
        with self._lock:
            for conn, _ in self._waiting.values():
                conn.close()
            self._waiting.clear()
        self._thread.join(timeout=1.0)


def _read_frame(conn: socket.socket, deadline: float) -> list[Any]:
    reader = FrameReader(_MAX_FRAME, plain=True)  # plain values only, before and after the token is checked
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
            conn.sendall(frame(["hello", token, index, address]))
            header = _read_frame(conn, deadline)
    except (OSError, WireError, RendezvousFailed) as error:
        raise RendezvousFailed(
            f"{RETRY_MARKER} task {index} could not learn its peers' addresses from the driver at {rendezvous} "
            f"within {timeout:.0f} s ({type(error).__name__}: {error}); if executors cannot reach the driver on "
            f"that port, set spark.pytimely.rendezvous=barrier"
        ) from error
    peers = header[1] if len(header) == 2 and header[0] == "peers" else None
    if not isinstance(peers, list) or len(peers) != tasks or not all(isinstance(peer, str) for peer in peers):
        raise RendezvousFailed(f"{RETRY_MARKER} task {index} got a malformed peer list from {rendezvous}")
    return peers
