"""Fuzzing every decoder of outside bytes: the wire, capture logs, recordings, handshakes (issue 16).

Whatever the bytes (random, nested deep through extension types, declaring
huge lengths, truncated, one byte changed), a decoder either returns what was
written or raises the project's error: never a crash, never a raw
``TypeError``/``ValueError``/msgpack exception, never different data read as
if it were right.
"""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import msgpack  # type: ignore[import-untyped]
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import codec
from runtime.communication.wire import (
    BATCH_ARROW,
    BATCH_COLUMNS,
    BATCH_FAST,
    BATCH_GENERAL,
    BATCH_NDARRAY,
    EncodingError,
    FrameReader,
    WireError,
    decode_batch,
    decode_plain_value,
    decode_value,
    encode_value,
)
from runtime.communication.wire import frame as wire_frame
from runtime.errors import DecodeError, TimelyRuntimeError
from runtime.eventlog import (
    MAGIC,
    EventEncodeError,
    EventLogError,
    EventReader,
    EventWriter,
    event_log_bytes,
    header_frame,
)
from runtime.framing import RECORDING_MAGIC, frame
from runtime.instrument import END_FRAME, RecordingError, RecordingStream, encode_events, encode_header
from scopes.capture import Batch, Progress
from scopes.timestamp import INTEGER, Product

ROOT = Path(__file__).resolve().parent.parent
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def nested_extensions(code: int, depth: int) -> bytes:
    """``depth`` extension values of type ``code``, each the whole payload of the one around it."""
    value = msgpack.packb(0)
    for _ in range(depth):
        value = msgpack.packb(msgpack.ExtType(code, value))
    return value


def every_decoder(data: bytes) -> list[tuple[str, Any]]:
    """Feed ``data`` to every decoder as the value it reads; ``(name, result or exception)`` for each."""
    attempts: list[tuple[str, Any]] = []

    def attempt(name: str, read: Any) -> None:
        try:
            attempts.append((name, read()))
        except TimelyRuntimeError as error:  # the project's errors (DecodeError, WireError, EventLogError, ...)
            attempts.append((name, error))

    for dialect in (codec.PLAIN, codec.WIRE, codec.WIRE_RECORDS, codec.CAPTURE, codec.RECORDING, codec.RECORDING_V1):
        attempt(f"decode {dialect.name}", lambda dialect=dialect: codec.decode(data, dialect))
    attempt("wire value", lambda: decode_value(data))
    attempt("handshake value", lambda: decode_plain_value(data))
    for path in (BATCH_FAST, BATCH_GENERAL, BATCH_COLUMNS, BATCH_NDARRAY, BATCH_ARROW):
        attempt(f"wire batch {path}", lambda path=path: decode_batch(path, data))
    attempt("wire frame header", lambda: list(FrameReader().feed(_raw_frame(data))))
    attempt("handshake frame header", lambda: list(FrameReader(1 << 16, plain=True).feed(_raw_frame(data))))
    attempt("capture log event", lambda: list(EventReader(io.BytesIO(event_log_bytes([data])))))
    attempt("capture log header", lambda: list(EventReader(io.BytesIO(MAGIC + frame(data)))))
    attempt("recording frame", lambda: RecordingStream("fuzz").feed(encode_header(0) + frame(data)))
    attempt("recording header", lambda: RecordingStream("fuzz").feed(RECORDING_MAGIC + frame(data)))
    attempt("recording v1", lambda: _feed_and_finish(_v1_header() + data))
    return attempts


def _feed_and_finish(data: bytes) -> Any:
    """What a recording stream makes of ``data``: an error, or events with a truncation note (a value cut short)."""
    stream = RecordingStream("fuzz", allow_format_1=True)
    events = stream.feed(data)
    truncated = stream.finish()
    if truncated is not None:
        return RecordingError(truncated)  # reported, not read as whole
    return events


def _raw_frame(header: bytes) -> bytes:
    """A wire frame whose header is ``header`` as it is (no payload)."""
    return len(header).to_bytes(4, "big") * 2 + header


