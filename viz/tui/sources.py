"""Where the terminal UI's events come from: a recording to replay, or programs streaming over TCP.

:class:`Replay` holds a recording's events in time order and moves a cursor
over them (forwards by applying events, backwards from the nearest checkpoint).

:class:`LiveListener` listens on ``HOST:PORT`` for programs started with
``--log tcp://HOST:PORT`` (or ``PYTIMELY_LOG``), accepts any number of
connections (one per process of a cluster), unpacks events on a background
thread per connection, and queues them in batches stamped with their arrival
time (raw wire arrays: decoding them into dataclasses would cost more than
the rest of the work); the app drains the queue on its own schedule and folds
the batches in with :func:`viz.tui.ingest.apply_raw`.  A slow screen never
slows the program: the queue is bounded, and beyond it the program's sink
drops events instead, and says how many.

The listener holds at most :data:`MAX_CONNECTIONS` connections open and at
most :data:`MAX_PENDING_BYTES` of one connection's unfinished event; a
connection must send the stream's header within :data:`HEADER_TIMEOUT`
seconds.  When a connection arrives with :data:`MAX_CONNECTIONS` open, the
open connection that has been silent longest is closed to make room for it
if it has sent nothing for :data:`IDLE_EVICTION` seconds (connections with no
header first), so connections that send a header and then idle cannot keep a
real program out; a program whose connection was closed this way reconnects
when it next has events to send.  Only when every open connection is active
is the new one closed at once and counted (:attr:`LiveListener.refused`, shown
in the viewer's header).  The queue holds at most :data:`MAX_QUEUED_BYTES`
bytes of received events (and ``capacity`` events); beyond that the listener
stops reading.  Every text field of a structure event is clipped to
:data:`viz.limits.MAX_NAME` characters before it is queued, and the threads
of closed connections are forgotten as new ones arrive.
"""

from __future__ import annotations

import contextlib
import copy
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from runtime.instrument import (
    K_SHUTDOWN,
    Event,
    FrontiersChanged,
    RecordingError,
    RecordingStream,
    RecordingTooLarge,
    read_recording,
)
from viz import limits
from viz.errors import TuiError as TuiError
from viz.limits import LARGE_EVENT, clip_deep, clip_raw
from viz.tui.adapter import TuiState
from viz.tui.ingest import HOT, Raw

MAX_CONNECTIONS = 32
"""Program connections the live viewer holds open at once (one per process); more are refused."""
ACCEPT_RETRY = 0.05
"""Seconds the listener waits after a failed ``accept`` (out of descriptors, say) before it accepts again."""
MAX_PENDING_BYTES = 4 << 20
"""Bytes of one connection's incomplete event the viewer buffers; a larger event ends that connection."""
HEADER_TIMEOUT = 10.0
"""Seconds a new connection has to send the stream's header before the viewer closes it."""
IDLE_EVICTION = 2.0
"""Seconds of silence after which an open connection may be closed to make room for a new one."""
MAX_QUEUED_BYTES = 32 << 20
"""Bytes of received events the queue holds before the listener stops reading (the screen is far behind)."""
_KEPT_CLOSED = 256


# ---------------------------------------------------------------------- replay


def load_recording(
    paths: Sequence[str | os.PathLike[str]], allow_format_1: bool = False
) -> tuple[list[Event], list[str]]:
    """Every event of the recording files (one per process), in time order, and why any file looks cut short.

    Raises :class:`TuiError` for a file that cannot be read at all; files of
    format version 1 (no checksums) only with ``allow_format_1``, with a warning.
    """
    events: list[Event] = []
    truncated: list[str] = []
    for path in paths:
        try:
            recording = read_recording(path, allow_format_1)
        except RecordingError as error:
            raise TuiError(str(error)) from None
        events.extend(recording.events)
        if recording.truncated is not None:
            truncated.append(recording.truncated)
    if not events:
        cut = "".join(f"; {why}" for why in truncated)  # a file cut inside its first frame of events says so
        raise TuiError(f"{', '.join(map(str, paths))}: the recording holds no events{cut}")
    events.sort(key=lambda e: (e.t, e.worker, e.seq))
    return events, truncated


