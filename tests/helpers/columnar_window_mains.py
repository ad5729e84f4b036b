"""A worker main for the columnar window checkpoint test on 2 processes (importable by name in each process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runtime.checkpoints import CheckpointStore


class Crash(Exception):
    """The simulated crash of a test run."""


def checkpointed_main(worker: Any, root: str, tag: str, epochs: list[list[Any]], crash_after: int) -> int:
    """Run the columnar windows of ``test_columnar_windows`` from the store's resume epoch.

    Each worker appends every result to ``root/tag-worker-I.jsonl`` as ``[time, record]``
    lines as it is sent; worker 0 raises :class:`Crash` once epoch ``crash_after``
    is complete (``-1``: never).  Returns the epoch the run resumed from.
    """
    from test_columnar_windows import windows_to_checkpoint

    store = CheckpointStore(Path(root) / "checkpoints") if tag != "plain" else None
    lines = open(Path(root) / f"{tag}-worker-{worker.index}.jsonl", "a")  # noqa: SIM115 (closed below)

    def keep(time: int, batch: Any) -> None:
        for record in batch:
            lines.write(json.dumps([time, record]) + "\n")
        lines.flush()

    def build(scope: Any) -> Any:
        handle, rows = scope.new_input("Rows")
        out = windows_to_checkpoint(scope, rows)
        out.inspect_batch(keep)
        return handle, out.probe()

    try:
        handle, probe = worker.dataflow(build, checkpoint=store)
        start = store.resume_epoch if store is not None else 0
        for epoch in range(start, len(epochs)):
            handle.send_batch(epochs[epoch][worker.index :: worker.peers])
            handle.advance_to(epoch + 1)
            worker.step_while(lambda epoch=epoch: probe.less_than(epoch + 1))
            if epoch == crash_after and worker.index == 0:
                raise Crash(f"crash after epoch {epoch}")
        handle.close()
        worker.step_while(lambda: not probe.done())
        return start
    finally:
        lines.close()
