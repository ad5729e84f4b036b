"""What each Spark task of a gang runs: one pytimely process of the cluster, fed by its partition.

A task (1) binds a listening socket, (2) shares its ``host:port`` with the other
tasks of the barrier stage through ``BarrierTaskContext.allGather`` (which
returns every task's message in partition order, so task ``i`` is process
``i``), (3) joins the TCP mesh with the job's token
(:func:`runtime.cluster.run_process`), (4) feeds its partition's Arrow record
batches into the dataflow's input (``columnar``: each batch is one message,
a columnar batch; otherwise each batch is one record of a list batch), runs
the dataflow to completion, and (5) yields the output as record batches of
the schema: the output stream's Arrow batches as they are, its rows gathered
into columns.

The dataflow runs inside the task's own Python worker process, in its
thread: the task starts no process, so nothing can outlive it.  When Spark
kills the task, or the process dies, its connections close and every other
process of the mesh stops within seconds, naming it; the barrier stage then
fails as a whole.

An error that another attempt would raise again (a schema mismatch, an
exception in a user operator, a stuck dataflow) is marked with
:data:`~runtime.spark.errors.FATAL_MARKER`, so that the driver does not retry
it; a lost peer or a killed task is left unmarked, and the driver retries.
"""

from __future__ import annotations

import contextlib
import importlib
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]

from runtime.cluster import run_process
from runtime.errors import DataflowStuck, WorkerFailed
from runtime.spark.arrow import output_records, to_record_batches
from runtime.spark.errors import FATAL_MARKER, SparkError
from runtime.spark.progress import ProgressReporter
from runtime.tcp import Endpoint, parse_endpoint
from runtime.worker import Worker
from scopes import ScopeBuilder, Stream

Build = Callable[[ScopeBuilder, Stream], Stream]
"""``build(scope, batches) -> output``: the user's dataflow (see :func:`runtime.spark.run_dataflow`)."""


@dataclass(frozen=True)
class TaskPlan:
    """Everything a task needs, made by the driver for one attempt and shipped with the task."""

    build: Build
    schema: pa.Schema
    token: str
    attempt: int
    workers: int
    stall_timeout: float
    connect_timeout: float
    bind_host: str | None
    progress: str | None
    name: str
    log: str | None = None
    columnar: bool = False


@dataclass(frozen=True)
class TaskInfo:
    """The running task, for the user's operators: :func:`current_task` returns it inside ``build``."""

    index: int
    """This task's partition, which is also its pytimely process and worker index."""
    peers: int
    """The number of tasks (workers) in the gang."""
    attempt: int
    """Which attempt of the job this is (0 for the first)."""
    reporter: ProgressReporter

    def report(self, event: str, **fields: Any) -> None:
        """Send a progress event to the driver's ``on_progress`` (best effort, never blocks for long)."""
        self.reporter.report(event, **fields)


_current: TaskInfo | None = None


def current_task() -> TaskInfo | None:
    """The task running the dataflow in this process, or ``None`` outside a Spark task."""
    return _current


class TaskFailed(SparkError):
    """A task could not run its part of the dataflow (the message says whether a retry may help)."""


def _listen(bind_host: str | None, advertised: str) -> tuple[socket.socket, str]:
    """A listening socket, and the ``host:port`` the other tasks should connect to."""
    host = bind_host
    if host is None:
        host = "127.0.0.1" if advertised in ("localhost", "127.0.0.1", "::1") else ""
    listener = socket.create_server((host, 0), backlog=64)
    port = listener.getsockname()[1]
    shown = advertised if not host or host in ("0.0.0.0", "::") else host
    return listener, f"{shown}:{port}"


def _advertised_host(context: Any, index: int) -> str:
    try:
        address = context.getTaskInfos()[index].address
    except Exception:  # noqa: BLE001 - fall back to this machine's name
        return socket.gethostname()
    host, sep, _ = str(address).rpartition(":")
    return host if sep else str(address)


