"""What a mutational fuzzer of every file reader found: each case is built here from bytes, checksums right.

A checksum (CRC-32 or BLAKE2b) is no signature: anyone can recompute it over a
damaged body, so every reader must treat what it covers as hostile.  Each test
below is one distinct failure the fuzzer met, reduced; each ends in an error of
pytimely naming the file and the byte offset, never in another exception type.
The property tests at the end damage the body of each checksummed format and
recompute the checksum, as the fuzzer did.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import struct
from pathlib import Path
from typing import Any

import msgpack  # type: ignore[import-untyped]
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import codec, execute
from runtime.checkpoints import MAGIC as CHECKPOINT_MAGIC
from runtime.checkpoints import VERSION as CHECKPOINT_VERSION
from runtime.checkpoints import CheckpointStore
from runtime.communication.wire import encode_value
from runtime.errors import CheckpointCorrupt, CheckpointError, RecordingCorrupt, RecordingError, WorkerFailed
from runtime.eventlog import (
    MAGIC,
    EventLogCorrupt,
    EventLogError,
    EventLogFormatError,
    EventLogVersionError,
    EventReader,
    LogFile,
    encode_event,
    event_log_bytes,
    header_frame,
    read_event_log,
)
from runtime.framing import frame
from runtime.instrument import END_FRAME, encode_events, encode_header, read_recording
from scopes import INTEGER
from scopes.capture import Batch, CapturedBatch, Progress
from scopes.errors import TimelyError
from scopes.progress.timestamp import Product, ProductType
from viz.__main__ import main as viz_main

DEEP = 1000
"""Arrays nested this deep decode (msgpack allows 1024), but ``repr`` of them raises RecursionError."""


def deep_array(depth: int = DEEP) -> bytes:
    """The msgpack bytes of an array nested ``depth`` deep (too deep for msgpack's packer to write)."""
    return b"\x91" * depth + b"\x90"


def packed_map(items: dict[str, bytes]) -> bytes:
    """A msgpack map whose values are given as msgpack bytes already."""
    return bytes([0x80 | len(items)]) + b"".join(msgpack.packb(key) + value for key, value in items.items())


# ---------------------------------------------------------------------- capture logs


def test_a_numpy_array_as_an_events_kind_is_damage_at_its_offset(tmp_path: Path) -> None:
    """``kind == 0`` with an array as the kind answered an array, and ``if`` on it raised a bare ValueError."""
    path = tmp_path / "kind.log"
    for kind in (np.arange(3), np.zeros(0)):
        path.write_bytes(event_log_bytes([codec.pack_capture([kind, [[0, 1]]])]))
        with pytest.raises(EventLogCorrupt) as caught:
            read_event_log(path)
        assert caught.value.offset == len(header_frame(INTEGER))
        assert str(path) in str(caught.value) and f"byte offset {caught.value.offset}" in str(caught.value)


def test_a_numpy_scalar_as_an_events_batch_is_damage_at_its_offset_not_a_type_error_in_the_replay(
    tmp_path: Path,
) -> None:
    """A batch of no axes was taken as messages, and replaying it failed with a bare TypeError (len() of unsized
    object): a batch's rows are its first axis."""
    path = tmp_path / "scalar.log"
    path.write_bytes(event_log_bytes([codec.pack_capture([1, 0, np.array(5)]), encode_event(Progress([(0, -1)]))]))
    with pytest.raises(EventLogCorrupt) as caught:
        read_event_log(path)
    assert caught.value.offset == len(header_frame(INTEGER)) and "no axes" in str(caught.value)

    def main(worker: Any) -> None:
        worker.dataflow(lambda scope: scope.replay([LogFile(path)]))

    with pytest.raises(WorkerFailed) as failed:
        execute(main, workers=1, stall_timeout=5)
    assert f"byte offset {caught.value.offset}" in str(failed.value)
    path.write_bytes(event_log_bytes([codec.pack_capture([1, 0, np.array([5])]), encode_event(Progress([(0, -1)]))]))
    assert [event.data.tolist() for event in read_event_log(path) if isinstance(event, CapturedBatch)] == [[5]]


@pytest.mark.parametrize(
    ("field", "error", "expected"),
    [
        ("format", EventLogFormatError, None),
        ("version", EventLogVersionError, None),
        ("timestamp", EventLogFormatError, INTEGER),
    ],
)
def test_a_header_field_nested_deep_is_refused_naming_the_header_not_a_recursion_error(
    tmp_path: Path, field: str, error: type[EventLogError], expected: Any
) -> None:
    """The header's format, version or timestamp was shown with ``!r``, which recursed 1000 levels deep."""
    fields = {"format": msgpack.packb("pytimely-events"), "version": msgpack.packb(3)}
    fields["timestamp"] = msgpack.packb("integer")
    fields[field] = deep_array()
    path = tmp_path / "header.log"
    path.write_bytes(MAGIC + frame(packed_map(fields)))
    with pytest.raises(error) as caught:
        list(EventReader(path, expected))
    assert str(path) in str(caught.value) and "byte offset 8" in str(caught.value)
    assert len(str(caught.value)) < 600


def test_a_replay_refusing_a_checksum_valid_log_names_the_events_offset(tmp_path: Path) -> None:
    """A log whose chain is right can still release a capability it never held: the ReplayError named the log
    but not where in it."""
    payloads = [encode_event(Progress([(0, -1), (1, 1)])), encode_event(Progress([(2, -1)]))]
    data = event_log_bytes(payloads)
    second = len(data) - len(frame(payloads[1]))
    path = tmp_path / "released.log"
    path.write_bytes(data)

    def main(worker: Any) -> None:
        worker.dataflow(lambda scope: scope.replay([LogFile(path)]).probe())

    with pytest.raises(WorkerFailed) as caught:
        execute(main)
    message = str(caught.value)
    assert str(path) in message and f"byte offset {second}" in message and "did not hold" in message
    path.write_bytes(event_log_bytes(payloads[:1]))
    with pytest.raises(WorkerFailed) as caught:
        execute(main)
    message = str(caught.value)
    assert f"at the end of the log, byte offset {len(event_log_bytes(payloads[:1]))}" in message
    assert "still holding capabilities" in message


# ---------------------------------------------------------------------- recordings


def test_an_events_field_nested_deep_is_refused_naming_the_offset_not_a_recursion_error(tmp_path: Path) -> None:
    """An event whose address is an array 1000 deep was shown in the error with ``!r``: RecursionError."""
    event = b"\x9a" + b"".join(msgpack.packb(v) for v in (1, 0, 1, 0.5)) + deep_array()
    event += b"".join(msgpack.packb(v) for v in ("op", 0, 0, [], None))
    good = encode_header(0) + encode_events([(12, 0, 1, 0.25, "start")])
    path = tmp_path / "deep.msgpack"
    path.write_bytes(good + frame(b"\x91" + event) + END_FRAME)
    with pytest.raises(RecordingCorrupt) as caught:
        read_recording(path)
    assert caught.value.offset == len(good) and f"byte offset {len(good)}" in str(caught.value)
    assert str(path) in str(caught.value) and len(str(caught.value)) < 1000


@pytest.mark.parametrize("version", [deep_array(), msgpack.packb(None), msgpack.packb(True), msgpack.packb("2")])
def test_a_recording_header_whose_version_is_no_int_is_refused_at_its_offset(tmp_path: Path, version: bytes) -> None:
    """A version nested 1000 deep raised RecursionError; any version not an int was called 'newer than this
    viewer's', with no offset."""
    header = packed_map({"format": msgpack.packb("pytimely-recording"), "version": version})
    path = tmp_path / "version.msgpack"
    path.write_bytes(encode_header(0)[:8] + frame(header) + END_FRAME)
    with pytest.raises(RecordingCorrupt) as caught:
        read_recording(path)
    assert caught.value.offset == 8 and str(path) in str(caught.value) and "newer" not in str(caught.value)


def test_a_recording_of_format_1_names_the_offset_of_a_damaged_event(tmp_path: Path) -> None:
    header = msgpack.packb({"format": "pytimely-events", "version": 1, "process": 0})
    good = msgpack.packb([12, 0, 1, 0.5, "start"])
    path = tmp_path / "v1.msgpack"
    path.write_bytes(header + good + msgpack.packb([12, "w", 2, 0.5, "bad"]))
    with pytest.raises(RecordingError, match=rf"corrupted after 1 events, at byte offset {len(header + good)}: "):
        read_recording(path, allow_format_1=True)
    path.write_bytes(header + good + b"\xc1")
    with pytest.raises(RecordingError, match=rf"corrupted after 1 events, at byte offset {len(header + good)} "):
        read_recording(path, allow_format_1=True)
    path.write_bytes(header[:12])
    with pytest.raises(
        RecordingError, match=r"its header, at byte offset 0, is cut short: the file ends at byte offset 12"
    ):
        read_recording(path, allow_format_1=True)


def test_viz_names_the_file_of_a_recording_without_events(tmp_path: Path) -> None:
    """A sound recording whose event frames are empty said only 'the recording holds no events'."""
    path = tmp_path / "empty.msgpack"
    path.write_bytes(encode_header(0) + encode_events([]) + END_FRAME)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert viz_main(["dot", str(path), "-o", "-"]) == 1
    assert f"{path}: the recording holds no events" in err.getvalue()


# ---------------------------------------------------------------------- checkpoints


def forge_checkpoint(path: Path, header: bytes, body: bytes) -> None:
    """A checkpoint at ``path`` holding ``header`` and ``body`` as they are, its BLAKE2b right."""
    data = CHECKPOINT_MAGIC + struct.pack(">HI", CHECKPOINT_VERSION, len(header)) + header
    data += struct.pack(">Q", len(body)) + body
    path.write_bytes(data + hashlib.blake2b(data, digest_size=32).digest())


def test_a_checkpoint_header_nested_deep_is_a_mismatch_naming_the_header_not_a_recursion_error(
    tmp_path: Path,
) -> None:
    store = CheckpointStore(tmp_path)
    path = store.write(0, 1, "shape", 5, {})
    for header in (
        deep_array(),
        packed_map({"workers": msgpack.packb(1), "worker": msgpack.packb(0), "shape": deep_array()}),
    ):
        forge_checkpoint(path, header, encode_value({}))
        with pytest.raises(CheckpointError) as caught:
            store.read(path, 1, 0, "shape")
        assert str(path) in str(caught.value) and "header at byte 14" in str(caught.value)


def test_a_checkpoint_body_keyed_by_other_than_text_is_refused_when_read(tmp_path: Path) -> None:
    """Keys of other types passed the read and met the restore (where sorting them with str keys raised)."""
    store = CheckpointStore(tmp_path)
    path = store.write(0, 1, "shape", 5, {})
    header = encode_value({"shape": "shape", "workers": 1, "worker": 0, "epoch": 5})
    forge_checkpoint(path, header, encode_value({1: b"\x90", "key": b"\x90"}))
    with pytest.raises(CheckpointCorrupt, match=rf"the body at byte {14 + len(header) + 8} is not a state map"):
        store.read(path, 1, 0, "shape")


# ---------------------------------------------------------------------- the Spark integration's saved outputs


def out_of_bounds_batch() -> Any:
    """A string column whose second offset points 1 GiB past its 5 bytes of data (the last one is in range)."""
    pa = pytest.importorskip("pyarrow")
    offsets = pa.py_buffer(struct.pack("<3i", 0, 1 << 30, 5))
    column = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(b"hello")])
    return pa.RecordBatch.from_arrays([column], names=["s"])


