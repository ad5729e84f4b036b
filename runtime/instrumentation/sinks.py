"""Where encoded events go: memory, a file, or a viewer over TCP."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from pathlib import Path
from typing import Any

from runtime.instrumentation.encoding import END_FRAME, encode_events, encode_header
from runtime.instrumentation.events import K_DROPPED

log = logging.getLogger("runtime.instrument")


class Sink(ABC):
    """Where encoded events go.  ``write`` runs on the writer thread."""

    dropped = 0
    needs_bytes = True
    """Whether :meth:`write` uses the encoded bytes (the writer skips encoding otherwise)."""
    records = True
    """Whether the sink is a recording (a file, memory, a viewer), not an observer such as the metrics endpoint."""

    @abstractmethod
    def write(self, events: list[tuple[Any, ...]], encoded: bytes) -> None:
        """Take a batch of raw events and their encoding."""

    def close(self) -> None:  # noqa: B027 - most sinks hold nothing to release
        """Flush and release resources (nothing, unless a sink overrides this)."""


class MemorySink(Sink):
    """Keeps every raw event in memory (for :class:`Recorder`)."""

    needs_bytes = False

    def __init__(self) -> None:
        """An empty sink."""
        self.raw: list[tuple[Any, ...]] = []

    def write(self, events: list[tuple[Any, ...]], encoded: bytes) -> None:
        """Append the batch."""
        self.raw.extend(events)


class FileSink(Sink):
    """Writes a recording to a file (format version 2: framed, checksummed, closed by an end frame)."""

    def __init__(self, path: str | os.PathLike[str], process: int = 0) -> None:
        """Create (truncate) ``path`` and write the header."""
        self.path = Path(path)
        self._file = open(self.path, "wb")  # noqa: SIM115 - closed in close()
        self._file.write(encode_header(process))
        self._file.flush()

    def write(self, events: list[tuple[Any, ...]], encoded: bytes) -> None:
        """Append the encoded batch."""
        self._file.write(encoded)
        self._file.flush()

    def close(self) -> None:
        """Write the end frame and close the file (a file without it reads as truncated)."""
        self._file.write(END_FRAME)
        self._file.close()


class TcpSink(Sink):
    """Streams a recording to a viewer; never blocks the writer: buffers, then drops and counts.

    A sender thread connects (retrying every ``retry`` seconds), sends the
    header, then the encoded chunks from a bounded buffer, oldest first.  Until
    a viewer connects, chunks wait in that buffer, so a viewer started after
    the program still sees the dataflows being created.  The buffer holds at
    most ``capacity`` chunks and ``max_events`` events: past either bound
    (the viewer is slow, late, or gone), new chunks are dropped and counted in
    :attr:`dropped`; once a connection can take data again, an
    ``EventsDropped`` event says how many were lost.  What is still buffered
    when the sink closes without a viewer counts as dropped too.
    """

    def __init__(
        self,
        host: str,
        port: int,
        process: int = 0,
        capacity: int = 256,
        retry: float = 0.5,
        max_events: int = 200_000,
    ) -> None:
        """Stream to ``host:port``, buffering at most ``capacity`` chunks and ``max_events`` events."""
        self.host = host
        self.port = port
        self._process = process
        self._capacity = capacity
        self._max_events = max_events
        self._chunks: deque[tuple[bytes, int]] = deque()
        self._buffered = 0
        self._lock = threading.Condition()
        self._retry = retry
        self.dropped = 0
        self._reported = 0
        self.connected = False
        self._ever_connected = False
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._send_loop, name="timely-log-tcp", daemon=True)
        self._thread.start()

    @property
    def buffered(self) -> int:
        """Events waiting in the buffer for the viewer."""
        return self._buffered

    def write(self, events: list[tuple[Any, ...]], encoded: bytes) -> None:
        """Buffer the chunk, or drop it if the buffer is full."""
        count = len(events)
        with self._lock:
            if len(self._chunks) >= self._capacity or self._buffered + count > self._max_events:
                self.dropped += count
                return
            self._chunks.append((encoded, count))
            self._buffered += count
            self._lock.notify()

    def _connect(self) -> socket.socket | None:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=1.0)
        except OSError:
            return None
        sock.settimeout(5.0)
        return sock

    def _next_chunk(self) -> tuple[bytes, int, int] | None:
        """The oldest buffered chunk and the drops not yet reported; ``None`` once closing and empty."""
        with self._lock:
            while not self._chunks:
                if self._closing.is_set():
                    return None
                self._lock.wait(0.1)
            chunk, count = self._chunks.popleft()
            self._buffered -= count
            lost = self.dropped - self._reported
            self._reported = self.dropped
            return chunk, count, lost

    def _send_loop(self) -> None:
        sock: socket.socket | None = None
        while True:
            if sock is None:
                sock = self._connect()
                if sock is None:
                    if self._closing.wait(self._retry):
                        break
                    continue
                try:
                    sock.sendall(encode_header(self._process))
                except OSError:
                    sock.close()
                    sock = None
                    continue
                self.connected = self._ever_connected = True
            item = self._next_chunk()
            if item is None:
                break
            chunk, count, lost = item
            try:
                if lost:
                    sock.sendall(encode_events([(K_DROPPED, -1, 0, time.monotonic(), lost)]))
                    lost = 0
                sock.sendall(chunk)
            except OSError:
                with self._lock:
                    self.dropped += count
                    self._reported -= lost  # a report that did not go out is made again
                self.connected = False
                sock.close()
                sock = None
        if sock is not None:
            with contextlib.suppress(OSError):  # the viewer may be gone already
                sock.sendall(END_FRAME)
            sock.close()
        self.connected = False
        with self._lock:  # never sent: no viewer came
            self.dropped += self._buffered
            self._chunks.clear()
            self._buffered = 0

    def close(self) -> None:
        """Send what is buffered if a viewer is connected (bounded wait), then disconnect.

        If no viewer ever connected, the events that were lost are reported through :mod:`logging`
        as a warning, so that a recording streamed to a wrong address is not lost unnoticed.
        """
        self._closing.set()
        with self._lock:
            self._lock.notify()
        self._thread.join(timeout=5.0)
        if self.dropped and not self._ever_connected:  # a viewer that came is told of drops itself
            log.warning(
                "--log tcp://%s:%d: no viewer connected, so the %d event(s) of process %d were not delivered: "
                "start the viewer first (python -m viz tui --listen %s:%d), or record to a file with --log FILE",
                self.host,
                self.port,
                self.dropped,
                self._process,
                self.host,
                self.port,
            )
