"""Columnar batches on the wire: numpy arrays and Arrow batches travel as themselves, never pickled."""

from __future__ import annotations

import ast
import gc
import io
import pickle
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as nps

from runtime.codec import decode_ndarray
from runtime.communication.arraycodec import encode_ndarray
from runtime.communication.wire import (
    BATCH_ARROW,
    BATCH_ARROW_TABLE,
    BATCH_NDARRAY,
    EncodingError,
    FrameReader,
    WireError,
    copy_decoded,
    decode_batch,
    decode_value,
    encode_batch,
    encode_value,
    frame,
    register_codec,
)

ROOT = Path(__file__).resolve().parent.parent

dtypes = st.one_of(
    nps.scalar_dtypes(),
    nps.integer_dtypes(endianness="?"),
    nps.floating_dtypes(endianness="?"),
    nps.unicode_string_dtypes(min_len=1, max_len=6),
    nps.byte_string_dtypes(min_len=1, max_len=6),
    nps.datetime64_dtypes(),
    nps.timedelta64_dtypes(),
    nps.nested_dtypes(max_itemsize=64),
)
arrays = nps.arrays(dtypes, nps.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6))
batches = nps.arrays(dtypes, nps.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=6))
"""Arrays that are batches: a batch's rows are its first axis, so it has one."""


def same_array(a: Any, b: Any) -> bool:
    """Same class, dtype, shape and bytes (bytes, so that NaN and NaT compare equal to themselves)."""
    return type(a) is type(b) is np.ndarray and a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@settings(max_examples=300, deadline=None)
@given(batches)
def test_numpy_arrays_of_any_fixed_width_dtype_and_shape_round_trip_as_batches(array: Any) -> None:
    path, data = encode_batch(array)
    assert path == BATCH_NDARRAY
    received = decode_batch(path, data)
    assert same_array(received, array)
    assert received.flags.writeable


@settings(max_examples=150, deadline=None)
@given(batches, st.integers(1, 3))
def test_strided_views_travel_as_their_contents(array: Any, step: int) -> None:
    view = array[::step]
    assert same_array(decode_batch(*encode_batch(view)), view.copy(order="C"))


@settings(max_examples=150, deadline=None)
@given(arrays, st.text(max_size=4))
def test_arrays_inside_values_round_trip(array: Any, label: str) -> None:
    decoded = decode_value(encode_value([(label, array), {"a": array}]))
    (got_label, first), second = decoded[0], decoded[1]["a"]
    assert got_label == label
    assert same_array(first, array) and same_array(second, array)


optional_ints = st.lists(st.none() | st.integers(-(2**63), 2**63 - 1), max_size=20)
optional_text = st.lists(st.none() | st.text(max_size=5), max_size=20)


@st.composite
def record_batches(draw: st.DrawFn) -> pa.RecordBatch:
    rows = draw(st.integers(0, 20))
    columns = {
        "i": pa.array(
            draw(st.lists(st.none() | st.integers(-(2**63), 2**63 - 1), min_size=rows, max_size=rows)), pa.int64()
        ),
        "s": pa.array(draw(st.lists(st.none() | st.text(max_size=5), min_size=rows, max_size=rows)), pa.string()),
        "f": pa.array(draw(st.lists(st.floats(allow_nan=False), min_size=rows, max_size=rows)), pa.float64()),
        "b": pa.array(draw(st.lists(st.binary(max_size=4), min_size=rows, max_size=rows)), pa.binary()),
        "l": pa.array(
            draw(st.lists(st.lists(st.integers(0, 9), max_size=3), min_size=rows, max_size=rows)), pa.list_(pa.int32())
        ),
    }
    chosen = draw(st.lists(st.sampled_from(sorted(columns)), min_size=1, max_size=5, unique=True))
    return pa.record_batch({name: columns[name] for name in chosen}, metadata={b"origin": b"test"})