def not_utf8_batch() -> Any:
    pa = pytest.importorskip("pyarrow")
    offsets = pa.py_buffer(struct.pack("<2i", 0, 2))
    column = pa.Array.from_buffers(pa.string(), 1, [None, offsets, pa.py_buffer(b"\xff\xfe")])
    return pa.RecordBatch.from_arrays([column], names=["s"])


def forge_output(log: Any, epoch: int, batch: Any, options: Any = None) -> None:
    """Write ``batch`` as ``log``'s file of ``epoch`` with a right checksum, as :meth:`OutputLog.write` frames it
    but without its validation (which refuses such batches): magic, header, the IPC stream, BLAKE2b-256."""
    pa = pytest.importorskip("pyarrow")
    from runtime.spark.resume import MAGIC as OUTPUT_MAGIC
    from runtime.spark.resume import VERSION

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=options) as writer:
        writer.write_batch(batch)
    body = sink.getvalue().to_pybytes()
    data = OUTPUT_MAGIC + struct.pack(">HQ", VERSION, len(body)) + body
    log.directory.mkdir(parents=True, exist_ok=True)
    log.path(epoch).write_bytes(data + hashlib.blake2b(data, digest_size=32).digest())


@pytest.mark.parametrize("make", [out_of_bounds_batch, not_utf8_batch], ids=["offset-out-of-bounds", "not-utf8"])
def test_a_saved_output_is_validated_before_it_is_handed_on(tmp_path: Path, make: Any) -> None:
    """The IPC reader checks only that buffers lie in the stream: reading the column of a forged file crashed
    the process (or raised UnicodeDecodeError, SystemError), after read() had returned it as sound."""
    from runtime.spark.resume import MAGIC as OUTPUT_MAGIC
    from runtime.spark.resume import OutputLog

    batch = make()
    log = OutputLog(tmp_path, 0, 1, batch.schema)
    forge_output(log, 0, batch)  # the writer refuses such a batch: forged here, checksum right
    with pytest.raises(CheckpointCorrupt) as caught:
        log.read(0)
    assert str(log.path(0)) in str(caught.value) and f"at byte {len(OUTPUT_MAGIC) + 10}" in str(caught.value)


