"""``run_dataflow``: a pytimely dataflow over a Spark DataFrame, as one gang of barrier tasks.

Retries
    Spark runs the ``N`` tasks as one barrier stage: all start together, and
    when one fails Spark kills the others and fails the stage.  A failed
    barrier *result* stage aborts the whole job (Spark does not retry it), so
    the driver does: it runs the job again, with a fresh token, up to
    ``retries`` more times.  Failures that another attempt would repeat (an
    exception in a user operator, a schema mismatch, a stuck dataflow) are not
    retried; nor are Python errors raised before a task's body ran (the user's
    module not importable on an executor, ``build`` not unpicklable).  Only
    infrastructure failures (a lost peer or executor, a killed Python worker,
    a failed barrier sync) are retried (:mod:`runtime.spark.failures`).  The
    error raised carries the failing task's Python traceback.  The result is
    materialized (``localCheckpoint``) inside the attempt, and an attempt
    either produces every task's output or nothing, so no partial or
    duplicated rows can come back; Spark's stale barrier mark on it is then
    cleared (:mod:`runtime.spark.materialize`).

Settings
    ``bind_host`` and ``ports`` (``"LOW-HIGH"`` or a pair) pin the interface
    and the port range on which the tasks listen for each other.  Their
    defaults are the session settings ``spark.pytimely.bindHost`` and
    ``spark.pytimely.ports`` (``LOW-HIGH``); without those, a task listens on
    loopback when its executor's address is loopback, else on every
    interface, on a random port.  The
    tasks learn each other's addresses from the driver, on a port of
    ``spark.driver.host`` (``spark.pytimely.rendezvous=barrier``: through
    ``BarrierTaskContext.allGather`` instead, a second slower).

Durable results, resuming, Spark Connect
    ``durable=True`` keeps the result in a reliable checkpoint in the session's
    checkpoint directory, ``durable="PATH"`` as Parquet files there, read back
    (:mod:`runtime.spark.durable`); the default local checkpoint dies with an
    executor.  ``checkpoint=DIR`` (a directory every executor reaches) makes
    a retried gang resume from its last complete checkpoint rather than from
    the start; each input batch is then its own epoch
    (:mod:`runtime.spark.resume`).  On a Spark Connect session everything
    works but the free-slot check and the warm-up wait, which need the JVM;
    its tasks meet through ``allGather`` unless
    ``spark.pytimely.rendezvous=driver``.

In the Spark UI and ``on_progress``
    The job is labelled with ``name``: job group ``pytimely:NAME``, a
    description with the attempt, the stage ``pytimely dataflow 'NAME'`` (a
    tag over Connect).  ``on_progress`` also gets the driver's phases before
    the job (``task`` is ``None``); see :mod:`runtime.spark.driver_phases`.

Preflight
    The session must allow barrier mode (no speculation, no dynamic
    allocation); the executors must import pytimely and its dependencies
    (:mod:`runtime.spark.executors`); a task waits for its peers at most
    ``connect_timeout`` seconds (:mod:`runtime.spark.gang`); a :func:`runtime.spark.warm_up`
    still running is waited for (up to :data:`WARM_UP_WAIT` seconds); if
    fewer than ``workers`` task slots are free after ``slot_wait`` seconds,
    a warning is issued and
    :class:`~runtime.spark.errors.SlotsUnavailable` raised at once, saying what
    to change, instead of waiting for Spark's own slot check to give up.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
import secrets
import sys
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]

from runtime.errors import ConfigurationError
from runtime.spark.connect import is_connect, own_setting, setting
from runtime.spark.ddl import simple_ddl
from runtime.spark.driver_phases import DriverPhases, job_labels, partitions_without_running
from runtime.spark.durable import Durable, check_durable, finish
from runtime.spark.errors import DataflowFailed, SparkError, SparkSetupError
from runtime.spark.executors import check_executors
from runtime.spark.failures import (
    OWN_FAILURE_WAIT,
    FailureReports,
    cancelled,
    exception_line,
    should_retry,
    stopped_by_another,
    summary,
    task_traceback,
    without_markers,
)
from runtime.spark.preflight import check_session, check_slots, running_tasks
from runtime.spark.progress import ProgressServer, TaskEvent
from runtime.spark.rendezvous import Rendezvous
from runtime.spark.task import Build, TaskPlan, run_task
from runtime.spark.warmup import wait_for_warm_up

DEFAULT_RETRIES = 2
"""Further attempts after a failed one (so three runs in all)."""
BIND_HOST_SETTING = "spark.pytimely.bindHost"
"""The session setting that gives the interface the tasks' mesh listens on (``bind_host``)."""
PORTS_SETTING = "spark.pytimely.ports"
"""The session setting that gives the port range ``LOW-HIGH`` the tasks' mesh listens on (``ports``)."""
WARM_UP_WAIT = 60.0
"""Seconds ``run_dataflow`` waits at most for a :func:`~runtime.spark.warm_up` job still running."""
CLIENT_HOST_SETTING = "spark.pytimely.clientHost"
"""On Spark Connect: the client's address, on which the tasks reach its listeners (rendezvous, progress)."""
RENDEZVOUS_SETTING = "spark.pytimely.rendezvous"
"""``driver`` (the default: tasks learn each other's addresses from the driver) or ``barrier`` (``allGather``)."""


