"""Instrumentation: the event schema, per-worker loggers, batching, and sinks.

Logging is off by default.  Every hook site in ``scopes`` and ``runtime`` is
guarded by ``if observer is not None:``, so a program that does not log pays
one attribute test per hook, nothing more.  Turn it on with
``configure_from("FILE")``, ``configure_from("tcp://HOST:PORT")`` (both what
``--log`` / ``PYTIMELY_LOG`` pass), or in a test or notebook with a
:class:`Recorder` (``with Recorder() as recording: execute(...)``).

Event schema
============

On the wire every event is one msgpack array ``[kind, worker, seq, t, *fields]``:
``kind`` is one of the ``K_*`` integers below, ``worker`` the worker's index,
``seq`` a per-worker sequence number (1, 2, ...; gaps never occur in a sink that
has dropped nothing), ``t`` a ``time.monotonic()`` reading in seconds (one
clock for every process on a machine).  Decoded, each kind is the dataclass
named after it, with the fields that follow ``t`` in the order listed:

``K_OPERATOR`` :class:`OperatorCreated`
    ``address`` (path of child indices in the scope tree, the dataflow's index
    first), ``name``, ``inputs``, ``outputs`` (port counts), ``reach``
    (``reach[i]``: the outputs input ``i`` reaches inside the operator),
    ``scope_timestamp`` (the timestamp type's name when the operator is a
    scope, else ``None``), and optionally ``site``: where the user's code
    built the operator, ``file.py:LINE`` (absent when unknown).  A dataflow is
    the scope at address ``(index,)``.
``K_CHANNEL`` :class:`ChannelCreated`
    ``scope`` (address), ``source`` and ``target`` as ``(node, port)`` pairs
    (node 0 is the scope's boundary: its sources are the scope's inputs, its
    targets the scope's outputs), ``contract`` (``Pipeline``, ``Exchange``,
    ``Broadcast``).
``K_LOCATIONS`` :class:`LocationsDefined`
    ``scope``, ``table``: ``(node, port, is_source)`` for each dense location
    index used by the pointstamp and frontier events of that scope.
``K_SCHEDULE`` :class:`Scheduled`
    ``address``, ``start`` (``perf_counter``), ``duration`` (seconds).
``K_MESSAGES`` :class:`Messages`
    ``address``, ``consumed`` and ``produced``: per input (output) port, the
    ``(time, records)`` received (sent) during one scheduling.
``K_POINTSTAMPS`` :class:`PointstampsChanged`
    ``scope``, ``changes``: ``(location, time, diff)`` folded into the scope's
    tracker on this worker (capabilities at sources, messages at targets;
    every worker's tracker counts every worker's pointstamps, so these are
    what this worker *knows*, global counts).
``K_LOCAL_POINTSTAMPS`` :class:`LocalPointstampsChanged`
    ``scope``, ``changes``: the ``(location, time, diff)`` changes this worker
    *originated* (its own progress batch, as it broadcasts it, and its own
    share of the initial capabilities).  Every change is originated by exactly
    one worker, so summing these over the workers gives the global counts, and
    one worker's sum gives the capabilities that worker holds.  Changes at a
    nested scope's boundary locations (``node == 0``) stand for messages the
    worker consumed at the scope's input (``Source(0, i)``, diff < 0) or
    produced at its output (``Target(0, o)``); the parent counts them at the
    scope's input and at the targets of the scope's output.  Only logged
    when there are several workers: alone, a worker's tracker counts exactly
    the changes it originated, and ``K_POINTSTAMPS`` says it all.
``K_FRONTIERS`` :class:`FrontiersChanged`
    ``scope``, ``changes``: ``(location, time, diff)`` changes to the frontier
    the tracker implies at each location (+1: the time joined the frontier).
``K_INPUT`` :class:`InputChanged`
    ``address`` (of the input operator), ``name`` (as the user named it),
    ``action`` (``created``, ``advanced``, ``closed``), ``time`` (the handle's
    time after the action), and optionally ``site`` (``created`` only: where
    the user's code created the handle, ``file.py:LINE``).
``K_DATAFLOW_DONE`` :class:`DataflowCompleted`
    ``index``, ``name``.
``K_SHUTDOWN`` :class:`WorkerShutdown`
    no fields: the worker stopped.
``K_DROPPED`` :class:`EventsDropped`
    ``count``: events a sink had to drop (worker ``-1``); sent when it can.
``K_MARK`` :class:`Mark`
    ``label``: a note from the program (``logger.mark("...")``).

Times are encoded as msgpack values; :class:`~scopes.timestamp.Product` as
extension type 1 holding ``[outer, inner]``; other non-msgpack times as
extension type 2 holding their ``repr``.

Files start with a header map ``{"format": "pytimely-events", "version": 1,
"process": P, ...}`` followed by the events.  A single process writes exactly
the file named; process ``P`` of a multi-process cluster writes
``STEM.P.SUFFIX`` (``run.msgpack`` -> ``run.0.msgpack``, ``run.1.msgpack``);
``python -m viz`` merges several files.  A TCP sink sends the same bytes.

Batching
========

Each worker's :class:`Instrument` appends plain tuples to its own deque (an
atomic operation, no lock).  One background thread per process drains the
deques every few milliseconds, encodes, and hands the batch to the sinks.  A
TCP sink keeps a bounded buffer of encoded chunks and a sender thread: chunks
wait there for the viewer's first connection (so a viewer started after the
program sees everything from the start, up to the bound); when the buffer is
full, because the viewer is slow, late or gone, chunks are dropped and
counted, never waited for.
"""

