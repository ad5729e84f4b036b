"""A Spark dataflow's output batch that is not valid Arrow is refused in the task, before Spark or the output log.

pyarrow builds arrays from buffers or views without checking them, and so does
``pyarrow.array`` for integers in a time-of-day column.  Spark's ``mapInArrow``
took such a batch as it was: a ``string`` of the bytes ``ff fe`` came back as
two replacement characters (the job succeeded), a ``time64`` of 25 hours made
the job succeed and ``collect()`` fail later with ``hour must be in 0..23``
(the JVM, with ``Invalid value for NanoOfDay``).  Under ``checkpoint=`` the
batch was also saved, and a resumed attempt's reader, which validates, called
the file damaged (``CheckpointCorrupt``).  Now the task fails, at once and
without retries, with :class:`~runtime.spark.errors.InvalidOutputBatch` naming
the column, its type and Arrow's text; valid batches of the same types come
back unchanged.  (Spark has no ``time32``: its ``TIME`` is Arrow's
``time64[ns]``; the output log, which takes any schema, is checked with both.)
"""

from __future__ import annotations

import datetime
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pytest

pytest.importorskip("pyspark")

from runtime.errors import InvalidArrowBatch  # noqa: E402
from runtime.spark import DataflowFailed, run_dataflow  # noqa: E402
from runtime.spark.errors import FATAL_MARKER, InvalidOutputBatch  # noqa: E402
from runtime.spark.resume import OutputLog  # noqa: E402
from scopes import ScopeBuilder, Stream  # noqa: E402

HOUR_NS = 3600 * 10**9
TIME_SCHEMA = pa.schema([("k", pa.int64()), ("t", pa.time64("ns"))])
TEXT_SCHEMA = pa.schema([("k", pa.int64()), ("s", pa.string())])


@pytest.fixture(scope="module", autouse=True)
def ship_by_value() -> None:
    """Spark's tasks cannot import the tests by name: ship this module by value."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def text_column(valid: bool) -> Any:
    """``["ok", X]``: ``X`` is ``"é"``, or the bytes ``ff fe`` viewed as a string (not UTF-8) unless ``valid``."""
    return pa.array([b"ok", "é".encode() if valid else b"\xff\xfe"], pa.binary()).view(pa.string())


def time_column(valid: bool, kind: Any = None) -> Any:
    """``[00:00:01, X]``: ``X`` is 23:59:59, or 25:00:00 unless ``valid`` (``pyarrow.array`` does not check)."""
    kind = kind or pa.time64("ns")
    scale = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[kind.unit]
    return pa.array([scale, (86_399 if valid else 25 * 3600) * scale], kind)


def emitting(column: str, valid: bool) -> Any:
    """``build``: for each input batch, an Arrow batch of the input's ``k`` and a ``column`` made as above."""

    def build(scope: ScopeBuilder, batches: Stream) -> Stream:
        def out(batch: Any) -> Any:
            made = text_column(valid) if column == "s" else time_column(valid)
            return pa.record_batch({"k": pa.array([batch.column(0)[0].as_py()] * 2, pa.int64()), column: made})

        return batches.map_batch(out)

    return build


def rows_with_nanoseconds(valid: bool) -> Any:
    """``build`` (rows): each row ``(k,)`` becomes ``(k, nanoseconds)``, a time of day Arrow takes unchecked."""
    nanoseconds = (23 if valid else 25) * HOUR_NS

    def build(scope: ScopeBuilder, rows: Stream) -> Stream:
        return rows.map(lambda row: (row[0], nanoseconds))

    return build


def frame(spark: Any) -> Any:
    """Four rows ``k``, two per partition."""
    return spark.createDataFrame([(k,) for k in range(4)], "k long").repartition(2)


def checkpoint_of(tmp_path: Path, checkpointed: bool) -> Path | None:
    return tmp_path / "job" if checkpointed else None


def assert_refused(caught: Any, column: str, kind: str, arrow_text: str, checkpoint: Path | None, when: str) -> None:
    """The job failed once, not retried, naming the column, its type, Arrow's text and the output's time."""
    error = caught.value
    message = str(error)
    assert error.attempts == 1 and not error.retryable, message[:3000]
    assert "InvalidOutputBatch" in message and "CheckpointCorrupt" not in message, message[:3000]
    assert f"has column {column!r} ({kind}), which is not valid Arrow" in message, message[:3000]
    assert arrow_text in message and "operator 'SparkOutput'" in message and when in message, message[:3000]
    if checkpoint is not None:  # epoch 0, each task's only one, was refused before it was saved
        assert not list((checkpoint / "outputs").glob("workers-2/worker-*/epoch-*.out"))


