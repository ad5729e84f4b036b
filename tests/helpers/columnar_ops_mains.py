"""Worker mains for the aggregate_batch and join_batch tests (they also run in other processes)."""

from __future__ import annotations

from typing import Any

import numpy as np


def as_rows(batch: Any) -> list[dict[str, Any]]:
    """The rows of a structured array or Arrow table as dicts (what travels back from a process)."""
    if isinstance(batch, np.ndarray):
        return [dict(zip(batch.dtype.names, row, strict=True)) for row in batch.tolist()]
    return batch.to_pylist()


def aggregate_main(worker: Any, epochs: list[list[Any]], keys: Any, aggregations: Any) -> list[tuple[int, Any]]:
    """Send batch ``j`` of each epoch from worker ``j % peers``; return ``(time, rows)`` of every output batch."""
    seen: list[tuple[int, Any]] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        out = stream.aggregate_batch(keys, aggregations, name="Agg")
        return handle, out.inspect_batch(lambda time, batch: seen.append((time, as_rows(batch)))).probe()

    handle, probe = worker.dataflow(build)
    for epoch, batches in enumerate(epochs):
        for number, batch in enumerate(batches):
            if number % worker.peers == worker.index:
                handle.send_batch(batch)
        handle.advance_to(epoch + 1)
    handle.close()
    worker.step_while(lambda: not probe.done())
    return seen


def join_main(
    worker: Any, left: list[list[Any]], right: list[list[Any]], keys: Any, right_keys: Any, join_type: str
) -> list[tuple[int, Any]]:
    """Both sides sent as :func:`aggregate_main` sends; return ``(time, rows)`` of every joined table."""
    seen: list[tuple[int, Any]] = []

    def build(scope: Any) -> Any:
        left_handle, left_stream = scope.new_input("Left")
        right_handle, right_stream = scope.new_input("Right")
        out = left_stream.join_batch(right_stream, keys, right_keys, join_type, name="Join")
        probe = out.inspect_batch(lambda time, batch: seen.append((time, as_rows(batch)))).probe()
        return left_handle, right_handle, probe

    left_handle, right_handle, probe = worker.dataflow(build)
    for epoch, (lefts, rights) in enumerate(zip(left, right, strict=True)):
        for handle, batches in ((left_handle, lefts), (right_handle, rights)):
            for number, batch in enumerate(batches):
                if number % worker.peers == worker.index:
                    handle.send_batch(batch)
            handle.advance_to(epoch + 1)
    left_handle.close()
    right_handle.close()
    worker.step_while(lambda: not probe.done())
    return seen
