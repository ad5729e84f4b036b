"""Live progress from the tasks of a Spark dataflow to the driver, over one small TCP side channel.

The driver's :class:`ProgressServer` listens on the driver's host; every task
connects with a :class:`ProgressReporter`, proves it knows the job's token
(the first frame), then sends events: msgpack maps such as ``{"event":
"round", "task": 1, "round": 3, "records": 2827}``.  Events are best effort:
a task that cannot reach the driver runs on without reporting, and nothing a
task sends is ever unpickled.
"""

from __future__ import annotations

import contextlib
import hmac
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from runtime.communication.wire import FrameReader, WireError, frame

TaskEvent = dict[str, Any]
"""One progress event: ``event`` (its kind), ``task``, ``attempt``, ``at`` (seconds since the epoch) and more."""

_MAX_FRAME = 1 << 20


class ProgressServer:
    """Accepts task connections and calls ``on_event(event)`` (on its own threads) for each event."""

    def __init__(self, host: str, token: str, on_event: Callable[[TaskEvent], None]) -> None:
        """Listen on ``host`` (an ephemeral port); call :meth:`close` when the job is over."""
        self._token = token
        self._on_event = on_event
        self._sock = socket.create_server((host, 0))
        self._sock.settimeout(0.2)
        self.host = host
        self.port = int(self._sock.getsockname()[1])
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        accept = threading.Thread(target=self._accept, name="pytimely-progress", daemon=True)
        accept.start()
        self._threads.append(accept)

    @property
    def address(self) -> str:
        """``host:port`` for the tasks."""
        return f"{self.host}:{self.port}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            reader = threading.Thread(target=self._read, args=(conn,), name="pytimely-progress-task", daemon=True)
            reader.start()
            self._threads.append(reader)

    def _read(self, conn: socket.socket) -> None:
        reader = FrameReader(_MAX_FRAME, plain=True)  # plain values only: nothing from a socket runs a codec
        trusted = False
        conn.settimeout(0.5)
        with conn:
            while not self._closed.is_set():
                try:
                    data = conn.recv(1 << 16)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                try:
                    for header, _ in reader.feed(data):
                        if not trusted:
                            token = header[1] if len(header) == 2 and header[0] == "hello" else ""
                            if not isinstance(token, str) or not hmac.compare_digest(token, self._token):
                                return
                            trusted = True
                        elif header and isinstance(header[0], dict):
                            with self._lock:
                                self._on_event(header[0])
                except WireError:
                    return

    def close(self) -> None:
        """Stop listening and reading."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread now, not at its next poll
        with contextlib.suppress(OSError):
            self._sock.close()
        for thread in self._threads:
            thread.join(timeout=1.0)


class ProgressReporter:
    """A task's side of the channel: :meth:`report` sends one event, silently dropped if the driver is away."""

    def __init__(self, address: str | None, token: str, task: int, attempt: int) -> None:
        """Connect to the driver at ``address`` (``None``: report nothing)."""
        self.task = task
        self.attempt = attempt
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        if address:
            host, _, port = address.rpartition(":")
            try:
                self._sock = socket.create_connection((host, int(port)), timeout=5.0)
                self._sock.sendall(frame(["hello", token]))
            except OSError:
                self._sock = None

    def report(self, event: str, **fields: Any) -> None:
        """Send ``{"event": event, "task": ..., "attempt": ..., "at": ..., **fields}`` to the driver."""
        sock = self._sock
        if sock is None:
            return
        message = {"event": event, "task": self.task, "attempt": self.attempt, "at": time.time(), **fields}
        try:
            data = frame([message])
        except Exception:  # noqa: BLE001 - a field the wire cannot carry: drop the event
            return
        with self._lock:
            try:
                sock.sendall(data)
            except OSError:
                self._sock = None

    def close(self) -> None:
        """Close the connection."""
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None
