"""Which CPU the worker threads of one process run on.

Worker threads of one process share the GIL: only one of them runs Python at a
time, and they hand the GIL to each other at every park, hand-over and wake-up.
When the operating system spreads them over two cores, each hand-over moves the
interpreter's working set from one core's cache to the other's, and a woken
thread starts on an idle core only to wait there for the GIL.  Measured on 2
cores (``benchmarks/latency_processes.py``, ``benchmarks/scaling.py``), runs
then fall into a slow mode about half the time: an epoch of 2 threads costs
about 100 µs of CPU instead of 47 µs, and the Collatz loop fragments its
iterations (about 60 records per exchanged message instead of 200) and costs
twice the CPU.  With every worker thread on one core, neither happens.

With ``PYTIMELY_THREAD_CORES=one``, :func:`~runtime.execute.execute` runs its
worker threads on the core the calling thread was on when it started them
(:func:`shared_core`); the calling thread itself, and the process's other
threads, keep the process's CPUs.  It is not the default, for its price: C
code that releases the GIL (NumPy, Arrow, compression, I/O) no longer runs on
two worker threads at once (two threads sorting 2 M floats a batch took 1.77 s
on one core against 0.80 s spread), and threads that a worker thread starts
inherit its one core.  So it suits threads whose work is Python; processes
(``execute(..., processes=P)``) are the way to use several cores for that.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Set

from runtime.errors import ConfigurationError

CORES_VARIABLE = "PYTIMELY_THREAD_CORES"
"""``all`` (the default): worker threads of one process may use every CPU; ``one``: they share one core."""


def current_cpu() -> int | None:
    """The CPU the calling thread runs on now (Linux), or ``None`` if it cannot be read."""
    try:
        with open("/proc/thread-self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return int(fields[36])  # field 39 of stat(5); the split starts at field 3
    except (OSError, IndexError, ValueError):
        return None


def choose_core(allowed: Set[int], current: int | None) -> int:
    """The core to share: ``current`` if the process may use it, else the lowest allowed CPU."""
    return current if current is not None and current in allowed else min(allowed)


def shared_core() -> int | None:
    """The one core the worker threads about to start should share, or ``None`` to leave them as they are.

    ``None`` unless :data:`CORES_VARIABLE` says ``one``, where threads cannot be
    given a CPU (not Linux), and where the calling thread may use only one CPU anyway.
    Raises :class:`~runtime.errors.ConfigurationError` for any other value of the variable.
    """
    setting = os.environ.get(CORES_VARIABLE, "all").strip().lower()
    if setting not in ("one", "all"):
        raise ConfigurationError(
            f"{CORES_VARIABLE} must be 'all' (worker threads may use every CPU of the process, the default) "
            f"or 'one' (they share one core), got {setting!r}"
        )
    if setting == "all" or not hasattr(os, "sched_setaffinity"):
        return None
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        return None
    return choose_core(allowed, current_cpu())


def run_on(core: int | None) -> None:
    """Keep the calling thread on ``core`` (``None``: do nothing); a refusal by the system leaves it as it is."""
    if core is None:
        return
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, {core})  # 0: the calling thread (Linux)
