"""Key columns of many types through every columnar keyed operator (tests/test_columnar_key_types.py).

A *case* names the type of the key column ``k`` (Arrow, or a NumPy field) and
the values it holds; :func:`epochs` builds its batches (a value column ``v``
numbers the rows), the same in every process.  :func:`run_ops` builds one
dataflow with the operators asked for, all reading those batches, and returns
each output row with its key as a :func:`token`: a string that is equal for
keys the operators must treat as one key (every NaN, ``0.0`` and ``-0.0``,
``1`` and ``1.0``, one instant in any unit, a dictionary and its value) and
different otherwise.  The test compares them with what pandas computes from
the tokens of the input.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

EPOCHS = (0, 1, 3, 6)
"""The epochs with rows: ``Tumbling(2)`` windows [0, 2), [2, 4), [6, 8); ``Session(2)`` joins 0 and 1 only."""
BATCHES = 2
ROWS = 6
OPS = ("aggregate", "join", "window", "session", "join_latest", "exchange")


def _bits(bits: int) -> float:
    value: float = struct.unpack("<d", struct.pack("<Q", bits))[0]
    return value


FLOATS = [0.0, -0.0, 1.5, float("nan"), _bits(0xFFF8000000000000), _bits(0x7FF8000000000123), 3.0, float("inf")]
"""NaN of three bit patterns (one key), ``0.0`` and ``-0.0`` (one key)."""
INSTANT = dt.datetime(2020, 1, 1, 12)
DAYS = [dt.date(2020, 1, 1), dt.date(1969, 12, 31), dt.date(2024, 2, 29)]
INSTANTS = [INSTANT, INSTANT + dt.timedelta(seconds=1), INSTANT + dt.timedelta(milliseconds=5)]


def _arrow(values: list[Any], kind: Any) -> Any:
    if pa.types.is_floating(kind) and None not in values:
        return pa.array(np.array(values, np.float64).astype(kind.to_pandas_dtype()), kind)  # keeps NaN bits
    if pa.types.is_dictionary(kind):
        return pa.array(values, kind.value_type).dictionary_encode()
    return pa.array(values, kind)


ARROW_CASES: dict[str, tuple[list[Any], list[Any]]] = {
    **{name: ([0, 1, 2, 5, -7, 100], [getattr(pa, name)()]) for name in ("int8", "int16", "int32", "int64")},
    **{name: ([0, 1, 2, 5, 200], [getattr(pa, name)()]) for name in ("uint8", "uint16", "uint32")},
    "uint64": ([0, 1, 2**63 + 5, 2**64 - 1], [pa.uint64()]),
    **{name: (FLOATS, [getattr(pa, name)()]) for name in ("float16", "float32", "float64")},
    "bool": ([True, False], [pa.bool_()]),
    "string": (["a", "bb", "", "é", "a\x00b"], [pa.string()]),
    "large_string": (["a", "bb", "", "é"], [pa.large_string()]),
    "binary": ([b"a", b"bb", b"", b"\xff", b"a\x00"], [pa.binary()]),
    "large_binary": ([b"a", b"bb", b"\xff"], [pa.large_binary()]),
    "dictionary": (["a", "bb", "", "é"], [pa.dictionary(pa.int32(), pa.string())]),
    "date32": (DAYS, [pa.date32()]),
    "timestamp": (INSTANTS, [pa.timestamp("us")]),
    "time64": ([0, 10**6, 86_399 * 10**6], [pa.time64("us")]),
    "duration": ([-5, 0, 1_500], [pa.duration("ms")]),
    "timestamp_tz": ([t.replace(tzinfo=dt.UTC) for t in INSTANTS], [pa.timestamp("us", "Europe/Oslo")]),
    "decimal128": ([decimal.Decimal(x) for x in ("1.50", "0.00", "-2.25", "100.00")], [pa.decimal128(10, 2)]),
    "null": ([None], [pa.null()]),
    "int64_nulls": ([1, None, 2, 3], [pa.int64()]),
    "string_nulls": (["a", None, "bb", ""], [pa.string()]),
    "float64_nulls": ([1.5, None, float("nan"), -0.0, 0.0], [pa.float64()]),
    # one stream, batches of different types holding equal keys
    "string+dictionary": (["a", "bb", "", "é"], [pa.string(), pa.dictionary(pa.int8(), pa.string())]),
    "int32+int64": ([0, 1, 2, 5, -7, 100], [pa.int32(), pa.int64()]),
    "int64+float64": ([0, 1, 2, 5, -7], [pa.int64(), pa.float64()]),
    "timestamp_ms+ns": (INSTANTS, [pa.timestamp("ms"), pa.timestamp("ns")]),
}
"""Arrow cases: the distinct key values, and the key column's types (batches take them in turn)."""

