"""The row form's conversions in bulk, and the benchmark of the three forms on a real Spark (``local[2]``).

Rows in: each Arrow column becomes Python values in one call (through NumPy
for numbers), zipped into tuples in C.  Rows out: a list of rows is taken at
once and turned into columns with ``map(itemgetter)``, not row by row; what
does not fit still gets the row-by-row error that names it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from runtime.spark import SchemaMismatch
from runtime.spark.arrow import ROWS_PER_BATCH, OutputBatcher, input_rows

SCHEMA = pa.schema([("key", pa.int64()), ("name", pa.string()), ("score", pa.float64())])
ROOT = Path(__file__).resolve().parent.parent


def test_a_list_of_rows_is_taken_in_bulk_not_record_by_record(monkeypatch: pytest.MonkeyPatch) -> None:
    batcher = OutputBatcher(SCHEMA)

    def one_by_one(record: Any) -> Any:
        raise AssertionError("a list of rows went record by record")

    monkeypatch.setattr(batcher, "add_record", one_by_one)
    rows = [(n, f"n{n}", n / 2) for n in range(ROWS_PER_BATCH + 10)]
    ready = batcher.add(rows)
    assert [batch.num_rows for batch in ready] == [ROWS_PER_BATCH]
    assert batcher.add([[1, "list", 0.5], (2, "tuple", 1.0)]) == []
    assert batcher.add([{"score": 2.5, "name": "dict", "key": 3}]) == []
    rest = batcher.finish()
    table = pa.Table.from_batches([*ready, *rest])
    assert table.schema.equals(SCHEMA) and table.num_rows == ROWS_PER_BATCH + 13
    assert table.column("key").to_pylist()[-3:] == [1, 2, 3] and table.column("name").to_pylist()[-1] == "dict"
    assert table.column("score").to_pylist()[:3] == [0.0, 0.5, 1.0]


@pytest.mark.parametrize(
    ("rows", "words"),
    [
        ([(1, "a", 0.5), (2, "b")], "output row 1 has 2 field(s)"),
        ([(1, "a", 0.5), {"key": 2, "name": "b"}], "output row 1 is a dict"),
        ([(1, "a", 0.5), (2, 3, 0.5)], "output row 1 has int 3 there"),
        ([{"key": 1, "name": "a", "score": 0.5}, {"key": 1, "name": "a", "other": 0.5}], "not in the schema"),
    ],
)
def test_rows_that_do_not_fit_still_name_the_row_and_what_is_wrong(rows: list[Any], words: str) -> None:
    batcher = OutputBatcher(SCHEMA)
    with pytest.raises(SchemaMismatch, match=words.replace("(", r"\(").replace(")", r"\)")):
        batcher.add(rows)
        batcher.finish()


def test_input_columns_become_python_values_of_their_own_kind() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "i": pa.array([1, 2], pa.int32()),
            "f": pa.array([0.5, 1.5]),
            "b": pa.array([True, False]),
            "n": pa.array([7, None], pa.int64()),
            "s": pa.array(["x", None]),
        }
    )
    rows = input_rows(batch)
    assert rows == [(1, 0.5, True, 7, "x"), (2, 1.5, False, None, None)]
    assert [type(value) for value in rows[0]] == [int, float, bool, int, str]


def test_the_forms_benchmark_measures_plain_rows_and_columnar_with_the_same_answer(spark: Any) -> None:
    pytest.importorskip("pyspark")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import spark_forms

    found = spark_forms.measure_forms(spark, rows=20_000, keys=300, workers=2)
    assert all(found[form] > 0 for form in spark_forms.FORMS)
    assert found["rows_over_columnar"] == pytest.approx(found["rows"] / found["columnar"])
    assert found["rows_count"] == 20_000 and found["keys"] == 300
