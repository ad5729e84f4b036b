"""Arrow values that are valid in Arrow but that Python cannot hold, wherever pytimely makes records of them.

A Parquet ``timestamp`` in year 10000 (a user's sentinel date) read record-wise failed the run with a bare
``OverflowError: date value out of range``, naming neither the column nor the row; so did a ``date32`` past 9999,
a ``duration[s]`` past ``timedelta.max`` (``OverflowError: Python int too large to convert to C int``), a timestamp
in a time zone Python does not know (pytz's ``UnknownTimeZoneError``, a ``KeyError``), and the same values met by
``write_files`` to JSON Lines, ``CaptureRecorder.messages()``, ``run_dataflow``'s outputs and a record-wise exchange
key on Arrow batches.  Error messages that quote a key (a columnar ``join_latest``'s conflicting updates, a key a
restored worker does not own) turned into the bare error themselves, as ``as_py()``, ``str()`` and ``repr()`` of
such a scalar all raise.  Each is now an ``ArrowValueError`` (``FileValueError`` for a file source,
``FileSinkValueError`` for a sink) naming the column, the row, the type, the value in Arrow's own text and what to
do, with the operator, worker and time from the operator's failure report.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from helpers import python_values_mains

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from runtime import execute  # noqa: E402
from runtime.errors import FileSinkValueError, FileSourceError, FileValueError, WorkerFailed  # noqa: E402
from runtime.files import read_files  # noqa: E402
from runtime.testing import run_dataflow  # noqa: E402
from scopes import ConflictingUpdates  # noqa: E402
from scopes.arrow_values import find_unconvertible, safe_as_py, value_text  # noqa: E402
from scopes.errors import ArrowValueError  # noqa: E402

YEAR_10000 = 253402300800
"""``10000-01-01T00:00:00`` in seconds since the epoch: one second past what ``datetime`` holds."""

BEFORE_YEAR_1 = -62135596801
"""One second before ``0001-01-01T00:00:00``."""


def unknown_zone() -> Any:
    return pa.array([None, 1], pa.timestamp("s", tz="Mars/Olympus"))  # a null converts: row 1 is the first refused


# Each: an array whose row 1 Python cannot hold, what Arrow writes for it, and the phrase saying why.
REFUSED: dict[str, tuple[Any, str, str]] = {
    "timestamp[s] year 10000": (pa.array([0, YEAR_10000], pa.timestamp("s")), "10000-01-01 00:00:00", "years 1 to"),
    "timestamp[ms] year 10000": (
        pa.array([0, YEAR_10000 * 1000], pa.timestamp("ms")),
        "10000-01-01 00:00:00.000",
        "years 1 to",
    ),
    "timestamp[us] year 10000": (
        pa.array([0, YEAR_10000 * 10**6], pa.timestamp("us", tz="UTC")),
        "10000-01-01 00:00:00.000000Z",
        "years 1 to",
    ),
    "timestamp[s] before year 1": (pa.array([0, BEFORE_YEAR_1], pa.timestamp("s")), "0000-12-31 23:59:59", "years 1"),
    "date32 year 10000": (pa.array([0, 2932897], pa.date32()), "10000-01-01", "years 1 to"),
    "date64 year 10000": (pa.array([0, YEAR_10000 * 1000], pa.date64()), "10000-01-01", "years 1 to"),
    "duration[s] past timedelta.max": (pa.array([0, 2**62], pa.duration("s")), str(2**62), "999999999 days"),
    "duration[ms] past timedelta.max": (pa.array([0, 2**62], pa.duration("ms")), str(2**62), "999999999 days"),
    "unknown time zone": (unknown_zone(), "1970-01-01 00:00:01Z", "time zone is unknown"),
    "string not UTF-8": (
        pa.Array.from_buffers(
            pa.string(), 2, [None, pa.py_buffer(b"\0\0\0\0\2\0\0\0\4\0\0\0"), pa.py_buffer(b"ok\xff\xfe")]
        ),
        '"',
        "not valid UTF-8",
    ),
    "decimal scale larger than precision": (
        pa.Array.from_buffers(
            pa.decimal128(38, 40), 2, [pa.py_buffer(b"\x02"), pa.py_buffer(bytes(16) + (123).to_bytes(16, "little"))]
        ),
        "scale out of range",
        "scale is larger than its precision",
    ),
    "struct holding year 10000": (
        pa.StructArray.from_arrays([pa.array([0, YEAR_10000], pa.timestamp("s"))], ["at"]),
        "{at: 10000-01-01 00:00:00}",
        "a value inside it",
    ),
    "list holding year 10000": (
        pa.array([[0], [YEAR_10000]], pa.list_(pa.int64())).cast(pa.list_(pa.timestamp("s"))),
        "10000-01-01 00:00:00",
        "a value inside it",
    ),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_the_values_pyarrow_refuses_are_found_and_printed_without_raising(name: str) -> None:
    """The probe: pyarrow's ``to_pylist``, ``as_py``, ``str`` and ``repr`` raise for each; Arrow's printer does not."""
    array, text, why = REFUSED[name]
    for convert in (array.to_pylist, array[1].as_py, lambda: str(array[1])):
        with pytest.raises(Exception) as refused:
            convert()
        assert not isinstance(refused.value, ArrowValueError)
    table = pa.table({"fine": [1, 2], "odd": array})
    found = find_unconvertible(table)
    assert found is not None and found.column == "odd" and found.row == 1, found
    assert text in found.text and text in value_text(array, 1) and text in str(safe_as_py(array[1])), found
    failure = pytest.raises(ArrowValueError, __import__("scopes.arrow_values").arrow_values.records, table, "here")
    message = str(failure.value)
    assert "column 'odd'" in message and "row 1" in message and why in message and text in message, message


def test_values_pyarrow_accepts_are_not_refused() -> None:
    """What pyarrow converts (nanosecond timestamps, the last microsecond of a day, big decimals) passes as before.

    (A time of 24 hours or more, which pyarrow wraps around midnight, is refused: tests/test_time_of_day.py.)"""
    import decimal

    table = pa.table(
        {
            "ns": pa.array([2**63 - 1], pa.timestamp("ns")),
            "time": pa.array([24 * 3600 * 10**6 - 1], pa.time64("us")),
            "decimal": pa.array([decimal.Decimal("9" * 38)], pa.decimal128(38, 0)),
            "duration_us": pa.array([2**62], pa.duration("us")),
        }
    )
    assert find_unconvertible(table) is None
    assert len(__import__("scopes.arrow_values").arrow_values.records(table, "here")) == 1


# ---------------------------------------------------------------------- read_files


def sentinel_file(directory: Path, column: Any = None) -> Path:
    """A Parquet file of 4 rows in 2 row groups whose row 2 (row 0 of row group 1) Python cannot hold."""
    directory.mkdir(parents=True, exist_ok=True)
    if column is None:
        column = pa.array([0, 1, YEAR_10000, 3], pa.timestamp("s"))
    target = directory / "part-00.parquet"
    pq.write_table(pa.table({"n": [0, 1, 2, 3], "when": column}), target, row_group_size=2)
    return target


def read(path: Path, workers: int, **options: Any) -> list[Any]:
    def main(worker: Any) -> list[Any]:
        seen: list[Any] = []

        def build(scope: Any) -> Any:
            stream = read_files(scope, path, **options)
            stream.inspect_batch(lambda time, batch: seen.append(batch))
            return stream.probe()

        probe = worker.dataflow(build)
        worker.step_while(lambda: not probe.done())
        return seen

    return [batch for seen in execute(main, workers=workers) for batch in seen]


def cause_of(error: BaseException, kind: type[BaseException]) -> Any:
    current: BaseException | None = error
    while current is not None and not isinstance(current, kind):
        current = current.__cause__
    assert current is not None, f"no {kind.__name__} in the chain of {error!r}"
    return current


@pytest.mark.parametrize("workers", [1, 2])
def test_read_files_of_a_parquet_timestamp_in_year_10000_names_file_row_group_offset_and_column(
    tmp_path: Path, workers: int
) -> None:
    """It failed with ``OverflowError: date value out of range``, naming neither the column nor the row."""
    target = sentinel_file(tmp_path / "in")
    with pytest.raises(WorkerFailed) as failure:
        read(tmp_path / "in", workers)
    error = cause_of(failure.value, FileValueError)
    assert isinstance(error, FileSourceError) and isinstance(error, ArrowValueError)
    message = str(error)
    assert repr(str(target)) in message, message
    assert "row 2 of the file" in message and "row 0 of row group 1" in message, message
    assert "column chunk at byte offset" in message and "column 'when'" in message, message
    assert "holds 10000-01-01 00:00:00" in message and "years 1 to 9999" in message, message
    assert "on worker" in message and "columnar=True" in message, message
    assert (error.column, error.row, error.text) == ("when", 2, "10000-01-01 00:00:00.000")
    assert "failed in operator 'ReadFiles'" in str(failure.value)


@pytest.mark.parametrize(
    "column, text",
    [
        (pa.array([0, 1, 2932897, 3], pa.date32()), "10000-01-01"),
        (pa.array([0, 1, 2**62, 3], pa.duration("s")), str(2**62)),
        (pa.array([None, None, 2, None], pa.timestamp("s", tz="Mars/Olympus")), "1970-01-01 00:00:02"),
    ],
    ids=["date32", "duration", "unknown time zone"],
)
def test_read_files_names_other_values_python_cannot_hold(tmp_path: Path, column: Any, text: str) -> None:
    sentinel_file(tmp_path / "in", column)
    with pytest.raises(WorkerFailed) as failure:
        read(tmp_path / "in", 1)
    message = str(cause_of(failure.value, FileValueError))
    assert "column 'when'" in message and "row 2 of the file" in message and text in message, message


def test_read_files_columnar_keeps_the_value_arrow_holds(tmp_path: Path) -> None:
    sentinel_file(tmp_path / "in")
    batches = read(tmp_path / "in", 2, columnar=True)
    values = pa.concat_arrays([batch.column("when").cast(pa.int64()) for batch in batches]).to_pylist()
    assert sorted(values) == [0, 1000, 3000, YEAR_10000 * 1000]  # Parquet keeps seconds as milliseconds


def test_read_files_on_two_processes_names_the_value(tmp_path: Path) -> None:
    target = sentinel_file(tmp_path / "in")
    main = functools.partial(python_values_mains.read_records, directory=str(tmp_path / "in"))
    with pytest.raises(WorkerFailed) as failure:
        execute(main, processes=2, workers=1, stall_timeout=60)
    message = str(failure.value)
    assert "FileValueError" in message and repr(str(target)) in message, message
    assert "row 2 of the file" in message and "column 'when'" in message and "10000-01-01" in message, message


# ---------------------------------------------------------------------- write_files


def test_write_files_to_json_lines_names_the_value_and_leaves_no_file(tmp_path: Path) -> None:
    """The sink failed with ``FileSinkError: cannot write ...: date value out of range`` (no column, no row)."""
    table = pa.table({"n": [0, 1], "when": pa.array([0, YEAR_10000], pa.timestamp("s"))})
    with pytest.raises(WorkerFailed) as failure:
        python_values_mains.write_table(tmp_path / "out", table, format="json")
    message = str(cause_of(failure.value, FileSinkValueError))
    assert "at time 0" in message and "column 'when'" in message and "row 1" in message, message
    assert "10000-01-01 00:00:00" in message and "format='parquet'" in message, message
    assert not [path for path in (tmp_path / "out").rglob("*") if path.is_file()]


def test_write_files_to_parquet_keeps_the_value(tmp_path: Path) -> None:
    table = pa.table({"n": [0, 1], "when": pa.array([0, YEAR_10000], pa.timestamp("s"))})
    python_values_mains.write_table(tmp_path / "out", table, format="parquet")
    (written,) = (tmp_path / "out").rglob("*.parquet")
    assert pq.read_table(written).column("when").cast(pa.int64()).to_pylist()[1] == YEAR_10000 * 1000


# ---------------------------------------------------------------------- operators


def sentinel_tables(scope: Any, rows: Any) -> Any:
    """Each batch of ints as a table whose column ``when`` holds year 10000 where the int is 2."""
    return rows.map_batch(
        lambda batch: pa.table(
            {"n": batch, "when": pa.array([YEAR_10000 if n == 2 else n for n in batch], pa.timestamp("s"))}
        ),
        name="Tables",
    )


def build_exchange(scope: Any, rows: Any) -> Any:
    return (
        sentinel_tables(scope, rows)
        .exchange(lambda record: record["n"], name="Keyed")
        .map_batch(lambda table: table.select(["n"]))
    )


def build_tables(scope: Any, rows: Any) -> Any:
    return sentinel_tables(scope, rows)


CONFIGURATIONS: list[dict[str, Any]] = [{"workers": 1}, {"workers": 2}, {"processes": 2}]


@pytest.mark.parametrize("configuration", CONFIGURATIONS, ids=["1 worker", "2 threads", "2 processes"])
def test_a_record_wise_exchange_key_on_arrow_batches_names_the_value(configuration: dict[str, Any]) -> None:
    """It was blamed on the key function: ``its exchange key function failed ...: OverflowError: ...``."""
    with pytest.raises(WorkerFailed) as failure:
        run_dataflow(build_exchange, [[0, 1], [2, 3]], **configuration)
    message = str(failure.value)
    assert "ArrowValueError" in message and "exchange key function failed" not in message, message
    assert "into operator 'Keyed'" in message and "at time 1" in message, message
    assert "column 'when'" in message and "row 0" in message and "10000-01-01 00:00:00" in message, message


@pytest.mark.parametrize("configuration", CONFIGURATIONS, ids=["1 worker", "2 threads", "2 processes"])
def test_run_dataflow_names_an_output_value_python_cannot_hold(configuration: dict[str, Any]) -> None:
    with pytest.raises(ArrowValueError) as failure:
        run_dataflow(build_tables, [[0, 1], [2, 3]], **configuration)
    message = str(failure.value)
    assert "output 'output' at time 1" in message or "at time 1" in message, message
    assert "column 'when'" in message and "10000-01-01 00:00:00" in message, message


def test_capture_recorder_messages_name_the_value_and_batches_keep_it() -> None:
    recorder = python_values_mains.capture_batches(sentinel_tables, [[0, 1], [2, 3]])
    with pytest.raises(ArrowValueError) as failure:
        recorder.messages()
    message = str(failure.value)
    assert "at time 1" in message and "column 'when'" in message and "row 0" in message, message
    assert [batch.num_rows for _, batch in recorder.batches()] == [2, 2]


def timestamp_plans(scope: Any, streams: Any) -> Any:
    """A columnar join_latest whose table gets two different rows for a key in year 10000."""
    schema = pa.schema([("at", pa.timestamp("s")), ("plan", pa.string())])
    clicks = streams["clicks"].map_batch(lambda rows: pa.table({"at": pa.array(rows, pa.timestamp("s"))}))
    plans = streams["plans"].map_batch(
        lambda rows: pa.Table.from_pydict(dict(zip(schema.names, zip(*rows, strict=True), strict=True)), schema)
    )
    return clicks.key_by_columns("at").join_latest(plans.key_by_columns("at"), name="Plans")


@pytest.mark.parametrize("workers", [1, 2])
def test_conflicting_updates_for_a_key_python_cannot_hold_name_it(workers: int) -> None:
    """The ConflictingUpdates message quoted the key with ``as_py()``, which raised ``OverflowError`` instead."""
    plans: list[list[Any]] = [[(YEAR_10000, "gold"), (YEAR_10000, "free")]]
    with pytest.raises(WorkerFailed) as failure:
        run_dataflow(timestamp_plans, {"clicks": [[YEAR_10000]], "plans": plans}, workers=workers)
    error = cause_of(failure.value, ConflictingUpdates)
    assert "different rows for key {'at': 10000-01-01 00:00:00} at time 0" in str(error), error


def test_a_misplaced_key_python_cannot_hold_is_named() -> None:
    """first_misplaced_row builds a KeyNotOwned message's key with ``as_py()``; it raised for year 10000."""
    from scopes.batch_keys import BatchKeys
    from scopes.key_owners import first_misplaced_row

    table = pa.table({"at": pa.array([YEAR_10000 + i for i in range(8)], pa.timestamp("s"))})
    routing = BatchKeys("at", "test")
    found = first_misplaced_row(table, routing, ["at"], 0, 2) or first_misplaced_row(table, routing, ["at"], 1, 2)
    assert found is not None and "10000-01-01" in repr(found.key), found


