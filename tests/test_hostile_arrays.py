"""Columnar batches crafted to lie: refused when read, from a file or the wire, never crashing the reader.

* An Arrow batch whose string offsets point outside its data, in a frame with a
  valid checksum, crashed (segfaulted) any reader once the column was read:
  every Arrow batch is now validated fully before use.  The reads run in a
  child process, so a regression fails the test instead of killing pytest.
* A numpy array header of dtype ``|V0`` declaring 2**40 elements held in no
  bytes was accepted, and replaying it iterated 2**40 records: dtypes of no
  bytes are refused, and so is any element count the bytes cannot hold.
* A ``U`` array whose UTF-32 data held a unit past U+10FFFF was accepted, and
  its strings raised ``SystemError`` when used: such data is refused.
"""

from __future__ import annotations

import contextlib
import io
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import msgpack  # type: ignore[import-untyped]
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.communication.arraycodec import _compressed
from runtime.communication.wire import BATCH_ARROW, BATCH_NDARRAY, decode_batch, encode_batch
from runtime.errors import ColumnarDecodeError, EncodingError, WireError
from runtime.eventlog import (
    EventEncodeError,
    EventLogCorrupt,
    EventReader,
    EventWriter,
    event_log_bytes,
    header_frame,
    read_event_log,
)
from scopes import INTEGER
from scopes.capture import Batch

ROOT = Path(__file__).resolve().parent.parent
EVENT_OFFSET = len(header_frame(INTEGER))

CRAFTED_ARROW = textwrap.dedent(
    """
    import struct, sys
    import pyarrow as pa
    from runtime import execute
    from runtime.communication.wire import decode_batch, encode_batch
    from runtime.errors import WireError
    from runtime.eventlog import EventLogCorrupt, LogFile, encode_event, event_log_bytes, read_event_log
    from scopes import INTEGER
    from scopes.capture import Batch, Progress, replay_into
    from runtime.communication import arraycodec

    # a writer that does not check what it sends, as a hostile peer or file would not: pytimely's own refuses
    # such a batch before it leaves the process (runtime.communication.arrow_validity)
    arraycodec.refuse_invalid = lambda batch: None

    # slot 1's offset points 1 GiB past the 5 bytes of data; the last offset is in range, so
    # Arrow's basic checks (which building and the IPC reader do) pass
    offsets = pa.py_buffer(struct.pack("<3i", 0, 1 << 30, 5))
    column = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(b"hello")])
    batch = pa.RecordBatch.from_arrays([column], names=["s"])
    path = sys.argv[1]
    for name, value in (("batch", batch), ("table", pa.Table.from_batches([batch]))):
        with open(path, "wb") as handle:
            handle.write(event_log_bytes([encode_event(Batch(0, value)), encode_event(Progress([(0, -1)]))]))
        try:
            events = read_event_log(path)
        except EventLogCorrupt as error:
            print(name, "file refused at", error.offset, "|", error, flush=True)
        else:
            print(name, "file read", events[0].data.column(0).to_pylist(), flush=True)
        try:
            def main(worker, path=path):
                worker.dataflow(lambda scope: replay_into([LogFile(path, INTEGER)], scope).inspect_batch(
                    lambda t, b: print(b.column(0).to_pylist())))
            execute(main, workers=1, stall_timeout=5)
        except Exception as error:
            print(name, "replay refused |", type(error).__name__, error, repr(error.__cause__), flush=True)
        else:
            print(name, "replay ran", flush=True)
        try:
            received = decode_batch(*encode_batch(value))
        except WireError as error:
            print(name, "wire refused |", error, flush=True)
        else:
            print(name, "wire read", received.column(0).to_pylist(), flush=True)
    """
)


