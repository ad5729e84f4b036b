"""The mean of an integer column is computed as pandas and Arrow compute it: the values added as floats.

An integer sum wraps past ``2**63`` and does not convert to a float exactly
past ``2**53``; a mean is neither, for ``aggregate_batch`` and the columnar
windows, NumPy and Arrow batches, on any number of workers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from runtime.testing import run_dataflow
from scopes import Tumbling

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")

BIG = 2**62
ROWS = [(1, BIG), (2, 5), (1, BIG), (2, 6), (1, BIG), (3, 2**53 + 1), (3, 2**53 + 3)]
"""Key 1's sum wraps in int64; key 3's sum is past 2**53, where int64 -> float64 is not exact."""


def as_kind(rows: list[tuple[int, int]], kind: str) -> Any:
    array = np.array(rows, dtype=[("k", "i8"), ("v", "i8")])
    return array if kind == "numpy" else pa.table({"k": array["k"], "v": array["v"]})


def numpy_means(scope: Any, rows: Any) -> Any:
    return rows.map_batch(lambda r: as_kind(r, "numpy")).aggregate_batch("k", [("v", "mean"), ("v", "sum")])


def arrow_means(scope: Any, rows: Any) -> Any:
    return rows.map_batch(lambda r: as_kind(r, "arrow")).aggregate_batch("k", [("v", "mean"), ("v", "sum")])


def window_means(scope: Any, rows: Any) -> Any:
    tables = rows.map_batch(lambda r: pa.table({"k": [k for k, _ in r], "v": [v for _, v in r], "t": [0] * len(r)}))
    return tables.window_batch(Tumbling(1), keys="k", event_time="t").aggregate([("v", "mean")]).down


def pandas_means() -> dict[int, float]:
    return pd.DataFrame(ROWS, columns=["k", "v"]).groupby("k")["v"].mean().to_dict()


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("build", [numpy_means, arrow_means])
def test_the_mean_of_large_integers_equals_pandas(build: Any, workers: int) -> None:
    rows = [
        row if isinstance(row, dict) else dict(zip(("k", "v_mean", "v_sum"), row, strict=True))
        for row in run_rows(build, workers)
    ]
    assert {row["k"]: row["v_mean"] for row in rows} == pytest.approx(pandas_means(), rel=1e-12)
    # the integer sum wraps, as pandas' and Arrow's do: only the mean adds floats
    assert {row["k"]: row["v_sum"] for row in rows} == {1: -(2**62), 2: 11, 3: 2**54 + 4}


def run_rows(build: Any, workers: int) -> list[Any]:
    return run_dataflow(build, [ROWS], workers=workers).output()[0]


@pytest.mark.parametrize("workers", [1, 2])
def test_the_window_mean_of_large_integers_equals_pandas(workers: int) -> None:
    run = run_dataflow(window_means, [ROWS], workers=workers)
    means = {row["k"]: row["v_mean"] for row in run.output()[0]}
    assert means == pytest.approx(pandas_means(), rel=1e-12)