class Replay:
    """A cursor over a recording: the state after the first :attr:`position` events."""

    def __init__(
        self,
        events: list[Event],
        bucket: float | None = None,
        checkpoint_every: int = 2000,
        truncated: Sequence[str] = (),
    ) -> None:
        """Replay ``events`` (sorted by time); rates in buckets of ``bucket`` seconds (default: 1/40 of the run).

        ``truncated`` says why the recording's files look cut short (the header shows it).
        """
        self.events = events
        self.truncated = list(truncated)
        self.start = events[0].t if events else 0.0
        self.end = events[-1].t if events else 0.0
        self.bucket = bucket if bucket is not None else max((self.end - self.start) / 40, 0.001)
        self.state = TuiState(self.bucket)
        self.position = 0
        self._every = checkpoint_every
        self._checkpoints: dict[int, TuiState] = {0: copy.deepcopy(self.state)}
        self._next_checkpoint = checkpoint_every
        """Where the next copy is taken: at least as many events after the last as that copy held entries, so
        the copies together hold about as many entries as the recording has events (not its square)."""

    def __len__(self) -> int:
        return len(self.events)

    @property
    def now(self) -> float:
        """Seconds from the start of the recording to the last event applied."""
        if self.position == 0:
            return 0.0
        return self.events[self.position - 1].t - self.start

    def _forward(self, target: int) -> None:
        events, state = self.events, self.state
        while self.position < target:
            state.apply(events[self.position])
            self.position += 1
            if self.position >= self._next_checkpoint:
                self._checkpoints[self.position] = copy.deepcopy(state)
                self._next_checkpoint = self.position + max(self._every, state.size())
        if self.position == len(events):
            state.model.settle()  # the recording ended: no worker's next event will come

    def seek(self, position: int) -> None:
        """Show the state after ``position`` events (clamped to the recording)."""
        position = max(0, min(len(self.events), position))
        if position < self.position:
            base = max(p for p in self._checkpoints if p <= position)
            self.state = copy.deepcopy(self._checkpoints[base])
            self.position = base
        self._forward(position)

    def step(self, count: int = 1) -> None:
        """Move ``count`` events forwards (negative: backwards)."""
        self.seek(self.position + count)

    def next_frontier_change(self) -> bool:
        """Move forwards to just after the next frontier change; return whether there was one."""
        for index in range(self.position, len(self.events)):
            if isinstance(self.events[index], FrontiersChanged):
                self.seek(index + 1)
                return True
        self.seek(len(self.events))
        return False

    def previous_frontier_change(self) -> bool:
        """Move backwards to just after the previous frontier change; return whether there was one."""
        for index in range(self.position - 2, -1, -1):
            if isinstance(self.events[index], FrontiersChanged):
                self.seek(index + 1)
                return True
        self.seek(0)
        return False

    def seek_time(self, seconds: float) -> None:
        """Show the state after every event up to ``seconds`` from the start."""
        limit = self.start + seconds
        low, high = 0, len(self.events)
        while low < high:
            middle = (low + high) // 2
            if self.events[middle].t <= limit:
                low = middle + 1
            else:
                high = middle
        self.seek(low)


# ---------------------------------------------------------------------- live


@dataclass
class Connection:
    """One program process streaming to the viewer."""

    peer: str
    process: int | None = None
    pid: int | None = None
    """The program process's id, from its header (a reconnection from the same process has the same)."""
    events: int = 0
    open: bool = True
    error: str | None = None
    workers: set[int] = field(default_factory=set)
    shut_down: set[int] = field(default_factory=set)
    last_active: float = field(default_factory=time.monotonic)
    """When the connection last delivered bytes (or opened), on ``time.monotonic``."""
    skew: float | None = None
    """The smallest ``arrival - event time`` seen: the program's clock against ours, plus the quickest trip."""

    def sent_at(self, event_time: object, arrived: float) -> float:
        """When data whose newest event has ``event_time`` left the program, on our clock.

        The program stamps events with its own monotonic clock.  The smallest
        difference between arrival and event time seen on this connection
        maps its clock onto ours (on one host both clocks are the same; across
        hosts the offset is learned).  Data that waited in the network or in
        the kernel because the listener read too slowly then counts as lag
        too, not only the time it waits in the listener's queue.
        """
        if event_time.__class__ is not float:
            return arrived
        skew = arrived - event_time
        if self.skew is None or skew < self.skew:
            self.skew = skew
        return min(arrived, event_time + self.skew)

    @property
    def dropped_early(self) -> bool:
        """Whether the connection closed before every one of its workers shut down."""
        return not self.open and (self.error is not None or not self.workers or self.workers != self.shut_down)


