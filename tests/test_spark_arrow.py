"""runtime.spark without a Spark cluster: output conversion, schema errors, the Arrow codec, Java and progress."""

from __future__ import annotations

import os
import socket
import stat
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from helpers import eventually
from helpers.ports import free_port, refusing_port

from runtime.communication.wire import decode_value, encode_value, frame
from runtime.spark import SchemaMismatch, SparkSetupError, check_java, java_version, to_record_batches
from runtime.spark.arrow import register_arrow_codec
from runtime.spark.errors import FATAL_MARKER
from runtime.spark.progress import ProgressReporter, ProgressServer

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
    with refusing_port() as port:  # no driver there while the test runs, nor another test's server
        reporter = ProgressReporter(f"127.0.0.1:{port}", "t", 0, 0)
        reporter.report("anything", value=object())
        reporter.close()
    assert threading.active_count() >= 1 and os.getpid() > 0


# ---------------------------------------------------------------------- alignment, failures, output queue, ports


def test_an_arrow_batch_received_at_an_odd_offset_is_aligned_and_acero_does_not_warn(
    capfd: pytest.CaptureFixture[str],
) -> None:
    from runtime.communication.arraycodec import ARROW_BATCH, decode_arrow, encode_arrow

    keys = [f"k{n % 3}" for n in range(100)]
    batch = pa.RecordBatch.from_pydict({"n": pa.array(range(100), pa.int64()), "key": keys})
    received = memoryview(bytearray(b"x" + encode_arrow(batch)))[1:]  # as a frame's payload may sit
    decoded = decode_arrow(ARROW_BATCH, received)
    assert decoded.equals(batch) and decoded.column(0).buffers()[1].address % 8 == 0
    grouped = pa.Table.from_batches([decoded]).group_by("key").aggregate([("n", "sum")])
    assert sorted(grouped.column("n_sum").to_pylist()) == sorted(sum(range(k, 100, 3)) for k in range(3))
    assert "poorly aligned" not in capfd.readouterr().err


SPARK_FAILURE = (
    "py4j.protocol.Py4JJavaError: An error occurred while calling o156.localCheckpoint.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: barrier task failed\n"
    "org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was thrown from the Python "
    "worker: Traceback (most recent call last):\n"
    '  File "/x/pyspark/worker.py", line 3, in read_command\n'
    "    command = serializer.loads(command)\n"
    "ModuleNotFoundError: No module named 'my_dataflow'\n"
    "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)\n"
    "Caused by: org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
)


def test_a_spark_failure_gives_the_tasks_traceback_and_its_exception_line() -> None:
    from runtime.spark.failures import should_retry, summary, task_traceback

    traceback = task_traceback(SPARK_FAILURE)
    assert traceback is not None and traceback.startswith("Traceback (most recent call last):")
    assert traceback.endswith("ModuleNotFoundError: No module named 'my_dataflow'") and "\tat " not in traceback
    assert summary(SPARK_FAILURE) == "ModuleNotFoundError: No module named 'my_dataflow'"
    assert not should_retry(SPARK_FAILURE)


CANCELLED = (
    "An error occurred while calling o178.localCheckpoint.\n: org.apache.spark.SparkException: [SPARK_JOB_CANCELLED] "
    "Job 1 cancelled part of cancelled job group pytimely:slow SQLSTATE: XXKDA\n"
    "\tat org.apache.spark.errors.SparkCoreErrors$.sparkJobCancelled(SparkCoreErrors.scala:222)\n"
    "\tat org.apache.spark.scheduler.DAGScheduler.handleJobCancellation(DAGScheduler.scala:4404)\n"
)
"""What Spark 4 says when ``cancelJobGroup`` stopped a dataflow's job."""


@pytest.mark.parametrize(
    ("text", "retry"),
    [
        ("Traceback (most recent call last):\n  File x\nTaskFailed: [pytimely:retry] task 0: PeerLost: gone", True),
        ("Traceback (most recent call last):\n  File x\nTaskFailed: [pytimely:no-retry] task 0: WorkerFailed", False),
        ("org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)", True),
        ("ExecutorLostFailure (executor 1 exited caused by one of the running tasks)", True),
        ("Traceback (most recent call last):\n  File x\n_pickle.UnpicklingError: invalid load key", False),
        (CANCELLED, False),
    ],
)
def test_only_infrastructure_failures_are_retried(text: str, retry: bool) -> None:
    from runtime.spark.failures import should_retry

    assert should_retry(text) is retry


def test_the_output_queue_holds_a_bounded_number_of_bytes_and_fails_a_waiting_put_when_cancelled() -> None:
    from runtime.spark.task import OutputQueue, TaskFailed

    batch = pa.RecordBatch.from_pydict({"n": pa.array(range(1000), pa.int64())})
    queue = OutputQueue(limit=batch.nbytes)
    queue.put(batch)
    second = threading.Thread(target=queue.put, args=(batch,))
    second.start()
    second.join(0.3)
    assert second.is_alive() and queue.held == batch.nbytes  # waits for room
    assert queue.take() is batch
    second.join(5)
    assert not second.is_alive() and queue.held == batch.nbytes
    failed: list[BaseException] = []

    def put_and_record() -> None:
        try:
            queue.put(batch)
        except TaskFailed as error:
            failed.append(error)

    third = threading.Thread(target=put_and_record)
    third.start()
    queue.cancel()
    third.join(5)
    assert failed and "stopped reading" in str(failed[0])
    queue.close(ValueError("the dataflow failed"))
    assert queue.take() is batch
    with pytest.raises(ValueError, match="the dataflow failed"):
        queue.take()