def test_spark_input_rows_name_a_value_python_cannot_hold() -> None:
    """Spark's Arrow batches were made rows with ``to_pylist``: a bare ``OverflowError`` failed the task."""
    from runtime.spark.arrow import input_rows
    from runtime.spark.errors import SparkError

    batch = pa.RecordBatch.from_pydict(
        {"n": [1, 2], "at": pa.array([0, YEAR_10000 * 10**6], pa.timestamp("us", tz="UTC"))}
    )
    with pytest.raises(ArrowValueError) as failure:
        input_rows(batch, 100)
    assert isinstance(failure.value, SparkError) and failure.value.row == 101
    message = str(failure.value)
    assert "column 'at'" in message and "row 101 of this task's partition" in message, message
    assert "10000-01-01 00:00:00.000000Z" in message and "columnar=True" in message, message


def build_scalar(scope: Any, rows: Any) -> Any:
    """A map_batch function returning an Arrow scalar (not a batch) in a time zone Python does not know."""
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    zoned = rows.map_batch(lambda batch: pa.table({"at": pa.array(batch, pa.timestamp("s", tz="Mars/Olympus"))}))
    return zoned.map_batch(lambda table: pc.max(table["at"]), name="Latest")


@pytest.mark.parametrize("workers", [1, 2])
def test_a_message_describing_an_arrow_scalar_python_cannot_hold_does_not_raise(workers: int) -> None:
    """``repr`` of such a scalar raises ``ArrowInvalid``: the UserFunctionError became a bare ArrowInvalid."""
    with pytest.raises(WorkerFailed) as failure:
        run_dataflow(build_scalar, [[0, 1]], workers=workers)
    message = str(failure.value)
    assert "UserFunctionError" in message and "returned TimestampScalar 1970-01-01 00:00:0" in message, message
    assert "must return a batch" in message, message


