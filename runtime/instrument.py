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

Times are encoded as msgpack values by :mod:`runtime.codec` (the recording
dialect): :class:`~scopes.timestamp.Product` as its extension type PRODUCT
holding ``[outer, inner]``, other non-msgpack times as REPR holding their
``repr``.

Files (format version 2) start with the 8 magic bytes
:data:`~runtime.framing.RECORDING_MAGIC`, then frames of
:mod:`runtime.framing` (length, CRC-32, payload): first a header map
``{"format": "pytimely-recording", "version": 2, "process": P, "pid": N}``,
then one frame per batch of events (a msgpack array of event arrays), and
last, when the program closes its log, an end map ``{"end": True}``.  A file
without that end frame is reported as truncated (the program was killed, or
is still writing); a damaged frame is refused naming the file and its byte
offset.  Files of format version 1 (a bare msgpack stream: the header map
``{"format": "pytimely-events", "version": 1, ...}`` then the events, with
REPR as extension type 2) are still read.  A single process writes exactly
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
import contextlib
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

from runtime import codec
from runtime.errors import DecodeError, RecordingCorrupt, RecordingError, RecordingTooLarge
from runtime.framing import HEAD, MAX_FRAME_BYTES, RECORDING_MAGIC, FrameBuffer, FrameDamage, frame, what_file

FORMAT = "pytimely-recording"
"""The header's ``format`` field (format version 2 on)."""
FORMAT_V1 = "pytimely-events"
"""The header's ``format`` field in recordings of format version 1."""
VERSION = 2
"""The recording format version this module writes (version 1 is still read)."""

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

_READ_CHUNK = 1 << 16
_V1_MAX_BUFFER = 1 << 27  # version 1 is one msgpack stream: no value may need more than this at once

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
    "RecordingCorrupt",
    "RecordingError",
    "RecordingStream",
    "RecordingTooLarge",
    "Scheduled",
    "WorkerShutdown",
    "configure_from",
    "decode",
    "logger_for",
    "read_events",
    "read_recording",
    "stop_logging",
]


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


def encode_header(process: int) -> bytes:
    """The start of a recording written by ``process``: the magic bytes and the header frame."""
    header = {"format": FORMAT, "version": VERSION, "process": process, "pid": os.getpid()}
    return RECORDING_MAGIC + frame(codec.pack_recording(header))


def encode_events(events: Sequence[tuple[Any, ...]]) -> bytes:
    """One frame holding raw events (``(kind, worker, seq, t, *fields)`` tuples)."""
    return frame(codec.pack_recording(events))


END_FRAME = frame(codec.pack_recording({"end": True}))
"""The last frame of a recording whose program closed its log."""


# ---------------------------------------------------------------------- decoding


@dataclass(frozen=True)
class Recording:
    """What :func:`read_recording` read: the events, and why the file looks cut short (``None`` if it does not)."""

    events: list[Event]
    truncated: str | None


