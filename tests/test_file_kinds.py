"""Capture logs and recordings: each refuses the other by name, old versions still read, truncation shown (issue 16)."""

from __future__ import annotations

import asyncio
import io
import re
import subprocess
import sys
from pathlib import Path

import msgpack  # type: ignore[import-untyped]
import pytest
from helpers.recording_v1 import header as v1_header
from helpers.recording_v1 import pack as v1_pack
from helpers.viz_synthetic import finish, running
from test_tui import text_of

from runtime import codec
from runtime.communication.wire import FrameReader, WireError, decode_plain_value, register_codec, unregister_codec
from runtime.communication.wire import frame as wire_frame
from runtime.eventlog import (
    MAGIC,
    EventEncodeError,
    EventLogCorrupt,
    EventLogFormatError,
    EventReader,
    EventWriter,
    encode_event,
    read_event_log,
    write_events,
)
from runtime.framing import frame
from runtime.instrument import (
    END_FRAME,
    InputChanged,
    Mark,
    RecordingCorrupt,
    RecordingError,
    UncheckedRecordingWarning,
    encode_events,
    encode_header,
    read_recording,
)
from scopes.capture import Batch, Progress
from scopes.timestamp import INTEGER, Product, ProductType
from viz.tui.app import TimelyApp
from viz.tui.sources import Replay, TuiError, load_recording

ROOT = Path(__file__).resolve().parent.parent


def write_recording(path: Path, raws: list[tuple[object, ...]], end: bool = True) -> None:
    path.write_bytes(encode_header(0) + encode_events(raws) + (END_FRAME if end else b""))


def run_dot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "viz", "dot", *args], capture_output=True, text=True, cwd=ROOT, timeout=60
    )


# ---------------------------------------------------------------------- each kind refuses the others by name


def test_a_capture_log_given_to_the_recording_readers_is_named(tmp_path: Path) -> None:
    log = tmp_path / "captured.log"
    write_events(log, [Progress([(0, 1)])])
    with pytest.raises(RecordingError, match="capture log.*not a pytimely recording"):
        read_recording(log)
    with pytest.raises(TuiError, match="capture log"):
        load_recording([log])
    done = run_dot(str(log), "-o", str(tmp_path / "out.dot"))
    assert done.returncode == 1 and "capture log" in done.stderr and "empty file" not in done.stderr, done.stderr


@pytest.mark.parametrize("version", [1, 2])
def test_a_recording_given_to_the_capture_log_reader_is_named(tmp_path: Path, version: int) -> None:
    path = tmp_path / "run.msgpack"
    if version == 1:
        path.write_bytes(v1_header() + v1_pack((12, 0, 1, 1.0, "hi")))
    else:
        write_recording(path, [(12, 0, 1, 1.0, "hi")])
    with pytest.raises(EventLogFormatError, match="recording.*not a pytimely event log"):
        read_event_log(path)


