"""``execute``: run a timely computation on several workers in this process.

:func:`run_workers` is the part shared by every way of running workers: given
one communicator per local worker, it runs ``main`` on each (in this thread for
a single worker, in one thread each otherwise), stops them all when one fails
or Ctrl-C is pressed, and turns failures into :class:`~runtime.errors.WorkerFailed`.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from runtime.audit import AUDIT_VARIABLE, ProcessLedger, audit_requested
from runtime.communication import Communicator, Stop
from runtime.communication.fabric import ThreadFabric
from runtime.core_governor import counters_readable, start_governor
from runtime.environment_observers import observers_from_environment, recording_processes
from runtime.errors import (
    ConfigurationError,
    DataflowStuck,
    WorkerAborted,
    WorkerFailed,
    combined_stuck,
)
from runtime.launcher import INTERRUPT_GRACE, execute_processes
from runtime.settings import check_settings, check_stall_timeout, settings_for_run
from runtime.thread_cores import cores_setting, run_on, shared_core
from runtime.worker import Worker
from scopes.errors import OperatorFailed, describe_user_error

R = TypeVar("R")


def execute(
    main: Callable[[Worker], R],
    workers: int = 1,
    stall_timeout: float | None = None,
    processes: int = 1,
    audit: bool | None = None,
) -> list[R]:
    """Run ``main(worker)`` on ``workers`` workers in this process; return their results in order.

    When ``main`` returns, the worker closes its inputs and runs its dataflows
    to completion.  If any worker raises, every worker is stopped and the first
    failure is re-raised as :class:`~runtime.errors.WorkerFailed`, naming the
    worker (and, for an error in a user function, the operator and time).  A
    stall that can never end (every worker's ``main`` waits in ``step_while`` on
    probes that only open inputs hold back, see :mod:`runtime.stalls`) fails within seconds with a
    :class:`~runtime.errors.DataflowStuck` cause explaining what holds the
    dataflows back; any other stall is explained once as a logged warning (see
    :class:`~runtime.worker.Worker`), unless ``stall_timeout`` is set: then no
    worker making progress for that many seconds is such a failure.  Ctrl-C stops every worker, prints one line
    and exits with status 130.

    With ``processes=P`` it runs ``P`` processes of ``workers`` threads each
    instead (see :func:`runtime.launcher.execute_processes`): ``main`` must then
    be importable and its arguments and results wire-encodable.

    ``audit=True`` checks the progress ledger as the computation runs and
    raises :class:`~runtime.errors.AuditViolation` at the first inconsistency
    (see :mod:`runtime.audit`); ``None`` follows ``PYTIMELY_AUDIT``.
    """
    if processes != 1:  # execute_processes checks the settings before any process starts
        with (
            settings_for_run({AUDIT_VARIABLE: None if audit is None else "1" if audit else "0"}),
            recording_processes(processes),
        ):
            return execute_processes(main, processes, workers, stall_timeout)
    check_settings()  # threads too: a wrong setting is refused at every worker count
    if workers.__class__ is not int or workers < 1:
        raise ConfigurationError(f"execute needs workers >= 1 (an int), got {workers!r}")
    check_stall_timeout(stall_timeout)
    fabric = ThreadFabric(workers)
    with observers_from_environment():
        return run_workers(main, fabric.communicators(), stall_timeout, audit=audit, one_core=True)


def run_workers(
    main: Callable[[Worker], R],
    communicators: Sequence[Communicator],
    stall_timeout: float | None,
    threaded: bool | None = None,
    audit: bool | None = None,
    one_core: bool = False,
    announce_interrupt: bool = True,
) -> list[R]:
    """Run ``main`` on one worker per communicator; return the results in communicator order.

    With ``threaded`` unset, a single communicator runs in the calling thread and several run in one thread each;
    with ``one_core``, those threads are placed on cores as ``PYTIMELY_THREAD_CORES`` says (runtime.thread_cores).
    On Ctrl-C (or a ``KeyboardInterrupt`` from ``main`` or a user function) every worker is stopped, one line is
    printed to stderr and :class:`SystemExit` ``(130)`` is raised; without ``announce_interrupt`` (a child of the
    launcher, whose parent prints the line) :class:`KeyboardInterrupt` is raised instead, silently.
    ``audit`` (``None``: as ``PYTIMELY_AUDIT`` says) gives the workers one shared :class:`~runtime.audit.ProcessLedger`.
    """
    count = len(communicators)
    if audit is None:
        audit = audit_requested()
    ledger = ProcessLedger(count, communicators[0].peers) if audit and communicators else None
    results: list[R | None] = [None] * count
    failures: list[tuple[int, BaseException]] = []
    lock = threading.Lock()

    # Set when a worker has unwound.  Ctrl-C waits on these, not on Thread.join: a join
    # interrupted by KeyboardInterrupt can mark a running thread as stopped (CPython 3.11),
    # after which joining it again returns at once and its finally blocks are cut off.
    done = [threading.Event() for _ in range(count)]

    core: int | None = None
    ended = threading.Event()  # set when the first worker ends: stops the core governor

    def run(slot: int) -> None:
        try:
            run_on(core)
            result, error = run_worker(main, communicators[slot], stall_timeout, ledger if audit else False)
            results[slot] = result
            if error is not None:
                with lock:
                    failures.append((communicators[slot].index, error))
        finally:
            done[slot].set()
            ended.set()

    threads: list[threading.Thread] = []
    try:
        if threaded is False or (threaded is None and count == 1):
            for slot in range(count):
                run(slot)
        else:
            setting = cores_setting() if one_core else "all"
            start = shared_core(setting)
            # under auto too, each thread puts itself on the core as it starts (the governor only moves them later);
            # where no governor could read their counters, they are left on every CPU
            core = start if setting == "one" or (setting == "auto" and counters_readable()) else None
            threads = [
                threading.Thread(
                    target=run, args=(slot,), name=f"timely-worker-{communicators[slot].index}", daemon=True
                )
                for slot in range(count)
            ]
            _run_threads(threads, core if setting == "auto" else None, ended)
    except KeyboardInterrupt:
        _interrupted(communicators, done if threads else [], announce_interrupt)
    reason = communicators[0].stop_reason
    if any(isinstance(error, KeyboardInterrupt) for _, error in failures) or (
        reason is not None and reason.kind == "interrupted"
    ):
        _interrupted(communicators, [], announce_interrupt)
    if failures:
        raise failure_of(failures, communicators[0].peers)
    if reason is not None:  # stopped by a worker elsewhere (another process)
        raise WorkerFailed(
            f"stopped because {reason.describe()}",
            reason.worker if reason.worker is not None else -1,
        )
    return results  # type: ignore[return-value]


def _run_threads(threads: Sequence[threading.Thread], governed_core: int | None, ended: threading.Event) -> None:
    """Start the worker threads and wait for them; with ``governed_core``, a core governor runs beside them
    (``PYTIMELY_THREAD_CORES=auto``, see :mod:`runtime.core_governor`) until they end, fail or Ctrl-C is pressed."""
    governor = None
    try:
        for thread in threads:
            thread.start()
        if governed_core is not None and not ended.is_set():
            tids = [thread.native_id for thread in threads if thread.native_id is not None]
            governor = start_governor(tids, governed_core, ended)
        for thread in threads:
            while thread.is_alive():
                thread.join(0.1)
    finally:
        if governor is not None:
            governor.stop()


def run_worker(
    main: Callable[[Worker], R],
    communicator: Communicator,
    stall_timeout: float | None,
    audit: ProcessLedger | bool | None = None,
) -> tuple[R | None, BaseException | None]:
    """Run ``main`` and then the dataflows to completion on a new worker; return ``(result, error)``.

    On an error every other worker is stopped through ``communicator`` with the
    matching :class:`~runtime.communication.Stop`.  A worker stopped because of
    another's failure returns ``(None, None)``.  The communicator is always
    told that this worker has finished.
    """
    worker = Worker(communicator, stall_timeout, audit)
    try:
        result = main(worker)
        worker.run_to_completion()
        return result, None
    except WorkerAborted:
        return None, None
    except BaseException as error:  # noqa: BLE001 - reported by the caller
        if isinstance(error, DataflowStuck):
            communicator.stop(Stop("stalled", communicator.index))
        elif isinstance(error, KeyboardInterrupt):
            communicator.stop(Stop("interrupted"))
        else:
            communicator.stop(Stop("failed", communicator.index, _summary(error)))
        return None, error
    finally:
        worker.abandon()  # what unfinished dataflows hold outside them (a replay's watched socket); none if done
        if worker.logger is not None:
            worker.logger.shutdown()
        communicator.finish()


def _interrupted(communicators: Sequence[Communicator], unwound: Sequence[threading.Event], announce: bool) -> None:
    """Stop every worker after Ctrl-C, wait for them to unwind, print one line, exit with 130.

    Without ``announce`` raise :class:`KeyboardInterrupt` instead of printing: the launcher's child reports it
    to its parent, which prints the one line for the whole cluster.
    """
    communicators[0].stop(Stop("interrupted"))
    deadline = time.monotonic() + INTERRUPT_GRACE
    for event in unwound:
        event.wait(max(0.0, deadline - time.monotonic()))
    if not announce:
        raise KeyboardInterrupt
    peers = communicators[0].peers
    print(f"pytimely: interrupted (Ctrl-C); stopped {peers} worker(s)", file=sys.stderr, flush=True)
    raise SystemExit(130)


def _summary(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}".splitlines()[0]


def _operator_failure(error: BaseException) -> OperatorFailed | None:
    """The :class:`~scopes.errors.OperatorFailed` in ``error``'s chain of causes, if any."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, OperatorFailed):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def failure_of(failures: list[tuple[int, BaseException]], peers: int) -> WorkerFailed:
    """One :class:`WorkerFailed` for the failures ``(worker index, error)``, chained to its cause.

    If every failure is a :class:`DataflowStuck`, their explanations are combined in
    worker order; otherwise the first failure is reported.
    """
    stuck = [(index, error) for index, error in failures if isinstance(error, DataflowStuck)]
    if stuck and len(stuck) == len(failures):
        stuck.sort(key=lambda item: item[0])
        combined = combined_stuck([str(error) for _, error in stuck])
        index = stuck[0][0]
        failed = WorkerFailed(f"worker {index} of {peers} failed: DataflowStuck: {combined}", index)
        failed.__cause__ = combined
        return failed
    index, error = failures[0]
    operator = _operator_failure(error)
    if operator is not None:
        scope = " / ".join(operator.scope_path) or "?"
        user = operator.__cause__
        what = describe_user_error(user) if user is not None else str(operator)
        built = "" if operator.site is None else f", built at {operator.site}"
        message = (
            f"worker {index} of {peers} failed in operator '{operator.operator}' "
            f"(scope '{scope}', address {operator.address}{built}) {operator.when}: {what}"
        )
    else:
        message = f"worker {index} of {peers} failed: {type(error).__name__}: {error}"
    failed = WorkerFailed(message, index)
    failed.__cause__ = error
    return failed
