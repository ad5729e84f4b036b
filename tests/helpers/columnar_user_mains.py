"""Build functions over columnar batches for run_dataflow with processes (tests/test_columnar_shapes.py).

Each turns the epoch's rows (``[key, value]`` pairs, lists as the wire carries
them) into a batch and feeds one columnar operator; run_dataflow imports them by
name in every process.
"""

from __future__ import annotations

from typing import Any

import numpy as np

PAIRS = np.dtype([("k", "i8"), ("v", "i8")])


def two_d(rows: list[Any]) -> np.ndarray:
    """``np.array(lists, structured dtype)``: NumPy fills every field of a row with each value, shape ``(n, 2)``."""
    return np.array(rows, dtype=PAIRS)


def exchange_two_d(scope: Any, rows: Any) -> Any:
    """``exchange_batch`` by a column of 2-D structured arrays."""
    return rows.map_batch(two_d).exchange_batch("k")


def aggregate_two_d(scope: Any, rows: Any) -> Any:
    """``aggregate_batch`` of 2-D structured arrays."""
    return rows.map_batch(two_d).aggregate_batch("k", [("v", "sum")])


def floats_when_split(scope: Any, numbers: Any) -> Any:
    """Integers, or the same numbers as floats in batches of fewer than 3 (as on two workers): a wrong answer."""
    return numbers.map_batch(lambda batch: [n / 1 if len(batch) < 3 else n for n in batch])


def nan_array(scope: Any, numbers: Any) -> Any:
    """One NaN per record, in float arrays: every ``tolist()`` makes NaN objects of its own."""
    return numbers.map_batch(lambda batch: np.full(len(batch), np.nan))


def timestamped(scope: Any, numbers: Any) -> Any:
    """Structured arrays with a ``datetime64[ms]`` column, exchanged: records with ``datetime`` values."""
    stamped = np.dtype([("k", "i8"), ("at", "M8[ms]")])
    return numbers.map_batch(lambda batch: np.array([(n, n) for n in batch], dtype=stamped)).exchange_batch("k")


def arrow_zoned(scope: Any, numbers: Any) -> Any:
    """Arrow tables with a time-zoned timestamp and a decimal column, exchanged."""
    import decimal

    import pyarrow as pa  # type: ignore[import-untyped]

    def table(batch: list[int]) -> Any:
        return pa.table(
            {
                "k": pa.array(batch, pa.int64()),
                "at": pa.array(batch, pa.timestamp("ms", "UTC")),
                "price": pa.array([decimal.Decimal(n) / 4 for n in batch], pa.decimal128(10, 2)),
            }
        )

    return numbers.map_batch(table).exchange_batch("k")


def sub_arrays(scope: Any, numbers: Any) -> Any:
    """Structured arrays with a field of three integers per row."""
    triples = np.dtype([("k", "i8"), ("xyz", "i4", (3,))])
    return numbers.map_batch(lambda batch: np.array([(n, (n, n, n)) for n in batch], dtype=triples))


def exchange_rows_by_themselves(scope: Any, numbers: Any) -> Any:
    """A record-wise exchange whose key is the whole row of a structured array: an unhashable ``numpy.void``."""
    return numbers.map_batch(lambda batch: np.array([(n, n) for n in batch], dtype=PAIRS)).exchange(lambda row: row)


def exchange_rows_by_a_field(scope: Any, numbers: Any) -> Any:
    """A record-wise exchange of structured arrays by an ``int`` of each row."""
    return numbers.map_batch(lambda batch: np.array([(n, n) for n in batch], dtype=PAIRS)).exchange(
        lambda row: int(row["k"])
    )