def _is_fatal(error: BaseException) -> bool:
    """Whether another attempt would fail the same way (a user or schema error, a stuck dataflow)."""
    if isinstance(error, WorkerFailed):
        return True
    if isinstance(error, DataflowStuck):
        return True
    return FATAL_MARKER in str(error)


def run_task(plan: TaskPlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The body of one barrier task: join the gang, run the dataflow, yield its output."""
    global _current
    from pyspark import BarrierTaskContext

    context = BarrierTaskContext.get()
    index = context.partitionId()
    listener, address = _listen(plan.bind_host, _advertised_host(context, index))
    reporter = ProgressReporter(plan.progress, plan.token, index, plan.attempt)
    try:
        with listener:
            addresses = context.allGather(address)
            endpoints: list[Endpoint] = [parse_endpoint(text, f"task {i}") for i, text in enumerate(addresses)]
            info = TaskInfo(index, len(endpoints), plan.attempt, reporter)
            _current = info
            reporter.report("joined", peers=len(endpoints), address=address)
            logging_on = _start_logging(plan.log, index, len(endpoints), reporter)
            started = time.monotonic()
            try:
                results = run_process(
                    lambda worker: _drive(worker, plan, batches, info),
                    index,
                    endpoints,
                    1,
                    plan.token,
                    plan.stall_timeout,
                    plan.connect_timeout,
                    listener=listener,
                    gather=False,
                )
            finally:
                if logging_on:
                    _stop_logging()
        produced = results[0]
        output = list(to_record_batches(output_records(produced), plan.schema))
        rows = sum(batch.num_rows for batch in output)
        reporter.report("finished", rows=rows, seconds=time.monotonic() - started)
    except BaseException as error:
        reporter.report("failed", error=f"{type(error).__name__}: {error}"[:500])
        if _is_fatal(error) and FATAL_MARKER not in str(error):
            raise TaskFailed(f"{FATAL_MARKER} task {index} of attempt {plan.attempt}: {error}") from error
        raise
    finally:
        _current = None
        reporter.close()
    yield from output


def _start_logging(spec: str | None, index: int, peers: int, reporter: ProgressReporter) -> bool:
    """Turn on the instrumentation log ``spec`` (``--log``) for this task's process, if pytimely has it."""
    if not spec:
        return False
    try:
        instrument = importlib.import_module("runtime.instrument")
    except ImportError:
        reporter.report("log-unavailable", reason="runtime.instrument is not installed")
        return False
    instrument.configure_from(spec, index, peers)
    return True


def _stop_logging() -> None:
    with contextlib.suppress(ImportError):
        importlib.import_module("runtime.instrument").stop_logging()


def _drive(worker: Worker, plan: TaskPlan, batches: Iterator[pa.RecordBatch], info: TaskInfo) -> list[Any]:
    """Build the dataflow on this task's worker, feed the partition, and collect the output messages.

    The output is kept as the messages that arrived (lists of records, or
    columnar batches), never iterated here.
    """
    produced: list[Any] = []

    def dataflow(scope: ScopeBuilder) -> Any:
        handle, stream = scope.new_input("SparkPartition")
        output = plan.build(scope, stream)
        if not isinstance(output, Stream):
            raise TaskFailed(
                f"{FATAL_MARKER} build(scope, batches) must return the output Stream of the dataflow, "
                f"got {type(output).__name__}"
            )
        probe = output.inspect_batch(lambda _time, batch: produced.append(batch), name="SparkOutput").probe()
        return handle, probe

    handle, probe = worker.dataflow(dataflow, name=plan.name)
    rows = 0
    count = 0
    send = handle.send_batch if plan.columnar else handle.send
    for batch in batches:
        send(batch)
        rows += batch.num_rows
        count += 1
        worker.step()
    info.report("input", batches=count, rows=rows)
    handle.close()
    worker.step_while(lambda: not probe.done())
    with contextlib.suppress(Exception):
        info.report("output", messages=len(produced), rows=sum(map(len, produced)))
    return produced