def test_an_arrow_batch_with_an_offset_out_of_bounds_is_refused_not_a_crash(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    run = subprocess.run(
        [sys.executable, "-c", CRAFTED_ARROW, str(tmp_path / "crafted.log")],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, (run.returncode, run.stdout, run.stderr[-2000:])
    lines = run.stdout.splitlines()
    for name in ("batch", "table"):
        [file_line] = [line for line in lines if line.startswith(f"{name} file")]
        assert file_line.startswith(f"{name} file refused at {EVENT_OFFSET} |"), file_line
        assert "crafted.log" in file_line and f"byte offset {EVENT_OFFSET}" in file_line
        assert "out of bounds" in file_line
        [replay_line] = [line for line in lines if line.startswith(f"{name} replay")]
        assert "refused" in replay_line and "EventLogCorrupt" in replay_line, replay_line
        [wire_line] = [line for line in lines if line.startswith(f"{name} wire")]
        assert wire_line.startswith(f"{name} wire refused |") and "out of bounds" in wire_line, wire_line


def ndarray_bytes(spec: object, shape: list[int], data: bytes = b"") -> bytes:
    """An encoded numpy array with a hand-written header (see runtime.communication.arraycodec)."""
    header = msgpack.packb([spec, shape])
    return struct.pack(">I", len(header)) + header + data


def batch_event(array_bytes: bytes) -> bytes:
    return msgpack.packb([1, 0, msgpack.ExtType(5, array_bytes)])


def test_a_zero_byte_dtype_declaring_2_to_the_40_elements_is_refused(tmp_path: Path) -> None:
    attack = ndarray_bytes("|V0", [1 << 40])
    assert len(attack) <= 20
    path = tmp_path / "v0.log"
    path.write_bytes(event_log_bytes([batch_event(attack)]))
    with pytest.raises(EventLogCorrupt, match="no bytes") as failure:
        read_event_log(path)
    assert failure.value.offset == EVENT_OFFSET and str(path) in str(failure.value)
    with pytest.raises(WireError, match="no bytes"):
        decode_batch(BATCH_NDARRAY, attack)


@pytest.mark.parametrize(
    "spec",
    [
        "|S0",
        "<U0",
        ["struct", [], [], [], 0, []],
        ["sub", "<i4", [0]],
        ["struct", ["a"], [["sub", "<i8", [0]]], [0], 0, [None]],
    ],
    ids=["S0", "U0", "empty struct", "empty sub-array", "struct of an empty sub-array"],
)
def test_every_dtype_of_no_bytes_is_refused(spec: object) -> None:
    with pytest.raises(WireError, match="no bytes"):
        decode_batch(BATCH_NDARRAY, ndarray_bytes(spec, [1 << 40]))


@pytest.mark.parametrize(
    ("spec", "shape", "data"),
    [
        ("<i8", [1 << 40], b"\0" * 8),
        ("<i8", [1 << 20, 1 << 20], b"\0" * 16),
        ("|u1", [3], b"\0" * 4),
    ],
)
def test_element_counts_the_bytes_cannot_hold_are_refused(spec: str, shape: list[int], data: bytes) -> None:
    with pytest.raises(WireError, match="needs .* bytes of data"):
        decode_batch(BATCH_NDARRAY, ndarray_bytes(spec, shape, data))


def test_dtype_descriptions_nest_only_so_deep() -> None:
    spec: object = "<i2"
    for _ in range(40):
        spec = ["sub", spec, [1]]
    with pytest.raises(WireError, match="nests more than"):
        decode_batch(BATCH_NDARRAY, ndarray_bytes(spec, [1], b"\0\0"))


def test_arrays_of_no_bytes_an_element_are_refused_when_written() -> None:
    with pytest.raises(EventEncodeError, match="no bytes"):
        EventWriter(io.BytesIO(), close=False).push(Batch(0, np.zeros(3, "V0")))
    with pytest.raises(EncodingError, match="no bytes"):
        encode_batch(np.zeros(3, [("a", "<i8", (0,))]))


def test_honest_arrays_still_round_trip() -> None:
    for array in (np.arange(5), np.zeros((2, 0), "<i4"), np.array([b"ab", b"c"]), np.zeros(3, "V2")):
        back = decode_batch(*encode_batch(array))
        assert back.dtype == array.dtype and back.shape == array.shape and back.tobytes() == array.tobytes()


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
@pytest.mark.parametrize("dictionary", [False, True])
def test_compressed_arrow_buffers_are_refused_before_they_are_decompressed(compression: str, dictionary: bool) -> None:
    pa = pytest.importorskip("pyarrow")
    column = pa.array(np.zeros(1_000_000, np.int64))  # 8 MB that compress to a few KB
    if dictionary:
        column = pa.DictionaryArray.from_arrays(pa.array(np.zeros(1_000_000, np.int32)), column)
    batch = pa.record_batch({"x": column})
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, batch.schema, options=options) as writer:
        writer.write_batch(batch)
    data = sink.getvalue().to_pybytes()
    assert len(data) < 200_000
    with pytest.raises(WireError, match="compressed Arrow buffers"):
        decode_batch(BATCH_ARROW, data)
    with pytest.raises(EventLogCorrupt, match=f"byte offset {EVENT_OFFSET}.*compressed Arrow buffers"):
        read_event_log_bytes(event_log_bytes([msgpack.packb([1, 0, msgpack.ExtType(6, data)])]))


def read_event_log_bytes(data: bytes) -> list[object]:
    return [event for event in EventReader(io.BytesIO(data)) if event is not None]


def test_honest_arrow_batches_still_round_trip() -> None:
    pa = pytest.importorskip("pyarrow")
    words = pa.array(["a", None, "ccc", "a"]).dictionary_encode()
    batch = pa.record_batch({"w": words, "n": pa.array([1, 2, None, 4]), "l": pa.array([[1], [], None, [2, 3]])})
    table = pa.Table.from_batches([batch, batch.slice(1, 2)])
    for value in (batch, table, batch.slice(0, 0), pa.table({"x": pa.array([], pa.int8())})):
        back = decode_batch(*encode_batch(value))
        assert type(back) is type(value) and back.equals(value)
        assert back.to_pylist() == value.to_pylist()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_the_compression_check_reads_any_metadata_within_bounds(meta: bytes) -> None:
    with contextlib.suppress(ColumnarDecodeError):
        assert _compressed(meta) in (True, False)


def test_a_numpy_batch_of_no_axes_from_another_process_is_a_wire_error() -> None:
    """A scalar array is no batch (its rows are its first axis): it reached operators, which failed on its len()."""
    from runtime.communication.arraycodec import encode_ndarray

    with pytest.raises(WireError, match="no axes"):
        decode_batch(BATCH_NDARRAY, memoryview(bytearray(encode_ndarray(np.array(5)))))
    with pytest.raises(EncodingError, match="no axes"):
        encode_batch(np.array(5))
    assert decode_batch(BATCH_NDARRAY, encode_ndarray(np.array([5]))).tolist() == [5]


@pytest.mark.parametrize("count", [5, 0, -3])
def test_a_batch_sent_column_by_column_without_a_column_is_a_wire_error_not_an_empty_batch(count: int) -> None:
    """``[count]`` alone decoded to no records whatever the count said (an encoder never sends no column)."""
    from runtime.communication.wire import BATCH_COLUMNS

    with pytest.raises(WireError, match="at least one column"):
        decode_batch(BATCH_COLUMNS, msgpack.packb([count]))
    assert decode_batch(BATCH_COLUMNS, msgpack.packb([2, [1, 2], "a\0b"])) == [(1, "a"), (2, "b")]


def _units_beyond_unicode(array: np.ndarray, at: int) -> bytes:
    """``array`` encoded, with the 4 bytes at ``at`` (from the end) set to a unit no character has (0xffffffff)."""
    from runtime.communication.arraycodec import encode_ndarray

    data = bytearray(encode_ndarray(array))
    data[len(data) - at : len(data) - at + 4] = b"\xff\xff\xff\xff"
    return bytes(data)


@pytest.mark.parametrize(
    ("array", "at"),
    [
        (np.array(["ab", "cd"]), 4),
        (np.array(["ab", "cd"], ">U2"), 4),
        (np.zeros(2, [("n", "<i4"), ("s", "<U2")]), 4),
        (np.zeros(2, [("n", "<i4"), ("inner", [("s", ">U1", (2,))])]), 8),
    ],
    ids=["U", "big-endian U", "U field", "U sub-array in a nested field"],
)
def test_string_units_beyond_unicode_are_refused_not_read_into_broken_strs(array: np.ndarray, at: int) -> None:
    """A ``U`` array's data is UTF-32: a unit past U+10FFFF (found by fuzzing with right checksums) was read into a
    ``str`` CPython cannot hold, and printing the array, or calling the string's methods, raised ``SystemError``."""
    attack = _units_beyond_unicode(array, at)
    with pytest.raises(WireError, match="beyond Unicode"):
        decode_batch(BATCH_NDARRAY, attack)
    with pytest.raises(EventLogCorrupt, match=f"byte offset {EVENT_OFFSET}.*beyond Unicode"):
        read_event_log_bytes(event_log_bytes([batch_event(attack)]))
    honest = np.array(["\U0010ffff", "\ud800"])  # the last code point, and a lone surrogate (a str may hold one)
    assert decode_batch(*encode_batch(honest)).tolist() == honest.tolist()
    assert decode_batch(*encode_batch(array)).tobytes() == array.tobytes()


def _null_rows_batch(rows: int) -> bytes:
    """An Arrow record batch of one null column of ``rows`` rows, in a few hundred bytes (the length patched in)."""
    pa = pytest.importorskip("pyarrow")

    marker = 0x0A0B0C0D
    batch = pa.RecordBatch.from_arrays([pa.Array.from_buffers(pa.null(), marker, [None])], names=["k"])
    sink = pa.BufferOutputStream()  # written by Arrow itself: pytimely refuses to send so many rows in so few bytes
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes().replace(struct.pack("<q", marker), struct.pack("<q", rows))


@pytest.mark.parametrize("rows", [1 << 60, (1 << 31) - 1])
def test_an_arrow_batch_declaring_more_rows_than_its_bytes_hold_is_refused(rows: int) -> None:
    """Null columns take no bytes a row: 224 bytes (found by fuzzing the IPC stream) declared 2**60 rows, which
    decoded, and the columnar operators' key column then asked NumPy for 2**60 items (a bare ``ValueError``)."""
    attack = _null_rows_batch(rows)
    assert len(attack) < 300
    with pytest.raises(WireError, match=f"declares {rows} rows, more than its {len(attack)} bytes hold"):
        decode_batch(BATCH_ARROW, attack)
    with pytest.raises(EventLogCorrupt, match=f"byte offset {EVENT_OFFSET}.*declares {rows} rows"):
        read_event_log_bytes(event_log_bytes([msgpack.packb([1, 0, msgpack.ExtType(6, attack)])]))
    honest = _null_rows_batch(1000)  # a null column of a few rows still travels
    assert decode_batch(BATCH_ARROW, honest).num_rows == 1000


@pytest.mark.parametrize(
    ("name", "damaged"),
    [(b"qqq", b"q\xffq"), (b"Europe/Paris", b"Europe/Pari\xff"), (b"www", b"\xfe\xfe\xfe")],
    ids=["struct child", "time zone", "child of a list's struct"],
)
def test_an_arrow_schema_name_that_is_not_utf8_is_refused(name: bytes, damaged: bytes) -> None:
    """Found by fuzzing the IPC stream: a struct child's name (or a time zone) in damaged bytes passed full validation,
    which checks the data only, and every read of the struct's values then raised a bare ``UnicodeDecodeError``."""
    pa = pytest.importorskip("pyarrow")
    table = pa.table(
        {
            "st": pa.array([{"qqq": 1}]),
            "ts": pa.array([1], pa.timestamp("ms", tz="Europe/Paris")),
            "l": pa.array([[{"www": 1}]]),
        }
    )
    _, encoded = encode_batch(table)
    attack = bytes(encoded).replace(name, damaged)
    assert attack != bytes(encoded)
    with pytest.raises(WireError, match="UnicodeDecodeError"):
        decode_batch(BATCH_ARROW, attack)
    with pytest.raises(EventLogCorrupt, match=f"byte offset {EVENT_OFFSET}.*UnicodeDecodeError"):
        read_event_log_bytes(event_log_bytes([msgpack.packb([1, 0, msgpack.ExtType(7, attack)])]))
    assert decode_batch(BATCH_ARROW, bytes(encoded)).to_pylist() == table.to_pylist()


@pytest.mark.parametrize("shape", [[1 << 62, 0], [0, 1 << 62], [70_000, 0]])
def test_an_array_of_no_elements_declaring_huge_extents_is_refused(shape: list[int]) -> None:
    """Found by fuzzing array headers: shape (2**62, 0) holds no elements, so no data checks its 2**62 rows (as
    with a dtype of no bytes); it was a batch of 2**62 rows in 20 bytes, and concat_batches raised ValueError."""
    attack = ndarray_bytes("|b1", shape)
    with pytest.raises(WireError, match="holds no elements, and no data can back"):
        decode_batch(BATCH_NDARRAY, attack)
    with pytest.raises(EventLogCorrupt, match=f"byte offset {EVENT_OFFSET}.*holds no elements"):
        read_event_log_bytes(event_log_bytes([batch_event(attack)]))
    for honest in (np.zeros((0, 3)), np.zeros((5, 0)), np.zeros((0,), "<i4")):
        back = decode_batch(*encode_batch(honest))
        assert back.shape == honest.shape and back.dtype == honest.dtype


@pytest.mark.parametrize("titles", [[{"x": 1}], [["t"]], [b"t"], "t"])
def test_field_titles_that_are_not_strings_are_refused(titles: object) -> None:
    """Found by fuzzing array headers: numpy takes any object as a field title, and a dtype titled by a map is
    unhashable: concat_batches, which builds the set of its batches' dtypes, raised TypeError."""
    attack = ndarray_bytes(["struct", ["a"], ["<i4"], [0], 4, titles], [1], b"\0" * 4)
    with pytest.raises(WireError, match="titles of a numpy dtype must be strings or nil"):
        decode_batch(BATCH_NDARRAY, attack)
    titled = np.zeros(2, np.dtype([(("the title", "a"), "<i4")]))
    assert decode_batch(*encode_batch(titled)).dtype == titled.dtype


@pytest.mark.parametrize("unit", [0, 1], ids=["months", "days and milliseconds"])
def test_an_arrow_type_pyarrow_cannot_hold_in_python_is_refused(unit: int) -> None:
    """Found by fuzzing the IPC stream: an interval column's unit changed from month-day-nano to months (or
    day-time) decoded and validated, but pyarrow has no Python array class for those types, so every read of the
    column (scopes.batches.column, to_pylist) raised a bare KeyError."""
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"iv": pa.array([(1, 2, 3)], pa.month_day_nano_interval())})
    _, encoded = encode_batch(table)
    unit_field = bytes.fromhex("0600080006000600000000000200")  # the Interval table: its unit, 2 (month-day-nano)
    assert bytes(encoded).count(unit_field) == 1
    attack = bytes(encoded).replace(unit_field, unit_field[:-2] + bytes([unit, 0]))
    with pytest.raises(WireError, match="KeyError"):
        decode_batch(BATCH_ARROW, attack)
    with pytest.raises(EventLogCorrupt, match=f"byte offset {EVENT_OFFSET}.*KeyError"):
        read_event_log_bytes(event_log_bytes([msgpack.packb([1, 0, msgpack.ExtType(6, attack)])]))
    assert decode_batch(BATCH_ARROW, bytes(encoded)).to_pylist() == table.to_pylist()