class RecordingStream:
    """Decodes a recording as its bytes arrive (a file read in chunks, or a viewer's TCP connection).

    :meth:`feed` returns the raw events (``(kind, worker, seq, t, *fields)``
    tuples) now complete; :meth:`finish` says at the end whether the
    recording was cut short.  Reads format version 2 (framed, checksummed)
    and version 1 (a bare msgpack stream).  Anything else, a damaged frame or
    a value past the decoder's limits raises :class:`RecordingError` (a
    :class:`RecordingCorrupt` naming ``where`` and the byte offset); so does
    every call after one that raised.
    """

    def __init__(self, where: str, cache_times: bool = False, max_pending: int | None = None) -> None:
        """Decode a recording called ``where`` in errors; ``cache_times`` decodes each product time once.

        ``max_pending`` bounds the bytes held for one unfinished frame (or, in
        version 1, one unfinished value): past it :meth:`feed` raises
        :class:`RecordingTooLarge` instead of buffering more.
        """
        self.max_pending = max_pending
        self.where = where
        self.header: dict[Any, Any] | None = None
        self.version: int | None = None
        self.ended = False
        self.events = 0
        self._start = b""
        self._fed = 0
        self._frames = FrameBuffer(start=len(RECORDING_MAGIC), max_frame=max_pending or MAX_FRAME_BYTES)
        self._unpacker: Any = None
        self._cache_times = cache_times
        self._dialect = codec.RECORDING.cached() if cache_times else codec.RECORDING
        self._error: RecordingError | None = None

    def feed(self, data: bytes | bytearray | memoryview) -> list[Any]:
        """Add received bytes; return the events they complete, in order."""
        if self._error is not None:
            raise self._error
        self._fed += len(data)
        try:
            if self.version is None:
                data = self._detect(bytes(data))
                if self.version is None:
                    return []
            if self.version == 1:
                return self._feed_v1(data)
            return self._feed_v2(data)
        except RecordingError as error:
            self._error = error
            raise

    def _detect(self, data: bytes) -> bytes:
        """Tell the format version from the first bytes; return the bytes not yet consumed."""
        start = self._start + data
        if len(start) < len(RECORDING_MAGIC) and RECORDING_MAGIC.startswith(start):
            self._start = start
            return b""
        self._start = b""
        if start.startswith(RECORDING_MAGIC):
            self.version = VERSION
            return start[len(RECORDING_MAGIC) :]
        if 0x81 <= start[0] <= 0x8F and (len(start) < 8 or start[1:8] == b"\xa6format"):
            self.version = 1
            dialect = codec.RECORDING_V1.cached() if self._cache_times else codec.RECORDING_V1
            self._unpacker = dialect.unpacker(min(_V1_MAX_BUFFER, self.max_pending or _V1_MAX_BUFFER))
            return start
        kind = what_file(start[:8])
        if kind is not None:
            raise RecordingError(f"{self.where}: this is {kind}, not a pytimely recording")
        raise RecordingError(f"{self.where}: not a pytimely recording (it starts with {start[:8]!r})")

    def _feed_v2(self, data: bytes | bytearray | memoryview) -> list[tuple[Any, ...]]:
        frames = self._frames
        frames.feed(data)
        out: list[tuple[Any, ...]] = []
        while True:
            try:
                taken = frames.take()
            except FrameDamage as damage:
                if self.max_pending is not None and frames.needed() - HEAD.size > self.max_pending:
                    raise self._too_large() from None
                raise self._corrupt(damage.offset, damage.problem) from None
            if taken is None:
                return out
            offset, payload = taken
            if self.ended:
                raise self._corrupt(offset, "follows the recording's end frame")
            try:
                value = codec.decode(payload, self._dialect)
            except DecodeError as error:
                raise self._corrupt(offset, f"cannot be decoded: {error}") from None
            if self.header is None:
                self._check_header(value, offset)
            elif value.__class__ is tuple:
                self._check_events(value, offset)
                self.events += len(value)
                out.extend(value)
            elif value.__class__ is dict and value.get("end") is True:
                self.ended = True
            else:
                raise self._corrupt(offset, f"holds a {type(value).__name__}, not events")

    def _feed_v1(self, data: bytes | bytearray | memoryview) -> list[tuple[Any, ...]]:
        unpacker = self._unpacker
        out: list[Any] = []
        try:
            unpacker.feed(data)
            out.extend(unpacker)
        except msgpack.BufferFull:
            raise self._too_large() from None
        except Exception as error:  # msgpack and the decoder raise many unrelated types on damage
            problem = codec.decode_error(error, codec.RECORDING_V1)
            done = self.events + len(out) - (1 if self.header is None and out else 0)
            raise RecordingError(f"{self.where}: corrupted after {done} events ({problem})") from None
        if self.header is None and out:
            self._check_header(out.pop(0), 0)
        self._check_events(out, unpacker.tell())
        self.events += len(out)
        return out

    def _too_large(self) -> RecordingTooLarge:
        limit = self.max_pending or _V1_MAX_BUFFER
        return RecordingTooLarge(f"{self.where}: an event larger than the limit of {limit:,} bytes", limit)

    def _check_header(self, value: Any, offset: int) -> None:
        if not isinstance(value, dict) or value.get("format") not in (FORMAT, FORMAT_V1):
            raise RecordingError(f"{self.where}: not a pytimely recording (no '{FORMAT}' header)")
        version = value.get("version")
        if not isinstance(version, int) or version > VERSION:
            raise RecordingError(
                f"{self.where}: recording format version {version!r} is newer than this viewer's ({VERSION}); "
                "upgrade pytimely to read it"
            )
        if version != self.version:
            raise self._corrupt(offset, f"declares format version {version!r} in a file of version {self.version}")
        self.header = value

    def _check_events(self, events: Sequence[Any], offset: int) -> None:
        for raw in events:
            if raw.__class__ is not tuple or len(raw) < 4 or raw[0] not in _CLASSES:
                if self.version == 1:
                    raise RecordingError(
                        f"{self.where}: corrupted after {self.events} events: "
                        f"{codec.describe(raw)} is not a pytimely event"
                    )
                raise self._corrupt(offset, f"holds {codec.describe(raw)}, not a pytimely event")

    def _corrupt(self, offset: int, problem: str) -> RecordingCorrupt:
        return RecordingCorrupt(
            f"{self.where} is damaged: the frame at byte offset {offset} {problem}; the events before it "
            f"({self.events}) were read. Record the run again, or look at the undamaged part knowing it is incomplete",
            self.where,
            offset,
        )

    def finish(self) -> str | None:
        """At the end of the input: why the recording looks cut short, or ``None`` if it is whole.

        Raises :class:`RecordingError` if the input held no recording at all.
        """
        if self._error is not None:
            raise self._error
        if self.version is None:
            if not self._start:
                raise RecordingError(f"{self.where}: empty file, not a pytimely recording")
            return f"{self.where} is truncated: it ends {len(self._start)} bytes into its magic bytes"
        if self.header is None:
            if self.version == 1:
                raise RecordingError(f"{self.where}: not a pytimely recording (its header is cut short)")
            return f"{self.where} is truncated: it ends in its header, at byte offset {self._frames.start}"
        if self.version == 1:
            if self._unpacker.tell() < self._fed:
                return f"{self.where} is truncated: it ends in the middle of an event, after {self.events} events"
            return None
        if len(self._frames):
            return (
                f"{self.where} is truncated: it ends {len(self._frames)} bytes into the frame at byte offset "
                f"{self._frames.start}, after {self.events} events"
            )
        if not self.ended:
            return (
                f"{self.where} is truncated: it has no end frame after its {self.events} events (the program "
                "was killed, or had not closed its log)"
            )
        return None


