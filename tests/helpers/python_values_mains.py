"""Mains for tests of Arrow values that Python cannot hold, run on processes.

Top-level, so that ``execute(main, processes=2)`` can import it in every process.
"""

from __future__ import annotations

from typing import Any


def read_records(worker: Any, directory: str) -> int:
    """Read ``directory``'s Parquet files record-wise; the number of records this worker saw."""
    from runtime.files import read_files

    seen: list[Any] = []

    def build(scope: Any) -> Any:
        stream = read_files(scope, directory)
        stream.inspect_batch(lambda time, batch: seen.extend(batch))
        return stream.probe()

    probe = worker.dataflow(build)
    worker.step_while(lambda: not probe.done())
    return len(seen)
