"""Every worker of a file source lists and counts the files when it builds the dataflow; they must agree.

A file rewritten, added or removed between two workers' builds gave each worker
another idea of the row offsets (``rows_per_epoch``) or of the list of files
that they share out (every mode): records landed in the wrong epochs, or files
were read twice or not at all, without any error.  The workers now exchange what
they listed and counted, and no epoch completes until every worker has heard
the same from all; otherwise every worker fails with a ``FileSourceError``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import file_agreement_mains

from runtime import execute
from runtime.errors import FileSourceError, WorkerFailed
from runtime.files import read_files


def write_csv(path: Path, numbers: range) -> None:
    """A CSV file with the columns ``n`` and ``t`` (a small time, for ``time_column``)."""
    path.write_text("n,t\n" + "".join(f"{n},{n % 3}\n" for n in numbers))


def file_error(error: BaseException) -> FileSourceError:
    """The FileSourceError in ``error``'s chain of causes (operator errors are chained under WorkerFailed)."""
    current: BaseException | None = error
    while current is not None and not isinstance(current, FileSourceError):
        current = current.__cause__
    assert current is not None, f"no FileSourceError in {error!r}"
    return current


def run_changing_between_builds(
    directory: Path, change: Callable[[], None], seen: list[Any], completed: list[Any], **options: Any
) -> None:
    """Two worker threads read ``directory``; worker 1 builds (lists and counts) only after worker 0 has built its
    dataflow and ``change()`` has changed the files.  ``seen`` gets ``(epoch, n)`` of every row read, ``completed``
    the workers that saw epoch 0 complete."""
    built = threading.Event()

    def main(worker: Any) -> None:
        if worker.index == 1:
            assert built.wait(timeout=60), "worker 0 did not build its dataflow"

        def build(scope: Any) -> Any:
            stream = read_files(scope, directory, **{"format": "csv", **options})
            stream.inspect_batch(lambda time, batch: seen.extend((time, row["n"]) for row in batch))
            return stream.probe()

        probe = worker.dataflow(build)
        if worker.index == 0:
            change()
            built.set()
        while not probe.done():
            worker.step()
            if not probe.less_equal(0) and worker.index not in completed:
                completed.append(worker.index)

    execute(main, workers=2)


def test_a_file_rewritten_between_two_workers_counts_fails_every_worker_before_any_epoch_completes(tmp_path):
    """Worker 0 counted b.csv with 10 rows, worker 1 with 12; worker 1 reads it (and sees its own count), so
    neither noticed: c.csv's rows were numbered from 20 by worker 0, b.csv's last two rows were row 20 and 21 by
    worker 1, and epoch 4 got 7 rows."""
    directory = tmp_path / "in"
    directory.mkdir()
    write_csv(directory / "a.csv", range(0, 10))
    write_csv(directory / "b.csv", range(10, 20))
    write_csv(directory / "c.csv", range(100, 110))
    seen: list[Any] = []
    completed: list[Any] = []
    with pytest.raises(WorkerFailed) as failure:
        run_changing_between_builds(
            directory, lambda: write_csv(directory / "b.csv", range(10, 22)), seen, completed, rows_per_epoch=5
        )
    message = str(file_error(failure.value))
    assert "file source 'ReadFiles' in scope" in message, message
    assert repr(str(directory / "b.csv")) in message, message
    assert "10 rows on worker" in message and "12 rows on worker" in message, message
    assert "worker 0" in message and "worker 1" in message, message
    assert "a.csv" not in message and "c.csv" not in message, message
    assert (
        "do not change input files while a dataflow that reads them with rows_per_epoch is being built; rerun"
    ) in message, message
    assert completed == [], f"epoch 0 completed on worker(s) {completed} before the counts were compared"


@pytest.mark.parametrize("mode", ["per_file", "rows_per_epoch", "time_column"])
@pytest.mark.parametrize("change", ["add", "remove"])
def test_a_file_added_or_removed_between_two_workers_listings_fails_every_worker(tmp_path, change, mode):
    """Worker 0 listed [a, c] and read a; worker 1 listed [a, b, c] and read b: c was read by nobody.  Or worker 0
    listed [a, b, c] and read a and c; worker 1 listed [a, c] and read c again.  Without an error, in every mode."""
    directory = tmp_path / "in"
    directory.mkdir()
    write_csv(directory / "a.csv", range(0, 10))
    write_csv(directory / "c.csv", range(100, 110))
    middle = directory / "b.csv"
    if change == "remove":
        write_csv(middle, range(10, 20))
    options = {"per_file": {}, "rows_per_epoch": {"rows_per_epoch": 5}, "time_column": {"time_column": "t"}}[mode]
    seen: list[Any] = []
    completed: list[Any] = []
    with pytest.raises(WorkerFailed) as failure:
        run_changing_between_builds(
            directory,
            (lambda: write_csv(middle, range(10, 20))) if change == "add" else middle.unlink,
            seen,
            completed,
            **options,
        )
    message = str(file_error(failure.value))
    assert "file source 'ReadFiles' in scope" in message, message
    assert f"{str(middle)!r} is listed on worker" in message and "but not on worker" in message, message
    assert "a.csv" not in message and "c.csv" not in message, message
    assert "is being built; rerun" in message, message
    assert completed == [], f"epoch 0 completed on worker(s) {completed} before the listings were compared"