@settings(max_examples=100, deadline=None)
@given(record_batches())
def test_arrow_record_batches_round_trip_with_schema_and_metadata(batch: pa.RecordBatch) -> None:
    path, data = encode_batch(batch)
    assert path == BATCH_ARROW
    received = decode_batch(path, data)
    assert type(received) is pa.RecordBatch
    assert received.equals(batch, check_metadata=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(record_batches(), min_size=1, max_size=3))
def test_arrow_tables_round_trip_with_their_chunks(batches: list[pa.RecordBatch]) -> None:
    schema = batches[0].schema
    table = pa.Table.from_batches([b for b in batches if b.schema.equals(schema)], schema=schema)
    path, data = encode_batch(table)
    assert path == BATCH_ARROW_TABLE
    received = decode_batch(path, data)
    assert type(received) is pa.Table
    assert received.equals(table, check_metadata=True)
    chunks = [len(chunk) for chunk in table.column(0).chunks if len(chunk)]
    assert [len(chunk) for chunk in received.column(0).chunks if len(chunk)] == chunks
    nested = decode_value(encode_value((1, table, batches[0])))
    assert nested[1].equals(table) and nested[2].equals(batches[0])


def test_columnar_batches_travel_through_frames_split_anywhere() -> None:
    batches = [np.arange(10), np.array([("a", 1.5)], dtype=[("w", "U3"), ("x", "f8")]), pa.record_batch({"x": [1, 2]})]
    stream = b"".join(frame([0, time, path], data) for time, (path, data) in enumerate(map(encode_batch, batches)))
    reader = FrameReader()
    received = []
    for start in range(0, len(stream), 7):
        received.extend(reader.feed(stream[start : start + 7]))
    assert [header[1] for header, _ in received] == [0, 1, 2]
    assert same_array(decode_batch(received[0][0][2], received[0][1]), batches[0])
    assert same_array(decode_batch(received[1][0][2], received[1][1]), batches[1])
    assert decode_batch(received[2][0][2], received[2][1]).equals(batches[2])


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(1, 300_000), min_size=1, max_size=12),
    st.lists(st.sampled_from([0, 10, 40_000]), max_size=4),
)
def test_large_frames_are_gathered_whole_whatever_the_chunks(chunks: list[int], sizes: list[int]) -> None:
    """Large frames (numpy batches of 320 kB) between small ones, fed in chunks of any size, come out intact."""
    batches: list[Any] = [np.arange(size, dtype=np.float64) for size in sizes] + [np.arange(40_000), [1, "two"]]
    stream = b"".join(frame([0, index, path], data) for index, (path, data) in enumerate(map(encode_batch, batches)))
    reader = FrameReader()
    received = []
    position = 0
    for chunk in [*chunks, len(stream)]:
        received.extend(reader.feed(memoryview(stream)[position : position + chunk]))
        position += chunk
        if position >= len(stream):
            break
    assert reader.pending == 0
    assert [header[1] for header, _ in received] == list(range(len(batches)))
    for (header, payload), batch in zip(received, batches, strict=True):
        got = decode_batch(header[2], payload)
        if isinstance(batch, list):
            assert got == batch
        else:
            assert same_array(got, batch) and got.flags.writeable


def test_a_large_received_array_shares_the_frame_buffer_instead_of_copying_it() -> None:
    data = frame([0, BATCH_NDARRAY], encode_batch(np.arange(100_000))[1])
    reader = FrameReader()
    received = list(reader.feed(data[:1000])) + list(reader.feed(data[1000:]))
    ((header, payload),) = received
    assert isinstance(payload, memoryview) and not payload.readonly
    array = decode_batch(header[1], payload)
    assert not array.flags.owndata and array.flags.writeable and array.sum() == sum(range(100_000))
    assert array.ctypes.data % 16 == 0  # the reader placed the payload so that the data lies aligned