class LiveListener:
    """A TCP listener that accepts program connections and queues their decoded events."""

    def __init__(
        self, host: str, port: int, clock: Callable[[], float] = time.monotonic, capacity: int = 1_000_000
    ) -> None:
        """Bind ``host:port`` now (raising :class:`TuiError` if it is taken); accept once :meth:`start` runs.

        At most about ``capacity`` events wait in the queue; beyond that the
        listener stops reading until the screen catches up, and the program's
        sink drops events (it never waits for the viewer).
        """
        self.host = host
        self.clock = clock
        try:
            self._server = socket.create_server((host, port), reuse_port=False)
        except OSError as error:
            reason = "the port is in use" if error.errno in (98, 48, 10048) else (error.strerror or str(error))
            raise TuiError(f"cannot listen on {host}:{port}: {reason}; choose another port") from None
        self.port = self._server.getsockname()[1]
        self._server.settimeout(0.2)
        self._queue: deque[tuple[float, Connection, list[Raw], int]] = deque()
        self._queued = 0
        self._queued_bytes = 0
        self._sockets: dict[int, socket.socket] = {}
        """The open connections' sockets, by ``id`` of their :class:`Connection`."""
        self.capacity = capacity
        self.connections: list[Connection] = []
        self.received = 0
        self.refused = 0
        """Connections closed at once because :data:`MAX_CONNECTIONS` were open and none was idle."""
        self.evicted = 0
        """Idle connections closed to make room for a new one."""
        self.last_refused: str | None = None
        """The address of the last connection refused, and why."""
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    @property
    def address(self) -> str:
        """``HOST:PORT`` as bound (the port resolved when 0 was asked for)."""
        return f"{self.host}:{self.port}"

    def start(self) -> None:
        """Start accepting connections on a background thread."""
        thread = threading.Thread(target=self._accept_loop, name="tui-accept", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                sock, peer = self._server.accept()
            except TimeoutError:
                continue
            except OSError as error:
                if self._stop.is_set() or self._server.fileno() < 0:
                    return
                # out of descriptors (a flood), a connection reset before it was accepted: the listener lives on
                with self._lock:
                    self.refused += 1
                    self.last_refused = f"a connection could not be accepted: {error}"
                self._stop.wait(ACCEPT_RETRY)
                continue
            connection = Connection(f"{peer[0]}:{peer[1]}")
            with self._lock:
                self._threads = [thread for thread in self._threads if thread.is_alive()]  # reap
                if sum(1 for c in self.connections if c.open) >= MAX_CONNECTIONS and not self._evict_idle():
                    self.refused += 1
                    self.last_refused = f"{connection.peer}: {MAX_CONNECTIONS} connections already open"
                    sock.close()
                    continue
                closed = [c for c in self.connections if not c.open]
                if len(closed) > _KEPT_CLOSED:  # a flood of short connections must not grow the list forever
                    forget = {id(c) for c in closed[: len(closed) - _KEPT_CLOSED]}
                    self.connections = [c for c in self.connections if id(c) not in forget]
                self.connections.append(connection)
                self._sockets[id(connection)] = sock
                thread = threading.Thread(target=self._read_loop, args=(sock, connection), name="tui-read", daemon=True)
                self._threads.append(thread)
            thread.start()

    def _evict_idle(self) -> bool:
        """Close the open connection silent longest, if silent :data:`IDLE_EVICTION` s (the caller holds the lock).

        Connections that have not sent the stream's header go first.
        """
        now = time.monotonic()
        idle = [
            c for c in self.connections if c.open and id(c) in self._sockets and now - c.last_active >= IDLE_EVICTION
        ]
        if not idle:
            return False
        victim = min(idle, key=lambda c: (c.process is not None or c.pid is not None, c.last_active))
        victim.error = f"closed after {now - victim.last_active:.0f} s idle to make room for a new connection"
        victim.open = False
        self.evicted += 1
        with contextlib.suppress(OSError):
            self._sockets.pop(id(victim)).shutdown(socket.SHUT_RDWR)  # its reading thread then ends
        return True

    def _read_loop(self, sock: socket.socket, connection: Connection) -> None:
        # Decoded by the project's bounded decoder; each distinct time is decoded once per connection,
        # and one unfinished event may hold at most MAX_PENDING_BYTES.
        # A program of this release streams format version 2; version 1 streams (older programs) are still
        # shown, as TCP's own checksum guards the bytes in flight (no file to be damaged at rest).
        stream = RecordingStream(
            f"the connection from {connection.peer}",
            cache_times=True,
            max_pending=MAX_PENDING_BYTES,
            allow_format_1=True,
            check_fields=False,  # apply_raw decodes the events it needs whole; a bad field ends in the app's report
        )
        sock.settimeout(0.2)
        header_deadline = time.monotonic() + HEADER_TIMEOUT
        unclipped = 0  # bytes received since the last batch of events
        try:
            while not self._stop.is_set():
                if stream.header is None and time.monotonic() > header_deadline:
                    raise RecordingError(f"not a pytimely event stream (no header within {HEADER_TIMEOUT:g} s)")
                if self._queued > self.capacity or self._queued_bytes > MAX_QUEUED_BYTES:
                    # The screen is far behind: stop reading, so the program's sink drops (and counts) instead.
                    connection.last_active = time.monotonic()  # silent because we do not read: not idle
                    time.sleep(0.01)
                    continue
                try:
                    data = sock.recv(1 << 18)
                except TimeoutError:
                    continue
                if not data:
                    break
                connection.last_active = time.monotonic()
                unclipped += len(data)
                batch = stream.feed(data)
                if connection.process is None and stream.header is not None:
                    process = stream.header.get("process")
                    connection.process = process if process.__class__ is int else None
                    pid = stream.header.get("pid")
                    connection.pid = pid if pid.__class__ is int else None
                if not batch:
                    continue
                if unclipped > LARGE_EVENT * len(batch):  # big events: only a huge time can make one big
                    batch = [clip_deep(raw) for raw in batch]
                else:
                    batch = [raw if raw[0] in HOT else clip_raw(raw) for raw in batch]  # long names cut here
                size, unclipped = unclipped, 0
                if len(connection.workers) < limits.MAX_WORKERS:  # a peer could name every int: at most one batch more
                    connection.workers.update({raw[1] for raw in batch if raw[1].__class__ is int and raw[1] >= 0})
                if len(connection.shut_down) < limits.MAX_WORKERS:
                    connection.shut_down.update(raw[1] for raw in batch if raw[0] == K_SHUTDOWN)
                connection.events += len(batch)
                stamp = connection.sent_at(batch[-1][3], self.clock())
                with self._lock:
                    self.received += len(batch)
                    self._queued += len(batch)
                    self._queued_bytes += size
                    self._queue.append((stamp, connection, batch, size))
        except RecordingTooLarge as error:
            connection.error = f"an event larger than the limit of {error.limit:,} bytes"
        except RecordingError as error:
            connection.error = str(error) if stream.header is None else f"not a pytimely event stream ({error})"
        except OSError as error:
            connection.error = connection.error or f"connection lost ({error.strerror or error})"
        finally:
            connection.open = False
            with self._lock:
                self._sockets.pop(id(connection), None)
            sock.close()

    def take(self, limit: int = 20_000) -> list[tuple[Connection, list[Raw]]]:
        """Take queued batches, whole, until about ``limit`` events (at least one batch if any).

        Each batch comes with the connection it arrived on; events are raw wire
        arrays (``(kind, worker, seq, t, *fields)``), for :func:`viz.tui.ingest.apply_raw`.
        """
        taken: list[tuple[Connection, list[Raw]]] = []
        count = 0
        queue = self._queue
        size = 0
        with self._lock:
            while queue and count < limit:
                _, connection, batch, nbytes = queue.popleft()
                taken.append((connection, batch))
                count += len(batch)
                size += nbytes
            self._queued -= count
            self._queued_bytes -= size
        return taken

    @property
    def lag(self) -> float:
        """How long ago the oldest batch still queued left its program: how far behind the screen is (0 if none)."""
        queue = self._queue
        try:
            return max(self.clock() - queue[0][0], 0.0)
        except IndexError:
            return 0.0

    @property
    def queued(self) -> int:
        """Events received but not yet taken."""
        return self._queued

    @property
    def queued_bytes(self) -> int:
        """Bytes of the events received but not yet taken (as they came over the wire)."""
        return self._queued_bytes

    @property
    def reading_threads(self) -> int:
        """Threads reading connections, alive now."""
        with self._lock:
            return sum(1 for thread in self._threads if thread.is_alive() and thread.name == "tui-read")

    def close(self) -> None:
        """Stop accepting and reading; close every socket (bounded wait)."""
        self._stop.set()
        self._server.close()
        for thread in self._threads:
            thread.join(timeout=1.0)
