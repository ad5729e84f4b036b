"""Event logs: captured streams written to and read from files and sockets.

:class:`EventWriter` is an :class:`~scopes.capture.EventPusher` that writes each
event of a captured stream as a record; :class:`EventReader` reads such records
back as an iterable for :func:`~scopes.capture.replay_into`.  The format is
versioned msgpack, documented in ``docs/capture-format.md``:

* a header: the 8 magic bytes :data:`MAGIC`, then one frame holding a msgpack map
  ``{"format": "pytimely-events", "version": 3, "timestamp": <type name>}``;
* then one frame per event, chained (version 3 on): each event frame's checksum
  covers its number and the previous frame's checksum
  (:class:`~runtime.framing.FrameChain`), so a frame dropped, repeated or
  moved is refused at its byte offset like a damaged one.

Columnar batches (numpy arrays, Arrow record batches and tables) are written
as themselves, as msgpack extension types holding the array's memory or Arrow's
IPC stream (:mod:`runtime.communication.arraycodec`), never as rows; they are read back as
the same kind of batch.  Version 2 added them; version 3 chains the frames.
Logs of versions 1 and 2 are still read, each frame checked on its own.

Frames are those of :mod:`runtime.framing` (length, CRC-32, payload), which
recordings share; payloads are decoded by :mod:`runtime.codec`'s bounded
decoder.  A damaged or truncated log raises an :class:`EventLogCorrupt`
naming the log and the byte offset of the damaged frame; nothing at or after
the damage is returned.  So does an event whose times are not of the
timestamp type the header declares; a log whose timestamp type is not a
built-in one is read only when the reader is told that type (its times are
then checked with it).  A recording, or any other file, is refused with
:class:`EventLogFormatError` saying what it is.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator
from typing import IO, Any

from runtime import codec, readiness
from runtime.codec import (
    EXT_ARROW_BATCH,
    EXT_ARROW_TABLE,
    EXT_FROZENSET,
    EXT_NDARRAY,
    EXT_PRODUCT,
    EXT_SET,
    EXT_TUPLE,
)
from runtime.communication.arraycodec import NDARRAY, ColumnarUnavailable, columnar_kind
from runtime.errors import (
    DecodeError,
    EventEncodeError,
    EventLogCorrupt,
    EventLogError,
    EventLogFormatError,
    EventLogTruncated,
    EventLogVersionError,
)
from runtime.framing import (
    CAPTURE_MAGIC,
    HEAD,
    MAX_FRAME_BYTES,
    FrameBuffer,
    FrameChain,
    FrameDamage,
    frame,
    what_file,
)
from scopes.capture import CapturedBatch, CaptureEvent, Progress
from scopes.progress.timestamp import INTEGER, ProductType, TimestampType

MAGIC = CAPTURE_MAGIC
"""The first 8 bytes of every event log (binary, and sensitive to newline mangling)."""

FORMAT_NAME = "pytimely-events"
"""The value of the header's ``format`` field."""

FORMAT_VERSION = 3
"""The format version this module writes."""

READ_VERSIONS = (1, 2, 3)
"""The format versions this module reads (version 1 has no columnar batches; before 3, frames are not chained)."""

CHAINED_VERSION = 3
"""The first format version whose event frames are chained (:class:`~runtime.framing.FrameChain`)."""

EXTENSION_CODES = (EXT_PRODUCT, EXT_TUPLE, EXT_SET, EXT_FROZENSET, EXT_NDARRAY, EXT_ARROW_BATCH, EXT_ARROW_TABLE)
"""The extension types of :mod:`runtime.codec` a log holds (the same codes in every version)."""

EVENT_PROGRESS = 0
"""First element of a Progress record: ``[0, [[time, diff], ...]]``."""
EVENT_MESSAGES = 1
"""First element of a CapturedBatch record: ``[1, time, [record, ...]]`` or ``[1, time, columnar batch]``."""

_READ_CHUNK = 1 << 16


# ---------------------------------------------------------------------- errors


# ---------------------------------------------------------------------- encoding


def encode_event(event: CaptureEvent) -> bytes:
    """The msgpack payload of ``event`` (without framing)."""
    if isinstance(event, Progress):
        return codec.pack_capture([EVENT_PROGRESS, [[time, diff] for time, diff in event.updates]])
    if isinstance(event, CapturedBatch):
        return codec.pack_capture([EVENT_MESSAGES, event.time, event.data])
    raise TypeError(f"{event!r} is not an event (Progress or CapturedBatch)")


