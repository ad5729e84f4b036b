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


def capture_batches(make_tables: Any, epochs: list[list[int]]) -> Any:
    """Run ``make_tables(scope, rows)`` on 1 worker, feeding it ``epochs`` (one list of row numbers each, at times
    0, 1, ...), and capture its output into a new ``CaptureRecorder``; return the recorder."""
    from runtime import execute
    from scopes.capture import CaptureRecorder

    recorder = CaptureRecorder()

    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            handle, rows = scope.new_input()
            tables = make_tables(scope, rows)
            tables.capture_into(recorder)
            return handle, tables.probe()

        handle, probe = worker.dataflow(build)
        for time, batch in enumerate(epochs):
            handle.advance_to(time)
            handle.send_batch(batch)
        handle.close()
        worker.step_while(lambda: not probe.done())

    execute(main, workers=1)
    return recorder


def write_table(out: Any, table: Any, **options: Any) -> None:
    """Send ``table`` at time 0 through ``write_files(stream, out, **options)`` on 1 worker."""
    from runtime import execute
    from runtime.files import write_files

    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            return handle, write_files(stream, out, **options).probe()

        handle, probe = worker.dataflow(build)
        handle.send_batch(table)
        handle.close()
        worker.step_while(lambda: not probe.done())

    execute(main, workers=1)