def test_other_files_are_refused_as_neither(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_bytes(b"just some text, long enough\n")
    with pytest.raises(RecordingError, match="not a pytimely recording"):
        read_recording(other)
    with pytest.raises(EventLogFormatError, match="not a pytimely event log"):
        read_event_log(other)


def test_a_directory_is_refused_clearly_by_both_readers(tmp_path: Path) -> None:
    with pytest.raises(EventLogFormatError, match="is a directory"):
        EventReader(tmp_path)
    with pytest.raises(RecordingError, match="is a directory"):
        read_recording(tmp_path)


# ---------------------------------------------------------------------- times of the declared type


def test_a_capture_log_whose_times_are_not_of_its_declared_type_is_refused() -> None:
    for timestamp, event in [
        (INTEGER, Batch("five", [1])),
        (INTEGER, Progress([("five", 1)])),
        (INTEGER, Progress([(5, "one")])),
        (INTEGER, Batch(Product(1, 2), [1])),
        (ProductType(INTEGER), Batch(5, [1])),
    ]:
        buffer = io.BytesIO()
        writer = EventWriter(buffer, timestamp, close=False)
        writer.push(Progress([(timestamp.minimum(), 1)]))
        refused = f"holds {re.escape(timestamp.name)} timestamps|not an integer count"
        with pytest.raises(EventEncodeError, match=refused):
            writer.push(event)  # refused as it is written
        # a log written otherwise (by an older pytimely, or another program) is refused as it is read
        writer._write(writer._chain.frame(encode_event(event)))
        with pytest.raises(EventLogCorrupt, match=re.escape(f"declares {timestamp.name}")):
            list(EventReader(io.BytesIO(buffer.getvalue())))


def test_a_log_of_product_times_reads_them() -> None:
    product = ProductType(ProductType(INTEGER))
    buffer = io.BytesIO()
    writer = EventWriter(buffer, product, close=False)
    time = Product(Product(1, 2), 3)
    writer.push(Batch(time, [(1, "a")]))
    assert [e for e in EventReader(io.BytesIO(buffer.getvalue())) if e is not None] == [Batch(time, [(1, "a")])]


# ---------------------------------------------------------------------- old versions


@pytest.mark.parametrize("version", [1, 2])
def test_capture_logs_of_versions_1_and_2_still_read(version: int) -> None:
    def ext(code: int, value: object) -> msgpack.ExtType:
        return msgpack.ExtType(code, msgpack.packb(value))

    header = msgpack.packb({"format": "pytimely-events", "version": version, "timestamp": "Product[integer, integer]"})
    messages = msgpack.packb([1, ext(1, [3, 4]), [ext(2, [1, "a"])]])  # product 1, tuple 2: as they were written
    progress = msgpack.packb([0, [[ext(1, [3, 4]), 1]]])
    data = MAGIC + frame(header) + frame(progress) + frame(messages)
    events = [e for e in EventReader(io.BytesIO(data)) if e is not None]
    assert events == [Progress([(Product(3, 4), 1)]), Batch(Product(3, 4), [(1, "a")])]


def test_recordings_of_version_1_still_read_with_their_extension_codes(tmp_path: Path) -> None:
    path = tmp_path / "old.msgpack"
    raws = [
        (8, 0, 1, 1.25, (0, 1), "input", "advanced", Product(3, 4)),
        (8, 0, 2, 1.5, (0, 1), "input", "advanced", {1, 2}),  # not a msgpack type: version 1 wrote its repr
    ]
    path.write_bytes(v1_header() + b"".join(v1_pack(raw) for raw in raws))
    with pytest.warns(UncheckedRecordingWarning, match="format version 1.*without checksums"):
        recording = read_recording(path, allow_format_1=True)
    assert recording.truncated is None and recording.unchecked is not None
    assert recording.events == [
        InputChanged(0, 1, 1.25, (0, 1), "input", "advanced", Product(3, 4)),
        InputChanged(0, 2, 1.5, (0, 1), "input", "advanced", "{1, 2}"),
    ]


def test_recordings_of_version_2_round_trip_with_reprs_and_products(tmp_path: Path) -> None:
    path = tmp_path / "new.msgpack"
    write_recording(path, [(8, 0, 1, 1.25, (0, 1), "input", "advanced", Product(3, 4)), (12, 0, 2, 2.0, {1})])
    recording = read_recording(path)
    assert recording.truncated is None
    assert recording.events == [
        InputChanged(0, 1, 1.25, (0, 1), "input", "advanced", Product(3, 4)),
        Mark(0, 2, 2.0, "{1}"),
    ]
    assert path.read_bytes().startswith(b"\x89PTRC")


# ---------------------------------------------------------------------- damage and truncation


def test_a_damaged_recording_names_the_file_and_the_offset(tmp_path: Path) -> None:
    path = tmp_path / "flipped.msgpack"
    write_recording(path, [(12, 0, 1, 5909.920376182, "a"), (12, 0, 2, 5910.0, "b")])
    data = bytearray(path.read_bytes())
    offset = len(encode_header(0))
    data[offset + 20] ^= 0x01  # inside the events frame: one bit of a time
    path.write_bytes(bytes(data))
    with pytest.raises(RecordingCorrupt, match=f"flipped.msgpack is damaged: the frame at byte offset {offset}"):
        read_recording(path)
    done = run_dot(str(path), "-o", str(tmp_path / "out.dot"))
    assert done.returncode == 1 and f"byte offset {offset}" in done.stderr and "Traceback" not in done.stderr


def truncated_recording(path: Path, cut_inside: bool) -> None:
    script = running()
    finish(script, workers=2)
    data = encode_header(0) + encode_events(script.raw[:-3]) + encode_events(script.raw[-3:])
    path.write_bytes(data[:-5] if cut_inside else data)  # no end frame either way


@pytest.mark.parametrize("cut_inside", [True, False])
def test_a_truncated_recording_is_reported_by_viz_dot_and_read_recording(tmp_path: Path, cut_inside: bool) -> None:
    path = tmp_path / "cut.msgpack"
    truncated_recording(path, cut_inside)
    recording = read_recording(path)
    assert recording.truncated is not None and "cut.msgpack is truncated" in recording.truncated
    done = run_dot(str(path), "-o", str(tmp_path / "out.dot"))
    assert done.returncode == 0, done.stderr
    assert "warning" in done.stderr and "truncated" in done.stderr
    whole = tmp_path / "whole.msgpack"
    script = running()
    write_recording(whole, script.raw)
    done = run_dot(str(whole), "-o", str(tmp_path / "whole.dot"))
    assert done.returncode == 0 and done.stderr == ""


def test_the_viewer_header_says_truncated(tmp_path: Path) -> None:
    path = tmp_path / "cut.msgpack"
    truncated_recording(path, cut_inside=True)
    events, truncated = load_recording([path])
    assert len(truncated) == 1

    async def run() -> None:
        replay = Replay(events, truncated=truncated)
        replay.seek(len(replay))
        app = TimelyApp(replay=replay, clock=lambda: 0.0)
        async with app.run_test(size=(160, 30)):
            assert "TRUNCATED" in text_of(app, "#status")
            assert "cut.msgpack is truncated" in text_of(app, "#status2")

    asyncio.run(run())


# ---------------------------------------------------------------------- handshakes decode plain values only


def test_a_handshake_frame_decodes_plain_values_and_never_calls_a_codec() -> None:
    calls: list[object] = []

    class Secret:
        pass

    register_codec(Secret, encode=lambda value: 1, decode=lambda data: calls.append(data))
    try:
        hostile = wire_frame(["hello", Secret()])
        with pytest.raises(WireError, match="extension type 8"):
            list(FrameReader(1 << 16, plain=True).feed(hostile))
        with pytest.raises(WireError, match="extension type"):
            list(FrameReader(1 << 16, plain=True).feed(wire_frame(["hello", (1, 2)])))
        assert calls == []
        assert list(FrameReader(1 << 16, plain=True).feed(wire_frame(["hello", b"nonce", 3]))) == [
            (["hello", b"nonce", 3], b"")
        ]
        assert decode_plain_value(codec.pack_wire({"a": [1, 2.5, None]})) == {"a": [1, 2.5, None]}
    finally:
        unregister_codec(Secret)
