"""The barrier wait of a task, bounded by the job rather than by the session.

``BarrierTaskContext.allGather`` waits ``spark.barrier.sync.timeout`` for the
other tasks of the stage, and Spark's default is 365 days, so a task whose
peers never start would hold its slot for a year on a session made without
that setting.  :func:`all_gather` waits for the gather in a helper thread for
at most the job's own ``timeout`` (``run_dataflow(connect_timeout=...)``);
after it, the task fails with a retryable error and Spark's stage failure
ends the blocked call along with the task.
"""

from __future__ import annotations

import threading
from typing import Any

from runtime.spark.errors import RETRY_MARKER, TaskFailed


def all_gather(context: Any, address: str, index: int, timeout: float) -> list[str]:
    """Every task's ``address`` in partition order, through ``context.allGather``, within ``timeout`` seconds."""
    outcome: list[Any] = []

    def gather() -> None:
        try:
            outcome.append(("ok", context.allGather(address)))
        except BaseException as error:  # noqa: BLE001 - handed back to the task
            outcome.append(("error", error))

    thread = threading.Thread(target=gather, name=f"pytimely-all-gather-{index}", daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        raise TaskFailed(
            f"{RETRY_MARKER} task {index}: the other tasks of the gang did not all reach the barrier within "
            f"{timeout:g} s (run_dataflow connect_timeout=); a peer may not have started"
        )
    kind, value = outcome[0]
    if kind == "error":
        raise TaskFailed(f"{RETRY_MARKER} task {index}: the barrier sync failed: {value}") from value
    return list(value)
