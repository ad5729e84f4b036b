"""A record-wise operator refuses an Arrow batch: iterating a ``pyarrow.Table`` or ``RecordBatch`` gives its columns.

Found by a user-level audit: ``stream.map(f)`` or ``filter`` over Arrow tables took each column (a
``ChunkedArray``) as a record and went on, with a plausible wrong answer and no error.  ``map``, ``filter``,
``flat_map``, ``inspect``, ``branch``, ``key_by``, ``partition``, ``delay`` and ``accumulate`` now refuse such a
batch, naming the operator and the time, the same at every worker count.
"""

from __future__ import annotations

from typing import Any

import pytest

from runtime.errors import WorkerFailed
from runtime.testing import run_dataflow

pa = pytest.importorskip("pyarrow")

CONFIGURATIONS: list[dict[str, Any]] = [{"workers": 1}, {"workers": 2}, {"processes": 2}]


def as_tables(rows: Any) -> Any:
    """Each batch of ``{"user": ..}`` rows as an Arrow table (a batch operator, so the tables are what travels)."""
    return rows.map_batch(lambda batch: pa.Table.from_pylist(batch) if batch else batch, name="Tables")


def build_map(scope: Any, rows: Any) -> Any:
    return as_tables(rows).map(lambda record: record, name="Map")


def build_filter(scope: Any, rows: Any) -> Any:
    return as_tables(rows).filter(lambda record: True, name="Filter")


def build_flatmap(scope: Any, rows: Any) -> Any:
    return as_tables(rows).flat_map(lambda record: [record], name="FlatMap")


def build_inspect(scope: Any, rows: Any) -> Any:
    return as_tables(rows).inspect(lambda record: None, name="Inspect")


def build_branch(scope: Any, rows: Any) -> Any:
    return as_tables(rows).branch(lambda record: True, name="Branch")[1]


def build_keyby(scope: Any, rows: Any) -> Any:
    return as_tables(rows).key_by(lambda record: 0, name="KeyBy").stream


def build_partition(scope: Any, rows: Any) -> Any:
    return as_tables(rows).partition(2, lambda record: 0, name="Partition")[0]


def build_delay(scope: Any, rows: Any) -> Any:
    return as_tables(rows).delay(lambda record, time: time, name="Delay")


def build_accumulate(scope: Any, rows: Any) -> Any:
    return as_tables(rows).accumulate(0, lambda total, record: total + 1, name="Accumulate")


RECORD_WISE = ["Map", "Filter", "FlatMap", "Inspect", "Branch", "KeyBy", "Partition", "Delay", "Accumulate"]
"""``partition``, ``delay`` and ``accumulate`` took the columns as records too (``accumulate`` counted 1 for a table
of one column and two rows)."""


@pytest.mark.parametrize("configuration", CONFIGURATIONS, ids=["1 worker", "2 threads", "2 processes"])
@pytest.mark.parametrize("operator", RECORD_WISE)
def test_an_arrow_batch_is_refused_by_a_record_wise_operator(operator: str, configuration: dict[str, Any]) -> None:
    build = globals()[f"build_{operator.lower()}"]  # module level: the processes of run_dataflow import it by name
    with pytest.raises(WorkerFailed) as failed:
        run_dataflow(build, [[{"user": "ann"}, {"user": "bob"}]], **configuration)
    message = str(failed.value)
    assert "iterates as its columns, not its rows" in message, message
    assert f"operator '{operator}'" in message and "at time 0" in message, message


def test_lists_and_numpy_arrays_still_pass_as_records() -> None:
    np = pytest.importorskip("numpy")

    def build(scope: Any, rows: Any) -> Any:
        return rows.map_batch(lambda batch: np.array(batch)).map(int).filter(lambda n: n > 1)

    assert run_dataflow(build, [[1, 2, 3]], workers=2).output() == {0: [2, 3]}