@pytest.mark.parametrize("cut", [1, 7, 1000, 70_000])
def test_a_large_structured_array_arrives_aligned_and_shared_wherever_the_stream_is_cut(cut: int) -> None:
    offer = np.dtype([("node", np.int32), ("flag", np.int32), ("label", np.int64)])
    batch = np.zeros(50_000, offer)
    batch["label"] = np.arange(50_000)
    data = frame([0, 7, "a longer header", BATCH_NDARRAY], encode_batch(batch)[1])
    reader = FrameReader()
    ((header, payload),) = list(reader.feed(data[:cut])) + list(reader.feed(data[cut:]))
    received = decode_batch(header[3], payload)
    assert received["node"].flags.aligned and received["label"].flags.aligned
    assert not received.flags.owndata  # shares the frame's buffer: no copy was needed
    assert (received == batch).all()


def test_each_receiver_gets_its_own_array_and_arrow_batches_are_shared() -> None:
    array = decode_batch(*encode_batch(np.arange(4)))
    copy = copy_decoded(BATCH_NDARRAY, array)
    copy[0] = 99
    assert array[0] == 0
    batch = decode_batch(*encode_batch(pa.record_batch({"x": [1]})))
    assert copy_decoded(BATCH_ARROW, batch) is batch


def test_encoding_copies_memory_and_does_nothing_per_row() -> None:
    """A million-row array is encoded as its bytes plus a small header, whatever the row count."""
    array = np.arange(1_000_000, dtype=np.int64)
    path, data = encode_batch(array)
    assert len(data) - array.nbytes < 64
    assert bytes(data).endswith(array.tobytes())
    table = pa.table({"x": array})
    assert len(encode_batch(table)[1]) - array.nbytes < 1024


def python_calls(function: Any) -> int:
    """How many Python and C functions ``function()`` calls (a count that per-row work would make grow)."""
    count = 0

    def profiler(_frame: Any, event: str, _arg: Any) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    # A garbage collection during the call would run finalizers left by earlier
    # tests (a capability's __del__, say) and count their calls as ours.
    gc.collect()
    gc.disable()
    sys.setprofile(profiler)
    try:
        function()
    finally:
        sys.setprofile(None)
        gc.enable()
    return count


def through_the_wire(batch: Any) -> Any:
    """Encode, frame, split and decode ``batch`` as two processes do."""
    path, payload = encode_batch(batch)
    data = frame([0, 1, path], payload)
    ((header, body),) = list(FrameReader().feed(data))
    return decode_batch(header[2], body)


@pytest.mark.parametrize("kind", ["numpy", "structured", "arrow", "table"])
def test_sending_a_columnar_batch_costs_the_same_calls_for_a_thousand_rows_as_for_a_million(kind: str) -> None:
    def make(rows: int) -> Any:
        keys = np.arange(rows, dtype=np.int64)
        if kind == "numpy":
            return keys
        if kind == "structured":
            array = np.zeros(rows, dtype=[("k", "<i8"), ("word", "U4"), ("x", "<f8")])
            array["k"] = keys
            return array
        batch = pa.record_batch({"k": keys, "x": keys.astype(np.float64)})
        return batch if kind == "arrow" else pa.Table.from_batches([batch, batch])

    small, large = make(1_000), make(1_000_000)
    assert (
        same_array(through_the_wire(large), large)
        if kind in ("numpy", "structured")
        else (through_the_wire(large).equals(large))
    )
    through_the_wire(small)  # warm up: first calls import and cache
    calls = python_calls(lambda: through_the_wire(large))
    assert calls < 200 and abs(calls - python_calls(lambda: through_the_wire(small))) <= 3  # small frames: bytes


# ---------------------------------------------------------------------- nothing is unpickled


@pytest.fixture
def no_unpickling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every way of unpickling fail loudly while the test runs."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("something was unpickled")

    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)
    monkeypatch.setattr(np, "load", refuse)


