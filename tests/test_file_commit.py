"""write_files commits each epoch whole (issue 27, item 1): kill -9 mid-run, reruns, and the partition column."""

from __future__ import annotations

import collections
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
ds = pytest.importorskip("pyarrow.dataset")

from runtime import execute  # noqa: E402
from runtime.errors import ConfigurationError, FileSinkError, WorkerFailed  # noqa: E402
from runtime.file_sink import STAGING  # noqa: E402
from runtime.files import read_files, write_files  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ROWS = 5
"""Rows each of the four workers writes per epoch in the kill test."""

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, threading
    from functools import partial
    sys.path.insert(0, {root!r})
    from runtime import execute
    from runtime.files import write_files

    def main(worker, out, victim, delay):
        def build(scope):
            handle, stream = scope.new_input()
            return handle, write_files(stream, out).probe()
        handle, probe = worker.dataflow(build)
        armed = worker.index != victim
        for epoch in range(1_000_000):
            handle.send_batch([{{"t": epoch, "w": worker.index, "i": i}} for i in range({rows})])
            handle.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(epoch - 1))
            if not armed and not probe.less_than(1):  # epoch 0 is committed: kill -9 this process a while later
                threading.Timer(delay, os.kill, (os.getpid(), signal.SIGKILL)).start()
                armed = True

    if __name__ == "__main__":
        out, victim, delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
        execute(partial(main, out=out, victim=victim, delay=delay), processes=2, workers=2)
    """
)


def read_back(out: Path) -> list[dict]:
    """Every row ``read_files`` sees under ``out`` (one worker)."""

    def main(worker):
        rows = []

        def build(scope):
            stream = read_files(scope, out, columnar=True)
            stream.inspect_batch(lambda time, batch: rows.extend(batch.to_pylist()))
            return stream.probe()

        probe = worker.dataflow(build)
        worker.step_while(lambda: not probe.done())
        return rows

    return execute(main)[0]


def check_whole_epochs(out: Path) -> int:
    """Assert that each epoch a plain pyarrow reader and read_files see is whole; return how many there are."""
    committed = sorted(entry.name for entry in out.iterdir() if entry.name.startswith("epoch="))
    table = ds.dataset(out, partitioning="hive").to_table()
    if not committed:
        assert table.num_rows == 0
        return 0
    per_epoch = collections.Counter(zip(table["epoch"].to_pylist(), table["t"].to_pylist(), strict=True))
    assert all(epoch == t for epoch, t in per_epoch), per_epoch
    assert set(per_epoch.values()) == {4 * ROWS}, f"a partial epoch is visible to pyarrow.dataset: {per_epoch}"
    assert sorted(epoch for epoch, _ in per_epoch) == list(range(len(committed))), "epochs committed out of order"
    by_t = collections.Counter((row["t"], row["w"]) for row in read_back(out))
    assert set(by_t.values()) == {ROWS} and len(by_t) == 4 * len(committed), "read_files sees a partial epoch"
    return len(committed)


def test_after_kill_9_of_one_process_every_visible_epoch_is_whole(tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(SCRIPT.format(root=str(ROOT), rows=ROWS))
    choose = random.Random(27)
    trials = [(tmp_path / f"out{trial}", 2 * (trial % 2), choose.uniform(0.0, 0.3)) for trial in range(10)]
    committed = []
    for group in (trials[:5], trials[5:]):  # five clusters at a time keep the test short
        runs = [
            subprocess.Popen(
                [sys.executable, str(script), str(out), str(victim), f"{delay:.3f}"],
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            for out, victim, delay in group
        ]
        try:
            errors = [run.communicate(timeout=60)[1] for run in runs]
        finally:
            for run in runs:
                if run.poll() is None:
                    os.killpg(run.pid, signal.SIGKILL)
                    run.communicate()
        for run, err, (out, _, _) in zip(runs, errors, group, strict=True):
            assert run.returncode != 0 and "killed by SIGKILL" in err, err[-2000:]
            committed.append(check_whole_epochs(out))
    assert min(committed) >= 1, committed  # each trial was killed after its first epoch was committed


def run_sink(out: Path, epochs: list[list], workers: int = 2, **options) -> list[str]:
    """Send ``epochs`` of records through write_files on ``workers`` threads; return the committed directories."""

    def main(worker):
        committed = []

        def build(scope):
            handle, stream = scope.new_input()
            commits = write_files(stream, out, **options)
            commits.inspect(committed.append)
            return handle, commits.probe()

        handle, probe = worker.dataflow(build)
        for time, records in enumerate(epochs):
            handle.advance_to(time)
            handle.send_batch(records[worker.index :: worker.peers])
        handle.close()
        worker.step_while(lambda: not probe.done())
        return committed

    return sorted(path for paths in execute(main, workers=workers) for path in paths)


def root_cause(error: BaseException) -> BaseException:
    while not isinstance(error, FileSinkError | ConfigurationError) and error.__cause__ is not None:
        error = error.__cause__
    return error


def test_each_epoch_is_committed_once_by_renaming_its_staging_directory(tmp_path: Path) -> None:
    out = tmp_path / "out"
    committed = run_sink(out, [[{"k": i} for i in range(6)], [], [{"k": 9}]], workers=3)
    assert committed == [str(out / "epoch=0"), str(out / "epoch=2")]
    assert sorted(os.listdir(out / "epoch=0")) == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    assert os.listdir(out / STAGING) == []  # every staged epoch was moved out


def test_a_rerun_into_a_used_directory_is_refused_and_overwrite_replaces_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_sink(out, [[{"k": i} for i in range(750)]], workers=3)
    with pytest.raises(WorkerFailed) as failure:
        run_sink(out, [[{"k": i} for i in range(500)]], workers=2)
    message = str(root_cause(failure.value))
    assert isinstance(root_cause(failure.value), FileSinkError)
    assert "already holds another run's output (epoch=0)" in message and "overwrite=True" in message
    assert ds.dataset(out, partitioning="hive").to_table().num_rows == 750  # refused before writing anything
    run_sink(out, [[{"k": i} for i in range(500)]], workers=2, overwrite=True)
    table = ds.dataset(out, partitioning="hive").to_table()
    assert table.num_rows == 500 and sorted(table["k"].to_pylist()) == list(range(500))
    assert sorted(os.listdir(out / "epoch=0")) == ["part-00000.parquet", "part-00001.parquet"]


def test_a_crashed_runs_staging_directory_is_refused_too(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / STAGING / "epoch=3").mkdir(parents=True)
    (out / "notes.txt").write_text("not ours")
    with pytest.raises(WorkerFailed, match=f"already holds another run's output \\({STAGING}\\)"):
        run_sink(out, [[{"k": 1}]])
    run_sink(out, [[{"k": 1}]], overwrite=True)
    assert sorted(os.listdir(out)) == [STAGING, "epoch=0", "notes.txt"]


def test_a_staging_directory_another_worker_removes_while_this_one_looks_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With overwrite=True worker 0 removes a crashed run's staging directory while the other workers look at the
    output directory: worker 1 listed it, then found the staging directory gone (a FileNotFoundError that failed
    the run as 'cannot create the directory', about once in the suite's fresh-clone runs)."""
    from runtime import file_sink

    out = tmp_path / "out"
    (out / STAGING / "epoch=3").mkdir(parents=True)
    listed = Path.iterdir

    def listed_then_cleared(self: Path) -> Any:
        entries = list(listed(self))
        if self == out:  # worker 0 clears the staging directory right after this worker listed the output
            shutil.rmtree(out / STAGING)
        return iter(entries)

    monkeypatch.setattr(Path, "iterdir", listed_then_cleared)
    file_sink._prepare(out, "epoch", True, 1, "file sink 'WriteFiles' on worker 1")
    assert os.listdir(out) == []


