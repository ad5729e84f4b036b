"""examples/spark_user.py on the shared ``spark`` session: a DataFrame through a loop with exchange, and out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.example_loader import load_example

from runtime.spark import run_dataflow

spark_user = load_example("spark_user")


@pytest.fixture(scope="module", autouse=True)
def ship_by_value() -> None:
    """The tasks cannot import the example by name: ship it by value."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(spark_user)


def test_stopping_times_from_spark_range_match_plain_spark(spark: Any) -> None:
    numbers = spark.range(1, 2001)
    result = run_dataflow(numbers, spark_user.stopping_times, spark_user.OUTPUT_SCHEMA, workers=2)
    assert result.count() == 2000 and spark_user.differences(result, spark_user.plain_spark(numbers)) == 0
    longest = result.orderBy(result.steps.desc(), "id").first()
    assert (longest["id"], longest["steps"]) == (1161, 181)


def test_stopping_times_of_a_parquet_file_drop_what_is_not_positive(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "numbers.parquet")
    spark.range(-5, 500).write.parquet(path)
    numbers = spark.read.parquet(path)
    result = run_dataflow(numbers, spark_user.stopping_times, spark_user.OUTPUT_SCHEMA, workers=2)
    assert result.count() == 499 and spark_user.differences(result, spark_user.plain_spark(numbers)) == 0