def not_utf8_keys(scope: Any, rows: Any) -> Any:
    """Tables routed by a dictionary column whose second value is not UTF-8 (Arrow builds it; ``validate`` would
    refuse it)."""
    words = pa.Array.from_buffers(
        pa.string(), 2, [None, pa.py_buffer(b"\0\0\0\0\2\0\0\0\4\0\0\0"), pa.py_buffer(b"ok\xff\xfe")]
    )
    keys = pa.DictionaryArray.from_arrays(pa.array([0, 1, 1], pa.int32()), words)
    tables = rows.map_batch(lambda batch: pa.table({"w": keys, "n": [1, 2, 3]}))
    return tables.exchange_batch("w", name="ByWord").map_batch(lambda table: table.select(["n"]))


def test_routing_by_a_key_python_cannot_hold_names_the_row() -> None:
    """Hashing the dictionary's values with ``to_pylist`` raised a bare ``UnicodeDecodeError`` on 2 workers."""
    with pytest.raises(WorkerFailed) as failure:
        run_dataflow(not_utf8_keys, [[0]], workers=2)
    message = str(failure.value)
    assert "ArrowValueError" in message and "operator 'ByWord'" in message and "at time 0" in message, message
    assert "column 'w'" in message and "row 1" in message and "not valid UTF-8" in message, message