def test_a_part_missing_from_the_staging_directory_is_not_committed(tmp_path: Path, monkeypatch) -> None:
    from runtime import file_sink

    real = file_sink._write_atomically

    def elsewhere(table, target, format, where, *rest):  # as if worker 1 wrote to a file system worker 0 cannot see
        if target.name == "part-00001.parquet":
            target = tmp_path / "elsewhere" / target.name
        real(table, target, format, where, *rest)

    monkeypatch.setattr(file_sink, "_write_atomically", elsewhere)
    with pytest.raises(WorkerFailed) as failure:
        run_sink(tmp_path / "out", [[{"k": 1}, {"k": 2}]])
    message = str(root_cause(failure.value))
    assert "cannot commit" in message and "part-00001.parquet" in message and "shared file system" in message
    assert not (tmp_path / "out" / "epoch=0").exists()


def test_a_field_named_like_the_partition_column_is_refused_and_another_partition_name_reads_back(
    tmp_path: Path,
) -> None:
    records = [[{"epoch": 7, "k": 1}, {"epoch": 8, "k": 2}]]
    with pytest.raises(WorkerFailed) as failure:
        run_sink(tmp_path / "a", records)
    assert isinstance(root_cause(failure.value), FileSinkError)
    assert "field 'epoch'" in str(root_cause(failure.value)) and "partition=" in str(root_cause(failure.value))
    assert not (tmp_path / "a" / "epoch=0").exists()
    with pytest.raises(WorkerFailed, match="columns \\['epoch', 'k'\\] include 'epoch'"):
        run_sink(tmp_path / "b", [[(7, 1)]], columns=["epoch", "k"])
    run_sink(tmp_path / "c", records, partition="batch")
    table = ds.dataset(tmp_path / "c", partitioning="hive").to_table()
    assert sorted(zip(table["batch"].to_pylist(), table["epoch"].to_pylist(), strict=True)) == [(0, 7), (0, 8)]
    with pytest.raises(WorkerFailed, match="partition must be a column name"):
        run_sink(tmp_path / "d", records, partition="_hidden")