NUMPY_CASES: dict[str, tuple[list[Any], str]] = {
    "int8": ([0, 1, 2, 5, -7, 100], "i1"),
    "uint64": ([0, 1, 2**63 + 5, 2**64 - 1], "u8"),
    "float16": (FLOATS, "f2"),
    "float64": (FLOATS, "f8"),
    "bool": ([True, False], "?"),
    "datetime64[ns]": (["2020-01-01T00:00:00", "2020-01-01T00:00:01", "NaT"], "M8[ns]"),
    "datetime64[D]": (["2020-01-01", "1969-12-31", "NaT"], "M8[D]"),
    "timedelta64[s]": ([1, 5, -3], "m8[s]"),
    "unicode": (["a", "bb", "", "é", "a "], "U3"),
    "bytes": ([b"a", b"bb", b"", b"\xff"], "S3"),
    "object": (["a", "bb", "", "é"], "O"),
}
"""NumPy cases: the distinct key values, and the dtype of the key field of structured arrays."""


def _picks(seed: int, count: int) -> list[int]:
    return np.random.default_rng(seed).integers(0, count, ROWS).tolist()


def _numpy(values: list[Any], dtype: str, picks: list[int], numbers: list[int]) -> np.ndarray:
    batch = np.empty(len(picks), dtype=[("k", dtype), ("v", np.int64)])
    if dtype.startswith("f"):
        batch["k"] = np.array([values[i] for i in picks], np.float64).astype(dtype)  # keeps NaN bits
    else:
        for row, index in enumerate(picks):
            batch["k"][row] = np.array(values[index]).astype(dtype) if dtype[0] in "Mm" else values[index]
    batch["v"] = numbers
    return batch


def epochs(case: str, seed: int = 0) -> list[list[Any]]:
    """The batches of ``case`` for each epoch of :data:`EPOCHS` (``seed`` 1 for the right side of a join)."""
    family, name = case.split(":")
    result = []
    for epoch in range(len(EPOCHS)):
        batches = []
        for number in range(BATCHES):
            serial = epoch * BATCHES + number
            first = (seed * 100 + serial) * ROWS
            numbers = list(range(first, first + ROWS))
            if family == "arrow":
                values, kinds = ARROW_CASES[name]
                picks = _picks(seed * 1000 + serial, len(values))
                column = _arrow([values[i] for i in picks], kinds[serial % len(kinds)])
                batches.append(pa.table({"k": column, "v": pa.array(numbers, pa.int64())}))
            else:
                values, dtype = NUMPY_CASES[name]
                batches.append(_numpy(values, dtype, _picks(seed * 1000 + serial, len(values)), numbers))
        result.append(batches)
    return result


def table_updates(case: str) -> list[Any]:
    """The table of ``join_latest``, sent at epoch 0: one row per distinct key of ``case`` (``w`` numbers them)."""
    seen: dict[str, None] = {}
    parts = []
    for batch in (batch for epoch in epochs(case) for batch in epoch):
        for row, key in enumerate(tokens(column_of(batch, "k"))):
            if key not in seen:
                seen[key] = None
                parts.append(pa.table({"k": to_arrow_column(column_of(batch, "k")).slice(row, 1)}))
    common = pa.unify_schemas([part.schema for part in parts], promote_options="permissive")
    table = pa.concat_tables([part.cast(common) for part in parts])
    return [table.append_column("w", pa.array(np.arange(table.num_rows) * 1000, pa.int64()))]


def column_of(batch: Any, name: str) -> Any:
    """A structured array's field, or an Arrow batch's column."""
    return batch[name] if isinstance(batch, np.ndarray) else batch.column(name)


def to_arrow_column(column: Any) -> Any:
    """An Arrow array of ``column`` (a NumPy field converted, NaT becoming null), dictionaries decoded."""
    if isinstance(column, np.ndarray):
        column = pa.array(column if column.dtype.kind != "O" else column.tolist())
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    return column


