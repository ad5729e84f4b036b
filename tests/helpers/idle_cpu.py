"""The CPU time a computation spends while it waits, measured apart from the rest of the test process.

The tests of parking (a worker waiting for outside data must not spin a core)
compare a run's CPU time with its wall time.  ``time.process_time()`` alone also
counts what else the test process does meanwhile: under pytest-xdist it has run
hundreds of tests before, and a full garbage collection of their heap (0.1 to
0.3 s) or a thread they left behind (a Spark session's, a proxy's) can land in
the measured second.  :class:`RunCpu` leaves both out: it collects before the
run and keeps the collector off during it, and it subtracts the CPU time of the
threads that were already running, other than the one that measures.  The
threads the run starts (its workers, its readers) are all counted, also those
that end before it does.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from pathlib import Path
from types import TracebackType

__all__ = ["RunCpu"]

_TASKS = Path("/proc/self/task")


def _thread_cpu(native_id: int) -> float | None:
    """The CPU seconds thread ``native_id`` of this process has used; ``None`` if it has ended (or no /proc)."""
    try:
        fields = (_TASKS / str(native_id) / "schedstat").read_text().split()
    except OSError:
        return None
    return int(fields[0]) / 1e9


class RunCpu:
    """``with RunCpu() as run:`` measures the CPU and wall seconds of the block as :attr:`cpu` and :attr:`wall`.

    :attr:`cpu` is this process's CPU time over the block, less what the threads
    alive before it (except the calling thread) used meanwhile; the garbage
    collector is off inside the block.
    """

    def __init__(self) -> None:
        self.cpu = 0.0
        """CPU seconds of the block (set on exit)."""
        self.wall = 0.0
        """Wall seconds of the block (set on exit)."""
        self._others: dict[int, float] = {}
        self._collecting = False
        self._started = (0.0, 0.0)

    def __enter__(self) -> RunCpu:
        self._collecting = gc.isenabled()
        gc.collect()
        gc.disable()
        me = threading.get_native_id()
        tasks = os.listdir(_TASKS) if _TASKS.is_dir() else []  # every thread, also those threading does not know
        for native_id in (int(name) for name in tasks if int(name) != me):
            used = _thread_cpu(native_id)
            if used is not None:
                self._others[native_id] = used
        self._started = (time.process_time(), time.monotonic())
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        cpu, wall = time.process_time(), time.monotonic()
        others = 0.0
        for native_id, before in self._others.items():
            after = _thread_cpu(native_id)
            if after is not None:  # one that ended meanwhile stays counted: an overestimate, never an excuse
                others += after - before
        if self._collecting:
            gc.enable()
        self.cpu = cpu - self._started[0] - others
        self.wall = wall - self._started[1]
