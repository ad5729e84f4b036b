"""run_dataflow(columnar=True): Arrow batches in as messages, and out to Spark as they are (the shared ``spark``)."""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from runtime.spark import DataflowFailed, current_task, run_dataflow
from runtime.spark.arrow import output_records, to_record_batches
from scopes import ScopeBuilder, Stream
from scopes.hashing import stable_hash

ROWS = 5_000
SCHEMA = pa.schema([("n", pa.int64()), ("key", pa.string()), ("value", pa.float64())])


@pytest.fixture(scope="module", autouse=True)
def ship_by_value() -> None:
    """Spark's tasks cannot import this test module by name: ship it by value."""
    try:
        from pyspark import cloudpickle
    except ImportError:  # without Spark the tests that need it skip (the spark fixture); the others run
        return
    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def input_table() -> pa.Table:
    return pa.table(
        {
            "n": pa.array(range(ROWS), pa.int64()),
            "key": [f"k{n % 41}" for n in range(ROWS)],
            "value": [n * 0.25 for n in range(ROWS)],
        }
    )


def only_record_batches(batch: Any) -> Any:
    """Refuse anything but an Arrow record batch: the columnar path must never hand over rows."""
    if type(batch) is not pa.RecordBatch:
        raise TypeError(f"expected a pyarrow.RecordBatch message, got {type(batch).__name__}")
    return batch


def identity(scope: ScopeBuilder, batches: Stream) -> Stream:
    """Arrow batches straight through (checked to be Arrow batches on the way)."""
    return batches.map_batch(only_record_batches, name="OnlyArrow")


def exchanged_with_task(scope: ScopeBuilder, batches: Stream) -> Stream:
    """Arrow batches exchanged by ``key`` between the tasks, each gaining the column ``task``."""

    def tag(batch: pa.RecordBatch) -> pa.RecordBatch:
        task = current_task()
        assert task is not None
        only_record_batches(batch)
        return batch.append_column("task", pa.array(np.full(batch.num_rows, task.index, np.int32)))

    return batches.map_batch(only_record_batches).exchange_batch("key").map_batch(tag, name="Tag")


def wrong_type(scope: ScopeBuilder, batches: Stream) -> Stream:
    """Arrow batches whose ``value`` column is a string, against a double in the schema."""
    return batches.map_batch(lambda batch: batch.set_column(2, "value", pa.array(["x"] * batch.num_rows)))


def test_arrow_batches_in_come_out_unchanged(spark: Any) -> None:
    table = input_table()
    frame = spark.createDataFrame(table)
    result = run_dataflow(frame, identity, SCHEMA, workers=2, columnar=True).toArrow()
    assert result.schema.equals(SCHEMA)
    assert result.sort_by("n").equals(table.sort_by("n"))


def test_arrow_batches_exchanged_by_column_between_tasks_keep_every_row(spark: Any) -> None:
    table = input_table()
    schema = SCHEMA.append(pa.field("task", pa.int32()))
    result = run_dataflow(spark.createDataFrame(table), exchanged_with_task, schema, workers=2, columnar=True)
    got = result.toArrow().sort_by("n")
    assert got.select(["n", "key", "value"]).equals(table.sort_by("n"))
    tasks = dict(zip(got.column("key").to_pylist(), got.column("task").to_pylist(), strict=False))
    assert set(tasks.values()) == {0, 1}
    assert all(stable_hash(key) % 2 == task for key, task in tasks.items())
    assert len(set(zip(got.column("key").to_pylist(), got.column("task").to_pylist(), strict=True))) == 41


def test_a_columnar_schema_mismatch_fails_at_once_naming_the_column_and_both_types(spark: Any) -> None:
    with pytest.raises(DataflowFailed) as caught:
        run_dataflow(spark.createDataFrame(input_table()), wrong_type, SCHEMA, workers=2, retries=2, columnar=True)
    error = caught.value
    assert error.attempts == 1 and not error.retryable
    message = str(error)
    assert "column 'value' has type double in the output schema" in message and "type string" in message


# ---------------------------------------------------------------------- without Spark: the output side


def test_a_batch_of_the_output_schema_is_handed_to_spark_as_it_is() -> None:
    batch = input_table().to_batches()[0]
    [out] = list(to_record_batches(output_records([batch]), SCHEMA))
    assert out is batch
    reordered = batch.select(["value", "n", "key"])
    [fixed] = list(to_record_batches(output_records([reordered]), SCHEMA))
    assert fixed.schema.equals(SCHEMA) and fixed.equals(batch)


def test_output_messages_of_every_kind_become_batches_of_the_schema() -> None:
    rows = [(1, "a", 0.5), {"n": 2, "key": "b", "value": 1.5}]
    structured = np.array([(3, "c", 2.5)], dtype=[("n", "<i8"), ("key", "U2"), ("value", "<f8")])
    table = pa.table({"n": [4], "key": ["d"], "value": [3.5]}, schema=SCHEMA)
    batches = list(to_record_batches(output_records([rows, structured, table, [table.to_batches()[0]]]), SCHEMA))
    assert all(batch.schema.equals(SCHEMA) for batch in batches)
    assert pa.Table.from_batches(batches).column("n").to_pylist() == [1, 2, 3, 4, 4]


def test_a_numpy_output_that_is_not_a_structured_array_says_what_fits() -> None:
    from runtime.spark import SchemaMismatch

    with pytest.raises(SchemaMismatch, match="only a 1-D structured array"):
        list(to_record_batches(output_records([np.arange(3)]), SCHEMA))


def with_message_rows(scope: ScopeBuilder, batches: Stream) -> Stream:
    """Each Arrow batch with the column ``rows``: how many rows its message held."""
    return batches.map_batch(
        lambda batch: only_record_batches(batch).append_column(
            "rows", pa.array(np.full(batch.num_rows, batch.num_rows))
        )
    )


def test_spark_small_arrow_batches_reach_the_dataflow_joined_in_order(spark: Any) -> None:
    table = input_table()
    before = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "300")  # each task's 2,500 rows in 9 batches
    try:
        frame = spark.createDataFrame(table).repartition(2)
        schema = SCHEMA.append(pa.field("rows", pa.int64()))
        got = run_dataflow(frame, with_message_rows, schema, workers=2, columnar=True).toArrow()
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", before)
    assert got.select(["n", "key", "value"]).sort_by("n").equals(table.sort_by("n"))
    messages = Counter(got.column("rows").to_pylist())  # message size -> rows that came in messages of that size
    assert all(rows % size == 0 for size, rows in messages.items())
    assert min(messages) > 300  # every task's partition (fewer rows than 65,536) came as one message, not 300 a time
    assert sum(rows // size for size, rows in messages.items()) == 2  # one message a task
