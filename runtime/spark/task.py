"""What each Spark task of a gang runs: one pytimely process of the cluster, fed by its partition.

A task (1) binds a listening socket (on ``bind_host``, in ``ports`` if the plan
pins a range), (2) shares its ``host:port`` with the other tasks of the barrier
stage through the driver's rendezvous (:mod:`runtime.spark.rendezvous`), or
``BarrierTaskContext.allGather``; both return every task's address in
partition order, so task ``i`` is process ``i``, (3) joins the TCP
mesh with the job's token (:func:`runtime.cluster_member.run_process`), (4) feeds its
partition's Arrow record batches into the dataflow's input (``columnar``: each
batch is one message, a columnar batch; otherwise each batch's rows are one
list batch of tuples), runs the dataflow to completion, and (5) streams the
output to Spark as record batches of the schema while the dataflow runs: the
output stream's Arrow batches as they are, its rows gathered into columns.

The dataflow runs in a thread of the task's own Python worker process, while
the task's generator hands each finished record batch to Spark: the output
waits in a queue bounded in bytes (:data:`OUTPUT_BUFFER_BYTES`), never as a
whole.  The task starts no process, so nothing can outlive it.  When Spark
kills the task, or the process dies, its connections close and every other
process of the mesh stops within seconds, naming it; the barrier stage then
fails as a whole.

Every error leaving a task is marked for the driver: an error another attempt
would raise again (a schema mismatch, an exception in a user operator, a
stuck dataflow) with :data:`~runtime.spark.errors.FATAL_MARKER`, a lost peer,
a socket error or a failed barrier sync with
:data:`~runtime.spark.errors.RETRY_MARKER`.  Spark carries the task's Python
traceback to the driver, which shows it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import random
import resource
import socket
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]

from runtime.cluster_member import run_process
from runtime.communication.tcp import ClusterError, Endpoint, parse_endpoint
from runtime.errors import DataflowStuck, WorkerFailed
from runtime.spark.arrow import OutputBatcher, coalesced, input_rows, refuse_invalid_output
from runtime.spark.errors import FATAL_MARKER, RETRY_MARKER, SparkError
from runtime.spark.errors import TaskFailed as TaskFailed
from runtime.spark.failures import FAILED_EVENT, without_markers
from runtime.spark.gang import all_gather
from runtime.spark.progress import ProgressReporter
from runtime.spark.rendezvous import gather
from runtime.spark.resume import drive_resumable
from runtime.worker import Worker
from scopes import ScopeBuilder, Stream

OUTPUT_BUFFER_BYTES = 64 << 20
"""Output a task may hold before its dataflow waits for Spark to take some (at least one batch always fits)."""
OUTPUT_WAIT = 0.5
"""Seconds between two checks, while the dataflow waits for room, that Spark still reads the task's output."""

MAX_REPORTED_TRACEBACK = 12_000
"""Characters of a failed task's traceback sent to the driver (the end, where the exception is)."""
REMOTE_FAILURE_DELAY = 1.0
"""Seconds a task stopped by another task's failure waits before failing, so that Spark reports the cause."""

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
    ports: tuple[int, int] | None = None
    rendezvous: str | None = None
    """The driver's :class:`~runtime.spark.rendezvous.Rendezvous` (``host:port``); ``None``: ``allGather``."""
    checkpoint: str | None = None
    """The job's checkpoint directory: a retried gang resumes from it (:mod:`runtime.spark.resume`)."""


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