def test_output_rows_become_batches_as_they_arrive_and_input_batches_become_tuples() -> None:
    from runtime.spark.arrow import ROWS_PER_BATCH, OutputBatcher, input_rows

    batcher = OutputBatcher(SCHEMA)
    assert batcher.add([("a", 1)]) == []
    full = batcher.add([("b", n) for n in range(ROWS_PER_BATCH)])
    assert [batch.num_rows for batch in full] == [ROWS_PER_BATCH] and [b.num_rows for b in batcher.finish()] == [1]
    table = pa.table({"package": ["t"], "size": pa.array([7], pa.int32())})
    assert batcher.add([("c", 2)]) == []
    ready = batcher.add(table)
    assert [batch.num_rows for batch in ready] == [1, 1] and ready[1].column(0).to_pylist() == ["t"]
    batch = pa.RecordBatch.from_pydict({"n": [1, 2], "s": ["x", None]})
    assert input_rows(batch) == [(1, "x"), (2, None)]


def test_the_mesh_listens_in_the_pinned_port_range_and_a_full_range_says_what_to_change() -> None:
    from runtime.errors import ConfigurationError
    from runtime.spark.driver import parse_ports
    from runtime.spark.errors import RETRY_MARKER
    from runtime.spark.task import TaskFailed, _listen

    free = free_port()
    assert parse_ports(f"{free}-{free}") == (free, free) and parse_ports((1, 2)) == (1, 2) and parse_ports(None) is None
    assert parse_ports(" 40000 - 40099 ") == (40000, 40099) and parse_ports("40000") == (40000, 40000)
    for bad in ("a-b", "9-3", "0-10", (70000, 70001), "5-", "-5", "+5-9", "5-9-12", "\u0665-9", "5_0-60", ""):
        with pytest.raises(ConfigurationError):
            parse_ports(bad)  # type: ignore[arg-type]
    listener, address = _listen("127.0.0.1", "127.0.0.1", (free, free))
    with listener:
        assert address == f"127.0.0.1:{free}" and listener.getsockname() == ("127.0.0.1", free)
        with pytest.raises(TaskFailed, match=rf"no free port in {free}-{free}") as caught:
            _listen("127.0.0.1", "127.0.0.1", (free, free))
        assert RETRY_MARKER in str(caught.value)