def list_plans(scope: Any, streams: Any) -> Any:
    """A columnar join_latest whose table has a list column (Arrow cannot group by it) holding year 10000."""
    schema = pa.schema([("user", pa.string()), ("ends", pa.list_(pa.timestamp("s")))])
    clicks = streams["clicks"].map_batch(lambda rows: pa.table({"user": pa.array(rows, pa.string())}))
    plans = streams["plans"].map_batch(
        lambda rows: pa.table(
            {
                "user": pa.array([user for user, _ in rows], pa.string()),
                "ends": pa.array([[end] for _, end in rows], pa.list_(pa.int64())).cast(schema.field("ends").type),
            }
        )
    )
    joined = clicks.key_by_columns("user").join_latest(plans.key_by_columns("user"), name="Plans")
    return joined.map_batch(lambda table: table.select(["user"]).append_column("end", pc_list_max(table)))


def pc_list_max(table: Any) -> Any:
    import pyarrow.compute as pc

    return pc.list_flatten(table.column("ends")).cast(pa.int64())


@pytest.mark.parametrize("workers", [1, 2])
def test_a_table_update_python_cannot_hold_joins_and_a_repeated_one_names_the_value(workers: int) -> None:
    """Updates with columns Arrow cannot group by are compared as Python values when a key repeats: the
    comparison raised a bare ``OverflowError``.  A key given once never leaves Arrow."""
    once: dict[str, Any] = {"clicks": [[], ["ann"]], "plans": [[("ann", YEAR_10000)]]}
    run = run_dataflow(list_plans, once, workers=workers)
    assert run.outputs["output"] == {1: [{"user": "ann", "end": YEAR_10000}]}
    plans: list[list[Any]] = [[("ann", YEAR_10000), ("ann", YEAR_10000 + 1)]]
    with pytest.raises(WorkerFailed) as failure:
        run_dataflow(list_plans, {"clicks": [["ann"]], "plans": plans}, workers=workers)
    message = str(failure.value)
    assert "ArrowValueError" in message and "operator 'Plans'" in message and "at time 0" in message, message
    assert "column 'ends'" in message and "[10000-01-01 00:00:0" in message, message  # either update, first