def test_nothing_received_is_unpickled(no_unpickling: None) -> None:
    values: list[Any] = [
        np.arange(3),
        np.array([("a", 1)], dtype=[("k", "U2"), ("v", "i4")]),
        np.array([b"xy"]),
        np.array(["2024-01-01"], dtype="M8[D]"),
        pa.record_batch({"x": [1, None], "y": ["a", "b"]}),
        pa.table({"x": [1.5]}),
    ]
    for value in values:
        received = decode_batch(*encode_batch(value))
        assert type(received) is type(value)
        decode_value(encode_value([value]))


def test_an_object_array_is_refused_saying_what_to_do() -> None:
    for array in (
        np.array(["a", 1], dtype=object),
        np.zeros(2, dtype=[("k", "O"), ("v", "i4")]),
    ):
        with pytest.raises(EncodingError, match="dtype .*object.*never pickles.*astype") as failure:
            encode_batch(array)
        assert failure.value.type_name == "numpy.ndarray"
        with pytest.raises(EncodingError, match="never pickles"):
            encode_value([array])


def test_a_received_array_claiming_an_object_dtype_is_refused_not_unpickled(no_unpickling: None) -> None:
    header = msgpack.packb(["|O", [1]])
    forged = struct.pack("!I", len(header)) + header + pickle.dumps("payload")[:8]
    with pytest.raises(WireError, match="dtype object, which would need unpickling"):
        decode_batch(BATCH_NDARRAY, forged)


def test_numpy_and_arrow_types_cannot_have_codecs() -> None:
    for cls in (np.ndarray, pa.RecordBatch, pa.Table):
        with pytest.raises(ValueError, match="travels natively"):
            register_codec(cls, lambda v: v, lambda v: v)


def test_other_batch_types_are_refused_naming_them() -> None:
    with pytest.raises(EncodingError, match="a batch must be a list, a numpy array.*got builtins.tuple"):
        encode_batch((1, 2))
    with pytest.raises(EncodingError, match="numpy.ma.*MaskedArray"):
        encode_batch(np.ma.masked_array([1, 2], mask=[0, 1]))


# ---------------------------------------------------------------------- damage


def test_a_corrupt_numpy_frame_gives_a_clear_error() -> None:
    path, parts = encode_batch(np.arange(10, dtype=np.int32))
    data = bytes(parts)  # an array's payload is its prefix and its memory, joined here to damage it
    with pytest.raises(WireError, match=r"dtype int32 and shape \(10,\) needs 40 bytes of data, got 39"):
        decode_batch(path, data[:-1])
    with pytest.raises(WireError, match="columnar batch.*header claims"):
        decode_batch(path, data[:6])
    with pytest.raises(WireError, match="columnar batch.*at least 4 bytes"):
        decode_batch(path, b"\x00")
    bad_dtype = msgpack.packb(["<not-a-dtype", [1]])
    with pytest.raises(WireError, match="malformed numpy array"):
        decode_batch(path, struct.pack("!I", len(bad_dtype)) + bad_dtype + b"\x00" * 8)
    bad_shape = msgpack.packb(["<i4", [-1]])
    with pytest.raises(WireError, match="not an array shape"):
        decode_batch(path, struct.pack("!I", len(bad_shape)) + bad_shape)