@pytest.mark.parametrize("mode", ["per_file", "rows_per_epoch"])
def test_a_parquet_file_rewritten_in_other_row_groups_between_two_workers_listings_fails_every_worker(tmp_path, mode):
    """Worker 0 listed b.parquet as one row group, worker 1 (which reads it) as two: worker 1 read the first half of
    b and then c, which worker 0 read too, and nobody read the second half of b."""
    directory = tmp_path / "in"
    directory.mkdir()
    for name, numbers in (("a", range(0, 10)), ("b", range(10, 20)), ("c", range(100, 110))):
        pq.write_table(pa.table({"n": list(numbers)}), directory / f"{name}.parquet")
    middle = directory / "b.parquet"
    seen: list[Any] = []
    completed: list[Any] = []
    with pytest.raises(WorkerFailed) as failure:
        run_changing_between_builds(
            directory,
            lambda: pq.write_table(pa.table({"n": list(range(10, 20))}), middle, row_group_size=5),
            seen,
            completed,
            format="parquet",
            **({"rows_per_epoch": 5} if mode == "rows_per_epoch" else {}),
        )
    message = str(file_error(failure.value))
    # whichever worker's error is reported, it names the file and both workers' counts
    assert f"{str(middle)!r} has 10 rows" in message, message
    assert "10 rows on worker" in message and "10 rows in 2 row groups on worker" in message, message
    assert "rows could be read twice or not at all" in message, message
    assert completed == [], f"epoch 0 completed on worker(s) {completed} before the listings were compared"


def write_three(directory: Path) -> None:
    directory.mkdir()
    write_csv(directory / "a.csv", range(0, 10))
    write_csv(directory / "b.csv", range(10, 20))
    write_csv(directory / "c.csv", range(100, 110))


def test_two_processes_that_count_a_file_differently_both_fail(tmp_path):
    """Process 1 counts a.csv (which process 0 reads) two rows longer: it numbered b.csv's rows from 12."""
    write_three(tmp_path / "in")
    main = functools.partial(file_agreement_mains.read_epochs, directory=str(tmp_path / "in"), miscount=True)
    with pytest.raises(WorkerFailed) as failure:
        execute(main, processes=2, workers=1, stall_timeout=60)
    message = str(failure.value)
    assert "FileSourceError" in message, message
    assert repr(str(tmp_path / "in" / "a.csv")) in message, message
    assert "10 rows on worker" in message and "12 rows on worker" in message, message
    assert "is being built; rerun" in message, message


def test_two_processes_that_agree_number_rows_across_files(tmp_path):
    write_three(tmp_path / "in")
    main = functools.partial(file_agreement_mains.read_epochs, directory=str(tmp_path / "in"), miscount=False)
    seen = [row for rows in execute(main, processes=2, workers=1, stall_timeout=60) for row in rows]
    order = [*range(0, 10), *range(10, 20), *range(100, 110)]
    assert sorted(seen) == sorted((row // 5, n) for row, n in enumerate(order))


def test_the_message_shows_row_groups_when_the_totals_agree_and_at_most_five_files():
    from runtime.files import _Agreement

    mine = [["a.parquet", [4, 6]], *([f"f{i}.csv", [3]] for i in range(7))]
    theirs = [["a.parquet", [5, 5]], *([f"f{i}.csv", [4]] for i in range(7))]
    agreement = _Agreement("n: int64", mine, 0, 2, "/data", None, "file source 'Files' in scope dataflow 0 on worker 0")
    message = str(agreement._disagreement(1, theirs))
    assert "'/data/a.parquet' has 10 rows in 2 row groups (4, 6) on worker 0 but 10 rows in 2 row groups (5, 5)" in (
        message
    ), message
    assert "'/data/f3.csv' has 3 rows on worker 0 but 4 rows on worker 1; and 3 more files (" in message, message
    assert "a file changed while the workers built the dataflow" in message, message
    assert "do not change input files while a dataflow that reads them is being built; rerun" in message, message


def test_a_first_file_rewritten_with_another_schema_between_two_workers_builds_fails_every_worker(tmp_path):
    """Each worker takes the schema its batches carry from the first file when it builds: both files rewritten
    with a column more between the two builds (each worker's own file matching the schema it took) gave worker 0
    batches without the column and worker 1 batches with it.  The same files otherwise, so only the schema tells
    them apart."""
    directory = tmp_path / "in"
    directory.mkdir()
    write_csv(directory / "a.csv", range(0, 10))
    write_csv(directory / "b.csv", range(10, 20))

    def add_a_column() -> None:
        for name, numbers in (("a.csv", range(0, 10)), ("b.csv", range(10, 20))):
            (directory / name).write_text("n,t,extra\n" + "".join(f"{n},{n % 3},x\n" for n in numbers))

    seen: list[Any] = []
    completed: list[Any] = []
    with pytest.raises(WorkerFailed) as failure:
        run_changing_between_builds(directory, add_a_column, seen, completed)
    message = str(file_error(failure.value))
    assert "took different schemas from the first file" in message, message
    assert "extra" in message and "worker 0" in message and "worker 1" in message, message
    assert "do not change input files while a dataflow that reads them is being built; rerun" in message, message
    assert completed == [], f"epoch 0 completed on worker(s) {completed} before the schemas were compared"
