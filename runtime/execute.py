"""``execute``: run a timely computation on several workers in this process."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from runtime.errors import ConfigurationError, WorkerAborted, WorkerFailed
from runtime.fabric import ThreadAllocator, ThreadFabric
from runtime.worker import Worker

R = TypeVar("R")


def execute(
    main: Callable[[Worker], R], workers: int = 1, stall_timeout: float | None = 30.0
) -> list[R]:
    """Run ``main(worker)`` on ``workers`` workers in this process; return their results in order.

    When ``main`` returns, the worker closes its inputs and runs its dataflows
    to completion.  If any worker raises, every worker is stopped and the first
    failure is re-raised as :class:`~runtime.errors.WorkerFailed`, naming the worker.
    If the dataflows cannot complete (every worker idle for ``stall_timeout``
    seconds after ``main`` returned), the failure is a
    :class:`~runtime.errors.DataflowStuck` explaining what holds them back.
    """
    if workers.__class__ is not int or workers < 1:
        raise ConfigurationError(f"execute needs workers >= 1 (an int), got {workers!r}")
    fabric = ThreadFabric(workers)
    results: list[R | None] = [None] * workers
    failures: list[tuple[int, BaseException]] = []
    lock = threading.Lock()

    def run(index: int) -> None:
        worker = Worker(ThreadAllocator(fabric, index))
        try:
            results[index] = main(worker)
            worker.run_to_completion(stall_timeout)
        except WorkerAborted:
            pass
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
            with lock:
                failures.append((index, error))
            fabric.stop_all()
        finally:
            if worker.logger is not None:
                worker.logger.shutdown()

    if workers == 1:
        run(0)
    else:
        threads = [
            threading.Thread(target=run, args=(index,), name=f"timely-worker-{index}", daemon=True)
            for index in range(workers)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if failures:
        index, error = failures[0]
        raise WorkerFailed(
            f"worker {index} of {workers} failed: {type(error).__name__}: {error}", index
        ) from error
    return results  # type: ignore[return-value]