def test_tasks_learn_every_address_in_task_order_from_the_driver_and_a_wrong_token_is_dropped() -> None:
    from runtime.spark.rendezvous import Rendezvous, RendezvousFailed, gather

    rendezvous = Rendezvous("127.0.0.1", "secret", 3)
    found: dict[int, list[str]] = {}
    try:
        intruder = socket.create_connection(("127.0.0.1", int(rendezvous.address.rpartition(":")[2])))
        intruder.sendall(frame(["hello", "wrong", 0, "evil:1"]))
        threads = [
            threading.Thread(
                target=lambda i=i: found.__setitem__(i, gather(rendezvous.address, "secret", i, f"h{i}:{i}", 3, 10.0))
            )
            for i in (2, 0, 1)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(15)
        intruder.close()
    finally:
        rendezvous.close()
    assert found == {i: ["h0:0", "h1:1", "h2:2"] for i in range(3)}
    lonely = Rendezvous("127.0.0.1", "t", 2)
    try:
        with pytest.raises(RendezvousFailed, match=r"\[pytimely:retry\] task 0 could not learn its peers"):
            gather(lonely.address, "t", 0, "h0:0", 2, 0.5)
    finally:
        lonely.close()


def test_the_drivers_listeners_decode_plain_values_only() -> None:
    """A rendezvous hello (read before its token is checked) carrying an extension value is refused, not decoded."""
    import socket
    import time

    from runtime.communication.wire import frame
    from runtime.errors import DecodeError
    from runtime.spark.rendezvous import _read_frame

    sender, receiver = socket.socketpair()
    try:
        sender.sendall(frame(["hello", "token", 0, ("a", "tuple")]))  # a tuple travels as an extension type
        with pytest.raises(DecodeError):
            _read_frame(receiver, time.monotonic() + 5)
        sender.sendall(frame(["hello", "token", 0, "host:1"]))
        assert _read_frame(receiver, time.monotonic() + 5) == ["hello", "token", 0, "host:1"]
    finally:
        sender.close()
        receiver.close()


def test_the_drivers_listeners_close_at_once_not_at_their_next_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime.spark import gate, rendezvous

    monkeypatch.setattr(gate, "_POLL", 30.0)  # without waking it, the accepting thread would sleep on
    meeting = rendezvous.Rendezvous("127.0.0.1", "token", 2)
    server = ProgressServer("127.0.0.1", "token", lambda event: None)
    threads = [meeting.gate._thread, server.gate._thread]

    def accepting() -> bool:  # both accepting threads are now in an accept with the long timeout
        frames = sys._current_frames()
        return all(t.ident in frames and frames[t.ident].f_code.co_name == "accept" for t in threads)

    eventually(accepting, timeout=10)
    started = time.perf_counter()
    meeting.close()
    server.close()
    assert time.perf_counter() - started < 1.0
    assert not meeting.gate._thread.is_alive() and not server.gate._thread.is_alive()


@pytest.mark.parametrize("without_concat_batches", [False, True])
def test_spark_batches_are_joined_in_order_into_batches_of_at_least_the_given_rows(
    without_concat_batches: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime.spark.arrow import coalesced

    if without_concat_batches:  # pyarrow before 19 joins through a table
        monkeypatch.delattr(pa, "concat_batches", raising=False)
    sizes = [3, 4, 10, 0, 2, 2, 1]
    start = [0]

    def batch(rows: int) -> pa.RecordBatch:
        values = list(range(start[0], start[0] + rows))
        start[0] += rows
        return pa.RecordBatch.from_arrays(
            [pa.array(values, pa.int64()), pa.array([str(v) for v in values], pa.string())], ["n", "s"]
        )

    given = [batch(rows) for rows in sizes]
    joined = list(coalesced(given, rows=6))
    assert [b.num_rows for b in joined] == [7, 10, 5]  # 3+4, then 10 alone, then the rest (an empty one too)
    assert joined[1] is given[2]  # a batch of enough rows passes as it is, not copied
    assert all(b.schema == given[0].schema for b in joined)
    assert pa.Table.from_batches(joined).column("n").to_pylist() == list(range(start[0]))
    assert list(coalesced([], rows=6)) == []


PY4J_STAGE_FAILURE = (
    "An error occurred while calling o841.collectToPython.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 3.0 failed 4 times, most "
    "recent failure: Lost task 1.3 in stage 3.0 (TID 9) (192.0.2.2 executor 2): java.io.IOException: Connection reset\n"
    "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:1)\n"
)


@pytest.mark.parametrize(
    ("text", "told"),
    [
        (PY4J_STAGE_FAILURE, "Job aborted due to stage failure: Task 1 in stage 3.0 failed 4 times"),
        (
            "An error occurred while calling o9.collectToPython.\n: org.apache.spark.SparkException: Job aborted due "
            "to stage failure: ... ExecutorLostFailure (executor 1 exited caused by one of the running tasks)\n",
            "ExecutorLostFailure (executor 1 exited",
        ),
        ("An error occurred while calling o9.collectToPython.\n", "An error occurred while calling o9"),
        (CANCELLED, "[SPARK_JOB_CANCELLED] Job 1 cancelled part of cancelled job group pytimely:slow"),
    ],
)
def test_a_spark_failure_is_summed_up_by_its_reason_not_by_py4js_header(text: str, told: str) -> None:
    from runtime.spark.failures import summary

    assert told in summary(text)


def test_a_session_whose_application_id_an_earlier_one_had_is_checked_again() -> None:
    """Two ``local-cluster`` sessions started in the same second both name their application app-<second>-0000."""
    from runtime.spark.executors import check_executors, forget_checks

    probes: list[int] = []

    class Rows:
        def __init__(self, tasks: int) -> None:
            self.tasks = tasks

        def mapInArrow(self, *_: object) -> Rows:  # noqa: N802 - Spark's name
            return self

        def collect(self) -> list[dict[str, str]]:
            probes.append(self.tasks)
            return [{"host": "vm", "python": "python", "missing": ""}] * self.tasks

    def session(started: int) -> object:
        class Context:
            applicationId = "app-20261128091239-0000"
            startTime = started

        class Session:
            sparkContext = Context

            def range(self, tasks: int, **__: object) -> Rows:
                return Rows(tasks)

        return Session()

    forget_checks()
    first, second = session(1764321159000), session(1764321159800)
    check_executors(first, 2)
    check_executors(first, 2)  # once per session
    check_executors(second, 2)  # another session, though its application id is the same
    assert probes == [2, 2]
    forget_checks()


def test_a_failed_probe_of_the_executors_names_spark_s_reason() -> None:
    """The check before run_dataflow names why Spark's probe job failed, not only the Java call that failed."""
    from runtime.spark.executors import check_executors

    class Failing:
        def mapInArrow(self, *_: object) -> Failing:  # noqa: N802 - Spark's name
            return self

        def collect(self) -> None:
            raise RuntimeError(PY4J_STAGE_FAILURE)

    class Session:
        class sparkContext:  # noqa: N801 - Spark's name
            applicationId = "app-probe-test"
            startTime = 1

        def range(self, *_: object, **__: object) -> Failing:
            return Failing()

    with pytest.raises(SparkSetupError) as refused:
        check_executors(Session(), 2)
    message = str(refused.value)
    assert "cannot run a Python Arrow task" in message and "java.io.IOException: Connection reset" in message
    assert "An error occurred while calling" not in message