def decode_event(payload: bytes) -> CaptureEvent:
    """The event encoded in ``payload``; raises :class:`~runtime.errors.DecodeError` if it is not one."""
    value = codec.decode(payload, codec.CAPTURE)
    if isinstance(value, list) and value:
        kind = value[0]
        if kind.__class__ is not int:  # compared with an int, a numpy array answers an array (ValueError in `if`)
            raise DecodeError(f"payload {codec.describe(value)} has {codec.describe(kind)} as its kind, not 0 or 1")
        if kind == EVENT_PROGRESS and len(value) == 2 and isinstance(value[1], list):
            updates = value[1]
            if all(pair.__class__ is list and len(pair) == 2 for pair in updates):
                return Progress([(pair[0], pair[1]) for pair in updates])
            raise DecodeError("a Progress record holds an update that is not a [time, diff] pair")
        if kind == EVENT_MESSAGES and len(value) == 3:
            data = value[2]
            kind_of_data = columnar_kind(data)
            if kind_of_data == NDARRAY and data.ndim == 0:  # a batch's rows are its first axis: it needs one
                raise DecodeError("a messages record holds a numpy array of no axes (a scalar), not a batch of rows")
            if isinstance(data, list) or kind_of_data is not None:
                return CapturedBatch(value[1], data)
    raise DecodeError(f"payload {codec.describe(value)} is not an event record")


def header_frame(timestamp: TimestampType) -> bytes:
    """The magic bytes and header frame of a log of ``timestamp`` times.

    The header frame's checksum (its bytes 12 to 16) starts the chain of the event frames.
    """
    header = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "timestamp": timestamp.name}
    return MAGIC + frame(codec.pack_capture(header))


def _header_checksum(data: bytes) -> int:
    """The checksum of the header frame in ``data`` (the output of :func:`header_frame`)."""
    _, checksum = HEAD.unpack_from(data, len(MAGIC))
    return int(checksum)


# ---------------------------------------------------------------------- writing


class EventWriter:
    """Writes the events of a captured stream to a file or a socket.

    ``target`` is a path (the file is created or replaced), a binary file object,
    or a connected socket.  Use it as the pusher of
    :func:`~scopes.capture.capture_into`; the capture calls :meth:`finish` when
    the stream is complete, which flushes and (with ``close=True``, the default)
    closes the target, so a reader sees the end of the log.
    """

    def __init__(self, target: Any, timestamp: TimestampType = INTEGER, close: bool = True) -> None:
        """Write a log of ``timestamp`` times to ``target``, starting with the header."""
        self.timestamp = timestamp
        self._close_target = close
        self._socket: socket.socket | None = None
        self._file: IO[bytes] | None = None
        if isinstance(target, (str, os.PathLike)):
            self.name = os.fspath(target)
            try:
                self._file = open(target, "wb")  # noqa: SIM115 - closed by finish()/close()
            except OSError as error:  # a missing folder, a directory, no permission: named, as the reader does
                raise EventLogError(
                    f"event log {self.name} cannot be created: {error.strerror or error}", self.name
                ) from error
            self._close_target = True
        elif isinstance(target, socket.socket):
            self._socket = target
            target.setblocking(True)
            self.name = _describe_socket(target)
        elif callable(getattr(target, "write", None)):
            self._file = target
            self.name = str(getattr(target, "name", repr(target)))
        else:
            raise TypeError(f"EventWriter needs a path, a binary file or a socket, got {target!r}")
        self.closed = False
        self.bytes_written = 0
        header = header_frame(timestamp)
        self._chain = FrameChain(_header_checksum(header))
        self._write(header)

    def _write(self, data: bytes) -> None:
        if self.closed:
            raise EventLogError(f"event log {self.name} is closed; nothing more can be written", self.name)
        try:
            if self._socket is not None:
                self._socket.sendall(data)
            else:
                assert self._file is not None
                self._file.write(data)
        except OSError as error:  # the reader gone, the disk full, ...: one error of this module, naming the log
            raise self._write_failed(error, f"writing at byte offset {self.bytes_written}") from error
        self.bytes_written += len(data)

    def _write_failed(self, error: OSError, what: str = "") -> EventLogError:
        what = what or f"writing its first {self.bytes_written} bytes to the file"  # buffered: where is unknown
        return EventLogError(f"event log {self.name}: {what} failed: {error.strerror or error}", self.name)

    def push(self, event: CaptureEvent) -> None:
        """Write one event as a record; a time not of the log's timestamp type, or a progress update that is not an
        integer count, is refused (``EventEncodeError``)."""
        contains = self.timestamp.contains
        times = [event.time] if isinstance(event, CapturedBatch) else [t for t, _ in getattr(event, "updates", ())]
        for time in times:
            if not contains(time):  # every reader would refuse the log as damaged from this frame on
                raise EventEncodeError(
                    f"event log {self.name} holds {self.timestamp.name} timestamps and cannot hold time {time!r}: "
                    "write the stream's own timestamp type, EventWriter(target, timestamp=scope.timestamp_type)",
                    self.name,
                )
        for time, diff in getattr(event, "updates", ()):
            if diff.__class__ is not int:  # likewise: a change of capabilities is a count
                raise EventEncodeError(
                    f"event log {self.name}: the progress update at time {time!r} changes the capabilities by "
                    f"{diff!r:.40}, which is not an integer count",
                    self.name,
                )
        try:
            payload = encode_event(event)
        except (TypeError, OverflowError, ValueError) as error:
            time = event.time if isinstance(event, CapturedBatch) else [t for t, _ in getattr(event, "updates", [])]
            raise EventEncodeError(
                f"event log {self.name}: cannot write the event at time {time!r}: {error}", self.name
            ) from error
        self._write(self._chain.frame(payload))

    def flush(self) -> None:
        """Push buffered bytes to the file (sockets are not buffered)."""
        if self._file is not None and not self.closed:
            try:
                self._file.flush()
            except OSError as error:
                raise self._write_failed(error) from error

    def finish(self) -> None:
        """The stream is complete: flush, and close the target if this writer owns it."""
        if self._close_target:
            self.close()
        else:
            self.flush()

    def close(self) -> None:
        """Flush and close the target.  Closing twice is harmless."""
        if self.closed:
            return
        try:
            self.flush()
        finally:  # the target is released even when the last bytes could not be written
            self.closed = True
            if self._socket is not None:
                with contextlib.suppress(OSError):  # the peer may already be gone
                    self._socket.shutdown(socket.SHUT_WR)
                self._socket.close()
            elif self._file is not None:
                try:
                    self._file.close()
                except OSError as error:
                    raise self._write_failed(error) from error

    def __enter__(self) -> EventWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EventWriter({self.name!r}, {self.timestamp.name}, {self.bytes_written} bytes)"