def arrow_schema(
    schema: Any, timezone: str | None = None, large_types: bool = False, input_names: list[str] | None = None
) -> tuple[Any, pa.Schema]:
    """``(Spark schema, Arrow schema)`` from a ``StructType``, a DDL string, or a ``pyarrow.Schema``.

    ``timezone`` is the session's ``spark.sql.session.timeZone``: a Spark
    ``timestamp`` column is an Arrow ``timestamp("us", tz=timezone)``, as
    Spark hands it to the tasks; a schema with one needs it.  ``large_types``
    is the session's ``spark.sql.execution.arrow.useLargeVarTypes``: Spark then
    hands strings and binaries over as Arrow's ``large_string`` and
    ``large_binary``, and the output schema has them too.  ``input_names``
    are the input DataFrame's columns, which must not repeat a name either.
    """
    if input_names is not None:
        _check_names(input_names, "the input DataFrame", "rename them (df.toDF(*names), or select with alias)")
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
    from pyspark.sql.types import StructType, _parse_datatype_string

    if isinstance(schema, pa.Schema):
        _check_names(schema.names)
        return from_arrow_schema(schema), schema
    if isinstance(schema, str):
        schema = simple_ddl(schema) or _parse_datatype_string(schema)  # Spark's parser: a JVM round trip
    if not isinstance(schema, StructType):
        raise ConfigurationError(
            f"run_dataflow needs the output schema as a StructType, a DDL string such as "
            f"'package string, scc string' or a pyarrow.Schema, got {type(schema).__name__}"
        )
    _check_names(schema.names)
    if timezone is None and _has_timestamp(schema):
        raise ConfigurationError(
            f"the output schema {schema.simpleString()} has a timestamp column, whose Arrow type names the "
            f"session's time zone: pass arrow_schema(schema, timezone=spark.conf.get('spark.sql.session.timeZone'))"
        )
    return schema, to_arrow_schema(schema, timezone=timezone, prefers_large_types=large_types)


