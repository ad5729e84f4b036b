"""Times of day of 24 hours or more (or negative) in Arrow batches that user code built.

pyarrow's ``to_pylist()`` and ``as_py()`` do not refuse a ``time32``/``time64`` outside ``[0, 24 hours)``: they
wrap it around midnight (``time32[s]`` 90000 becomes ``01:00:00``).  ``read_files`` validates its batches and
refused such a value, but a batch built in ``map_batch`` (or sent with ``send_batch``) was made into records with
the wrapped value wherever pytimely makes records of Arrow batches: a record-wise exchange key saw ``01:00:00``,
``run_dataflow`` and ``CaptureRecorder.messages()`` returned it, ``write_files`` wrote it to JSON Lines, a columnar
``join_latest`` compared two different updates as equal, and Spark's input rows carried it.  Each now refuses it
with the ``ArrowValueError`` that names the column, the row, the type, the value in Arrow's text
(``<value out of range: 90000>``) and what to do, on every worker count.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import python_values_mains

pa = pytest.importorskip("pyarrow")
pc = pytest.importorskip("pyarrow.compute")

from runtime import execute  # noqa: E402
from runtime.errors import FileSinkValueError, WorkerFailed  # noqa: E402
from runtime.files import write_files  # noqa: E402
from runtime.testing import run_dataflow  # noqa: E402
from scopes import arrow_values  # noqa: E402
from scopes.errors import ArrowValueError  # noqa: E402

HOURS_25 = 90_000
"""25 hours in seconds: pyarrow makes it ``01:00:00``."""

OUT_OF_RANGE = "<value out of range: 90000>"
"""How Arrow writes it."""

CONFIGURATIONS: list[dict[str, Any]] = [{"workers": 1}, {"workers": 2}, {"processes": 2}]
IDS = ["1 worker", "2 threads", "2 processes"]


def day_tables(scope: Any, rows: Any) -> Any:
    """Each batch of ints as a table whose ``time32[s]`` column ``t`` holds 25 hours where the int is 2."""
    return rows.map_batch(
        lambda batch: pa.table({"n": batch, "t": pa.array([HOURS_25 if n == 2 else n for n in batch], pa.time32("s"))}),
        name="Tables",
    )


def build_exchange(scope: Any, rows: Any) -> Any:
    return (
        day_tables(scope, rows)
        .exchange(lambda record: record["t"].hour, name="Keyed")
        .map_batch(lambda table: table.select(["n"]))
    )


def assert_names_the_time(message: str, row: int = 0) -> None:
    assert "ArrowValueError" in message or "column 't'" in message, message
    assert "column 't' (time32[s])" in message and f"row {row}" in message, message
    assert OUT_OF_RANGE in message and "wrap it around midnight" in message, message
    assert "int64" in message, message


def test_the_wrap_and_its_finding() -> None:
    """The probe: pyarrow wraps without an error; the finder names the first such row of every kind of column
    that holds a time of day, and passes nulls' slots and dictionary values no row uses."""
    day = pa.time32("s")
    assert pa.array([HOURS_25], day).to_pylist()[0].hour == 1  # the silent wrap
    assert pa.array([-1], pa.time64("ns")).to_pylist()[0].hour == 23
    cases = {
        "time64[us] negative": (pa.array([1, None, 3, -1], pa.time64("us")), 3),
        "chunked": (pa.chunked_array([pa.array([1, 2], day), pa.array([3, HOURS_25], day)]), 3),
        "struct": (pa.StructArray.from_arrays([pa.array([1, 2, HOURS_25], day)], ["a"]), 2),
        "list": (pa.array([[1], [], [2, 3], [HOURS_25]], pa.list_(pa.int32())).cast(pa.list_(day)), 3),
        "dictionary": (pa.DictionaryArray.from_arrays(pa.array([0, 0, 1], pa.int8()), pa.array([1, HOURS_25], day)), 2),
        "map": (pa.array([[("a", 1)], [("b", 2), ("c", HOURS_25)]], pa.map_(pa.string(), day)), 1),
        "run-end encoded": (pc.run_end_encode(pa.array([1, 1, HOURS_25], day)), 2),
    }
    for name, (column, row) in cases.items():
        found = arrow_values.find_wrapped_time(pa.table({"n": range(len(column)), "t": column}))
        assert found is not None and (found.column, found.row) == ("t", row), (name, found)
        assert "out of range" in found.text and "acceptable range" in str(found.error), (name, found)
    null_slot = pa.Array.from_buffers(
        day, 2, [pa.py_buffer(b"\x01"), pa.py_buffer(bytes(4) + bytes.fromhex("905f0100"))]
    )
    unused = pa.DictionaryArray.from_arrays(pa.array([0, 0], pa.int8()), pa.array([1, HOURS_25], day))
    fine = pa.table({"null": null_slot, "unused": unused, "edge": pa.array([0, 86_399], day), "n": [1, 2]})
    assert arrow_values.find_wrapped_time(fine) is None
    assert len(arrow_values.records(fine, "here")) == 2
    with pytest.raises(ArrowValueError) as failure:
        arrow_values.records(pa.table({"t": pa.array([0, HOURS_25], day)}), "here")
    assert_names_the_time(str(failure.value), row=1)
    assert (failure.value.column, failure.value.row, failure.value.text) == ("t", 1, OUT_OF_RANGE)
    assert str(arrow_values.safe_as_py(pa.array([HOURS_25], day)[0])) == OUT_OF_RANGE  # a message never quotes 01:00:00