from __future__ import annotations

import atexit
import os
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import msgpack  # type: ignore[import-untyped]

from runtime.errors import TimelyRuntimeError
from scopes.timestamp import Product

FORMAT = "pytimely-events"
VERSION = 1

K_OPERATOR = 1
K_CHANNEL = 2
K_LOCATIONS = 3
K_SCHEDULE = 4
K_MESSAGES = 5
K_POINTSTAMPS = 6
K_FRONTIERS = 7
K_INPUT = 8
K_DATAFLOW_DONE = 9
K_SHUTDOWN = 10
K_DROPPED = 11
K_MARK = 12
K_LOCAL_POINTSTAMPS = 13

_EXT_PRODUCT = 1
_EXT_REPR = 2

__all__ = [
    "ChannelCreated",
    "DataflowCompleted",
    "Event",
    "EventsDropped",
    "FrontiersChanged",
    "InputChanged",
    "Instrument",
    "LocalPointstampsChanged",
    "LocationsDefined",
    "Mark",
    "Messages",
    "OperatorCreated",
    "PointstampsChanged",
    "Recorder",
    "RecordingError",
    "Scheduled",
    "WorkerShutdown",
    "configure_from",
    "decode",
    "logger_for",
    "read_events",
    "stop_logging",
]


class RecordingError(TimelyRuntimeError):
    """A recording cannot be read: missing, not a recording, a newer version, or corrupted."""


# ---------------------------------------------------------------------- decoded events


@dataclass(frozen=True, slots=True)
class Event:
    """Fields every event carries: the worker, its sequence number, and a monotonic time."""

    worker: int
    seq: int
    t: float


@dataclass(frozen=True, slots=True)
class OperatorCreated(Event):
    """An operator or scope was built (see the module's schema)."""

    address: tuple[int, ...]
    name: str
    inputs: int
    outputs: int
    reach: tuple[tuple[int, ...], ...]
    scope_timestamp: str | None
    site: str | None = None


@dataclass(frozen=True, slots=True)
class ChannelCreated(Event):
    """An edge inside a scope, with its channel contract."""

    scope: tuple[int, ...]
    source: tuple[int, int]
    target: tuple[int, int]
    contract: str
    copies: int = 1


@dataclass(frozen=True, slots=True)
class LocationsDefined(Event):
    """The dense location numbering of a scope's tracker."""

    scope: tuple[int, ...]
    table: tuple[tuple[int, int, bool], ...]


@dataclass(frozen=True, slots=True)
class Scheduled(Event):
    """An operator ran for ``duration`` seconds."""

    address: tuple[int, ...]
    start: float
    duration: float


@dataclass(frozen=True, slots=True)
class Messages(Event):
    """Records received and sent by an operator in one scheduling, per port and time."""

    address: tuple[int, ...]
    consumed: tuple[tuple[tuple[Any, int], ...], ...]
    produced: tuple[tuple[tuple[Any, int], ...], ...]