def test_read_files_refuses_a_time_of_24_hours_or_more_rather_than_wrap_it(tmp_path: Path) -> None:
    """pyarrow's ``to_pylist`` wraps a ``time64`` of 25 hours around midnight (01:00) without an error; Arrow calls
    such a value invalid, and the source's full validation of each batch refuses it, naming the file."""
    directory = tmp_path / "in"
    directory.mkdir()
    pq.write_table(pa.table({"t": pa.array([0, 25 * 3600 * 10**6], pa.time64("us"))}), directory / "a.parquet")
    assert pa.array([25 * 3600 * 10**6], pa.time64("us")).to_pylist()[0].hour == 1  # the silent wrap
    for columnar in (False, True):
        with pytest.raises(WorkerFailed) as failure:
            read(directory, 1, columnar=columnar)
        message = str(cause_of(failure.value, FileSourceError))
        assert "a.parquet" in message and "not within the acceptable range" in message, message


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("format", ["csv", "jsonl"])
def test_read_files_of_text_files_names_the_row_of_a_time_past_year_9999(
    tmp_path: Path, format: str, workers: int
) -> None:
    """``9999-12-31T23:59:59-01:00`` is year 10000 in UTC: pyarrow's CSV and JSON readers parse it as a timestamp."""
    directory = tmp_path / "in"
    directory.mkdir()
    if format == "csv":
        target = directory / "a.csv"
        target.write_text("n,d\n0,2020-01-01T00:00:00Z\n1,9999-12-31T23:59:59-01:00\n")
    else:
        target = directory / "a.jsonl"
        target.write_text('{"n": 0, "d": "2020-01-01T00:00:00Z"}\n{"n": 1, "d": "9999-12-31T23:59:59-01:00"}\n')
    with pytest.raises(WorkerFailed) as failure:
        read(directory, workers, format=format)
    error = cause_of(failure.value, FileValueError)
    message = str(error)
    assert repr(str(target)) in message and "row 1 of the file" in message and "column 'd'" in message, message
    assert "10000-01-01 00:59:59" in message and error.row == 1, message


