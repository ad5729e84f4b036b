"""Every common Spark type, with nulls, through ``run_dataflow`` and back, row-wise and columnar (``spark``)."""

from __future__ import annotations

import datetime
import decimal
import sys
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from runtime.errors import ConfigurationError  # noqa: E402
from runtime.spark import DataflowFailed, arrow_schema, run_dataflow, to_record_batches  # noqa: E402
from runtime.spark.arrow import conform_batch  # noqa: E402
from runtime.spark.errors import SchemaMismatch  # noqa: E402
from scopes import ScopeBuilder, Stream  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def ship_by_value() -> None:
    """Spark's tasks cannot import the tests by name: ship this module by value."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def every_type() -> Any:
    """A ``StructType`` of one column of each common Spark type."""
    from pyspark.sql import types as t

    kinds = {
        "i": t.IntegerType(),
        "l": t.LongType(),
        "d": t.DoubleType(),
        "s": t.StringType(),
        "b": t.BooleanType(),
        "dt": t.DateType(),
        "ts": t.TimestampType(),
        "ntz": t.TimestampNTZType(),
        "dec": t.DecimalType(10, 2),
        "bin": t.BinaryType(),
        "f": t.FloatType(),
        "sh": t.ShortType(),
    }
    return t.StructType([t.StructField(name, kind) for name, kind in kinds.items()])


ROWS = [
    (1, 2**40, 1.5, "a", True, datetime.date(2020, 1, 2), datetime.datetime(2020, 1, 2, 3, 4, 5),
     datetime.datetime(2021, 1, 1), decimal.Decimal("1.25"), b"\x00x", 1.5, 3),
    (None,) * 12,
    (-2, -1, -0.5, "é", False, datetime.date(1, 1, 1), datetime.datetime(1970, 1, 1, 0, 0, 1),
     datetime.datetime(1999, 12, 31, 23, 59, 59, 999999), decimal.Decimal("-99999999.99"), b"", -2.5, -1),
]  # fmt: skip


def unchanged(scope: ScopeBuilder, batches: Stream) -> Stream:
    return batches


@pytest.mark.parametrize("columnar", [False, True])
def test_every_common_type_and_null_comes_back_as_spark_gave_it(spark: Any, columnar: bool) -> None:
    schema = every_type()
    frame = spark.createDataFrame(ROWS, schema)
    result = run_dataflow(frame, unchanged, schema, workers=2, columnar=columnar)
    assert result.schema == schema
    assert sorted(map(tuple, result.collect()), key=repr) == sorted(map(tuple, frame.collect()), key=repr)


def test_a_timestamp_schema_without_the_sessions_time_zone_says_what_to_pass() -> None:
    with pytest.raises(ConfigurationError, match="spark.sql.session.timeZone"):
        arrow_schema(every_type())
    assert str(arrow_schema(every_type(), "Europe/Paris")[1].field("ts").type) == "timestamp[us, tz=Europe/Paris]"


def not_nullable() -> Any:
    """``k long not null, s string not null``."""
    from pyspark.sql import types as t

    return t.StructType([t.StructField("k", t.LongType(), False), t.StructField("s", t.StringType(), False)])


@pytest.mark.parametrize("columnar", [False, True])
def test_a_null_in_a_column_the_schema_says_is_not_nullable_is_refused_at_once_naming_it(
    spark: Any, columnar: bool
) -> None:
    frame = spark.createDataFrame([(1, "a"), (2, None)], "k long, s string")
    with pytest.raises(DataflowFailed) as caught:
        run_dataflow(frame, unchanged, not_nullable(), workers=2, columnar=columnar)
    error = caught.value
    assert error.attempts == 1 and not error.retryable, str(error)[:3000]
    assert "column 's' is not nullable in the output schema" in str(error), str(error)[:3000]
    assert "SchemaMismatch" in str(error)
    assert "threading.py" not in str(error)  # the output operator, built by pytimely, has no line of the user's


@pytest.mark.parametrize(
    "schema", ["a long, a long", "a long, b string, a long", pa.schema([("a", pa.int64()), ("a", pa.string())])]
)
def test_an_output_schema_naming_a_column_twice_is_refused_before_the_job(spark: Any, schema: Any) -> None:
    frame = spark.createDataFrame([(1, "x")], "a long, b string")
    tracker = spark.sparkContext.statusTracker()
    jobs = tracker.getJobIdsForGroup("pytimely:twice")
    with pytest.raises(ConfigurationError, match="'a' more than once"):
        run_dataflow(frame, unchanged, schema, workers=2, name="twice")
    assert tracker.getJobIdsForGroup("pytimely:twice") == jobs


def halves(scope: ScopeBuilder, batches: Stream) -> Stream:
    return batches.map(lambda row: (row[0] / 2,))


def test_a_float_with_a_fraction_in_a_long_column_is_refused_not_truncated(spark: Any) -> None:
    frame = spark.createDataFrame([(2,), (3,)], "k long")
    with pytest.raises(DataflowFailed) as caught:
        run_dataflow(frame, halves, "half long", workers=2)
    error = caught.value
    assert error.attempts == 1 and "column 'half' has type int64" in str(error) and "float 1.5" in str(error)


@settings(deadline=None, max_examples=200)
@example(values=[2**60 + 1, 1.5], kind=pa.int64())  # Arrow infers no type for these: the typed path truncated 1.5
@example(values=[2**60 + 1, 2.0], kind=pa.int64())
@example(values=[1, 2.5], kind=pa.int8())
@given(
    values=st.lists(st.one_of(st.none(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True)), max_size=6),
    kind=st.sampled_from([pa.int8(), pa.int32(), pa.int64(), pa.uint64()]),
)
def test_output_rows_reach_an_integer_column_unchanged_or_are_refused(values: list[Any], kind: Any) -> None:
    schema = pa.schema([("x", kind)])
    try:
        batches = list(to_record_batches([(value,) for value in values], schema))
    except SchemaMismatch:
        return
    converted = [value for batch in batches for value in batch.column(0).to_pylist()]
    assert converted == values  # 2.0 == 2: a float without a fraction may become an int


@pytest.mark.parametrize(
    ("argument", "value"),
    [("connect_timeout", -1), ("connect_timeout", 0), ("stall_timeout", 0), ("stall_timeout", float("nan")),
     ("slot_wait", -1), ("stall_timeout", "60"), ("connect_timeout", True)],
)  # fmt: skip
def test_a_time_limit_that_is_no_number_of_seconds_is_refused_naming_it(spark: Any, argument: str, value: Any) -> None:
    frame = spark.range(0, 4, numPartitions=2)
    with pytest.raises(ConfigurationError, match=f"run_dataflow needs {argument}"):
        run_dataflow(frame, unchanged, "id long", workers=2, **{argument: value})


@pytest.mark.parametrize("directory", ["", " "])
def test_an_empty_checkpoint_directory_is_refused_not_taken_as_the_working_directory(
    spark: Any, directory: str
) -> None:
    frame = spark.range(0, 4, numPartitions=2)
    with pytest.raises(ConfigurationError, match="checkpoint="):
        run_dataflow(frame, unchanged, "id long", workers=2, checkpoint=directory)


@pytest.mark.parametrize("columnar", [False, True])
def test_strings_and_binaries_come_back_when_spark_hands_them_over_as_large_arrow_types(
    spark: Any, columnar: bool
) -> None:
    frame = spark.createDataFrame([(1, "a", b"x"), (2, None, None)], "k long, s string, b binary")
    spark.conf.set("spark.sql.execution.arrow.useLargeVarTypes", "true")
    try:
        result = run_dataflow(frame, unchanged, "k long, s string, b binary", workers=2, columnar=columnar)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.useLargeVarTypes")
    assert sorted(map(tuple, result.collect())) == [(1, "a", b"x"), (2, None, None)]


def test_a_string_or_binary_column_is_taken_in_its_large_form_or_not_and_other_types_must_match() -> None:
    schema = pa.schema([("s", pa.large_string()), ("b", pa.binary())])
    batch = pa.record_batch({"b": pa.array([b"y", None], pa.large_binary()), "s": pa.array(["x", None], pa.string())})
    (conformed,) = conform_batch(batch, schema)
    assert conformed.schema.equals(schema) and conformed.to_pylist() == [{"s": "x", "b": b"y"}, {"s": None, "b": None}]
    with pytest.raises(SchemaMismatch, match="column 's' has type large_string"):
        conform_batch(pa.record_batch({"s": pa.array([b"x"]), "b": pa.array([b"y"])}), schema)


def test_an_input_with_a_column_named_twice_after_a_join_is_refused_naming_it(spark: Any) -> None:
    left = spark.createDataFrame([(1, "x")], "id long, v string")
    right = spark.createDataFrame([(1, "y")], "id long, w string")
    joined = left.join(right, left.id == right.id)
    with pytest.raises(ConfigurationError, match="the input DataFrame .* has column.s. 'id' more than once"):
        run_dataflow(joined, unchanged, "id long, v string, id2 long, w string", workers=2)
    renamed = joined.toDF("id", "v", "id2", "w")
    assert run_dataflow(renamed, unchanged, "id long, v string, id2 long, w string", workers=2).collect() == [
        (1, "x", 1, "y")
    ]


def test_an_input_that_is_no_spark_dataframe_is_refused_saying_what_to_make(spark: Any) -> None:
    import pandas as pd

    for frame in (pd.DataFrame({"id": [1]}), spark.range(2).rdd, [(1,)]):
        with pytest.raises(ConfigurationError, match="needs a Spark DataFrame as its input"):
            run_dataflow(frame, unchanged, "id long", workers=2)
