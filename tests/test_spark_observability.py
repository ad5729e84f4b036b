"""What the Spark UI and ``on_progress`` show of a dataflow, on a real Spark (``local[2]``, the shared fixture).

The dataflow's job carries its ``name=`` (job group, description, stage name,
as the status tracker reports them), the driver's phases before the job are
reported, and choosing the partitions runs no Spark job of its own.
"""

from __future__ import annotations

import sys
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from runtime.spark import run_dataflow  # noqa: E402
from runtime.spark.driver_phases import job_group, partitions_without_running  # noqa: E402
from scopes import ScopeBuilder, Stream  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def ship_by_value() -> None:
    """Spark's tasks cannot import the tests by name: ship this module by value."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def unchanged(scope: ScopeBuilder, batches: Stream) -> Stream:
    return batches


def grouped(spark: Any) -> Any:
    """A DataFrame whose plan has a shuffle (a ``groupBy``): 50 rows ``(key long, total long)``."""
    from pyspark.sql import functions as F

    numbers = spark.range(1000).select((F.col("id") % 50).alias("key"), F.col("id").alias("n"))
    return numbers.groupBy("key").agg(F.sum("n").alias("total"))


def test_the_spark_ui_shows_the_dataflows_name_as_job_group_description_and_stage(spark: Any) -> None:
    context = spark.sparkContext
    frame = spark.createDataFrame(pa.table({"n": list(range(100))}))
    result = run_dataflow(frame, unchanged, "n long", workers=2, name="ui-labels")
    assert result.count() == 100
    tracker = context.statusTracker()
    jobs = tracker.getJobIdsForGroup(job_group("ui-labels"))
    assert jobs, "no job in the dataflow's job group"
    stage_names = {
        tracker.getStageInfo(stage).name
        for job in jobs
        for stage in tracker.getJobInfo(job).stageIds
        if tracker.getStageInfo(stage) is not None
    }
    assert "pytimely dataflow 'ui-labels'" in stage_names, stage_names
    assert not any("NativeMethodAccessorImpl" in name for name in stage_names)
    store = context._jsc.sc().statusStore()  # noqa: SLF001 - the description is not in PySpark's tracker
    descriptions = {store.job(job).description().getOrElse(None) for job in jobs}
    assert "pytimely dataflow 'ui-labels': 2 barrier task(s), attempt 1 of 3" in descriptions, descriptions


def test_the_callers_job_group_is_restored_and_choosing_partitions_runs_no_job(spark: Any) -> None:
    context = spark.sparkContext
    context.setJobGroup("caller-group", "the caller's own jobs")
    try:
        events: list[dict[str, Any]] = []
        result = run_dataflow(grouped(spark), unchanged, "key long, total long", workers=2, on_progress=events.append)
        # the groupBy's stages ran inside the dataflow's job, not before it under the caller's group
        assert context.statusTracker().getJobIdsForGroup("caller-group") == []
        assert context.getLocalProperty("spark.jobGroup.id") == "caller-group"
        assert context.getLocalProperty("callSite.short") is None
        assert sorted(result.toArrow().column("key").to_pylist()) == list(range(50))
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)
    driver = [event for event in events if event["task"] is None]
    assert [event.get("phase", event["event"]) for event in driver] == ["arguments", "preflight", "plan", "submitted"]
    assert all(event["seconds"] >= 0 for event in driver if event["event"] == "phase")
    submitted = events.index(driver[-1])
    assert all(event["task"] is not None for event in events[submitted + 1 :])
    assert any(event["event"] == "started" for event in events[submitted + 1 :])


def test_partitions_are_read_from_the_plan_where_it_is_certain_and_nothing_runs(spark: Any) -> None:
    context = spark.sparkContext
    context.setJobGroup("plan-reading", "partitions from the plan")
    try:
        assert partitions_without_running(spark.range(10).repartition(3)) == 3
        assert partitions_without_running(spark.range(10, numPartitions=4).select("id")) == 4
        assert partitions_without_running(spark.range(10)) == context.defaultParallelism  # PySpark fills it in
        assert partitions_without_running(grouped(spark)) is None
        assert context.statusTracker().getJobIdsForGroup("plan-reading") == []
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)


@pytest.mark.parametrize(
    "text",
    [
        "a long, b string",
        "n bigint,key STRING",
        "x: double, y: int, z boolean",
        "d date, bin binary, t tinyint, s smallint, f float, r real, i integer",
    ],
)
def test_a_flat_ddl_schema_is_parsed_in_python_as_sparks_parser_does(
    spark: Any, text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.sql import types

    from runtime.spark.ddl import simple_ddl
    from runtime.spark.driver import arrow_schema

    assert simple_ddl(text) == types._parse_datatype_string(text)

    def no_jvm(text: str) -> Any:
        raise AssertionError(f"Spark's parser was called for {text!r}")

    monkeypatch.setattr(types, "_parse_datatype_string", no_jvm)
    assert arrow_schema(text)[0] == simple_ddl(text)


@pytest.mark.parametrize(
    "text", ["a array<int>", "`a b` int", "a decimal(10,2)", "a int not null", "t timestamp", "", "a int,", "a"]
)
def test_other_ddl_is_left_to_sparks_parser(text: str) -> None:
    from runtime.spark.ddl import simple_ddl

    assert simple_ddl(text) is None


def held(row: Any) -> Any:
    """``row``, a tenth of a second later."""
    import time

    time.sleep(0.1)
    return row


def slow_rows(scope: ScopeBuilder, batches: Stream) -> Stream:
    """Each row held a tenth of a second: long enough for the test to cancel the job."""
    return batches.map(held, name="Slow")


def test_cancelling_the_dataflows_job_group_stops_it_without_another_attempt(spark: Any) -> None:
    import threading

    from runtime.spark import DataflowFailed

    meshed = threading.Event()
    attempts: list[int] = []

    def cancel_once_meshed() -> None:
        if meshed.wait(120):
            spark.sparkContext.cancelJobGroup(job_group("cancelled"))

    canceller = threading.Thread(target=cancel_once_meshed, daemon=True)
    canceller.start()
    with pytest.raises(DataflowFailed) as caught:
        run_dataflow(
            spark.range(0, 400, numPartitions=2),
            slow_rows,
            "id long",
            workers=2,
            name="cancelled",
            on_attempt=lambda number, _: attempts.append(number),
            on_progress=lambda event: meshed.set() if event["event"] == "meshed" else None,
        )
    canceller.join()
    error = caught.value
    assert attempts == [0] and error.attempts == 1 and not error.retryable, str(error)[:2000]
    assert "was cancelled" in str(error) and "job group pytimely:cancelled" in error.causes[0], error.causes