@dataclass(frozen=True, slots=True)
class PointstampsChanged(Event):
    """Pointstamp count changes folded into a scope's tracker."""

    scope: tuple[int, ...]
    changes: tuple[tuple[int, Any, int], ...]


@dataclass(frozen=True, slots=True)
class LocalPointstampsChanged(Event):
    """Pointstamp count changes this worker originated in a scope (its own progress batch)."""

    scope: tuple[int, ...]
    changes: tuple[tuple[int, Any, int], ...]


@dataclass(frozen=True, slots=True)
class FrontiersChanged(Event):
    """Frontier changes computed by a scope's tracker."""

    scope: tuple[int, ...]
    changes: tuple[tuple[int, Any, int], ...]


@dataclass(frozen=True, slots=True)
class InputChanged(Event):
    """An input handle was created, advanced or closed."""

    address: tuple[int, ...]
    name: str
    action: str
    time: Any
    site: str | None = None


@dataclass(frozen=True, slots=True)
class DataflowCompleted(Event):
    """A dataflow finished on this worker."""

    index: int
    name: str


@dataclass(frozen=True, slots=True)
class WorkerShutdown(Event):
    """The worker stopped."""


@dataclass(frozen=True, slots=True)
class EventsDropped(Event):
    """A sink dropped ``count`` events because its consumer could not keep up."""

    count: int


@dataclass(frozen=True, slots=True)
class Mark(Event):
    """A label the program attached to this moment."""

    label: str


_CLASSES: dict[int, type[Event]] = {
    K_OPERATOR: OperatorCreated,
    K_CHANNEL: ChannelCreated,
    K_LOCATIONS: LocationsDefined,
    K_SCHEDULE: Scheduled,
    K_MESSAGES: Messages,
    K_POINTSTAMPS: PointstampsChanged,
    K_FRONTIERS: FrontiersChanged,
    K_INPUT: InputChanged,
    K_DATAFLOW_DONE: DataflowCompleted,
    K_SHUTDOWN: WorkerShutdown,
    K_DROPPED: EventsDropped,
    K_MARK: Mark,
    K_LOCAL_POINTSTAMPS: LocalPointstampsChanged,
}


def decode(raw: Sequence[Any]) -> Event:
    """Turn one wire array ``[kind, worker, seq, t, *fields]`` into its event dataclass."""
    try:
        cls = _CLASSES[raw[0]]
        return cls(*raw[1:])
    except (KeyError, TypeError, IndexError) as error:
        raise RecordingError(f"not a pytimely event: {tuple(raw)[:6]!r} ({error})") from None


def _freeze(value: Any) -> Any:
    """Deep-convert lists to tuples (in-memory events look exactly like decoded ones)."""
    if value.__class__ is list or value.__class__ is tuple:
        return tuple(_freeze(item) for item in value)
    return value


# ---------------------------------------------------------------------- encoding


def _default(value: Any) -> Any:
    if isinstance(value, Product):
        return msgpack.ExtType(_EXT_PRODUCT, _pack([value[0], value[1]]))
    if isinstance(value, tuple):
        return list(value)
    return msgpack.ExtType(_EXT_REPR, repr(value).encode())


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, default=_default, strict_types=True, use_bin_type=True)


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _EXT_PRODUCT:
        outer, inner = msgpack.unpackb(data, ext_hook=_ext_hook, use_list=False, raw=False)
        return Product(outer, inner)
    if code == _EXT_REPR:
        return data.decode(errors="replace")
    return msgpack.ExtType(code, data)


def _header(process: int) -> bytes:
    return _pack({"format": FORMAT, "version": VERSION, "process": process, "pid": os.getpid()})


