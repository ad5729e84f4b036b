"""A program whose operator 'Broken' counts one record more than it sends, for the audit's over-count test.

Top-level, so that ``execute(main, processes=2)`` can import it in every
process: the main itself breaks the operator (in whichever process it runs)
and mends it when it returns or fails.
"""

from __future__ import annotations

import threading
from typing import Any

from scopes.operator import OutputPort

_REAL_SEND = OutputPort.send
_users = 0
_lock = threading.Lock()


def _over_counting_send(self: OutputPort, time: Any, batch: Any) -> None:
    _REAL_SEND(self, time, batch)
    if self.operator == "Broken":
        self.produced[time] += 1


def over_counting(worker: Any) -> list[int]:
    """Three epochs of 100 numbers through 'Broken' (which over-counts), an exchange and a count."""
    global _users
    with _lock:
        _users += 1
        OutputPort.send = _over_counting_send  # type: ignore[method-assign]
    try:
        totals: list[int] = []

        def build(scope: Any) -> Any:
            handle, numbers = scope.new_input("numbers")
            counts = numbers.map(lambda v: v, name="Broken").exchange(lambda v: v, name="ByValue").count()
            counts.inspect(totals.append)
            return handle, counts.probe()

        handle, probe = worker.dataflow(build, name="broken")
        for epoch in range(3):
            handle.send_batch(list(range(100)))
            handle.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(handle.time))
        return totals
    finally:
        with _lock:
            _users -= 1
            if not _users:
                OutputPort.send = _REAL_SEND  # type: ignore[method-assign]
