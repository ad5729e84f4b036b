"""Live progress from the tasks of a Spark dataflow to the driver, over one small TCP side channel.

The driver's :class:`ProgressServer` listens on the driver's host; every task
connects with a :class:`ProgressReporter`, proves it knows the job's token
(a challenge and response: :mod:`runtime.spark.gate`), then sends events: msgpack maps such as ``{"event":
"round", "task": 1, "round": 3, "records": 2827}``.  Events are best effort:
a task that cannot reach the driver runs on without reporting, and nothing a
task sends is ever unpickled.
"""

from __future__ import annotations

import contextlib
import math
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from runtime.codec import shown
from runtime.communication.wire import FrameReader, WireError, frame
from runtime.spark.gate import Gate, GateRefused, prove

TaskEvent = dict[str, Any]
"""One progress event: ``event`` (its kind), ``task``, ``attempt``, ``at`` (seconds since the epoch) and more."""

MAX_EVENT_FRAME = 64 << 10
"""Bytes of one progress event frame from a proven task; a larger one ends that task's reporting."""
MAX_REPORTERS = 1024
"""Proven task connections the progress server reads at once (one thread each); more are refused."""


def task_event(header: list[Any]) -> TaskEvent:
    """The event a task's frame header holds: ``[event]``, a map of text keys whose ``event`` is text, ``task`` and
    ``attempt`` counts and ``at`` a time in seconds; a :class:`WireError` for anything else (a proven task that
    sends one is refused rather than handed on to ``on_event``, which trusts those fields)."""
    event = header[0] if len(header) == 1 else None
    if (
        event.__class__ is not dict
        or not all(key.__class__ is str for key in event)
        or event.get("event").__class__ is not str
        or any(event.get(field).__class__ is not int or event[field] < 0 for field in ("task", "attempt"))
        or event.get("at").__class__ is not float
        or not math.isfinite(event["at"])
    ):
        raise WireError(
            f"a task sent {shown(header)}, not [event]: a map with text keys, the event's name, its task and attempt "
            "(counts) and when (seconds)"
        )
    return event


class ProgressServer:
    """Accepts task connections and calls ``on_event(event)`` (on its own threads) for each event.

    A connection proves the job's token before anything else is read (see
    :mod:`runtime.spark.gate`); after that, an event frame may hold at most
    :data:`MAX_EVENT_FRAME` bytes and must hold an event (:func:`task_event`),
    else that task's reporting ends (counted in :attr:`malformed`), and at most
    :data:`MAX_REPORTERS` proven connections (one thread each) are open at once.
    """

    def __init__(self, host: str, token: str, on_event: Callable[[TaskEvent], None]) -> None:
        """Listen on ``host`` (an ephemeral port); call :meth:`close` when the job is over."""
        self._on_event = on_event
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self.host = host
        self._gate = Gate(host, token, "pytimely-progress", self._read, max_proven=MAX_REPORTERS)
        self.port = self._gate.port
        self.malformed = 0
        """Proven connections whose reporting ended at a frame that was not an event (or was damaged)."""
        self.last_malformed: str | None = None
        """Why the last of them ended."""

    @property
    def address(self) -> str:
        """``host:port`` for the tasks."""
        return f"{self.host}:{self.port}"

    @property
    def gate(self) -> Gate:
        """The listener's :class:`~runtime.spark.gate.Gate` (its limits and refusals)."""
        return self._gate

    def _read(self, conn: socket.socket, fields: list[Any]) -> None:
        """Read a proven task's events until it closes the connection or the server closes."""
        reader = FrameReader(MAX_EVENT_FRAME, plain=True)  # plain values only: nothing from a socket runs a codec
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
                        event = task_event(header)
                        with self._lock:
                            self._on_event(event)
                except WireError as error:
                    with self._lock:
                        self.malformed += 1
                        self.last_malformed = str(error)
                    return

    def close(self) -> None:
        """Stop listening and reading."""
        self._closed.set()
        self._gate.close()


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
            sock: socket.socket | None = None
            try:
                sock = socket.create_connection((host, int(port)), timeout=5.0)
                prove(sock, token, time.monotonic() + 5.0)
                sock.settimeout(5.0)
                self._sock = sock
            except (OSError, WireError, GateRefused):
                if sock is not None:
                    sock.close()

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