def _listen(
    bind_host: str | None, advertised: str, ports: tuple[int, int] | None, neighbours: int = 1
) -> tuple[socket.socket, str]:
    """A listening socket (in ``ports`` if given), and the ``host:port`` the other tasks should connect to.

    ``neighbours`` is how many tasks of the gang (this one included) run on
    this machine: a range with fewer ports can never hold them all, which no
    retry changes, so it fails at once without the retry marker.
    """
    host = bind_host
    if host is None:
        host = "127.0.0.1" if advertised in ("localhost", "127.0.0.1", "::1") else ""
    shown = advertised if not host or host in ("0.0.0.0", "::") else host
    if ports is None:
        listener = socket.create_server((host, 0), backlog=64)
        return listener, f"{shown}:{listener.getsockname()[1]}"
    low, high = ports
    if high - low + 1 < neighbours:
        raise TaskFailed(
            f"{FATAL_MARKER} the mesh's port range {low}-{high} (spark.pytimely.ports / run_dataflow(ports=...)) "
            f"has {high - low + 1} port(s), but {neighbours} tasks of the gang run on this machine "
            f"({advertised}), one port each: it can never succeed, so it is not retried; widen the range to at "
            f"least {neighbours} ports"
        )
    candidates = list(range(low, high + 1))
    offset = random.randrange(len(candidates))  # tasks of one machine start at different ports
    for port in candidates[offset:] + candidates[:offset]:
        try:
            listener = socket.create_server((host, port), backlog=64)
        except OSError:
            continue
        return listener, f"{shown}:{port}"
    raise TaskFailed(
        f"{RETRY_MARKER} no free port in {low}-{high} on {host or 'all interfaces'} for the dataflow's mesh "
        f"(spark.pytimely.ports / run_dataflow(ports=...)): widen the range to at least as many ports as tasks "
        f"per machine"
    )


def _neighbours(context: Any, index: int) -> int:
    """How many tasks of the gang run on the same host as task ``index`` (1 if Spark does not say)."""
    try:
        hosts = [str(info.address).rpartition(":")[0] or str(info.address) for info in context.getTaskInfos()]
        return max(1, hosts.count(hosts[index]))
    except Exception:  # noqa: BLE001 - no task infos: count this task alone
        return 1


def _report_failure(reporter: ProgressReporter, error: BaseException, index: int) -> None:
    """Tell the driver at once how this task failed: its own traceback, and whether another task caused it."""
    chain = without_markers("".join(traceback.format_exception(error)).rstrip())[-MAX_REPORTED_TRACEBACK:]
    reporter.report(
        FAILED_EVENT,
        error=without_markers(f"{type(error).__name__}: {error}")[:500],
        elsewhere=_failed_elsewhere(error, index),
        retry=_is_retryable(error),
        traceback=chain,
    )


def _advertised_host(context: Any, index: int) -> str:
    try:
        address = context.getTaskInfos()[index].address
    except Exception:  # noqa: BLE001 - fall back to this machine's name
        return socket.gethostname()
    host, sep, _ = str(address).rpartition(":")
    return host if sep else str(address)


def _is_retryable(error: BaseException) -> bool:
    """Whether another attempt may succeed: the cluster lost a peer, a socket failed (not user code)."""
    if isinstance(error, WorkerFailed | DataflowStuck | SparkError):
        return False
    return isinstance(error, ClusterError | OSError)


def _marked(error: BaseException, index: int, attempt: int) -> BaseException:
    """``error`` as the task should raise it: with the marker that tells the driver whether to retry.

    The message carries the whole chain of tracebacks (the user's frames
    included), because Spark shortens the traceback it sends to the driver.
    """
    text = str(error)
    if (FATAL_MARKER in text or RETRY_MARKER in text) and error.__cause__ is None:
        return error
    marker = (
        "" if FATAL_MARKER in text or RETRY_MARKER in text else (RETRY_MARKER if _is_retryable(error) else FATAL_MARKER)
    )
    chain = "".join(traceback.format_exception(error)).rstrip()
    marked = TaskFailed(f"{marker} task {index} of attempt {attempt}: {type(error).__name__}: {error}\n\n{chain}")
    marked.__cause__ = error
    return marked


def _failed_elsewhere(error: BaseException, index: int) -> bool:
    """Whether ``error`` only reports that another task's worker failed (that task's error tells more)."""
    return isinstance(error, WorkerFailed) and error.worker != index