def _describe_socket(sock: socket.socket) -> str:
    try:
        peer = sock.getpeername()
    except OSError:
        peer = "an unconnected peer"
    return f"socket to {peer or 'an unnamed peer'}"  # a socketpair's peer has no name


# ---------------------------------------------------------------------- reading


class EventReader:
    """Reads the events of a log from a file or a socket; iterate to get them.

    ``source`` is a path, a binary file object, or a connected socket.  Over a
    socket the reader never blocks: it yields ``None`` while no complete record
    has arrived (:meth:`notify_when_ready` then says when to ask again), and
    ends when the peer closes the connection at a record boundary.  Over a
    file it ends at the end of the file.  With ``timestamp`` given, a log of
    another timestamp type is refused.

    A damaged log raises :class:`EventLogCorrupt` (or :class:`EventLogTruncated`)
    naming the log and the byte offset of the damage; every later call raises it
    again, so nothing after the damage is ever returned.
    """

    def __init__(self, source: Any, timestamp: TimestampType | None = None) -> None:
        """Read the log at ``source``."""
        self.expected_timestamp = timestamp
        self._socket: socket.socket | None = None
        self._file: IO[bytes] | None = None
        self._owns = False
        self.recording_id: str | None = None  # names a log file the same on every worker
        if isinstance(source, (str, os.PathLike)):
            self.name = self.recording_id = os.fspath(source)
            try:
                self._file = open(source, "rb")  # noqa: SIM115 - closed at the end of the log or by close()
            except IsADirectoryError:
                raise EventLogFormatError(
                    f"{self.name} is a directory, not an event log; give the path of a log file", self.name
                ) from None
            except OSError as error:  # missing, unreadable, ...: one error of this module, naming the file
                raise EventLogError(
                    f"event log {self.name} cannot be opened: {error.strerror or error}", self.name
                ) from error
            self._owns = True
        elif isinstance(source, socket.socket):
            self._socket = source
            source.setblocking(False)
            self._owns = True
            try:
                self.name = f"socket from {source.getpeername()}"
            except OSError:
                self.name = "an unconnected socket"
        elif callable(getattr(source, "read", None)):
            self._file = source
            self.name = str(getattr(source, "name", repr(source)))
        else:
            raise TypeError(f"EventReader needs a path, a binary file or a socket, got {source!r}")
        self.header: dict[str, Any] | None = None
        self._magic_ok = False
        self._frames = FrameBuffer(max_frame=codec.PLAIN_MAX_SIZE)  # the header: at most 64 KiB, not 1 GiB
        self._times: TimestampType | None = None
        self._eof = False
        self._ended = False
        self._error: EventLogError | None = None
        self._event_offset: int | None = None

    # -- input ---------------------------------------------------------------

    def _fill(self) -> bool:
        """Read more bytes if there are any now; return whether any arrived."""
        if self._eof:
            return False
        if self._socket is not None:
            try:
                data = self._socket.recv(_READ_CHUNK)
            except (BlockingIOError, InterruptedError):
                return False
            except OSError as error:
                raise EventLogError(
                    f"event log {self.name}: the connection failed at byte offset "
                    f"{self._frames.start + len(self._frames)}: {error}",
                    self.name,
                ) from error
        else:
            assert self._file is not None
            try:
                data = self._file.read(_READ_CHUNK)
            except OSError as error:
                raise EventLogError(
                    f"event log {self.name}: reading failed at byte offset "
                    f"{self._frames.start + len(self._frames)}: {error.strerror or error}",
                    self.name,
                ) from error
        if not data:
            self._eof = True
            return False
        self._frames.feed(data)
        return True

    def _take_frame(self) -> tuple[int, bytes] | None:
        """The next complete frame ``(offset, payload)``, or ``None`` if not all of it is here yet."""
        frames = self._frames
        while len(frames) < frames.needed() and self._fill():
            pass
        while len(frames) < frames.needed() and self._fill():  # the head told how long the payload is
            pass
        try:
            return frames.take()
        except FrameDamage as damage:
            raise self._corrupt(damage.offset, damage.problem) from None

    def _corrupt(self, offset: int, problem: str) -> EventLogCorrupt:
        return EventLogCorrupt(
            f"event log {self.name} is damaged: the frame at byte offset {offset} {problem}; "
            "nothing from that frame on was replayed. Re-capture the stream, or replay the "
            "undamaged prefix knowing that it is incomplete",
            self.name,
            offset,
        )

    def _at_end(self) -> None:
        """At end of input: finish cleanly or report a truncation."""
        if len(self._frames) or self.header is None:
            where = self._frames.start
            what = "its header" if self.header is None else "the record"
            error = EventLogTruncated(
                f"event log {self.name} is truncated: it ends {len(self._frames)} bytes into "
                f"{what} at byte offset {where}; nothing from that offset on was replayed. "
                "The writer probably stopped before finishing the log",
                self.name,
                where,
            )
            raise error
        self._ended = True
        self.close()

    def _read_header(self) -> bool:
        frames = self._frames
        if not self._magic_ok:
            while len(frames) < len(MAGIC) and self._fill():
                pass
            if len(frames) < len(MAGIC):
                if self._eof and len(frames) and what_file(bytes(frames.buffer)) is not None:
                    self._refuse_other_kind(bytes(frames.buffer))
                return False
            prefix = bytes(frames.buffer[: len(MAGIC)])
            if prefix != MAGIC:
                self._refuse_other_kind(prefix)
            frames.skip(len(MAGIC))
            self._magic_ok = True
        taken = self._take_frame()
        if taken is None:
            return False
        offset, payload = taken
        try:
            header = codec.decode(payload, codec.PLAIN)  # a map of plain values, at most 64 KiB
        except DecodeError as error:
            raise self._corrupt(offset, f"(the header) cannot be decoded: {error}") from error
        if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
            raise EventLogFormatError(
                f"{self.name} is not a pytimely event log: its header (the frame at byte offset {offset}) "
                + (
                    f"declares the format {codec.shown(header.get('format'))}"
                    if isinstance(header, dict)
                    else f"is {codec.describe(header)}"
                ),
                self.name,
            )
        version = header.get("version")
        if version.__class__ is not int or version not in READ_VERSIONS:
            raise EventLogVersionError(
                f"event log {self.name}: its header (the frame at byte offset {offset}) declares format version "
                f"{codec.shown(version)}; this pytimely reads versions {', '.join(map(str, READ_VERSIONS))}. "
                "Read it with the pytimely release that wrote it, or re-capture the stream",
                self.name,
                version,
            )
        expected = self.expected_timestamp
        if expected is not None and header.get("timestamp") != expected.name:
            raise EventLogFormatError(
                f"event log {self.name}: its header (the frame at byte offset {offset}) says it holds "
                f"{codec.shown(header.get('timestamp'))} timestamps, but {expected.name!r} timestamps were expected; "
                "replay it into a scope of its own timestamp type",
                self.name,
            )
        times = expected if expected is not None else timestamp_type_named(header.get("timestamp"))
        if times is None:
            raise self._unknown_timestamp(header.get("timestamp"), offset)
        self.header = header
        self._times = times
        self._frames.max_frame = MAX_FRAME_BYTES
        if version >= CHAINED_VERSION:
            self._frames.chain = FrameChain(self._frames.last_checksum)
        return True

    def _unknown_timestamp(self, name: Any, offset: int) -> EventLogFormatError:
        """The error for a header whose timestamp type this reader cannot check times against."""
        shown = codec.shown(name) if isinstance(name, str) else codec.describe(name)
        return EventLogFormatError(
            f"event log {self.name}: its header (the frame at byte offset {offset}) declares the timestamp "
            f"type {shown}, which is not a built-in one, so its times cannot be checked; give the reader "
            "that timestamp type (EventReader(path, timestamp=...), LogFile(path, timestamp)) to read it",
            self.name,
        )

    def _refuse_other_kind(self, prefix: bytes) -> None:
        kind = what_file(prefix)
        if kind is not None:
            raise EventLogFormatError(
                f"{self.name} is {kind}, not a pytimely event log (a capture log, written by EventWriter)",
                self.name,
            )
        raise EventLogFormatError(
            f"{self.name} is not a pytimely event log: it starts with {prefix!r}, not the magic bytes {MAGIC!r}",
            self.name,
        )

    def _check_times(self, event: CaptureEvent, offset: int) -> None:
        """Refuse an event whose times are not of the log's declared timestamp type."""
        times = self._times
        if times is None:
            return
        if isinstance(event, CapturedBatch):
            if not times.contains(event.time):
                raise self._wrong_time(event.time, offset)
        else:
            for time, diff in event.updates:
                if not times.contains(time) or diff.__class__ is not int:
                    raise self._wrong_time(time if not times.contains(time) else diff, offset)

    def _wrong_time(self, value: Any, offset: int) -> EventLogCorrupt:
        assert self._times is not None
        return self._corrupt(
            offset,
            f"holds {codec.describe(value)} where the log declares {self._times.name} timestamps (and integer counts)",
        )

    # -- iteration -----------------------------------------------------------

    def __iter__(self) -> Iterator[CaptureEvent | None]:
        return self

    def __next__(self) -> CaptureEvent | None:
        if self._error is not None:
            raise self._error
        if self._ended:
            raise StopIteration
        try:
            if self.header is None and not self._read_header():
                if self._eof:
                    self._at_end()
                return None
            taken = self._take_frame()
            if taken is None:
                if self._eof:
                    self._at_end()
                    raise StopIteration
                return None
            offset, payload = taken
            try:
                event = decode_event(payload)
            except ColumnarUnavailable as error:
                raise EventLogError(
                    f"event log {self.name}: the event at byte offset {offset} cannot be read here: {error}",
                    self.name,
                ) from error
            except DecodeError as error:
                raise self._corrupt(offset, f"cannot be decoded as an event: {error}") from error
            self._check_times(event, offset)
            self._event_offset = offset
            return event
        except EventLogError as error:
            self._error = error
            self.close()
            raise

    def notify_when_ready(self, callback: Callable[[], None]) -> bool:
        """After ``None`` was yielded: ask for ``callback()``, from another thread, once more bytes can be read.

        Over a socket it comes when bytes arrive or the peer closes or fails
        the connection (at once if that has already happened), so that a replay
        waiting on it lets its worker park; returns whether it will come (not
        over a file, which never makes the reader wait).
        """
        if self._socket is None or self._ended or self._error is not None or self._eof:
            return False
        readiness.when_readable(self._socket, callback)
        return True

    @property
    def timestamp_name(self) -> str | None:
        """The name of the log's timestamp type, once the header has been read."""
        return None if self.header is None else str(self.header.get("timestamp"))

    @property
    def replay_position(self) -> str | None:
        """Where the event last returned lies in the log, or that the log has ended, for a replay's errors.

        A log whose checksums are right can still describe an impossible stream
        (a CRC-32 is no signature); :func:`~scopes.capture.replay_into` names
        this position when it refuses one.
        """
        if self._ended:
            return f"at the end of the log, byte offset {self._frames.start}"
        if self._event_offset is None:
            return None
        return f"the event at byte offset {self._event_offset} of the log"

    @property
    def offset(self) -> int:
        """The byte offset in the log of the next unread frame."""
        return self._frames.start

    def close(self) -> None:
        """Release the file or socket (if this reader opened or was given ownership of it)."""
        if self._socket is not None:
            readiness.cancel(self._socket)  # before it closes: its number may be another socket's next
        if self._owns:
            if self._socket is not None:
                self._socket.close()
            elif self._file is not None:
                self._file.close()
            self._owns = False

    def __repr__(self) -> str:
        return f"EventReader({self.name!r}, offset={self._frames.start})"


