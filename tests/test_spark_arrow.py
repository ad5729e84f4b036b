"""runtime.spark without a Spark cluster: output conversion, schema errors, the Arrow codec, Java and progress."""

from __future__ import annotations

import os
import socket
import stat
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from runtime.spark import SchemaMismatch, SparkSetupError, check_java, java_version, to_record_batches
from runtime.spark.arrow import register_arrow_codec
from runtime.spark.errors import FATAL_MARKER
from runtime.spark.progress import ProgressReporter, ProgressServer
from runtime.wire import decode_value, encode_value, frame

SCHEMA = pa.schema([("package", pa.string()), ("size", pa.int32())])


def test_rows_tuples_dicts_and_batches_become_record_batches_of_the_schema() -> None:
    batch = pa.RecordBatch.from_arrays([pa.array([7], pa.int32()), pa.array(["z"])], names=["size", "package"])
    table = pa.table({"package": ["t1", "t2"], "size": pa.array([1, 2], pa.int32())})
    records = [("a", 1), ["b", 2], {"size": 3, "package": "c"}, batch, ("d", None), table]
    batches = list(to_record_batches(records, SCHEMA))
    assert all(b.schema == SCHEMA for b in batches)
    rows = pa.Table.from_batches(batches).to_pylist()
    assert rows == [
        {"package": "a", "size": 1},
        {"package": "b", "size": 2},
        {"package": "c", "size": 3},
        {"package": "z", "size": 7},
        {"package": "d", "size": None},
        {"package": "t1", "size": 1},
        {"package": "t2", "size": 2},
    ]


def test_a_row_value_of_the_wrong_type_names_the_column_and_both_types() -> None:
    with pytest.raises(SchemaMismatch) as caught:
        list(to_record_batches([("a", 1), ("b", "two")], SCHEMA))
    message = str(caught.value)
    assert "column 'size'" in message and "int32" in message and "str 'two'" in message and "row 1" in message
    assert caught.value.column == "size" and caught.value.expected == "int32" and caught.value.found == "str"
    assert FATAL_MARKER in message


def test_a_record_batch_with_another_column_type_names_the_column_and_both_types() -> None:
    wrong = pa.RecordBatch.from_arrays([pa.array(["a"]), pa.array([1], pa.int64())], names=["package", "size"])
    with pytest.raises(SchemaMismatch) as caught:
        list(to_record_batches([wrong], SCHEMA))
    assert "column 'size' has type int32 in the output schema" in str(caught.value)
    assert "type int64" in str(caught.value)
    assert (caught.value.expected, caught.value.found) == ("int32", "int64")


@pytest.mark.parametrize(
    ("record", "words"),
    [
        (pa.RecordBatch.from_arrays([pa.array(["a"])], names=["package"]), "without column 'size'"),
        (
            pa.RecordBatch.from_arrays(
                [pa.array(["a"]), pa.array([1], pa.int32()), pa.array([1.0])], names=["package", "size", "x"]
            ),
            "column(s) x",
        ),
        (("a", 1, 2), "has 3 field(s)"),
        ({"package": "a"}, "missing ['size']"),
        ({"package": "a", "size": 1, "extra": 0}, "not in the schema ['extra']"),
        ("just a string", "is a str"),
    ],
)
def test_records_that_do_not_fit_are_refused_with_what_is_wrong(record: object, words: str) -> None:
    with pytest.raises(SchemaMismatch) as caught:
        list(to_record_batches([record], SCHEMA))
    assert words in str(caught.value)


def test_record_batches_travel_through_the_wire_as_arrow_ipc() -> None:
    register_arrow_codec()
    batch = pa.RecordBatch.from_arrays([pa.array(["a", None]), pa.array([1, 2], pa.int32())], schema=SCHEMA)
    back = decode_value(encode_value([batch, ("x", batch)]))
    assert back[0].equals(batch) and back[1][1].equals(batch) and back[1][0] == "x"


def _fake_java(tmp_path: Path, banner: str) -> str:
    path = tmp_path / "java"
    path.write_text(f"#!/bin/sh\necho '{banner}' >&2\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_java_17_or_later_is_accepted_and_older_or_missing_java_says_what_to_install(tmp_path: Path) -> None:
    assert java_version(_fake_java(tmp_path, 'openjdk version "21.0.1" 2023-10-17')) == 21
    assert java_version(_fake_java(tmp_path, 'java version "1.8.0_292"')) == 8
    with pytest.raises(SparkSetupError, match=r"Java 17 or later.*Java 11.*openjdk-17-jre-headless"):
        check_java(_fake_java(tmp_path, 'openjdk version "11.0.2" 2019-01-15'))
    with pytest.raises(SparkSetupError, match=r"no java was found.*install Java 17"):
        check_java(str(tmp_path / "nowhere" / "java"))


def test_java_is_looked_up_through_java_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bin").mkdir()
    _fake_java(tmp_path / "bin", 'openjdk version "17.0.15" 2025-04-15')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert java_version() == 17
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "missing"))
    with pytest.raises(SparkSetupError, match="JAVA_HOME="):
        java_version()


def test_progress_events_reach_the_driver_and_a_wrong_token_is_ignored() -> None:
    events: list[dict[str, object]] = []
    server = ProgressServer("127.0.0.1", "secret", events.append)
    try:
        intruder = socket.create_connection(("127.0.0.1", server.port))
        intruder.sendall(frame(["hello", "wrong"]) + frame([{"event": "forged"}]))
        reporter = ProgressReporter(server.address, "secret", task=1, attempt=2)
        reporter.report("round", round=3, records=10)
        deadline = time.monotonic() + 5
        while not events and time.monotonic() < deadline:
            time.sleep(0.02)
        reporter.close()
        intruder.close()
    finally:
        server.close()
    assert [e["event"] for e in events] == ["round"]
    assert events[0]["task"] == 1 and events[0]["attempt"] == 2 and events[0]["records"] == 10


def test_a_reporter_without_a_driver_reports_nothing_and_does_not_fail() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    reporter = ProgressReporter(f"127.0.0.1:{port}", "t", 0, 0)
    reporter.report("anything", value=object())
    reporter.close()
    assert threading.active_count() >= 1 and os.getpid() > 0