def test_a_corrupt_arrow_frame_gives_a_clear_error() -> None:
    path, data = encode_batch(pa.record_batch({"x": list(range(100))}))
    with pytest.raises(WireError, match="malformed an Arrow record batch|malformed .*Arrow IPC"):
        decode_batch(path, data[: len(data) // 2])
    with pytest.raises(WireError, match="Arrow IPC"):
        decode_batch(BATCH_ARROW_TABLE, b"\xff" * 40)
    with pytest.raises(WireError, match="Arrow IPC"):
        decode_value(msgpack.packb([msgpack.ExtType(6, b"junk")]))


def test_a_frame_with_a_corrupt_nested_array_gives_a_clear_error() -> None:
    good = encode_value([np.arange(4)])
    with pytest.raises(WireError, match="needs 32 bytes of data"):
        decode_value(_shorten_ext(good))


def _shorten_ext(encoded: bytes) -> bytes:
    """The same value with the array's data one byte short (the ext length adjusted to match)."""
    (value,) = msgpack.unpackb(encoded, ext_hook=lambda code, data: msgpack.ExtType(code, data))
    return msgpack.packb([msgpack.ExtType(value.code, value.data[:-1])])


# ---------------------------------------------------------------------- without pyarrow

_WITHOUT_PYARROW = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import numpy as np

    import runtime
    from runtime import execute
    from runtime.communication.wire import WireError, decode_batch, BATCH_ARROW

    import {module}

    assert "pyarrow" not in sys.modules, "importing the runtime imported pyarrow"
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        pass
    else:
        raise AssertionError("the pyarrow blocker did not work")
    results = execute({module}.exchange_arrays, workers=1, processes=2, stall_timeout=20)
    print("results", results)
    try:
        decode_batch(BATCH_ARROW, Path(sys.argv[1]).read_bytes())
    except WireError as error:
        print("error", error)
    """
)


def test_the_runtime_works_without_pyarrow_and_says_what_to_install_for_an_arrow_batch(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "pyarrow.py").write_text("raise ImportError('pyarrow is blocked for this test')\n")
    arrow_bytes = tmp_path / "batch.arrow"
    arrow_bytes.write_bytes(encode_batch(pa.record_batch({"x": [1]}))[1])
    script = tmp_path / "script.py"
    script.write_text(_WITHOUT_PYARROW.format(module="helpers.columnar_helpers"))
    env = {
        "PYTHONPATH": f"{blocker}:{ROOT}:{ROOT / 'tests'}",
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        [sys.executable, str(script), str(arrow_bytes)], env=env, capture_output=True, text=True, timeout=90
    )
    assert done.returncode == 0, done.stderr
    lines = io.StringIO(done.stdout).read().splitlines()
    results = ast.literal_eval(next(line for line in lines if line.startswith("results"))[len("results ") :])
    assert all(results), "both workers receive records"
    assert sorted(results[0] + results[1]) == [(key, list(range(key)), "int16") for key in range(6)]
    error = next(line for line in lines if line.startswith("error"))
    assert "pyarrow is not installed in this process" in error and "pip install pyarrow" in error


def test_decode_of_a_nested_corrupt_array_is_a_wire_error() -> None:
    with pytest.raises(WireError):
        decode_value(msgpack.packb([msgpack.ExtType(5, b"\x00\x00\x00\x05abc")]))
    assert decode_ndarray(encode_ndarray(np.arange(3))).tolist() == [0, 1, 2]


def test_a_received_array_is_aligned_for_every_field_whatever_its_offset_in_the_frame() -> None:
    """Misaligned memory sends NumPy down slow paths (np.minimum.at 20x slower): such a body is copied once."""
    from runtime.communication.arraycodec import ndarray_from

    offer = np.dtype([("node", np.int32), ("flag", np.int32), ("label", np.int64)])
    original = np.zeros(100, offer)
    original["node"] = np.arange(100)
    original["label"] = np.arange(100) * 3
    for offset in range(9):
        buffer = bytearray(offset + original.nbytes)
        buffer[offset:] = original.tobytes()
        from runtime.communication.arraycodec import _dtype_spec

        received = ndarray_from([_dtype_spec(offer), [100]], memoryview(buffer)[offset:])
        assert received["node"].flags.aligned and received["label"].flags.aligned
        assert (received == original).all()
        shares = np.shares_memory(received, np.frombuffer(buffer, np.uint8))
        assert shares == ((np.frombuffer(buffer, np.uint8).ctypes.data + offset) % 16 == 0)