@pytest.mark.parametrize("checkpointed", [False, True], ids=["plain", "checkpoint"])
@pytest.mark.parametrize(
    ("column", "kind", "arrow_text"),
    [("s", "string", "Invalid UTF8"), ("t", "time64[ns]", "not within the acceptable range")],
    ids=["not-utf8", "time-25h"],
)
def test_an_invalid_output_batch_fails_the_job_at_once_naming_the_column(
    spark: Any, tmp_path: Path, checkpointed: bool, column: str, kind: str, arrow_text: str
) -> None:
    """Before: the non-UTF-8 string came back as replacement characters, the 25 h time failed collect() later."""
    checkpoint = checkpoint_of(tmp_path, checkpointed)
    schema = TIME_SCHEMA if column == "t" else TEXT_SCHEMA
    with pytest.raises(DataflowFailed) as caught:
        run_dataflow(frame(spark), emitting(column, False), schema, workers=2, columnar=True, checkpoint=checkpoint)
    assert_refused(caught, column, kind, arrow_text, checkpoint, "at epoch 0" if checkpointed else "at time 0")


@pytest.mark.parametrize("checkpointed", [False, True], ids=["plain", "checkpoint"])
def test_output_rows_of_a_time_past_24_hours_are_refused_naming_the_column(
    spark: Any, tmp_path: Path, checkpointed: bool
) -> None:
    """Record-wise: ``pyarrow.array`` makes a time of day from any integer; the batch of rows was taken as it was."""
    checkpoint = checkpoint_of(tmp_path, checkpointed)
    with pytest.raises(DataflowFailed) as caught:
        run_dataflow(frame(spark), rows_with_nanoseconds(False), TIME_SCHEMA, workers=2, checkpoint=checkpoint)
    when = "at epoch 0" if checkpointed else "at the end of the dataflow"
    assert_refused(caught, "t", "time64[ns]", "not within the acceptable range", checkpoint, when)


@pytest.mark.parametrize("checkpointed", [False, True], ids=["plain", "checkpoint"])
def test_valid_output_of_the_same_types_comes_back_unchanged(spark: Any, tmp_path: Path, checkpointed: bool) -> None:
    checkpoint = checkpoint_of(tmp_path, checkpointed)
    texts = run_dataflow(
        frame(spark), emitting("s", True), TEXT_SCHEMA, workers=2, columnar=True, checkpoint=checkpoint
    )
    assert sorted(row.s for row in texts.collect()) == sorted(["ok", "é"] * 2)
    times = run_dataflow(
        frame(spark), rows_with_nanoseconds(True), TIME_SCHEMA, workers=2, checkpoint=checkpoint and checkpoint / "t"
    )
    assert sorted(tuple(row) for row in times.collect()) == [(k, datetime.time(23)) for k in range(4)]


# ---------------------------------------------------------------------- the output log alone, without Spark


@pytest.mark.parametrize(
    ("column", "make", "text"),
    [
        ("s", text_column, "Invalid UTF8"),
        ("t", lambda valid: time_column(valid, pa.time32("s")), "time32[s] 90000 is not within the acceptable range"),
        ("t", time_column, "not within the acceptable range"),
    ],
    ids=["not-utf8", "time32-25h", "time64-25h"],
)
def test_the_output_log_refuses_an_invalid_batch_before_saving_anything(
    tmp_path: Path, column: str, make: Any, text: str
) -> None:
    """Before: the writer saved it, and the reader (which validates) called the file damaged on resume."""
    good, bad = (pa.record_batch({"k": pa.array([1, 2], pa.int64()), column: make(valid)}) for valid in (True, False))
    log = OutputLog(tmp_path, 1, 2, bad.schema, "job")
    log.write(0, [good])
    with pytest.raises(InvalidOutputBatch) as caught:
        log.write(1, [good, bad])
    error = caught.value
    kind = str(bad.schema.field(column).type)
    assert isinstance(error, InvalidArrowBatch) and str(error).startswith(FATAL_MARKER)
    assert (error.column, error.column_type, error.epoch, error.task) == (column, kind, 1, 1)
    message = str(error)
    assert text in error.problem and text in message and "task 1 (worker 1)" in message and "at epoch 1" in message
    assert "dataflow 'job'" in message and "nothing of epoch 1 was saved" in message and "pyarrow.array" in message
    assert log.epochs() == {0} and sorted(p.name for p in log.directory.iterdir()) == [log.path(0).name]
    assert log.read(0) == [good]
