"""Which CPUs the worker threads of one process run on: ``PYTIMELY_THREAD_CORES`` = ``auto``, ``one`` or ``all``.

Worker threads of one process share the GIL: only one of them runs Python at a
time, and they hand the GIL to each other at every park, hand-over and wake-up.
When the operating system spreads them over two cores, each hand-over moves the
interpreter's working set from one core's cache to the other's, and a woken
thread starts on an idle core only to wait there for the GIL (about 90 µs of
CPU per hand-over).  Measured on 2 cores (``benchmarks/scaling.py``), the
Collatz loop with exchange on 2 threads spread costs 1.95 times the time of 1
worker, and 1.69 times with both threads on one core (``BENCHMARKS.md``).  But C code that releases
the GIL (NumPy, Arrow, compression, I/O) runs on two threads at once only when
they are spread: two threads sorting 2 M floats a batch took 0.96 s on one
core against 0.52 s spread (``benchmarks/thread_cores.py``).  Neither fixed setting suits both, hence:

* ``auto`` (the default): :func:`~runtime.execute.execute`'s worker threads
  (two or more, on Linux, in a process that may use two or more CPUs) start on
  one shared core, and a governor thread (:mod:`runtime.core_governor`) reads
  every 20 to 320 ms how long they ran and how long they waited on a
  runqueue.  A thread waiting for the GIL sleeps and does not queue; a thread
  running C code with the GIL released does.  So when, sharing the core, they
  queue for it (on average at least 1.75 of them wanted a CPU, for 60 ms),
  they are spread over the process's CPUs; when, spread, they used at most
  1.15 CPUs (and did not ask for 1.75) for 200 ms in a row (GIL-bound: a
  second core buys only cache misses), they share one core again.
  :mod:`runtime.core_policy` has the rule, its measured thresholds and its
  hysteresis.  Where the counters cannot be read or threads cannot be moved,
  the threads stay as they are (with no counters at all, they are not put on
  one core in the first place).  Only the threads of ``execute(main,
  workers=N)`` are governed; the processes of ``execute(..., processes=P)``
  run their threads as they are.
* ``one``: the worker threads share one core for the whole run, the core the
  calling thread was on when it started them (:func:`shared_core`).
* ``all``: they may use every CPU of the process for the whole run, as the
  operating system places them.

In every mode the calling thread and the process's other threads keep the
process's CPUs, a single worker runs in the calling thread as it is, and
threads that a worker thread starts inherit its CPUs of that moment.  For
CPU-bound Python, processes (``execute(..., processes=P)``) are the way to use
several cores.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Set

from runtime.errors import ConfigurationError

CORES_VARIABLE = "PYTIMELY_THREAD_CORES"
"""``auto`` (the default): worker threads of one process start on one core and spread when they queue for it;
``one``: they share one core; ``all``: they may use every CPU."""

SETTINGS = ("auto", "one", "all")
"""The values :data:`CORES_VARIABLE` may take."""


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


def cores_setting() -> str:
    """The value of :data:`CORES_VARIABLE`: ``auto`` (also when unset), ``one`` or ``all`` (see :func:`cores_from`)."""
    return cores_from(os.environ.get(CORES_VARIABLE))


def cores_from(text: str | None) -> str:
    """The setting ``text`` (the value of :data:`CORES_VARIABLE`) asks for: ``auto`` when unset or blank.

    Raises :class:`~runtime.errors.ConfigurationError` for a value other than ``auto``, ``one`` or ``all``.
    """
    setting = (text or "").strip().lower() or "auto"
    if setting not in SETTINGS:
        raise ConfigurationError(
            f"{CORES_VARIABLE} must be 'auto' (worker threads start on one core and spread when they queue for it, "
            f"the default), 'one' (they share one core) or 'all' (they may use every CPU of the process), "
            f"got {text!r}"
        )
    return setting


def shared_core(setting: str | None = None) -> int | None:
    """The one core the worker threads about to start should share, or ``None`` to leave them as they are.

    ``None`` when ``setting`` (by default :func:`cores_setting`) is ``all``, where
    threads cannot be given a CPU (not Linux), and where the calling thread may
    use only one CPU anyway.  Under ``auto`` this is the core they start on.
    """
    if setting is None:
        setting = cores_setting()
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