@pytest.mark.parametrize("configuration", CONFIGURATIONS, ids=IDS)
def test_a_record_wise_exchange_key_refuses_a_time_it_would_see_wrapped(configuration: dict[str, Any]) -> None:
    """The key function got ``01:00:00`` for 25 hours, and routed the row by it."""
    with pytest.raises(WorkerFailed) as failure:
        run_dataflow(build_exchange, [[0, 1], [2, 3]], **configuration)
    message = str(failure.value)
    assert "into operator 'Keyed'" in message and "at time 1" in message, message
    assert "exchange key function failed" not in message, message
    assert_names_the_time(message)


@pytest.mark.parametrize("configuration", CONFIGURATIONS, ids=IDS)
def test_run_dataflow_refuses_an_output_time_it_would_return_wrapped(configuration: dict[str, Any]) -> None:
    with pytest.raises(ArrowValueError) as failure:
        run_dataflow(day_tables, [[0, 1], [2, 3]], **configuration)
    assert "at time 1" in str(failure.value), failure.value
    assert_names_the_time(str(failure.value))


def test_capture_recorder_messages_refuse_a_wrapped_time_and_batches_keep_it() -> None:
    recorder = python_values_mains.capture_batches(day_tables, [[2, 3]])
    with pytest.raises(ArrowValueError) as failure:
        recorder.messages()
    assert "at time 0" in str(failure.value)
    assert_names_the_time(str(failure.value))
    assert recorder.batches()[0][1].column("t").cast(pa.int32()).to_pylist() == [HOURS_25, 3]


def test_write_files_to_json_lines_refuses_a_time_it_would_write_wrapped(tmp_path: Path) -> None:
    """JSON Lines had ``"t": "01:00:00"`` for 25 hours."""
    table = pa.table({"n": [0, 1], "t": pa.array([5, HOURS_25], pa.time32("s"))})

    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            return handle, write_files(stream, tmp_path / "out", format="json").probe()

        handle, probe = worker.dataflow(build)
        handle.send_batch(table)
        handle.close()
        worker.step_while(lambda: not probe.done())

    with pytest.raises(WorkerFailed) as failure:
        execute(main, workers=1)
    error = failure.value.__cause__
    while error is not None and not isinstance(error, FileSinkValueError):
        error = error.__cause__
    assert isinstance(error, FileSinkValueError), failure.value
    assert "at time 0" in str(error) and "row 1 of the epoch's records" in str(error), error
    assert_names_the_time(str(error), row=1)
    assert not [path for path in (tmp_path / "out").rglob("*") if path.is_file()]


def time_plans(scope: Any, streams: Any) -> Any:
    """A columnar join_latest whose table has a list column of times (Arrow cannot group by it): its updates
    for one key are compared as Python values, where 25 hours and 1 hour were both ``01:00:00``."""
    kind = pa.list_(pa.time32("s"))
    clicks = streams["clicks"].map_batch(lambda rows: pa.table({"user": pa.array(rows, pa.string())}))
    plans = streams["plans"].map_batch(
        lambda rows: pa.table(
            {
                "user": pa.array([user for user, _ in rows], pa.string()),
                "at": pa.array([[at] for _, at in rows], pa.list_(pa.int32())).cast(kind),
            }
        )
    )
    joined = clicks.key_by_columns("user").join_latest(plans.key_by_columns("user"), name="Plans")
    return joined.map_batch(lambda table: table.select(["user"]))


@pytest.mark.parametrize("workers", [1, 2])
def test_join_latest_refuses_comparing_updates_it_would_see_wrapped(workers: int) -> None:
    """Two updates of one key, 25 hours and 1 hour, compared equal: no ConflictingUpdates, one of them kept."""
    plans: list[list[Any]] = [[("ann", HOURS_25), ("ann", 3600)]]
    with pytest.raises(WorkerFailed) as failure:
        run_dataflow(time_plans, {"clicks": [["ann"]], "plans": plans}, workers=workers)
    message = str(failure.value)
    assert "ArrowValueError" in message and "operator 'Plans'" in message and "at time 0" in message, message
    assert "column 'at' (list<item: time32[s]>)" in message and OUT_OF_RANGE in message, message


def test_spark_input_rows_refuse_a_time_they_would_carry_wrapped() -> None:
    from runtime.spark.arrow import input_rows
    from runtime.spark.errors import SparkValueError

    batch = pa.RecordBatch.from_pydict({"n": [1, 2], "t": pa.array([0, HOURS_25 * 10**6], pa.time64("us"))})
    with pytest.raises(SparkValueError) as failure:
        input_rows(batch, 100)
    message = str(failure.value)
    assert failure.value.row == 101 and "row 101 of this task's partition" in message, message
    assert "column 't' (time64[us])" in message and "<value out of range: 90000000000>" in message, message
    assert input_rows(pa.RecordBatch.from_pydict({"t": pa.array([0], pa.time64("us"))})) == [
        (pa.scalar(0, pa.time64("us")).as_py(),)
    ]