MAX_TIMESTAMP_DEPTH = codec.MAX_DEPTH
"""How deep ``Product`` types may nest in a timestamp type's name that a reader recognises."""


def timestamp_type_named(name: object, depth: int = 0) -> TimestampType | None:
    """The built-in timestamp type called ``name`` (``integer``, ``Product[integer, integer]``, ...), else ``None``.

    A log of a user-defined timestamp type has a name this does not know: a
    reader refuses it unless it is given that type.  So does a name nesting
    ``Product`` more than :data:`MAX_TIMESTAMP_DEPTH` deep (no time could be
    decoded that deep anyway).
    """
    if name == INTEGER.name:
        return INTEGER
    if depth >= MAX_TIMESTAMP_DEPTH:
        return None
    if not isinstance(name, str) or not name.startswith("Product[") or not name.endswith("]"):
        return None
    inside = name[len("Product[") : -1]
    brackets = 0
    for index, char in enumerate(inside):  # split at the comma between the two halves, not inside a half
        if char == "[":
            brackets += 1
        elif char == "]":
            brackets -= 1
        elif char == "," and brackets == 0:
            outer = timestamp_type_named(inside[:index].strip(), depth + 1)
            inner = timestamp_type_named(inside[index + 1 :].strip(), depth + 1)
            if outer is None or inner is None:
                return None
            return ProductType(outer, inner)
    return None


