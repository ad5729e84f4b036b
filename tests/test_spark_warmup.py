"""warm_up on the shared ``spark`` session: Python workers started ahead of the dataflow, waited for by run_dataflow."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from runtime.errors import ConfigurationError
from runtime.spark import run_dataflow, warm_up
from runtime.spark.warmup import wait_for_warm_up
from scopes import ScopeBuilder, Stream


@pytest.fixture(scope="module", autouse=True)
def ship_by_value() -> None:
    """The tasks cannot import this test module by name: ship it by value."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def worker_pids(_scope: ScopeBuilder, batches: Stream) -> Stream:
    """One row per input batch: the process id of the Python worker running the task."""
    return batches.map_batch(lambda rows: [(os.getpid(),)], name="Pid")


def test_warm_up_runs_one_task_per_slot_in_python_workers(spark: Any) -> None:
    job = warm_up(spark, 2, wait=True)
    assert job.error is None
    assert len(job.workers) == 2 and all(pid > 0 and pid != os.getpid() for pid in job.workers)


def test_run_dataflow_waits_for_a_warm_up_still_running(spark: Any) -> None:
    job = warm_up(spark, 2)
    wait_for_warm_up(120.0)
    assert job.wait(0.0) and job.error is None  # wait_for_warm_up returned only once the job had ended
    frame = spark.range(10).repartition(2)
    job = warm_up(spark, 2)
    pids = {row["pid"] for row in run_dataflow(frame, worker_pids, "pid long", workers=2).collect()}
    assert job.wait(0.0), "run_dataflow started its gang while the warm-up still held slots"
    assert pids and os.getpid() not in pids


@pytest.mark.parametrize("tasks", [0, -1, 1.5, True])
def test_warm_up_refuses_what_is_no_number_of_tasks_as_a_pytimely_error(spark: Any, tasks: Any) -> None:
    with pytest.raises(ConfigurationError, match="tasks >= 1"):
        warm_up(spark, tasks)