def iter_stream(stream: BinaryIO, where: str) -> Iterator[Event]:
    """Decode events from a binary stream that starts with a header; raise :class:`RecordingError`."""
    unpacker = msgpack.Unpacker(stream, ext_hook=_ext_hook, use_list=False, raw=False, strict_map_key=False)
    try:
        header = next(unpacker)
    except StopIteration:
        raise RecordingError(f"{where}: empty file, not a pytimely recording") from None
    except (ValueError, msgpack.UnpackException) as error:
        raise RecordingError(f"{where}: not a pytimely recording ({error})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise RecordingError(f"{where}: not a pytimely recording (no '{FORMAT}' header)")
    version = header.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise RecordingError(
            f"{where}: recording format version {version!r} is newer than this viewer's ({VERSION}); "
            "upgrade pytimely to read it"
        )
    count = 0
    while True:
        try:
            raw = next(unpacker)
        except StopIteration:
            return
        except (ValueError, msgpack.UnpackException) as error:
            raise RecordingError(f"{where}: corrupted after {count} events ({error})") from None
        if not isinstance(raw, tuple) or not raw:
            raise RecordingError(f"{where}: corrupted after {count} events (found {raw!r:.60})")
        try:
            event = decode(raw)
        except RecordingError as error:
            raise RecordingError(f"{where}: corrupted after {count} events: {error}") from None
        count += 1
        yield event


def read_events(path: str | os.PathLike[str]) -> list[Event]:
    """Every event of a recording file, in file order.

    A file cut short in the middle of its last event (a program killed while
    writing) yields the complete events before the cut.  Anything else that is
    wrong raises :class:`RecordingError` with one line saying what.
    """
    where = str(path)
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        raise RecordingError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise RecordingError(f"{where}: is a directory, not a recording") from None
    except OSError as error:
        raise RecordingError(f"{where}: cannot open ({error.strerror})") from None
    with handle:
        return list(iter_stream(handle, where))


# ---------------------------------------------------------------------- the per-worker logger


class Instrument:
    """One worker's logger: one cheap method per event kind (implements ``scopes.hooks.ProgressObserver``).

    Methods append a tuple to this worker's deque; the process's writer thread
    encodes and ships them.  Nothing here blocks or raises into the dataflow.
    """

    __slots__ = ("worker", "seq", "_events", "_clock")

    def __init__(self, worker: int, events: deque[tuple[Any, ...]]) -> None:
        """A logger for ``worker`` appending to ``events``."""
        self.worker = worker
        self.seq = 0
        self._events = events
        self._clock = time.monotonic

    def _emit(self, kind: int, *fields: Any) -> None:
        self.seq += 1
        self._events.append((kind, self.worker, self.seq, self._clock(), *fields))

    def operator_created(
        self,
        address: tuple[int, ...],
        name: str,
        inputs: int,
        outputs: int,
        reach: Sequence[Sequence[int]],
        scope_timestamp: str | None,
        site: str | None = None,
    ) -> None:
        """Log an operator or scope construction (built at ``site`` in the user's code, when known)."""
        reach_ = tuple(tuple(r) for r in reach)
        if site is None:
            self._emit(K_OPERATOR, tuple(address), name, inputs, outputs, reach_, scope_timestamp)
        else:
            self._emit(K_OPERATOR, tuple(address), name, inputs, outputs, reach_, scope_timestamp, site)

    def channel_created(
        self,
        scope: tuple[int, ...],
        source: tuple[int, int],
        target: tuple[int, int],
        contract: str,
        copies: int = 1,
    ) -> None:
        """Log an edge, its contract and its copies per record."""
        self._emit(K_CHANNEL, tuple(scope), tuple(source), tuple(target), contract, copies)

    def locations(self, scope: tuple[int, ...], table: Sequence[tuple[int, int, bool]]) -> None:
        """Log a scope's dense location numbering."""
        self._emit(K_LOCATIONS, tuple(scope), tuple(tuple(row) for row in table))

    def scheduled(self, address: tuple[int, ...], start: float, duration: float) -> None:
        """Log one scheduling of an operator."""
        self._emit(K_SCHEDULE, address, start, duration)

    def messages(
        self,
        address: tuple[int, ...],
        consumed: Sequence[Iterable[tuple[Any, int]]],
        produced: Sequence[Iterable[tuple[Any, int]]],
    ) -> None:
        """Log records received and sent per port and time in one scheduling."""
        self._emit(
            K_MESSAGES,
            address,
            tuple(tuple(port) for port in consumed),
            tuple(tuple(port) for port in produced),
        )

    def pointstamps(self, scope: tuple[int, ...], changes: Iterable[tuple[int, Any, int]]) -> None:
        """Log pointstamp changes applied to a scope's tracker."""
        batch = tuple(changes)
        if batch:
            self._emit(K_POINTSTAMPS, scope, batch)

    def local_pointstamps(self, scope: tuple[int, ...], changes: Iterable[tuple[int, Any, int]]) -> None:
        """Log the pointstamp changes this worker originated in a scope (its own batch)."""
        batch = tuple(changes)
        if batch:
            self._emit(K_LOCAL_POINTSTAMPS, scope, batch)

    def frontiers(self, scope: tuple[int, ...], changes: Iterable[tuple[int, Any, int]]) -> None:
        """Log frontier changes computed by a scope's tracker."""
        batch = tuple(changes)
        if batch:
            self._emit(K_FRONTIERS, scope, batch)

    def input_event(
        self, address: tuple[int, ...], name: str, action: str, time: Any, site: str | None = None
    ) -> None:
        """Log an input handle being created (at ``site``), advanced or closed."""
        if site is None:
            self._emit(K_INPUT, tuple(address), name, action, time)
        else:
            self._emit(K_INPUT, tuple(address), name, action, time, site)

    def dataflow_completed(self, index: int, name: str) -> None:
        """Log a dataflow finishing on this worker."""
        self._emit(K_DATAFLOW_DONE, index, name)

    def shutdown(self) -> None:
        """Log the worker stopping."""
        self._emit(K_SHUTDOWN)

    def mark(self, label: str) -> None:
        """Attach ``label`` to this moment of the recording."""
        self._emit(K_MARK, label)


# ---------------------------------------------------------------------- sinks


class Sink(ABC):
    """Where encoded events go.  ``write`` runs on the writer thread."""

    dropped = 0
    needs_bytes = True
    """Whether :meth:`write` uses the encoded bytes (the writer skips encoding otherwise)."""

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
    """Writes a msgpack recording to a file."""

    def __init__(self, path: str | os.PathLike[str], process: int = 0) -> None:
        """Create (truncate) ``path`` and write the header."""
        self.path = Path(path)
        self._file = open(self.path, "wb")  # noqa: SIM115 - closed in close()
        self._file.write(_header(process))
        self._file.flush()

    def write(self, events: list[tuple[Any, ...]], encoded: bytes) -> None:
        """Append the encoded batch."""
        self._file.write(encoded)
        self._file.flush()

    def close(self) -> None:
        """Close the file."""
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
                    sock.sendall(_header(self._process))
                except OSError:
                    sock.close()
                    sock = None
                    continue
                self.connected = True
            item = self._next_chunk()
            if item is None:
                break
            chunk, count, lost = item
            try:
                if lost:
                    sock.sendall(_pack([K_DROPPED, -1, 0, time.monotonic(), lost]))
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
            sock.close()
        self.connected = False
        with self._lock:  # never sent: no viewer came
            self.dropped += self._buffered
            self._chunks.clear()
            self._buffered = 0

    def close(self) -> None:
        """Send what is buffered if a viewer is connected (bounded wait), then disconnect."""
        self._closing.set()
        with self._lock:
            self._lock.notify()
        self._thread.join(timeout=5.0)


# ---------------------------------------------------------------------- the process's pipeline


class Pipeline:
    """Collects every worker's events in this process and ships them to the sinks off the hot path."""

    def __init__(self, sinks: Sequence[Sink], interval: float = 0.02) -> None:
        """Ship to ``sinks`` every ``interval`` seconds from a background thread."""
        self.sinks = list(sinks)
        self._deques: list[deque[tuple[Any, ...]]] = []
        self._lock = threading.Lock()
        self._interval = interval
        self._stop = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="timely-log-writer", daemon=True)
        self._thread.start()

    def logger(self, worker: int) -> Instrument:
        """A new logger for ``worker`` whose events this pipeline ships."""
        events: deque[tuple[Any, ...]] = deque()
        with self._lock:
            self._deques.append(events)
        return Instrument(worker, events)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.flush()

    def flush(self) -> None:
        """Encode and write every event logged so far (safe from any thread)."""
        with self._lock:
            batch: list[tuple[Any, ...]] = []
            for events in self._deques:
                pop = events.popleft
                for _ in range(len(events)):
                    batch.append(pop())
            if not batch:
                return
            encoded = b"".join(_pack(event) for event in batch) if any(s.needs_bytes for s in self.sinks) else b""
            for sink in self.sinks:
                sink.write(batch, encoded)

    @property
    def dropped(self) -> int:
        """Events dropped by the sinks so far."""
        return sum(sink.dropped for sink in self.sinks)

    def close(self) -> None:
        """Stop the writer thread, write what remains and close the sinks.  Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._thread.join(timeout=5.0)
        self.flush()
        for sink in self.sinks:
            sink.close()


_active: Pipeline | None = None
_active_lock = threading.Lock()


def logger_for(worker: int) -> Instrument | None:
    """The logger a new worker should use, or ``None`` when logging is off (the default)."""
    pipeline = _active
    if pipeline is None:
        return None
    return pipeline.logger(worker)


def logging_active() -> bool:
    """Whether a pipeline is installed (logging was turned on in this process and not stopped)."""
    return _active is not None


def _install(pipeline: Pipeline | None) -> Pipeline | None:
    global _active
    with _active_lock:
        previous, _active = _active, pipeline
    return previous


def stop_logging() -> None:
    """Flush and close the active pipeline (registered with ``atexit`` too)."""
    previous = _install(None)
    if previous is not None:
        previous.close()


atexit.register(stop_logging)


def log_path(path: str, process: int, processes: int) -> Path:
    """The file process ``process`` of ``processes`` writes for ``--log path``."""
    target = Path(path)
    if processes <= 1:
        return target
    return target.with_name(f"{target.stem}.{process}{target.suffix}")


def configure_from(spec: str | None, process: int = 0, processes: int = 1) -> Pipeline | None:
    """Turn logging on as ``--log SPEC`` / ``PYTIMELY_LOG=SPEC`` asks, for workers created from now on.

    ``SPEC`` is ``tcp://HOST:PORT`` (stream to a live viewer), a file path
    (one file per process, see :func:`log_path`), or empty / ``off`` / ``None``
    (logging stays off).  Returns the new pipeline, or ``None``.  Raises
    :class:`~runtime.errors.ConfigurationError` for a malformed spec.
    """
    from runtime.errors import ConfigurationError

    if spec is None or spec.strip() in ("", "off", "0", "none"):
        return None
    spec = spec.strip()
    sink: Sink
    if spec.startswith("tcp://"):
        host, _, port_text = spec[len("tcp://") :].rpartition(":")
        if not host or not port_text.isdigit():
            raise ConfigurationError(f"--log {spec!r}: expected tcp://HOST:PORT, for example tcp://127.0.0.1:51317")
        sink = TcpSink(host, int(port_text), process)
    else:
        path = log_path(spec[len("file:") :] if spec.startswith("file:") else spec, process, processes)
        try:
            sink = FileSink(path, process)
        except OSError as error:
            raise ConfigurationError(f"--log {spec!r}: cannot write {path}: {error.strerror}") from None
    pipeline = Pipeline([sink])
    previous = _install(pipeline)
    if previous is not None:
        previous.close()
    return pipeline


class Recorder:
    """Records every event of the workers created while it is active, in memory.

    ``with Recorder() as recording: execute(main, workers=2)`` then
    ``recording.events`` (decoded :class:`Event` objects, in the order logged
    per worker).  Activating a recorder replaces any other active logging
    until it exits.
    """

    def __init__(self) -> None:
        """An inactive recorder."""
        self._sink = MemorySink()
        self._pipeline: Pipeline | None = None
        self._previous: Pipeline | None = None

    def __enter__(self) -> Recorder:
        self._pipeline = Pipeline([self._sink])
        self._previous = _install(self._pipeline)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pipeline is not None:
            _install(self._previous)
            self._pipeline.close()

    @property
    def events(self) -> list[Event]:
        """Every event recorded so far, decoded."""
        if self._pipeline is not None:
            self._pipeline.flush()
        return [decode(_freeze(raw)) for raw in self._sink.raw]

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the recording to ``path`` in the file format."""
        if self._pipeline is not None:
            self._pipeline.flush()
        with open(path, "wb") as handle:
            handle.write(_header(0))
            for raw in self._sink.raw:
                handle.write(_pack(raw))