def test_a_saved_output_with_compressed_buffers_is_refused_before_inflating(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    from runtime.spark.resume import OutputLog

    batch = pa.record_batch({"n": pa.array(range(1000))})
    log = OutputLog(tmp_path, 0, 1, batch.schema)
    forge_output(log, 0, batch, pa.ipc.IpcWriteOptions(compression="zstd"))
    with pytest.raises(CheckpointCorrupt, match="compressed Arrow buffers"):
        log.read(0)


# ---------------------------------------------------------------------- properties: damaged bodies, checksums right


def damaged(data: bytes, changes: list[tuple[int, int]], cut: int | None) -> bytes:
    """``data`` with the byte at each ``(position, value)`` set (positions taken modulo its length), then cut."""
    out = bytearray(data)
    for position, value in changes:
        if out:
            out[position % len(out)] = value
    return bytes(out[:cut] if cut is not None else out)


changes = st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), min_size=1, max_size=4)
cuts = st.none() | st.integers(0, 400)
FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

CAPTURE_EVENTS = [
    Progress([(Product(0, 0), 1)]),
    Batch(Product(0, 0), [(1, "one"), (2.5, b"two"), frozenset({3}), {"k": [None, True]}]),
    Batch(Product(0, 0), np.arange(4, dtype=np.int32)),
    Progress([(Product(0, 0), -1), (Product(1, 0), 1)]),
    Progress([(Product(1, 0), -1)]),
]


