"""Dataflows for the columnar tests that run in other processes; imports neither pyarrow nor pytest."""

from __future__ import annotations

from typing import Any

import numpy as np


def exchange_arrays(worker: Any) -> list[Any]:
    """Records ``(key, array)`` exchanged by key between the workers (used without pyarrow)."""
    received: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        probe = (
            stream.exchange(lambda record: record[0])
            .inspect(lambda record: received.append((record[0], record[1].tolist(), str(record[1].dtype))))
            .probe()
        )
        return handle, probe

    handle, probe = worker.dataflow(build)
    if worker.index == 0:
        handle.send_batch([(key, np.arange(key, dtype=np.int16)) for key in range(6)])
    handle.close()
    worker.step_while(lambda: not probe.done())
    return sorted(received)