class OutputQueue:
    """The record batches a task's dataflow made and Spark has not taken yet, bounded in bytes.

    The dataflow's thread :meth:`put` s batches (waiting while more than
    ``limit`` bytes are held, unless nothing is) and :meth:`close` s the queue
    when it ends; the task's generator takes them with :meth:`take`.  When
    Spark stops reading (:meth:`cancel`), a waiting :meth:`put` raises.
    """

    def __init__(self, limit: int = OUTPUT_BUFFER_BYTES) -> None:
        """An empty queue holding at most ``limit`` bytes."""
        self.limit = limit
        self.batches: deque[pa.RecordBatch] = deque()
        self.held = 0
        self.done = False
        self.error: BaseException | None = None
        self.cancelled = False
        self.reported = False
        """Whether the dataflow's thread already reported its failure to the driver."""
        self.condition = threading.Condition()

    def put(self, batch: pa.RecordBatch) -> None:
        """Add ``batch``, first waiting for room while Spark reads."""
        size = batch.nbytes
        with self.condition:
            while self.batches and self.held + size > self.limit and not self.cancelled:
                self.condition.wait(OUTPUT_WAIT)
            if self.cancelled:
                raise TaskFailed(f"{RETRY_MARKER} Spark stopped reading the task's output")
            self.batches.append(batch)
            self.held += size
            self.condition.notify_all()

    def close(self, error: BaseException | None = None) -> None:
        """No more batches: the dataflow finished, or failed with ``error``."""
        with self.condition:
            self.done = True
            self.error = error
            self.condition.notify_all()

    def cancel(self) -> None:
        """Spark reads no more: let a waiting :meth:`put` fail."""
        with self.condition:
            self.cancelled = True
            self.condition.notify_all()

    def take(self) -> pa.RecordBatch | None:
        """The next batch, waiting for one; ``None`` once the dataflow finished; its error if it failed."""
        with self.condition:
            while not self.batches and not self.done:
                self.condition.wait(OUTPUT_WAIT)
            if self.batches:
                batch = self.batches.popleft()
                self.held -= batch.nbytes
                self.condition.notify_all()
                return batch
            if self.error is not None:
                raise self.error
            return None


