"""What a failed ``run_dataflow`` tells its user, on a real Spark (``local[2]``, the shared ``spark`` fixture).

A port range that can never hold the tasks fails at once; the failing task's
own traceback wins over the one of a task it stopped; the internal retry
markers never show; a schema error names what the dataflow emitted.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from helpers.ports import free_port

pytest.importorskip("pyspark")

from runtime.spark import DataflowFailed, current_task, run_dataflow  # noqa: E402
from runtime.spark.errors import FATAL_MARKER, RETRY_MARKER  # noqa: E402
from runtime.spark.failures import FailureReports, stopped_by_another, task_traceback  # noqa: E402
from scopes import ScopeBuilder, Stream  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def ship_by_value() -> None:
    """Spark's tasks cannot import the tests by name: ship this module by value."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def numbers(spark: Any, rows: int = 400) -> Any:
    """``rows`` rows ``(n long, key string)``."""
    return spark.createDataFrame(pa.table({"n": list(range(rows)), "key": [f"k{n % 7}" for n in range(rows)]}))


def unchanged(scope: ScopeBuilder, batches: Stream) -> Stream:
    return batches


def assert_no_marker(error: BaseException) -> None:
    """No internal marker in anything the user reads: the message, the causes, the traceback, ``__cause__``."""
    shown = [str(error), str(error.__cause__), *getattr(error, "causes", []), getattr(error, "task_traceback", "")]
    for text in shown:
        assert FATAL_MARKER not in (text or "") and RETRY_MARKER not in (text or ""), text[:2000]
        assert "[pytimely:" not in (text or "")


def test_a_port_range_smaller_than_the_tasks_fails_at_once_saying_it_can_never_succeed(spark: Any) -> None:
    port = free_port()  # one port for two tasks: the first task's, if no other test or connection takes it first
    attempts: list[int] = []
    started = time.monotonic()
    with pytest.raises(DataflowFailed) as caught:
        run_dataflow(
            numbers(spark),
            unchanged,
            "n long, key string",
            workers=2,
            ports=f"{port}-{port}",
            on_attempt=lambda n, _: attempts.append(n),
        )
    error = caught.value
    assert attempts == [0] and error.attempts == 1 and not error.retryable, (attempts, str(error)[:2000])
    assert f"{port}-{port}" in str(error) and "can never succeed" in str(error) and "2 tasks" in str(error)
    assert time.monotonic() - started < 60
    assert_no_marker(error)


class SlowToSay(Exception):
    """A user error slow to print in the task's main thread, so another task's error reaches Spark first."""

    def __str__(self) -> str:
        if threading.current_thread() is threading.main_thread():
            time.sleep(4.0)
        return "the user's operator failed on purpose"


def fail_in_task_one(row: Any) -> Any:
    task = current_task()
    if task is not None and task.index == 1:
        raise SlowToSay()
    return row


def failing_in_task_one(scope: ScopeBuilder, batches: Stream) -> Stream:
    return batches.map(fail_in_task_one, name="FailInTaskOne")


def test_the_failing_tasks_own_traceback_wins_over_the_task_it_stopped(spark: Any) -> None:
    events: list[dict[str, Any]] = []
    with pytest.raises(DataflowFailed) as caught:
        run_dataflow(numbers(spark), failing_in_task_one, "n long, key string", workers=2, on_progress=events.append)
    error = caught.value
    spark_text = str(error.__cause__)
    # Spark itself showed task 0, which task 1's failure stopped (that is the case this test makes)
    assert stopped_by_another(task_traceback(spark_text)), spark_text[:3000]
    traceback = error.task_traceback
    assert traceback is not None and "fail_in_task_one" in traceback and "raise SlowToSay()" in traceback
    assert "SlowToSay" in error.causes[-1] and "stopped because" not in error.causes[-1]
    assert error.attempts == 1 and not error.retryable
    assert any(event["event"] == "failed" and event["task"] == 1 and not event["elsewhere"] for event in events)
    assert_no_marker(error)


def numpy_with_wrong_dtype(scope: ScopeBuilder, batches: Stream) -> Stream:
    def as_array(batch: list[Any]) -> list[Any]:
        return [np.array([(float(n), key) for n, key in batch], dtype=[("n", "<f8"), ("key", "U8")])]

    return batches.map_batch(as_array, name="AsNumpy")


def test_a_schema_error_names_the_numpy_array_the_dataflow_emitted(spark: Any) -> None:
    with pytest.raises(DataflowFailed) as caught:
        run_dataflow(numbers(spark), numpy_with_wrong_dtype, "n long, key string", workers=2)
    message = str(caught.value)
    assert "a numpy structured array (dtype" in message and "Arrow RecordBatch" not in message
    assert "column 'n' has type int64 in the output schema" in message and "type double" in message
    assert_no_marker(caught.value)


def test_a_schema_mismatch_of_rows_shows_no_marker(spark: Any) -> None:
    with pytest.raises(DataflowFailed) as caught:
        run_dataflow(numbers(spark), unchanged, "n string, key string", workers=2)
    assert "column 'n' has type string" in str(caught.value)
    assert_no_marker(caught.value)


def test_the_driver_waits_briefly_for_the_failing_tasks_own_report() -> None:
    reports = FailureReports()
    reports.note({"event": "failed", "task": 0, "attempt": 0, "elsewhere": True, "traceback": "stopped"})
    assert reports.own_failure(0, 0.05) is None
    later = {"event": "failed", "task": 1, "attempt": 0, "elsewhere": False, "traceback": "Traceback: mine"}
    threading.Timer(0.1, reports.note, args=(later,)).start()
    assert reports.own_failure(0, 5.0) == later
    assert reports.own_failure(1, 0.0) is None


def test_the_failure_listener_is_left_out_where_the_driver_host_cannot_be_listened_on() -> None:
    from runtime.spark.driver import _progress_server

    def ignore(event: dict[str, Any]) -> None:
        pass

    unreachable = "192.0.2.1"  # TEST-NET-1: no interface of this machine has it
    assert _progress_server(unreachable, "t" * 32, ignore, asked=False) is None
    with pytest.raises(OSError):
        _progress_server(unreachable, "t" * 32, ignore, asked=True)
    server = _progress_server("127.0.0.1", "t" * 32, ignore, asked=False)
    assert server is not None
    server.close()