def test_a_resumable_spark_task_names_the_partition_row_python_cannot_hold(tmp_path: Path) -> None:
    """The checkpointed task makes rows epoch by epoch (one input batch each): the row counts across batches."""
    from runtime.spark.errors import SparkValueError
    from runtime.spark.resume import drive_resumable

    schema = pa.schema([("n", pa.int64())])
    batches = [
        pa.RecordBatch.from_pydict({"n": [0, 1], "at": pa.array([0, 1], pa.timestamp("s"))}),
        pa.RecordBatch.from_pydict({"n": [2, 3], "at": pa.array([2, YEAR_10000], pa.timestamp("s"))}),
    ]

    def build(scope: Any, hand_over: Any) -> Any:
        handle, stream = scope.new_input()
        return handle, stream.map(lambda row: (row[0],)).inspect_batch(hand_over).probe()

    def main(worker: Any) -> int:
        return drive_resumable(
            worker, str(tmp_path), "job", schema, False, build, iter(batches), lambda batch: None, lambda *a, **k: None
        )

    with pytest.raises(WorkerFailed) as failure:
        execute(main, workers=1)
    error = cause_of(failure.value, SparkValueError)
    message = str(error)
    assert "row 3 of this task's partition" in message and "column 'at'" in message, message
    assert error.row == 3
