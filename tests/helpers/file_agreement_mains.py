"""A file source whose workers count a file differently, for tests that run it on processes.

Top-level, so that ``execute(main, processes=2)`` can import it in every process.
"""

from __future__ import annotations

import dataclasses
from typing import Any


def miscounting_units(units: Any) -> Any:
    """``runtime.files._units`` as if the first file had held two more rows when it was counted.

    The row offsets of the later units move with it, as they would for a file
    rewritten with two more rows just before this worker counted it.
    """

    def counted(*args: Any, **kwargs: Any) -> list[Any]:
        first, *later = units(*args, **kwargs)
        grown = dataclasses.replace(first, rows=first.rows + 2)
        return [grown, *(dataclasses.replace(unit, first_row=unit.first_row + 2) for unit in later)]

    return counted


def read_epochs(worker: Any, directory: str, miscount: bool) -> list[tuple[int, int]]:
    """``(epoch, n)`` of every row worker reads with ``rows_per_epoch=5``; with ``miscount``, worker 1 counts the
    first file (which worker 0 reads) two rows longer than it is."""
    from runtime import files

    if miscount and worker.index == 1:  # each worker is a process of its own: the patch is this worker's only
        files._units = miscounting_units(files._units)
    seen: list[tuple[int, int]] = []

    def build(scope: Any) -> Any:
        stream = files.read_files(scope, directory, format="csv", rows_per_epoch=5)
        stream.inspect_batch(lambda time, batch: seen.extend((time, row["n"]) for row in batch))
        return stream.probe()

    probe = worker.dataflow(build)
    worker.step_while(lambda: not probe.done())
    return seen