def _v1_header() -> bytes:
    return msgpack.packb({"format": "pytimely-events", "version": 1, "process": 0, "pid": 1})


# ---------------------------------------------------------------------- deep nesting


ATTACK_SCRIPT = textwrap.dedent(
    """
    import io, sys
    import msgpack
    from runtime import eventlog, instrument
    from runtime.communication import wire

    def nested(code, depth):
        value = msgpack.packb(0)
        for _ in range(depth):
            value = msgpack.packb(msgpack.ExtType(code, value))
        return value

    target = sys.argv[1]
    attack = nested(int(sys.argv[2]), 200)
    try:
        if target == "wire":
            wire.decode_value(attack)
        elif target == "capture":
            eventlog.decode_event(attack)
        else:
            header = instrument.encode_header(0) if hasattr(instrument, "encode_header") else b""
            stream = header + (instrument.frame(attack) if hasattr(instrument, "frame") else attack)
            list(instrument.iter_stream(io.BytesIO(stream), "attack"))
    except Exception as error:
        print("refused:", type(error).__name__)
    """
)


@pytest.mark.parametrize(
    ("target", "code"), [("wire", 1), ("wire", 2), ("capture", 1), ("capture", 2), ("recording", 1)]
)
def test_extensions_nested_200_deep_are_refused_not_a_crash(target: str, code: int) -> None:
    """The 200-deep extension attack of issue 16 segfaulted each of these (exit -11); now it is refused."""
    done = subprocess.run(
        [sys.executable, "-c", ATTACK_SCRIPT, target, str(code)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.startswith("refused:"), done.stdout


def test_the_attack_is_small_and_every_decoder_refuses_it_in_process() -> None:
    for code in range(1, 11):
        attack = nested_extensions(code, 200)
        assert len(attack) < 1000
        for name, result in every_decoder(attack):
            # refused, or (where the code means REPR) read as the flat text it is
            assert isinstance(result, TimelyRuntimeError | str | int), f"{name} read {result!r:.100}"


def test_nesting_is_allowed_up_to_the_limit_and_refused_past_it() -> None:
    deep: Any = 0
    for _ in range(codec.MAX_DEPTH):
        deep = (deep,)
    assert decode_value(codec.pack_wire([deep])) == [deep]
    too_deep = (deep,)
    with pytest.raises(EncodingError, match="more than 32 deep"):  # refused when sent, not only when received
        encode_value([too_deep])
    hostile = msgpack.packb([0])  # built by hand, as a peer could
    for _ in range(codec.MAX_DEPTH + 1):
        hostile = msgpack.packb([msgpack.ExtType(codec.EXT_TUPLE, hostile)])
    with pytest.raises(WireError, match="nest more than"):
        decode_value(hostile)
    with pytest.raises(EventEncodeError, match="more than 32 deep"):  # a capture log refuses to write it
        EventWriter(io.BytesIO(), INTEGER).push(Batch(0, [too_deep]))
    assert codec.decode(codec.pack_capture([deep]), codec.CAPTURE) == [deep]


def test_arrays_nested_past_msgpacks_stack_are_refused() -> None:
    for data in (b"\x91" * 5000 + b"\x00", b"\x81\x00" * 5000 + b"\x00"):
        for name, result in every_decoder(data):
            assert isinstance(result, TimelyRuntimeError), f"{name} read {result!r:.100}"


# ---------------------------------------------------------------------- lengths and sizes


@pytest.mark.parametrize(
    "data",
    [
        b"\xdd\xff\xff\xff\xff",  # array32 of 4 billion items
        b"\xdf\xff\xff\xff\xff",  # map32
        b"\xdb\xff\xff\xff\xff" + b"x" * 10,  # str32
        b"\xc6\xff\xff\xff\xff" + b"x" * 10,  # bin32
        b"\xc9\xff\xff\xff\xff\x02",  # ext32
        b"\xc9\xff\xff\xff\xff\x05",  # ext32 numpy
        b"\xc7\x0c\x05\x00\x00\x00\x08\x92\xa3<i8\x91\xce\xff\xff\xff\xff",  # numpy array of 4 billion int64
    ],
)
def test_huge_declared_lengths_allocate_nothing_and_are_refused(data: bytes) -> None:
    for name, result in every_decoder(data):
        assert isinstance(result, TimelyRuntimeError), f"{name} read {result!r:.100}"


def test_values_past_a_dialects_size_are_refused_before_decoding() -> None:
    with pytest.raises(DecodeError, match="longer than the limit"):
        codec.decode_plain(msgpack.packb(b"x" * 70_000))
    with pytest.raises(WireError, match="longer than the limit"):
        decode_plain_value(msgpack.packb("y" * 100), max_size=50)


def test_frames_declaring_huge_lengths_are_damage_with_an_offset(tmp_path: Path) -> None:
    huge = (1 << 31).to_bytes(4, "big") + b"\0\0\0\0"
    with pytest.raises(EventLogError, match=f"byte offset {len(header_frame(INTEGER))} declares"):
        list(EventReader(io.BytesIO(header_frame(INTEGER) + huge)))
    with pytest.raises(RecordingError, match="byte offset"):
        RecordingStream("huge").feed(encode_header(0) + huge)
    with pytest.raises(WireError, match="exceeds the limit"):
        list(FrameReader().feed(b"\xff\xff\xff\xff\0\0\0\0"))


# ---------------------------------------------------------------------- random bytes


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes_end_in_a_value_or_the_projects_error(data: bytes) -> None:
    every_decoder(data)  # any other exception (or a crash) fails the test


values = st.recursive(
    st.integers(-(2**63), 2**64 - 1) | st.text(max_size=5) | st.binary(max_size=5) | st.none() | st.booleans(),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.tuples(inner, inner).map(lambda pair: Product(*pair))
    ),
    max_leaves=10,
)


@FUZZ
@given(values, st.data())
def test_damaged_encodings_of_real_values_end_in_a_value_or_the_projects_error(value: Any, data: st.DataObject) -> None:
    encoded = bytearray(codec.pack_wire([value]))
    assert decode_value(bytes(encoded)) == [value]
    index = data.draw(st.integers(0, len(encoded) - 1))
    encoded[index] ^= data.draw(st.integers(1, 255))
    every_decoder(bytes(encoded))
    every_decoder(bytes(encoded[:index]))


# ---------------------------------------------------------------------- every truncation and byte change of a file


def capture_log() -> tuple[bytes, list[Any]]:
    events = [Progress([(0, 1)]), Batch(0, [(1, "one"), (2, "two")]), Progress([(0, -1), (1, 1)])]
    buffer = io.BytesIO()
    writer = EventWriter(buffer, INTEGER, close=False)
    for event in events:
        writer.push(event)
    return buffer.getvalue(), events


def recording() -> tuple[bytes, list[Any]]:
    raws = [(12, 0, 1, 1.5, "start"), (8, 0, 2, 5909.920376182, (0, 1), "input", "advanced", Product(3, 4))]
    data = encode_header(0) + encode_events(raws[:1]) + encode_events(raws[1:]) + END_FRAME
    return data, raws


def read_capture(data: bytes) -> list[Any]:
    return [event for event in EventReader(io.BytesIO(data)) if event is not None]


def read_recording_bytes(data: bytes) -> tuple[list[Any], str | None]:
    stream = RecordingStream("damaged.msgpack")
    events = stream.feed(data)
    return events, stream.finish()


def test_every_truncation_of_a_capture_log_is_refused_or_a_prefix_cut_at_a_frame_boundary() -> None:
    """A cut inside a frame is refused; a cut between frames reads the events before it, and replaying
    them reports the stream incomplete (test_eventlog's frame-boundary test): never other events."""
    data, events = capture_log()
    assert read_capture(data) == events
    boundaries = 0
    for cut in range(len(data)):
        try:
            read = read_capture(data[:cut])
        except EventLogError as error:
            assert "truncated" in str(error) and "byte offset" in str(error), error
            continue
        boundaries += 1
        assert read == events[: len(read)] and len(read) < len(events), cut
    assert boundaries == len(events)  # after the header and after each event but the last


def test_every_byte_change_of_a_capture_log_is_refused() -> None:
    data, events = capture_log()
    for index in range(len(data)):
        for flip in range(1, 256):
            damaged = bytearray(data)
            damaged[index] ^= flip
            with pytest.raises(EventLogError) as caught:
                read_capture(bytes(damaged))
            assert "byte offset" in str(caught.value) or "not a pytimely event log" in str(caught.value)


def test_every_truncation_of_a_recording_is_refused_or_reported_truncated_with_a_prefix_of_its_events() -> None:
    data, raws = recording()
    assert read_recording_bytes(data) == (raws, None)
    for cut in range(len(data)):
        try:
            events, truncated = read_recording_bytes(data[:cut])
        except RecordingError:
            continue
        assert truncated is not None and "truncated" in truncated, cut
        assert events == raws[: len(events)], cut


def test_every_byte_change_of_a_recording_is_refused_naming_the_offset() -> None:
    """A changed byte is refused naming the file and the offset; one that makes a frame's length run past
    the end of the file can only be seen as a cut there, so it reads as truncated, with the events before it."""
    data, raws = recording()
    for index in range(len(data)):
        for flip in range(1, 256):
            damaged = bytearray(data)
            damaged[index] ^= flip
            try:
                events, truncated = read_recording_bytes(bytes(damaged))
            except RecordingError as error:
                if index >= len(RECORDING_MAGIC):
                    assert "damaged.msgpack" in str(error) and "byte offset" in str(error), error
                continue
            assert truncated is not None and "truncated" in truncated, (index, flip)
            assert events == raws[: len(events)], (index, flip)


def test_every_truncation_and_byte_change_of_a_wire_frame_ends_in_a_value_or_wire_error() -> None:
    data = wire_frame([0, 3, (0, 2), Product(1, 2), BATCH_GENERAL], codec.pack_wire([(1, "a"), {"k": [2.5]}]))
    for cut in range(len(data)):
        assert list(FrameReader().feed(data[:cut])) == []  # a stream that has not all arrived yet
    for index in range(len(data)):
        for flip in range(1, 256):
            damaged = bytearray(data)
            damaged[index] ^= flip
            try:
                for header, payload in FrameReader(1 << 20).feed(bytes(damaged)):
                    decode_batch(header[-1], payload)
            except WireError:
                pass


# ---------------------------------------------------------------------- the live viewer's listener


@pytest.mark.parametrize("version", [1, 2])
def test_the_live_viewer_refuses_the_attack_on_one_connection_and_keeps_listening(version: int) -> None:
    import socket
    import time

    from viz.tui.sources import LiveListener

    attack = nested_extensions(1, 400)  # main's listener thread segfaulted on this (exit 139)
    stream = _v1_header() + attack if version == 1 else encode_header(0) + frame(attack)
    listener = LiveListener("127.0.0.1", 0)
    listener.start()
    try:
        with socket.create_connection(("127.0.0.1", listener.port), timeout=5) as sock:
            sock.sendall(stream)
            deadline = time.monotonic() + 10
            while not (listener.connections and not listener.connections[0].open) and time.monotonic() < deadline:
                time.sleep(0.02)
        connection = listener.connections[0]
        assert not connection.open and connection.error is not None
        assert "nest more than" in connection.error or "damaged" in connection.error, connection.error
        with socket.create_connection(("127.0.0.1", listener.port), timeout=5) as good:
            good.sendall(encode_header(0) + encode_events([(12, 0, 1, 1.0, "still here")]))
            deadline = time.monotonic() + 10
            while listener.received < 1 and time.monotonic() < deadline:
                time.sleep(0.02)
        assert listener.received == 1
    finally:
        listener.close()
