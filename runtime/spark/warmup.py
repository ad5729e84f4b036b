"""Start Spark's Python side ahead of the first dataflow, while the driver does other work.

The first Python job of a session pays for things no later one does: the
executor starts its Python daemon (which imports NumPy, pyarrow and pytimely,
:mod:`runtime.spark.daemon`), forks a Python worker per task, and the JVM
loads its Arrow classes.  On the flagship that is about 2 s of a 4 s pytimely
stage whose dataflow needs 1 s.  :func:`warm_up` runs a tiny ``mapInArrow``
job on ``N`` partitions in a background thread, so that this happens while
the driver's Spark jobs (reading, interning) run.  Spark keeps idle Python
workers about a minute and the daemon and the Arrow classes for the session,
so the dataflow's tasks start warm.

:func:`~runtime.spark.run_dataflow` waits for a warm-up still running before it
starts its gang (:func:`wait_for_warm_up`): the warm-up's tasks hold slots the
barrier stage needs all at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]

from runtime.errors import ConfigurationError

_lock = threading.Lock()
_running: list[WarmUp] = []


class WarmUp:
    """A warm-up job running in a background thread: :meth:`wait` for it; ``error`` says if it failed."""

    def __init__(self, spark: Any, tasks: int) -> None:
        """Start a ``mapInArrow`` job of ``tasks`` tasks on ``spark`` in a daemon thread."""
        self.tasks = tasks
        self.error: BaseException | None = None
        self.workers: list[int] = []
        self._spark = spark
        self._thread = threading.Thread(target=self._run, name="pytimely-spark-warm-up", daemon=True)
        with _lock:
            _running.append(self)
        self._thread.start()

    def _run(self) -> None:
        try:
            frame = self._spark.range(self.tasks, numPartitions=self.tasks)
            rows = frame.mapInArrow(_touch, "pid long").collect()
            self.workers = sorted(int(row["pid"]) for row in rows)
        except Exception as error:  # noqa: BLE001 - a failed warm-up only means a cold start; kept for the caller
            self.error = error
        finally:
            with _lock:
                if self in _running:
                    _running.remove(self)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds (``None``: no limit) for the job to end; whether it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()


def _touch(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The warm-up task: read its (one-row) input and name the Python worker that ran it."""
    import os

    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"pid": pa.array([os.getpid()], pa.int64())})


def warm_up(spark: Any, tasks: int | None = None, wait: bool = False) -> WarmUp:
    """Start Python workers for ``tasks`` tasks (default: the session's parallelism) in the background.

    Returns the :class:`WarmUp`; with ``wait=True`` only once it has ended.
    Call it right after the session starts, before the driver's Spark jobs
    that come before the first :func:`~runtime.spark.run_dataflow`.
    """
    count = int(spark.sparkContext.defaultParallelism) if tasks is None else tasks
    if count.__class__ is not int or count < 1:
        raise ConfigurationError(f"warm_up needs tasks >= 1 (an int: Python workers to start), got {tasks!r}")
    job = WarmUp(spark, count)
    if wait:
        job.wait()
    return job


def wait_for_warm_up(timeout: float) -> None:
    """Wait (up to ``timeout`` seconds in all) for the warm-ups still running to end."""
    deadline = time.monotonic() + timeout
    with _lock:
        running = list(_running)
    for job in running:
        job.wait(max(0.0, deadline - time.monotonic()))
