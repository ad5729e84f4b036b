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
