"""The governor of ``PYTIMELY_THREAD_CORES=auto``: a thread that moves worker threads between one core and all.

:func:`~runtime.execute.run_workers` starts one :class:`CoreGovernor` beside
its worker threads when they start on one shared core under ``auto`` (see
:mod:`runtime.thread_cores`), and stops and joins it when they end.  Every
window (20 to 320 ms) it reads each worker thread's
``/proc/self/task/<tid>/schedstat`` (time on a CPU, time waiting on a
runqueue), sums them into a :class:`~runtime.core_policy.Window` and lets
:func:`~runtime.core_policy.decide` say whether to spread the threads over the
process's CPUs or put them back on the shared core.

A window lasts 20 ms at first and while a move is pending, and grows to 320 ms
while none is (see :mod:`runtime.core_policy`): 20 ms holds many GIL hand-overs (the
interpreter switches threads every 5 ms at the latest) and lets denied C work
be spread within about 60 ms; the longer windows keep the governor's own
cost, one wake-up, one turn with the GIL and a few ``pread`` calls per window,
near 1 ms of CPU a second while the work does not change.  Between windows it sleeps on a
:class:`threading.Event`, which :meth:`CoreGovernor.stop` sets.

It holds thread ids, CPU numbers and open file descriptors, nothing of the
workers.  If a ``schedstat`` file cannot be read or the system refuses to
move a thread, it stops governing and leaves the threads where they are, with
one debug log line.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Sequence, Set
from dataclasses import dataclass

from runtime.core_policy import POLICY, Action, GovernorState, Policy, Window, decide

log = logging.getLogger("runtime.core_governor")


@dataclass(frozen=True)
class GovernorReport:
    """What a governor has done so far (see :func:`latest_report`)."""

    spread: bool  # the worker threads may use every CPU of the process now
    windows: int  # windows looked at
    moves: int  # times it spread or pinned the threads
    stopped: bool  # it no longer governs (the workers ended, or it could not read or move them)
    cpu_seconds: float  # CPU time of the governor's own thread


_latest: weakref.ReferenceType[CoreGovernor] | None = None


def latest_report() -> GovernorReport | None:
    """The report of the governor started last in this process, while it still exists; else ``None``."""
    governor = _latest() if _latest is not None else None
    return governor.report() if governor is not None else None


def read_counters(descriptors: Sequence[int]) -> tuple[int, int] | None:
    """Nanoseconds on a CPU and waiting on a runqueue, summed over the threads' ``schedstat`` files; ``None`` if one
    cannot be read (a thread that has ended, or no such file)."""
    on_cpu = waiting = 0
    try:
        for descriptor in descriptors:
            fields = os.pread(descriptor, 128, 0).split()
            on_cpu += int(fields[0])
            waiting += int(fields[1])
    except (OSError, ValueError, IndexError):
        return None
    return on_cpu, waiting


def open_counters(tids: Sequence[int]) -> list[int] | None:
    """Open each thread's ``schedstat`` file; ``None`` (and nothing left open) if any cannot be opened."""
    descriptors: list[int] = []
    try:
        for tid in tids:
            descriptors.append(os.open(f"/proc/self/task/{tid}/schedstat", os.O_RDONLY))
    except OSError:
        for descriptor in descriptors:
            os.close(descriptor)
        return None
    return descriptors


def counters_readable() -> bool:
    """Whether the calling thread's ``schedstat`` can be opened and read: whether a governor could see threads."""
    descriptors = open_counters([threading.get_native_id()])
    if descriptors is None:
        return False
    try:
        return read_counters(descriptors) is not None
    finally:
        for descriptor in descriptors:
            os.close(descriptor)


class CoreGovernor:
    """Moves the threads ``tids`` between ``core`` (where they are) and ``allowed`` (the process's CPUs).

    ``descriptors`` are the threads' open ``schedstat`` files; the governor closes them when it ends.
    """

    def __init__(
        self,
        tids: Sequence[int],
        descriptors: Sequence[int],
        core: int,
        allowed: Set[int],
        stopping: threading.Event,
        policy: Policy = POLICY,
    ) -> None:
        self._tids = tuple(tids)
        self._descriptors = tuple(descriptors)
        self._core = core
        self._allowed = frozenset(allowed)
        self._stopping = stopping
        self._policy = policy
        self._state = GovernorState()
        self._windows = 0
        self._moves = 0
        self._stopped = False
        self._cpu = 0.0
        self._thread = threading.Thread(target=self._run, name="timely-core-governor", daemon=True)

    def start(self) -> None:
        """Start governing in a daemon thread of its own."""
        global _latest
        _latest = weakref.ref(self)
        self._thread.start()

    def stop(self) -> None:
        """Stop governing and wait (at most a second) for the thread to end; the threads stay where they are."""
        self._stopping.set()
        if self._thread.ident is not None:
            self._thread.join(1.0)

    def report(self) -> GovernorReport:
        """What it has done so far."""
        return GovernorReport(self._state.spread, self._windows, self._moves, self._stopped, self._cpu)

    def _run(self) -> None:
        started = time.thread_time()
        try:
            self._govern(started)
        finally:
            for descriptor in self._descriptors:
                os.close(descriptor)
            self._stopped = True
            self._cpu = time.thread_time() - started

    def _govern(self, started: float) -> None:
        before = read_counters(self._descriptors)
        then = time.monotonic_ns()
        while not self._stopping.wait(self._state.window):
            now = time.monotonic_ns()
            counters = read_counters(self._descriptors)
            window = None
            if counters is not None and before is not None:
                window = Window((now - then) / 1e9, (counters[0] - before[0]) / 1e9, (counters[1] - before[1]) / 1e9)
            self._state, action = decide(self._state, window, self._policy)
            self._windows += 1
            before, then = counters, now
            if action is Action.STOP:
                log.debug("stopped governing the worker threads' cores: a schedstat file cannot be read")
                return
            if action is not Action.STAY:
                if not move(self._tids, self._allowed if action is Action.SPREAD else {self._core}):
                    return
                self._moves += 1
            self._cpu = time.thread_time() - started


def move(tids: Sequence[int], cpus: Set[int]) -> bool:
    """Let every thread of ``tids`` run only on ``cpus``; ``False`` (after one debug line) if the system refuses."""
    try:
        for tid in tids:
            os.sched_setaffinity(tid, cpus)
    except OSError as error:
        log.debug("stopped governing the worker threads' cores: cannot move them (%s)", error)
        return False
    return True


def start_governor(tids: Sequence[int], core: int, stopping: threading.Event) -> CoreGovernor | None:
    """Start a governor for the threads ``tids``, which put themselves on ``core`` as they start; ``None`` where
    there is nothing to govern (fewer than two threads, a process that may use one CPU) or no way to (no
    ``schedstat`` files).  A system that refuses to move them stops the governor at its first move, leaving them
    where they are.  ``stopping`` set stops it."""
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return None
    if len(tids) < 2 or len(allowed) < 2:
        return None
    descriptors = open_counters(tids)
    if descriptors is None:
        log.debug("not governing the worker threads' cores: their schedstat files cannot be opened")
        return None
    governor = CoreGovernor(tids, descriptors, core, allowed, stopping)
    governor.start()
    return governor