@FAST
@given(index=st.integers(0, len(CAPTURE_EVENTS) - 1), changes=changes, cut=cuts)
def test_a_capture_logs_damaged_event_under_a_right_chain_is_refused_naming_the_file(
    tmp_path: Path, index: int, changes: list[tuple[int, int]], cut: int | None
) -> None:
    payloads = [encode_event(event) for event in CAPTURE_EVENTS]
    payloads[index] = damaged(payloads[index], changes, cut)
    path = tmp_path / "damaged.log"
    path.write_bytes(event_log_bytes(payloads, ProductType(INTEGER, INTEGER)))
    try:
        read_event_log(path)
    except TimelyError as error:
        assert str(path) in str(error) and "byte offset" in str(error), error


RECORDED = [
    (1, 0, 1, 0.0, (0,), "dataflow", 0, 0, (), "integer"),
    (1, 0, 2, 0.0, (0, 1), "map", 1, 1, ((0,),), None),
    (2, 0, 3, 0.0, (0,), (1, 0), (1, 0), "Pipeline"),
    (6, 0, 4, 0.5, (0,), ((0, 3, 1),)),
    (5, 0, 5, 0.5, (0, 1), (((3, 5),),), (((3, 5),),)),
    (8, 0, 6, 1.0, (0, 1), "input", "advanced", Product(3, 4)),
]


@FAST
@given(changes=changes, cut=cuts)
def test_a_recordings_damaged_frame_under_a_right_crc_is_refused_naming_the_file(
    tmp_path: Path, changes: list[tuple[int, int]], cut: int | None
) -> None:
    body = damaged(codec.pack_recording(RECORDED[3:]), changes, cut)
    path = tmp_path / "damaged.msgpack"
    path.write_bytes(encode_header(0) + encode_events(RECORDED[:3]) + frame(body) + END_FRAME)
    try:
        recording = read_recording(path)
    except TimelyError as error:
        assert str(path) in str(error) and "byte offset" in str(error), error
    else:  # what was read is drawn without an error other than the viewer's own
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            status = viz_main(["dot", str(path), "-o", "-"])
        assert status == 0 or "python -m viz: error" in err.getvalue(), (recording, err.getvalue())