def iter_stream(stream: BinaryIO, where: str) -> Iterator[Event]:
    """Decode events from a binary stream holding a recording; raise :class:`RecordingError`.

    A recording cut short yields the events before the cut (see :func:`read_recording` to learn that it was).
    """
    decoder = RecordingStream(where)
    while True:
        data = stream.read(_READ_CHUNK)
        if not data:
            break
        for raw in decoder.feed(data):
            yield _decode_checked(raw, decoder)
    decoder.finish()


def _decode_checked(raw: tuple[Any, ...], decoder: RecordingStream) -> Event:
    try:
        return decode(raw)
    except RecordingError as error:
        raise RecordingError(f"{decoder.where}: corrupted after {decoder.events} events: {error}") from None


def read_recording(path: str | os.PathLike[str]) -> Recording:
    """Every event of a recording file, in file order, and whether (and why) it was cut short.

    Raises :class:`RecordingError` with one line saying what is wrong for a
    missing file, a directory, another kind of file, a newer version, or
    damage (naming the byte offset in a file of format version 2).
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
    decoder = RecordingStream(where)
    events: list[Event] = []
    with handle:
        while True:
            data = handle.read(_READ_CHUNK)
            if not data:
                break
            events.extend(_decode_checked(raw, decoder) for raw in decoder.feed(data))
    return Recording(events, decoder.finish())


def read_events(path: str | os.PathLike[str]) -> list[Event]:
    """Every event of a recording file, in file order.

    A file cut short (a program killed while writing) yields the complete
    events before the cut; :func:`read_recording` also says whether it was.
    Anything else that is wrong raises :class:`RecordingError` with one line saying what.
    """
    return read_recording(path).events


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
                self.connected = True
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
        """Send what is buffered if a viewer is connected (bounded wait), then disconnect."""
        self._closing.set()
        with self._lock:
            self._lock.notify()
        self._thread.join(timeout=5.0)


# ---------------------------------------------------------------------- the process's pipeline


class EventShipper:
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
            encoded = encode_events(batch) if any(s.needs_bytes for s in self.sinks) else b""
            for sink in self.sinks:
                sink.write(batch, encoded)

    def attach(self, sink: Sink) -> None:
        """Ship events to ``sink`` too, from the next batch on."""
        with self._lock:
            self.sinks.append(sink)

    def detach(self, sink: Sink) -> bool:
        """Ship what is logged so far to ``sink``, then stop; return whether other sinks remain."""
        self.flush()
        with self._lock:
            if sink in self.sinks:
                self.sinks.remove(sink)
            return bool(self.sinks)

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


_active: EventShipper | None = None
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


def _install(pipeline: EventShipper | None) -> EventShipper | None:
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


def add_sink(sink: Sink) -> EventShipper:
    """Send events to ``sink`` too: through the active pipeline, or a new one installed for it; returns it."""
    global _active
    with _active_lock:
        if _active is None:
            _active = EventShipper([sink])
        else:
            _active.attach(sink)
        return _active


def remove_sink(pipeline: EventShipper, sink: Sink) -> None:
    """Stop sending events to ``sink``; a pipeline left without sinks is stopped and uninstalled."""
    global _active
    if pipeline.detach(sink):
        return
    with _active_lock:
        if _active is pipeline:
            _active = None
    pipeline.close()


def log_path(path: str, process: int, processes: int) -> Path:
    """The file process ``process`` of ``processes`` writes for ``--log path``."""
    target = Path(path)
    if processes <= 1:
        return target
    return target.with_name(f"{target.stem}.{process}{target.suffix}")


def configure_from(spec: str | None, process: int = 0, processes: int = 1) -> EventShipper | None:
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
    pipeline = EventShipper([sink])
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
        self._pipeline: EventShipper | None = None
        self._previous: EventShipper | None = None

    def __enter__(self) -> Recorder:
        self._pipeline = EventShipper([self._sink])
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
            handle.write(encode_header(0))
            handle.write(encode_events(self._sink.raw))
            handle.write(END_FRAME)