@pytest.mark.parametrize(
    "array",
    [np.array(["NaT", "NaT"], "M8"), np.array(["NaT"], ">m8"), np.zeros(2, [("n", "<i2"), ("t", "<M8")])],
    ids=["M8", "big-endian m8", "M8 field"],
)
def test_datetimes_of_generic_unit_other_than_nat_are_refused(array: np.ndarray) -> None:
    """NumPy makes no datetime of generic unit but NaT: an array header naming ``M8`` over other data (found by
    fuzzing array headers) decoded, and printing or iterating the array raised a bare ValueError."""
    if array.dtype.names:
        array["t"] = np.datetime64("NaT")
    assert decode_batch(*encode_batch(array)).tobytes() == array.tobytes()  # all NaT: as numpy makes them
    attack = bytearray(encode_batch(array)[1].__bytes__())
    attack[-8:] = (5).to_bytes(8, "little" if array.dtype.str[0] != ">" else "big")
    with pytest.raises(WireError, match="generic unit other than NaT"):
        decode_batch(BATCH_NDARRAY, bytes(attack))
    with pytest.raises(EventLogCorrupt, match=f"byte offset {EVENT_OFFSET}.*generic unit other than NaT"):
        read_event_log_bytes(event_log_bytes([batch_event(bytes(attack))]))