class LogFile:
    """A capture log file to replay, opened only by the worker that replays it.

    ``scope.replay([LogFile(path, INTEGER) for path in paths])`` gives every worker
    the same list; each worker opens (as an :class:`EventReader`) only the logs it
    replays, and the paths are checked to be the same on every worker.
    """

    def __init__(self, path: str | os.PathLike[str], timestamp: TimestampType | None = None) -> None:
        """The log at ``path``; with ``timestamp``, a log of another timestamp type is refused."""
        self.path = os.fspath(path)
        self.timestamp = timestamp

    @property
    def recording_id(self) -> str:
        """The path, which names this recording the same on every worker."""
        return self.path

    def __call__(self) -> EventReader:
        """Open the log."""
        return EventReader(self.path, self.timestamp)

    def __repr__(self) -> str:
        return f"LogFile({self.path!r})"


def write_events(path: Any, events: list[CaptureEvent], timestamp: TimestampType = INTEGER) -> None:
    """Write ``events`` as a complete log at ``path``."""
    with EventWriter(path, timestamp) as writer:
        for event in events:
            writer.push(event)


def event_log_bytes(payloads: list[bytes], timestamp: TimestampType = INTEGER) -> bytes:
    """A whole log (magic, header, chained frames) holding the event ``payloads`` as they are.

    For tools and tests that make payloads themselves (:func:`encode_event`, or
    hand-made ones): each is framed as the writer would frame it, unchecked.
    """
    header = header_frame(timestamp)
    chain = FrameChain(_header_checksum(header))
    return header + b"".join(chain.frame(payload) for payload in payloads)


def read_event_log(path: Any, timestamp: TimestampType | None = None) -> list[CaptureEvent]:
    """Every event of the log at ``path`` (raising on damage)."""
    return [event for event in EventReader(path, timestamp) if event is not None]


__all__ = [
    "LogFile",
    "EventEncodeError",
    "EventLogCorrupt",
    "EventLogError",
    "EventLogFormatError",
    "EventLogTruncated",
    "EventLogVersionError",
    "EventReader",
    "EventWriter",
    "FORMAT_VERSION",
    "MAGIC",
    "MAX_FRAME_BYTES",
    "READ_VERSIONS",
    "decode_event",
    "encode_event",
    "event_log_bytes",
    "read_event_log",
    "write_events",
]