def run_task(plan: TaskPlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The body of one barrier task: join the gang, run the dataflow, stream its output to Spark."""
    global _current
    from pyspark import BarrierTaskContext

    context = BarrierTaskContext.get()
    index = context.partitionId()
    reporter = ProgressReporter(plan.progress, plan.token, index, plan.attempt)
    reporter.report("started")
    queue = OutputQueue()
    runner: threading.Thread | None = None
    failure: tuple[BaseException, BaseException] | None = None
    try:
        advertised = _advertised_host(context, index)
        listener, address = _listen(plan.bind_host, advertised, plan.ports, _neighbours(context, index))
        with listener:
            if plan.rendezvous is not None:
                addresses = gather(plan.rendezvous, plan.token, index, address, plan.workers, plan.connect_timeout)
            else:
                addresses = all_gather(context, address, index, plan.connect_timeout)
            endpoints: list[Endpoint] = [parse_endpoint(text, f"task {i}") for i, text in enumerate(addresses)]
            info = TaskInfo(index, len(endpoints), plan.attempt, reporter)
            _current = info
            reporter.report("joined", peers=len(endpoints), address=address)
            runner = threading.Thread(
                target=_run_mesh,
                args=(plan, batches, info, endpoints, listener, queue),
                name=f"pytimely-spark-task-{index}",
                daemon=True,
            )
            started = time.monotonic()
            runner.start()
            rows = 0
            while (batch := queue.take()) is not None:
                rows += batch.num_rows
                yield batch
        runner.join()
        reporter.report(
            "finished",
            rows=rows,
            seconds=time.monotonic() - started,
            peak_rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        )
    except GeneratorExit:
        queue.cancel()
        raise
    except BaseException as error:
        queue.cancel()
        if not queue.reported:
            _report_failure(reporter, error, index)
        if _failed_elsewhere(error, index):
            time.sleep(REMOTE_FAILURE_DELAY)  # let the failing task's own error reach Spark first
        failure = (error, _marked(error, index, plan.attempt))
    finally:
        if runner is not None:
            runner.join(timeout=plan.stall_timeout)
        _current = None
        reporter.close()
    if failure is not None:  # raised once cleaned up: raised in the except, its traceback ended at reporter.close()
        original, marked = failure
        raise marked if marked is original else marked from original


def _run_mesh(
    plan: TaskPlan,
    batches: Iterator[pa.RecordBatch],
    info: TaskInfo,
    endpoints: list[Endpoint],
    listener: socket.socket,
    queue: OutputQueue,
) -> None:
    """The dataflow's thread: join the mesh, run the dataflow, close ``queue`` (with the error, if any)."""
    logging_on = _start_logging(plan.log, info.index, len(endpoints), info.reporter)
    try:
        run_process(
            lambda worker: _drive(worker, plan, batches, info, queue),
            info.index,
            endpoints,
            1,
            plan.token,
            plan.stall_timeout,
            plan.connect_timeout,
            listener=listener,
            gather=False,
        )
    except BaseException as error:  # noqa: BLE001 - handed to the task's generator, which raises it
        _report_failure(info.reporter, error, info.index)  # first: Spark may kill this task any moment now
        queue.reported = True
        queue.close(error)
        return
    finally:
        if logging_on:
            _stop_logging()
    queue.close()


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


def _drive(
    worker: Worker, plan: TaskPlan, batches: Iterator[pa.RecordBatch], info: TaskInfo, queue: OutputQueue
) -> int:
    """Build the dataflow on this task's worker, feed the partition, and hand the output to ``queue``.

    Each output message becomes record batches of the schema in the worker,
    as it arrives (:class:`~runtime.spark.arrow.OutputBatcher`), so a schema
    mismatch (or a batch that is not valid Arrow, which Spark would keep as it
    is) fails the worker and every process of the mesh stops naming it.
    Returns the number of output rows.
    """
    info.report("meshed")
    if plan.checkpoint is not None:
        build = functools.partial(_output_dataflow, plan)
        rows = drive_resumable(
            worker, plan.checkpoint, plan.name, plan.schema, plan.columnar, build, batches, queue.put, info.report
        )
        with contextlib.suppress(Exception):
            info.report("output", rows=rows)
        return rows
    batcher = OutputBatcher(plan.schema)
    produced = [0, 0]
    where = f"the output of operator 'SparkOutput' of dataflow {plan.name!r}"
    fate = "nothing of it was handed to Spark"

    def hand_over(at: Any, message: Any) -> None:
        produced[0] += 1
        for batch in batcher.add(message):
            refuse_invalid_output(batch, info.index, at, where, fate)
            produced[1] += batch.num_rows
            queue.put(batch)

    handle, probe = worker.dataflow(lambda scope: _output_dataflow(plan, scope, hand_over), name=plan.name)
    rows = 0
    count = 0
    for batch in coalesced(batches) if plan.columnar else batches:
        if plan.columnar:
            handle.send_batch(batch)
        else:
            handle.send_batch(input_rows(batch, rows))
        rows += batch.num_rows
        count += 1
        worker.step()
    info.report("input", batches=count, rows=rows)
    handle.close()
    worker.step_while(lambda: not probe.done())
    for batch in batcher.finish():
        refuse_invalid_output(batch, info.index, None, where, fate)
        produced[1] += batch.num_rows
        queue.put(batch)
    with contextlib.suppress(Exception):
        info.report("output", messages=produced[0], rows=produced[1])
    return produced[1]


def _output_dataflow(plan: TaskPlan, scope: ScopeBuilder, hand_over: Callable[[Any, Any], None]) -> Any:
    """Build the user's dataflow on ``scope``: ``(input handle, probe)``; each output message goes to ``hand_over``."""
    handle, stream = scope.new_input("SparkPartition")
    output = plan.build(scope, stream)
    if not isinstance(output, Stream):
        raise TaskFailed(
            f"{FATAL_MARKER} build(scope, batches) must return the output Stream of the dataflow, "
            f"got {type(output).__name__}"
        )
    probe = output.inspect_batch(hand_over, name="SparkOutput").probe()
    return handle, probe