def _arrow_settings(spark: Any) -> tuple[str | None, bool]:
    """The session's settings that shape the Arrow batches Spark hands the tasks: time zone, large types."""
    large = str(spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false")).strip().lower() == "true"
    return spark.conf.get("spark.sql.session.timeZone"), large


def _check_names(
    names: list[str], what: str = "the output schema", fix: str = "give every output column its own name"
) -> None:
    """Refuse columns named twice: Spark can neither hand such Arrow batches to the tasks nor read them back."""
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigurationError(
            f"{what} ({', '.join(names)}) has column(s) {', '.join(map(repr, twice))} more than once (after a "
            f"join?); Spark's mapInArrow cannot pass such columns to or from the tasks: {fix}"
        )


def _has_timestamp(kind: Any) -> bool:
    """Whether the Spark type ``kind`` is or holds a ``timestamp`` (with time zone) anywhere."""
    from pyspark.sql.types import ArrayType, MapType, StructType, TimestampType

    if isinstance(kind, TimestampType):
        return True
    if isinstance(kind, StructType):
        return any(_has_timestamp(field.dataType) for field in kind.fields)
    if isinstance(kind, ArrayType):
        return _has_timestamp(kind.elementType)
    if isinstance(kind, MapType):
        return _has_timestamp(kind.keyType) or _has_timestamp(kind.valueType)
    return False


_PORT_RANGE = re.compile(r"([0-9]{1,5})(?:\s*-\s*([0-9]{1,5}))?")


def parse_ports(text: str | tuple[int, int] | None) -> tuple[int, int] | None:
    """``(low, high)`` from ``"LOW-HIGH"`` or a pair (``None`` stays ``None``); a bad range is refused."""
    if text is None:
        return None
    try:
        if isinstance(text, str):  # 'LOW-HIGH' or one port, in ASCII digits ('5-', '+5' and '٥' are refused)
            found = _PORT_RANGE.fullmatch(text.strip())
            if found is None:
                raise ValueError(text)
            low, high = int(found[1]), int(found[2] or found[1])
        else:
            low, high = (int(value) for value in text)
    except (TypeError, ValueError):
        raise ConfigurationError(
            f"the mesh's port range must be 'LOW-HIGH' or (low, high), e.g. '40000-40099', got {text!r}"
        ) from None
    if not 1 <= low <= high <= 65535:
        raise ConfigurationError(f"the mesh's port range {low}-{high} is not within 1-65535 with low <= high")
    return low, high


def _rendezvous_mode(text: str) -> str:
    if text not in ("driver", "barrier"):
        raise ConfigurationError(f"{RENDEZVOUS_SETTING} must be 'driver' or 'barrier', got {text!r}")
    return text


def _wait_idle(spark: Any, seconds: float) -> None:
    """Wait (up to ``seconds``) for the tasks of a failed attempt to be gone before the next one."""
    if is_connect(spark):  # no status tracker on Connect: Spark frees the slots before it runs the next job
        return
    deadline = time.monotonic() + seconds
    while running_tasks(spark) and time.monotonic() < deadline:
        time.sleep(0.2)


def run_dataflow(
    df: Any,
    build: Build,
    schema: Any,
    workers: int | None = None,
    *,
    retries: int = DEFAULT_RETRIES,
    stall_timeout: float = 60.0,
    connect_timeout: float = 30.0,
    slot_wait: float = 10.0,
    bind_host: str | None = None,
    ports: str | tuple[int, int] | None = None,
    on_progress: Callable[[TaskEvent], None] | None = None,
    on_attempt: Callable[[int, str | None], None] | None = None,
    name: str = "pytimely",
    log: str | None = None,
    columnar: bool = False,
    durable: Durable = None,
    checkpoint: str | os.PathLike[str] | None = None,
) -> Any:
    """Run ``build`` over ``df`` on ``workers`` gang-scheduled Spark tasks; return the output DataFrame.

    ``df`` (repartitioned unless its plan has ``workers`` partitions) feeds a
    barrier ``mapInArrow`` stage: each task is one pytimely process (one
    worker) of a TCP mesh; the tasks learn each other's addresses from the
    driver, with a token it makes for each attempt (module docstring).

    Contract of ``build(scope, batches) -> Stream``: it is called once in every
    task with the dataflow's root scope and a stream of the task's
    ``pyarrow.RecordBatch`` es, at time 0.  With ``columnar=True`` each Arrow
    batch is one message of that stream, a columnar batch for the batch
    operators (``map_batch``, ``exchange_batch`` by column, ...); otherwise its
    rows enter as one list batch of tuples in column order (converted column
    by column).  Arrow batches travel between tasks in Arrow's IPC format.  ``build`` returns the output stream,
    whose messages may be Arrow record batches or tables with the schema's
    columns (handed to Spark as they are when their schema is the output
    schema, otherwise their columns are reordered), numpy structured arrays,
    or lists of rows (tuples/lists in schema order, dicts by name, or Arrow
    batches as records); see :mod:`runtime.spark.arrow`.  Inside ``build`` and its operators,
    :func:`runtime.spark.current_task` gives the task's index, the number of
    peers, the attempt and a ``report(event, **fields)`` that reaches
    ``on_progress`` on the driver.  ``build`` must be picklable by Spark
    (cloudpickle): a module-level function, or a closure over picklable values.

    ``schema`` is a ``StructType``, a DDL string or a ``pyarrow.Schema``.  The
    returned DataFrame is already computed (``localCheckpoint``), so writing
    or collecting it never runs the dataflow again, and it is an ordinary
    DataFrame: ``show``, ``take``, ``limit``, ``union``, ``coalesce`` and the
    rest work on it.  The tasks stream their output to Spark as the dataflow
    makes it (each holds at most ``OUTPUT_BUFFER_BYTES`` of it).

    Failures, the mesh's network (``bind_host``, ``ports``) and the preflight
    checks (``slot_wait``): see the module's docstring.  ``retries`` further attempts are
    made after a failed one that may succeed on another try; then
    :class:`~runtime.spark.errors.DataflowFailed` is raised, listing every
    attempt's failure.  ``on_attempt(number, failure)`` is called before each
    attempt (``failure`` is ``None`` for the first, else why the last failed).

    ``log`` is the instrumentation target of ``--log`` (a file path, which
    each task ``i`` writes as ``STEM.i.SUFFIX`` on its executor's machine, or
    ``tcp://HOST:PORT`` of a live viewer); it reaches every task, and needs
    :mod:`runtime.instrument`.  ``durable``, ``checkpoint``, Spark Connect and what the Spark UI and
    ``on_progress`` show of ``name`` and of the driver's phases: see the module's docstring.
    """
    phases = DriverPhases(on_progress)
    with phases.phase("arguments"):  # a DDL schema that is not flat goes to Spark's parser (the JVM) here
        spark = _session_of(df)
        workers = _checked_workers(spark, workers, retries, build, (stall_timeout, connect_timeout, slot_wait))
        spark_schema, pa_schema = arrow_schema(schema, *_arrow_settings(spark), input_names=df.columns)
        bind_host, port_range, through_driver, driver_host = _network(spark, bind_host, ports)
    with phases.phase("preflight"):
        _preflight(spark, workers, slot_wait, durable)
    with phases.phase("plan"):
        df = df if not is_connect(spark) and partitions_without_running(df) == workers else df.repartition(workers)
    # each attempt's token, number and servers are filled in by _run_attempts
    plan = TaskPlan(build, pa_schema, "", 0, workers, stall_timeout, connect_timeout, bind_host, None, name)
    plan = dataclasses.replace(plan, log=log, columnar=columnar, ports=port_range, checkpoint=_path(checkpoint))
    return _run_attempts(
        spark, df, spark_schema, plan, retries, driver_host, through_driver, phases, on_attempt, durable
    )


def _session_of(df: Any) -> Any:
    """The Spark session of the input DataFrame; anything else (pandas, an RDD) is refused, saying what to do."""
    spark = getattr(df, "sparkSession", None)
    if spark is None:
        raise ConfigurationError(
            f"run_dataflow needs a Spark DataFrame as its input, got {type(df).__module__}.{type(df).__name__}; "
            f"make one with spark.createDataFrame(...) (or rdd.toDF(...) for an RDD)"
        )
    return spark


def _path(path: str | os.PathLike[str] | None) -> str | None:
    """The checkpoint directory as text; an empty one (the tasks' working directories) is refused."""
    if path is None:
        return None
    text = os.fspath(path)
    if not text.strip():
        raise ConfigurationError(
            f"run_dataflow needs checkpoint= a directory every task reaches, or None for no checkpoints; got "
            f"{text!r}, which would checkpoint into each executor's working directory"
        )
    return text


def _preflight(spark: Any, workers: int, slot_wait: float, durable: Durable = None) -> None:
    """The module docstring's preflight: barrier mode allowed, a warm-up done, ``workers`` slots free.

    Then the executors must import pytimely (:mod:`runtime.spark.executors`).  On Spark
    Connect there is no status tracker: Spark's own slot check decides.
    """
    check_durable(spark, durable)
    check_session(spark)
    if not is_connect(spark):
        wait_for_warm_up(WARM_UP_WAIT)  # its tasks hold slots that the gang needs all at once
        check_slots(spark, workers, slot_wait)
    check_executors(spark, workers)


def _network(
    spark: Any, bind_host: str | None, ports: str | tuple[int, int] | None
) -> tuple[str | None, tuple[int, int] | None, bool, str]:
    """The mesh's interface and port range (the session's settings unless given), and how tasks meet.

    Returns ``(bind_host, ports, through_driver, driver_host)``: whether the tasks learn each
    other's addresses from the driver (else through ``allGather``), and the driver's host.
    """
    bind_host = bind_host if bind_host is not None else own_setting(spark, BIND_HOST_SETTING)
    port_range = parse_ports(ports if ports is not None else own_setting(spark, PORTS_SETTING))
    # a Connect client may be far from the executors: by default its tasks meet through allGather
    default = "barrier" if is_connect(spark) else "driver"
    through_driver = _rendezvous_mode(own_setting(spark, RENDEZVOUS_SETTING, default) or default) == "driver"
    driver_host = setting(spark, "spark.driver.host", "127.0.0.1") or "127.0.0.1"
    if is_connect(spark):  # the listeners run in the client, which need not be the server's driver host
        driver_host = own_setting(spark, CLIENT_HOST_SETTING) or driver_host
    return bind_host, port_range, through_driver, driver_host


def _checked_seconds(limits: tuple[Any, Any, Any]) -> None:
    """Refuse a time limit that is not a finite number of seconds above 0 (at least 0 for ``slot_wait``).

    ``limits`` is ``(stall_timeout, connect_timeout, slot_wait)``.
    """
    for name, value in zip(("stall_timeout", "connect_timeout", "slot_wait"), limits, strict=True):
        number = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
        if not number or value < 0 or (value == 0 and name != "slot_wait"):
            bound = ">= 0" if name == "slot_wait" else "> 0"
            raise ConfigurationError(f"run_dataflow needs {name} {bound} (seconds, a finite number), got {value!r}")


def _checked_workers(spark: Any, workers: int | None, retries: int, build: Build, limits: tuple[Any, Any, Any]) -> int:
    """The number of tasks to run (Spark's default parallelism unless given), once the arguments are checked.

    ``limits`` are the time limits, ``(stall_timeout, connect_timeout, slot_wait)``.
    """
    _checked_seconds(limits)
    if workers is None and is_connect(spark):
        parallelism = setting(spark, "spark.default.parallelism")
        if parallelism is None:
            raise ConfigurationError(
                "run_dataflow on a Spark Connect session needs workers= (the number of tasks of the gang): "
                "the session's default parallelism cannot be read over Connect"
            )
        workers = int(parallelism)
    elif workers is None:
        workers = int(spark.sparkContext.defaultParallelism)
    if workers.__class__ is not int or workers < 1:
        raise ConfigurationError(f"run_dataflow needs workers >= 1 (an int), got {workers!r}")
    if retries.__class__ is not int or retries < 0:
        raise ConfigurationError(f"run_dataflow needs retries >= 0 (an int), got {retries!r}")
    if not callable(build):
        raise ConfigurationError(f"run_dataflow needs build(scope, batches) -> Stream, got {build!r}")
    return workers


def _run_attempts(
    spark: Any,
    repartitioned: Any,
    spark_schema: Any,
    plan: TaskPlan,
    retries: int,
    driver_host: str,
    through_driver: bool,
    phases: DriverPhases,
    on_attempt: Callable[[int, str | None], None] | None,
    durable: Durable = None,
) -> Any:
    """Run the barrier stage until an attempt succeeds, a failure would repeat, or the retries are spent."""
    on_progress = phases.on_progress
    rendezvous: Rendezvous | None = None
    progress: ProgressServer | None = None
    causes: list[str] = []
    reports = FailureReports()

    def on_event(event: TaskEvent) -> None:
        reports.note(event)
        if on_progress is not None:
            on_progress(event)

    try:
        for attempt in range(retries + 1):
            if on_attempt is not None:
                on_attempt(attempt, causes[-1] if causes else None)
            token = secrets.token_hex(16)
            if progress is not None:
                progress.close()
            progress = _progress_server(driver_host, token, on_event, on_progress is not None)
            if through_driver:
                if rendezvous is not None:
                    rendezvous.close()
                rendezvous = Rendezvous(driver_host, token, plan.workers)
            attempt_plan = dataclasses.replace(
                plan,
                token=token,
                attempt=attempt,
                progress=progress.address if progress is not None else None,
                rendezvous=rendezvous.address if rendezvous is not None else None,
            )
            result = repartitioned.mapInArrow(functools.partial(run_task, attempt_plan), spark_schema, barrier=True)
            try:
                with job_labels(spark, plan.name, plan.workers, attempt, retries):
                    phases.event("submitted", attempt=attempt)
                    return finish(result.localCheckpoint(eager=True), plan.workers, durable)
            except Exception as error:  # noqa: BLE001 - Py4J and captured Spark errors alike
                if isinstance(error, KeyboardInterrupt):
                    raise
                text = str(error)
                own = None
                if stopped_by_another(task_traceback(text)):  # the failing task's own report tells more
                    own = reports.own_failure(attempt, OWN_FAILURE_WAIT)
                failed = _failure(text, attempt, retries, causes, own)
                if failed is not None:
                    raise failed from SparkError(without_markers(text))
                print(
                    f"pytimely: attempt {attempt + 1} of {retries + 1} failed ({causes[-1]}); retrying",
                    file=sys.stderr,
                    flush=True,
                )
                _wait_idle(spark, 30.0)
    finally:
        if progress is not None:
            progress.close()
        if rendezvous is not None:
            rendezvous.close()
    raise SparkSetupError("unreachable: no attempt ran")  # pragma: no cover


def _progress_server(
    host: str, token: str, on_event: Callable[[TaskEvent], None], asked: bool
) -> ProgressServer | None:
    """The attempt's progress listener, always made: the tasks report their failures on it.

    Where ``host`` cannot be listened on (a Spark Connect client far from the
    server's driver host) it is left out unless the caller asked for
    ``on_progress``, which then fails as before.
    """
    try:
        return ProgressServer(host, token, on_event)
    except OSError:
        if asked:
            raise
        return None


def _failure(
    text: str, attempt: int, retries: int, causes: list[str], own: dict[str, Any] | None = None
) -> DataflowFailed | None:
    """Note why attempt ``attempt`` failed (Spark's error ``text``); the error to raise, or ``None`` to retry.

    ``own`` is the failing task's own report, which wins over Spark's text
    when Spark shows a task that was only stopped by it.
    """
    if own is not None:
        traceback: str | None = without_markers(str(own["traceback"]))
        cause = exception_line(traceback or "")[:600]
        retry = bool(own.get("retry"))
    else:
        traceback, cause, retry = task_traceback(text), summary(text), should_retry(text)
    causes.append(cause)
    shown = f"\n\nThe failing task's Python traceback:\n{traceback}" if traceback else ""
    if not retry:
        repeat = " failed in a way another attempt would repeat"
        why = "'s Spark job was cancelled, which is not retried" if cancelled(text) else repeat
        return DataflowFailed(
            f"the dataflow{why} (attempt {attempt + 1} of {retries + 1}): {cause}{shown}",
            attempt + 1,
            causes,
            False,
            traceback,
        )
    if attempt == retries:
        listed = "\n".join(f"  attempt {i + 1}: {text}" for i, text in enumerate(causes))
        return DataflowFailed(
            f"the dataflow failed {len(causes)} time(s), the retry budget (retries={retries}); "
            f"raise retries= or fix the cause:\n{listed}{shown}",
            attempt + 1,
            causes,
            True,
            traceback,
        )
    return None