@FAST
@given(part=st.sampled_from(["header", "body"]), changes=changes, cut=cuts)
def test_a_checkpoints_damaged_header_or_body_under_a_right_blake2b_is_refused_naming_the_file(
    tmp_path: Path, part: str, changes: list[tuple[int, int]], cut: int | None
) -> None:
    store = CheckpointStore(tmp_path)
    path = store.write(0, 1, "shape", 5, {"0/3:Fold": encode_value({"a": 1}), "0/4:Window": encode_value([(1, 2)])})
    header = encode_value({"shape": "shape", "workers": 1, "worker": 0, "epoch": 5})
    body = encode_value({"0/3:Fold": encode_value({"a": 1}), "0/4:Window": encode_value([(1, 2)])})
    if part == "header":
        header = damaged(header, changes, cut)
    else:
        body = damaged(body, changes, cut)
    forge_checkpoint(path, header, body)
    try:
        store.read(path, 1, 0, "shape", 5)  # its name's epoch, checked against its header's
    except TimelyError as error:
        assert isinstance(error, CheckpointError) and str(path) in str(error) and "byte" in str(error), error


@FAST
@given(changes=changes, cut=cuts)
def test_a_checkpoint_file_damaged_anywhere_is_refused_naming_the_file(
    tmp_path: Path, changes: list[tuple[int, int]], cut: int | None
) -> None:
    """Damage to the file itself (its magic, version, lengths, header, body or digest; a cut anywhere) is a
    CheckpointCorrupt or CheckpointMismatch naming the file, or the file is read as it was written."""
    store = CheckpointStore(tmp_path)
    states = {"0/3:Fold": encode_value({"a": 1}), "0/4:Window": encode_value([(1, 2)])}
    path = store.write(0, 1, "shape", 5, states)
    path.write_bytes(damaged(path.read_bytes(), changes, cut))
    try:
        read = store.read(path, 1, 0, "shape", 5)
    except TimelyError as error:
        assert isinstance(error, CheckpointError) and str(path) in str(error), error
    else:
        assert read == states


@FAST
@given(changes=changes)
def test_a_saved_outputs_damaged_arrow_stream_under_a_right_blake2b_is_refused_naming_the_file(
    tmp_path: Path, changes: list[tuple[int, int]]
) -> None:
    pa = pytest.importorskip("pyarrow")
    from runtime.spark.resume import MAGIC as OUTPUT_MAGIC
    from runtime.spark.resume import VERSION, OutputLog

    schema = pa.schema([("k", pa.string()), ("n", pa.int64()), ("l", pa.list_(pa.int32()))])
    batch = pa.record_batch({"k": ["a", None, "ccc"], "n": [1, 2, 3], "l": [[1], None, [2, 3]]}, schema=schema)
    log = OutputLog(tmp_path, 0, 1, schema)
    log.write(0, [batch])
    body = damaged(log.path(0).read_bytes()[len(OUTPUT_MAGIC) + 10 : -32], changes, None)
    data = OUTPUT_MAGIC + struct.pack(">HQ", VERSION, len(body)) + body
    log.path(0).write_bytes(data + hashlib.blake2b(data, digest_size=32).digest())
    try:
        batches = log.read(0)
    except TimelyError as error:
        assert isinstance(error, CheckpointCorrupt) and str(log.path(0)) in str(error) and "at byte" in str(error)
    else:
        for read in batches:  # validated: reading every value is safe
            read.to_pylist()


def test_replaying_a_log_that_holds_many_times_costs_no_comparison_per_time_held_for_each_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each message was checked against every time held, from the first taken: a log holding its 2,000 times
    latest first, then a message at the least, compared 2,000 times per message (40,000 held: an hour for 1 MB)."""
    from scopes import capture

    compared = [0]
    real = capture.less_equal

    def counted(first: Any, second: Any) -> bool:
        compared[0] += 1
        return real(first, second)

    monkeypatch.setattr(capture, "less_equal", counted)
    times = 2000
    payloads = [encode_event(Progress([(t, 1) for t in range(times, 0, -1)] + [(0, -1)]))]
    payloads += [encode_event(Batch(1, [k])) for k in range(times)]
    payloads += [encode_event(Progress([(t, -1) for t in range(1, times + 1)]))]
    path = tmp_path / "many.log"
    path.write_bytes(event_log_bytes(payloads))
    received: list[Any] = []

    def main(worker: Any) -> None:
        worker.dataflow(lambda scope: scope.replay([LogFile(path)]).inspect_batch(lambda t, b: received.extend(b)))

    execute(main, workers=1)
    assert sorted(received) == list(range(times))
    assert compared[0] < times