def _token(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, float):
        return "nan" if value != value else repr(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, decimal.Decimal):
        return _token(float(value))
    return repr(value)


def tokens(column: Any) -> list[str]:
    """The key :func:`token` of every row of ``column``: equal for keys the operators must treat as one."""
    column = to_arrow_column(column)
    kind = column.type
    if pa.types.is_float16(kind):
        column = column.cast(pa.float32())
    elif pa.types.is_temporal(kind):  # one instant in any unit: integer nanoseconds
        unit = "D" if pa.types.is_date32(kind) else "ms" if pa.types.is_date64(kind) else kind.unit
        factor = {"D": 86_400 * 10**9, "s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[unit]
        counts = column.view(pa.int32() if kind.bit_width == 32 else pa.int64()).cast(pa.int64())
        column = pc.multiply(counts, pa.scalar(factor, pa.int64()))
    return [_token(value) for value in column.to_pylist()]


def _rows(batch: Any) -> tuple[list[str], dict[str, list[Any]], str]:
    names = batch.dtype.names if isinstance(batch, np.ndarray) else batch.column_names
    others = {}
    for name in names:
        if name != "k":
            values = column_of(batch, name)
            others[name] = values.tolist() if isinstance(values, np.ndarray) else values.to_pylist()
    key = column_of(batch, "k")
    kind = f"numpy {key.dtype}" if isinstance(key, np.ndarray) else str(key.type)
    return tokens(key), others, kind


def run_ops(worker: Any, case: str, ops: tuple[str, ...] = OPS) -> dict[str, list[Any]]:
    """Build ``ops`` over the batches of ``case``; ``{op: [(time, key token, other columns, key type), ...]}``.

    Batch ``j`` of an epoch is sent by worker ``j % peers``; the table of
    ``join_latest`` by worker 0 at epoch 0.
    """
    from scopes import Session, Tumbling

    seen: dict[str, list[Any]] = {op: [] for op in ops}

    def keep(op: str) -> Any:
        def inspect(time: Any, batch: Any) -> None:
            keys, others, kind = _rows(batch)
            seen[op].append((time, keys, others, kind))

        return inspect

    def build(scope: Any) -> Any:
        left_in, left = scope.new_input("Left")
        right_in, right = scope.new_input("Right")
        table_in, table = scope.new_input("Table")
        outputs = {}
        if "aggregate" in ops:
            outputs["aggregate"] = left.aggregate_batch("k", [("v", "sum"), ("v", "count")], name="Agg")
        if "join" in ops:
            outputs["join"] = left.join_batch(right, "k", name="Join")
        if "window" in ops:
            outputs["window"] = left.key_by_columns("k").window(Tumbling(2), name="Win").aggregate([("v", "sum")])
        if "session" in ops:
            outputs["session"] = left.window_batch(Session(2), keys="k", name="Ses").aggregate([("v", "sum")])
        if "join_latest" in ops:
            outputs["join_latest"] = left.key_by_columns("k").join_latest(table.key_by_columns("k"), name="Latest")
        if "exchange" in ops:
            outputs["exchange"] = left.exchange_batch("k", name="Route")
        probes = []
        for op, stream in outputs.items():
            stream = getattr(stream, "down", stream)
            probes.append(stream.inspect_batch(keep(op)).probe())
        return left_in, right_in, table_in, probes

    left_in, right_in, table_in, probes = worker.dataflow(build)
    lefts, rights = epochs(case), epochs(case, seed=1)
    for number, time in enumerate(EPOCHS):
        for handle in (left_in, right_in, table_in):
            handle.advance_to(time)
        if number == 0 and worker.index == 0 and "join_latest" in ops:
            for batch in table_updates(case):
                table_in.send_batch(batch)
        for handle, batches in ((left_in, lefts[number]), (right_in, rights[number] if "join" in ops else [])):
            for index, batch in enumerate(batches):
                if index % worker.peers == worker.index:
                    handle.send_batch(batch)
    for handle in (left_in, right_in, table_in):
        handle.close()
    worker.step_while(lambda: not all(probe.done() for probe in probes))
    return seen


def run_one(worker: Any, op: str, case: str) -> dict[str, list[Any]]:
    """:func:`run_ops` with the one operator ``op``."""
    return run_ops(worker, case, (op,))
