"""Reading recordings, from files or as their bytes arrive, in either format version.

Format version 1 has no checksums: a flipped bit in it usually reads as other
data.  It is read only on request (``allow_format_1=True``, or
``--allow-format-1`` on ``python -m viz``), with a warning
(:class:`~runtime.errors.UncheckedRecordingWarning`); otherwise it is refused
with a :class:`~runtime.errors.RecordingError` saying how to ask.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import msgpack  # type: ignore[import-untyped]

from runtime import codec
from runtime.errors import (
    DecodeError,
    RecordingCorrupt,
    RecordingError,
    RecordingTooLarge,
    UncheckedRecordingWarning,
)
from runtime.framing import HEAD, MAX_FRAME_BYTES, RECORDING_MAGIC, FrameBuffer, FrameDamage, what_file
from runtime.instrumentation.encoding import FORMAT, FORMAT_V1, VERSION
from runtime.instrumentation.events import _CLASSES, Event, build, decode, is_moment, problem

_READ_CHUNK = 1 << 16
_V1_MAX_BUFFER = 1 << 27  # version 1 is one msgpack stream: no value may need more than this at once


@dataclass(frozen=True)
class Recording:
    """What :func:`read_recording` read: the events, and why the file looks cut short (``None`` if it does not)."""

    events: list[Event]
    truncated: str | None
    unchecked: str | None = None
    """Set (to the warning given) when the file was of format version 1, read on request without checksums."""


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

    def __init__(
        self,
        where: str,
        cache_times: bool = False,
        max_pending: int | None = None,
        allow_format_1: bool = False,
        check_fields: bool = True,
    ) -> None:
        """Decode a recording called ``where`` in errors; ``cache_times`` decodes each product time once.

        ``max_pending`` bounds the bytes held for one unfinished frame (or, in
        version 1, one unfinished value): past it :meth:`feed` raises
        :class:`RecordingTooLarge` instead of buffering more.  A recording of
        format version 1 (no checksums) is refused unless ``allow_format_1``;
        when read, :attr:`unchecked` says so (the caller warns).

        With ``check_fields`` (the default) every field of every event is
        checked to have its type (:func:`~runtime.instrumentation.events.problem`),
        and an event that does not is refused at its frame's byte offset;
        without it only the kind, worker, sequence number and time are (the
        live viewer, whose ingest decodes what it needs and reports the rest).
        """
        self.check_fields = check_fields
        self.max_pending = max_pending
        self.allow_format_1 = allow_format_1
        self.unchecked: str | None = None
        self.where = where
        self.header: dict[Any, Any] | None = None
        self.version: int | None = None
        self.ended = False
        self.events = 0
        self._start = b""
        self._fed = 0
        self._frames = FrameBuffer(start=len(RECORDING_MAGIC), max_frame=max_pending or MAX_FRAME_BYTES)
        self._unpacker: Any = None
        self._next_value = 0  # format version 1: the byte offset of the first value not yet read whole
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

    def _format_1(self) -> None:
        """Refuse a recording of format version 1, or note that it is read unchecked as asked."""
        if not self.allow_format_1:
            raise RecordingError(
                f"{self.where}: this is a pytimely recording of format version 1, which has no checksums: "
                "damage in it reads as other data, without an error. Read it only if you trust the file: "
                "pass allow_format_1=True (python -m viz dot/tui: --allow-format-1), or record the run again"
            )
        self.unchecked = (
            f"{self.where} is a recording of format version 1, read without checksums as asked: "
            "damage in it would read as other data"
        )

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
        start = self._next_value  # the byte offset of the value being read (tell() is past a value cut short)
        try:
            unpacker.feed(data)
            for item in unpacker:
                if self.header is None:
                    self._check_header(item, start)  # refuses the file (unless asked) before any event is read
                else:
                    self._check_events((item,), start, len(out))
                    out.append(item)
                start = self._next_value = unpacker.tell()
        except msgpack.BufferFull:
            raise self._too_large() from None
        except RecordingError:
            raise
        except Exception as error:  # msgpack and the decoder raise many unrelated types on damage
            problem = codec.decode_error(error, codec.RECORDING_V1)
            raise RecordingError(
                f"{self.where}: corrupted after {self.events + len(out)} events, at byte offset {start} ({problem})"
            ) from None
        self.events += len(out)
        return out

    def _too_large(self) -> RecordingTooLarge:
        limit = self.max_pending or _V1_MAX_BUFFER
        return RecordingTooLarge(f"{self.where}: an event larger than the limit of {limit:,} bytes", limit)

    def _check_header(self, value: Any, offset: int) -> None:
        if not isinstance(value, dict) or value.get("format") not in (FORMAT, FORMAT_V1):
            raise RecordingError(
                f"{self.where}: not a pytimely recording (no '{FORMAT}' header in the frame at byte offset {offset})"
            )
        version = value.get("version")
        if version.__class__ is not int:  # a bool, or a value of any other type a damaged header may hold
            raise self._corrupt(offset, f"(the header) declares the format version {codec.shown(version)}")
        if version > VERSION:
            raise RecordingError(
                f"{self.where}: recording format version {version} is newer than this viewer's ({VERSION}) (its "
                f"header, at byte offset {offset}, says so); upgrade pytimely to read it"
            )
        if version != self.version:
            raise self._corrupt(offset, f"declares format version {version} in a file of version {self.version}")
        if version == 1:
            self._format_1()
        self.header = value

    def _check_events(self, events: Sequence[Any], offset: int, before: int = 0) -> None:
        """Refuse the first of ``events`` (read from byte ``offset``, after ``before`` others of this feed) that is
        not an event."""
        for raw in events:
            if self.check_fields:
                wrong = problem(raw)
            elif (
                raw.__class__ is not tuple
                or len(raw) < 4
                or raw[0].__class__ is not int  # before the lookup: a map there is unhashable
                or raw[0] not in _CLASSES
                or raw[1].__class__ is not int
                or raw[2].__class__ is not int
                or not is_moment(raw[3])
            ):
                wrong = f"{codec.describe(raw)}: its kind, worker, sequence number or time is not one of an event"
            else:
                wrong = None
            if wrong is not None:
                if self.version == 1:
                    raise RecordingError(
                        f"{self.where}: corrupted after {self.events + before} events, at byte offset {offset}: "
                        f"not a pytimely event: {wrong}"
                    )
                raise self._corrupt(offset, f"holds what is not a pytimely event: {wrong}")

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
                raise RecordingError(
                    f"{self.where}: not a pytimely recording (its header, at byte offset 0, is cut short: the file "
                    f"ends at byte offset {self._fed})"
                )
            return f"{self.where} is truncated: it ends in its header, at byte offset {self._frames.start}"
        if self.version == 1:
            if self._next_value < self._fed:
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


def iter_stream(stream: BinaryIO, where: str, allow_format_1: bool = False) -> Iterator[Event]:
    """Decode events from a binary stream holding a recording; raise :class:`RecordingError`.

    A recording cut short yields the events before the cut (see :func:`read_recording` to learn that it was).
    Format version 1 is refused unless ``allow_format_1`` (then read with an :class:`UncheckedRecordingWarning`).
    """
    decoder = RecordingStream(where, allow_format_1=allow_format_1)
    warned = False
    while True:
        data = stream.read(_READ_CHUNK)
        if not data:
            break
        raws = decoder.feed(data)
        if decoder.unchecked is not None and not warned:
            warned = True
            warnings.warn(decoder.unchecked, UncheckedRecordingWarning, stacklevel=2)
        for raw in raws:
            yield _decode_checked(raw, decoder)
    decoder.finish()


def _decode_checked(raw: tuple[Any, ...], decoder: RecordingStream) -> Event:
    if decoder.check_fields:
        return build(raw)  # checked as its frame was read
    try:
        return decode(raw)
    except RecordingError as error:
        raise RecordingError(f"{decoder.where}: corrupted after {decoder.events} events: {error}") from None


def read_recording(path: str | os.PathLike[str], allow_format_1: bool = False) -> Recording:
    """Every event of a recording file, in file order, and whether (and why) it was cut short.

    Raises :class:`RecordingError` with one line saying what is wrong for a
    missing file, a directory, another kind of file, a newer version, or
    damage (naming the byte offset in a file of format version 2).  A file of
    format version 1 (no checksums) is refused unless ``allow_format_1``; then
    it is read with an :class:`UncheckedRecordingWarning`, and the result's
    ``unchecked`` says so.
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
    decoder = RecordingStream(where, allow_format_1=allow_format_1)
    events: list[Event] = []
    with handle:
        while True:
            data = handle.read(_READ_CHUNK)
            if not data:
                break
            events.extend(_decode_checked(raw, decoder) for raw in decoder.feed(data))
    truncated = decoder.finish()
    if decoder.unchecked is not None:
        warnings.warn(decoder.unchecked, UncheckedRecordingWarning, stacklevel=2)
    return Recording(events, truncated, decoder.unchecked)


def read_raw(path: str | os.PathLike[str]) -> list[tuple[Any, ...]]:
    """The raw events (``(kind, worker, seq, t, *fields)``, checked) of a recording file of this version.

    What a :class:`~runtime.instrumentation.sinks.MemorySink` holds; raises :class:`RecordingError` as
    :func:`read_recording` does.  A file cut short gives the events before the cut.
    """
    decoder = RecordingStream(str(path))
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise RecordingError(f"{path}: cannot open ({error.strerror})") from None
    raws = list(decoder.feed(data))
    decoder.finish()
    return raws


def read_events(path: str | os.PathLike[str], allow_format_1: bool = False) -> list[Event]:
    """Every event of a recording file, in file order.

    A file cut short (a program killed while writing) yields the complete
    events before the cut; :func:`read_recording` also says whether it was.
    Anything else that is wrong raises :class:`RecordingError` with one line saying what;
    format version 1 is read only with ``allow_format_1`` (see :func:`read_recording`).
    """
    return read_recording(path, allow_format_1).events
