"""runtime.files: directories of Parquet, CSV and JSON Lines in, one file per epoch and worker out."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from runtime import execute
from runtime.errors import FileSinkError, FileSourceError, WorkerFailed
from runtime.files import read_files, write_files


def make_parquet(directory: Path, files: int = 3, rows: int = 10, row_group_size: int = 4) -> list[dict]:
    directory.mkdir(parents=True, exist_ok=True)
    everything = []
    for index in range(files):
        rows_here = [{"file": index, "n": index * 100 + i, "word": f"w{i % 3}"} for i in range(rows)]
        target = directory / f"part-{index:02d}.parquet"
        pq.write_table(pa.Table.from_pylist(rows_here), target, row_group_size=row_group_size)
        everything.extend(rows_here)
    return everything


def collect(path, workers=1, **options):
    """Run a file source on ``workers`` threads; return [(worker, time, record), ...] and per-time completion order."""

    def main(worker):
        seen = []
        completed = []

        def build(scope):
            stream = read_files(scope, path, **options)
            stream.inspect_batch(lambda time, batch: seen.extend((worker.index, time, r) for r in _rows(batch)))
            return stream.probe()

        probe = worker.dataflow(build)
        worker.step_while(lambda: not probe.done())
        return seen, completed

    results = execute(main, workers=workers)
    return [item for seen, _ in results for item in seen]


def root_cause(error: BaseException) -> BaseException:
    """The file error in ``error``'s chain of causes (operator errors are chained under WorkerFailed)."""
    while not isinstance(error, FileSourceError | FileSinkError) and error.__cause__ is not None:
        error = error.__cause__
    return error


def _rows(batch):
    return batch.to_pylist() if hasattr(batch, "to_pylist") else batch


def test_each_file_is_an_epoch_and_every_row_is_read_once(tmp_path):
    everything = make_parquet(tmp_path / "in")
    seen = collect(tmp_path / "in", workers=3)
    assert sorted(r["n"] for _, _, r in seen) == sorted(r["n"] for r in everything)
    assert all(time == record["file"] for _, time, record in seen)
    # row groups of one file are shared among workers, not read by one
    workers_of_file_0 = {w for w, _, r in seen if r["file"] == 0}
    assert len(workers_of_file_0) > 1


def test_rows_per_epoch_numbers_rows_across_files_in_path_order(tmp_path):
    make_parquet(tmp_path / "in", files=3, rows=10)
    seen = collect(tmp_path / "in", workers=2, rows_per_epoch=7)
    order = sorted((r["file"], r["n"]) for _, _, r in seen)
    by_row = {n: row for row, (_, n) in enumerate(order)}
    assert all(time == by_row[r["n"]] // 7 for _, time, r in seen)
    assert max(time for _, time, _ in seen) == 29 // 7


def test_time_column_gives_each_row_its_time(tmp_path):
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"t": [3, 1, 3, 2], "v": ["a", "b", "c", "d"]}), tmp_path / "in" / "a.parquet")
    pq.write_table(pa.table({"t": [1, 0], "v": ["e", "f"]}), tmp_path / "in" / "b.parquet")
    seen = collect(tmp_path / "in", workers=2, time_column="t", columnar=True)
    assert sorted((time, r["v"]) for _, time, r in seen) == [(0, "f"), (1, "b"), (1, "e"), (2, "d"), (3, "a"), (3, "c")]


def test_columnar_mode_sends_arrow_record_batches(tmp_path):
    make_parquet(tmp_path / "in", files=1)

    def main(worker):
        kinds = []

        def build(scope):
            stream = read_files(scope, tmp_path / "in", columnar=True)
            stream.inspect_batch(lambda time, batch: kinds.append(type(batch)))
            return stream.probe()

        probe = worker.dataflow(build)
        worker.step_while(lambda: not probe.done())
        return kinds

    assert set(execute(main)[0]) == {pa.RecordBatch}


def test_csv_and_json_lines(tmp_path):
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "a.csv").write_text("x,y\n1,a\n2,b\n")
    (tmp_path / "csv" / "b.csv").write_text("x,y\n3,c\n")
    assert sorted((t, r["x"], r["y"]) for _, t, r in collect(tmp_path / "csv", workers=2, format="csv")) == [
        (0, 1, "a"),
        (0, 2, "b"),
        (1, 3, "c"),
    ]
    (tmp_path / "jsonl").mkdir()
    (tmp_path / "jsonl" / "a.jsonl").write_text('{"x": 1}\n{"x": 2}\n{"x": 3}\n')
    seen = collect(tmp_path / "jsonl", format="jsonl", rows_per_epoch=2)
    assert sorted((t, r["x"]) for _, t, r in seen) == [(0, 1), (0, 2), (1, 3)]


def test_epochs_complete_while_later_files_are_still_being_read(tmp_path):
    make_parquet(tmp_path / "in", files=4, rows=50, row_group_size=5)
    completions = []

    def main(worker):
        def build(scope):
            stream = read_files(scope, tmp_path / "in", batch_rows=5)
            stream.inspect_batch(lambda time, batch: completions.append(("data", time)))
            return stream.probe()

        probe = worker.dataflow(build)
        reported = set()
        while not probe.done():
            worker.step()
            for epoch in range(4):
                if epoch not in reported and not probe.less_equal(epoch):
                    reported.add(epoch)
                    completions.append(("complete", epoch))

    execute(main)
    assert completions.index(("complete", 0)) < completions.index(("data", 3))


def test_a_missing_path_names_the_path(tmp_path):
    with pytest.raises(WorkerFailed) as failure:
        collect(tmp_path / "nope")
    assert isinstance(root_cause(failure.value), FileSourceError)
    assert "no such file or directory" in str(root_cause(failure.value)) and "nope" in str(root_cause(failure.value))


def test_an_empty_directory_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(WorkerFailed, match="holds no parquet files"):
        collect(tmp_path / "empty")


def test_a_schema_conflict_names_the_file(tmp_path):
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"x": [1, 2]}), tmp_path / "in" / "a.parquet")
    pq.write_table(pa.table({"x": ["one"]}), tmp_path / "in" / "b.parquet")
    with pytest.raises(WorkerFailed) as failure:
        collect(tmp_path / "in")
    message = str(root_cause(failure.value))
    assert isinstance(root_cause(failure.value), FileSourceError)
    assert "b.parquet" in message and "column 'x' of type string" in message and "a.parquet" in message


def test_an_unreadable_file_names_the_file(tmp_path):
    make_parquet(tmp_path / "in", files=2)
    (tmp_path / "in" / "part-01.parquet").write_bytes(b"PAR1 this is not parquet at all PAR1")
    with pytest.raises(WorkerFailed) as failure:
        collect(tmp_path / "in")
    assert isinstance(root_cause(failure.value), FileSourceError)
    assert "part-01.parquet" in str(root_cause(failure.value))


def test_a_file_damaged_while_the_source_reads_names_the_file_and_epoch_not_time_none(tmp_path):
    make_parquet(tmp_path / "in", files=3)
    damaged = tmp_path / "in" / "part-01.parquet"

    def main(worker):
        probe = worker.dataflow(lambda scope: read_files(scope, tmp_path / "in").probe())
        damaged.write_bytes(b"PAR1" + b"garbage" * 20 + b"PAR1")  # after the schemas were checked
        worker.step_while(lambda: not probe.done())

    with pytest.raises(WorkerFailed) as failure:
        execute(main)
    for error in (failure.value, failure.value.__cause__):
        message = str(error)
        assert "time None" not in message and "outside any batch" not in message, message
        assert f"while reading {str(damaged)!r} (row 0, epoch 1 or later)" in message, message
    assert isinstance(root_cause(failure.value), FileSourceError)


def test_bad_options_are_refused_when_the_dataflow_is_built(tmp_path):
    make_parquet(tmp_path / "in", files=1)
    with pytest.raises(WorkerFailed, match="give rows_per_epoch or time_column, not both"):
        collect(tmp_path / "in", rows_per_epoch=3, time_column="n")
    with pytest.raises(WorkerFailed, match="time_column 'missing' is not a column"):
        collect(tmp_path / "in", time_column="missing")
    with pytest.raises(WorkerFailed, match="times must be integers"):
        collect(tmp_path / "in", time_column="word")
    with pytest.raises(WorkerFailed, match="unknown file format 'xml'"):
        collect(tmp_path / "in", format="xml")


# ---------------------------------------------------------------------- sink


def run_sink(out, epochs, workers=2, **options):
    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()
            write_files(stream, out, **options)
            return handle, stream.probe()

        handle, probe = worker.dataflow(build)
        for time, records in enumerate(epochs):
            handle.advance_to(time)
            handle.send_batch(records[worker.index :: worker.peers])
        handle.close()
        worker.step_while(lambda: not probe.done())

    execute(main, workers=workers)


def test_the_sink_writes_one_file_per_epoch_and_worker_that_reads_back(tmp_path):
    epochs = [[{"k": i, "v": f"x{i}"} for i in range(5)], [], [{"k": 9, "v": "y"}]]
    run_sink(tmp_path / "out", epochs)
    files = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert files == ["epoch=0/part-00000.parquet", "epoch=0/part-00001.parquet", "epoch=2/part-00000.parquet"]
    table = ds.dataset(tmp_path / "out", partitioning="hive").to_table()
    assert sorted(zip(table["epoch"].to_pylist(), table["k"].to_pylist(), strict=True)) == [
        (0, 0),
        (0, 1),
        (0, 2),
        (0, 3),
        (0, 4),
        (2, 9),
    ]


def test_the_sink_writes_tuples_with_named_columns_as_csv_and_json_lines(tmp_path):
    run_sink(tmp_path / "csv", [[(1, "a"), (2, "b")]], workers=1, format="csv", columns=["n", "s"])
    assert (tmp_path / "csv" / "epoch=0" / "part-00000.csv").read_text().splitlines() == ['"n","s"', '1,"a"', '2,"b"']
    run_sink(tmp_path / "json", [[(1, "a")]], workers=1, format="jsonl", columns=["n", "s"])
    assert (tmp_path / "json" / "epoch=0" / "part-00000.jsonl").read_text() == '{"n": 1, "s": "a"}\n'


# a left join's output: in epoch 0 no click has a plan, so a part inferred from its records has a null column 'plan'
JOINED = [[{"user": "ann", "plan": None}, {"user": "bob", "plan": None}], [{"user": "ann", "plan": "pro"}]]
JOINED_SCHEMA = pa.schema([("user", pa.string()), ("plan", pa.string())])


@pytest.mark.parametrize("workers", [1, 2])
def test_the_sink_writes_every_part_with_the_given_schema(tmp_path, workers):
    run_sink(tmp_path / "out", JOINED, workers=workers, schema=JOINED_SCHEMA)
    parts = sorted((tmp_path / "out").glob("epoch=*/*.parquet"))
    assert parts and all(pq.read_schema(part) == JOINED_SCHEMA for part in parts)
    table = ds.dataset(tmp_path / "out", partitioning="hive").to_table()
    rows = sorted(zip(table["epoch"].to_pylist(), table["user"].to_pylist(), table["plan"].to_pylist(), strict=True))
    assert rows == [(0, "ann", None), (0, "bob", None), (1, "ann", "pro")]


def test_records_that_do_not_fit_the_sinks_schema_are_refused_naming_the_time(tmp_path):
    with pytest.raises(WorkerFailed, match=r"at time 1 the records' fields \['user', 'plan', 'age'\].*missing \[\]"):
        run_sink(tmp_path / "a", [[], [{"user": "ann", "plan": "pro", "age": 3}]], workers=1, schema=JOINED_SCHEMA)
    with pytest.raises(WorkerFailed, match="at time 0 the records do not fit the schema"):
        run_sink(tmp_path / "b", [[{"user": "ann", "plan": ["pro"]}]], workers=1, schema=JOINED_SCHEMA)
    with pytest.raises(WorkerFailed, match="the schema has a field 'epoch'"):
        run_sink(tmp_path / "c", [[]], workers=1, schema=pa.schema([("epoch", pa.int64())]))


def test_a_file_source_feeds_a_file_sink_end_to_end(tmp_path):
    everything = make_parquet(tmp_path / "in", files=3)

    def main(worker):
        def build(scope):
            stream = read_files(scope, tmp_path / "in", columnar=True)
            write_files(stream, tmp_path / "out")
            return stream.probe()

        probe = worker.dataflow(build)
        worker.step_while(lambda: not probe.done())

    execute(main, workers=2)
    table = ds.dataset(tmp_path / "out", partitioning="hive").to_table()
    assert sorted(table["n"].to_pylist()) == sorted(r["n"] for r in everything)
    assert all(e == f for e, f in zip(table["epoch"].to_pylist(), table["file"].to_pylist(), strict=True))


def test_tuples_without_columns_are_refused_naming_the_time(tmp_path):
    with pytest.raises(WorkerFailed) as failure:
        run_sink(tmp_path / "out", [[(1, 2)]], workers=1)
    assert isinstance(root_cause(failure.value), FileSinkError)
    assert "at time 0" in str(root_cause(failure.value)) and "columns=[...]" in str(root_cause(failure.value))


def test_a_crash_while_writing_leaves_no_file_a_reader_would_take(tmp_path, monkeypatch):
    import pyarrow.parquet as parquet

    real = parquet.write_table

    def crash_half_way(table, where, **kwargs):
        real(table.slice(0, 1), where, **kwargs)  # part of the data is on disk ...
        raise OSError("disk full")  # ... when the write fails

    monkeypatch.setattr(parquet, "write_table", crash_half_way)
    with pytest.raises(WorkerFailed) as failure:
        run_sink(tmp_path / "out", [[{"k": 1}, {"k": 2}]], workers=1)
    assert isinstance(root_cause(failure.value), FileSinkError)
    message = str(root_cause(failure.value))
    assert "epoch=0/part-00000.parquet" in message and "disk full" in message
    leftovers = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert leftovers == []
    assert os.listdir(tmp_path / "out") == ["_pytimely_staging"]  # no epoch=0: it was never committed


def test_the_wordcount_example_goes_from_parquet_files_to_per_epoch_parquet_results(tmp_path, capsys):
    from helpers.example_loader import load_example

    wordcount = load_example("wordcount")
    assert wordcount.main(["--write-sample", str(tmp_path / "lines"), "--epochs", "3", "--lines", "20"]) == 0
    assert wordcount.main(["-w", "2", "--input", str(tmp_path / "lines"), "--output", str(tmp_path / "totals")]) == 0
    assert "matches reference: True" in capsys.readouterr().out
    table = ds.dataset(tmp_path / "totals", partitioning="hive").to_table()
    expected = wordcount.reference(wordcount.random_text(3, 20, 1))
    got: dict[int, dict[str, int]] = {}
    for row in table.to_pylist():
        got.setdefault(row["epoch"], {})[row["word"]] = row["total"]
    assert got == expected


def test_a_later_file_lacking_a_column_is_a_schema_conflict_naming_it(tmp_path):
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"x": [1, 2], "y": ["a", "b"]}), tmp_path / "in" / "a.parquet")
    pq.write_table(pa.table({"x": [3]}), tmp_path / "in" / "b.parquet")
    for workers in (1, 2):
        with pytest.raises(WorkerFailed) as failure:
            collect(tmp_path / "in", workers=workers)
        message = str(root_cause(failure.value))
        assert isinstance(root_cause(failure.value), FileSourceError)
        assert "b.parquet" in message and "lacks column 'y' (string)" in message and "a.parquet" in message


def test_a_json_lines_record_nested_10000_deep_is_refused_naming_file_and_line(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text('{"x": 1}\n')
    deep = '{"x": 2, "a": ' + "[" * 10_000 + "]" * 10_000 + "}\n"
    (tmp_path / "in" / "b.jsonl").write_text('{"x": 3}\n{"x": 4}\n' + deep)
    assert 20_000 < len(deep) < 21_000
    for options in ({}, {"rows_per_epoch": 2}):
        with pytest.raises(WorkerFailed) as failure:
            collect(tmp_path / "in", workers=2, format="jsonl", **options)
        message = str(root_cause(failure.value))
        assert isinstance(root_cause(failure.value), FileSourceError)
        assert "b.jsonl' line 3" in message and "more than 100 deep" in message
    # the first file is the one pyarrow reads to learn the schema: it is checked before that
    (tmp_path / "in" / "0.jsonl").write_text(deep)
    with pytest.raises(WorkerFailed, match="0.jsonl' line 1"):
        collect(tmp_path / "in", format="jsonl")


@pytest.mark.parametrize("first", ['{"a": null}\n', "\n"], ids=["null column", "blank"])
def test_a_later_json_lines_file_read_for_the_schema_is_bounded_before_pyarrow_parses_it(
    tmp_path: Path, first: str
) -> None:
    """A first file whose column is all null (or a blank one) makes the schema be taken from the next file, which
    pyarrow's parser read before its nesting was checked: nested 200,000 deep, it killed the process (SIGSEGV)."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "0.jsonl").write_text(first)
    (tmp_path / "in" / "1.jsonl").write_text('{"a": ' + "[" * 200_000 + "]" * 200_000 + "}\n")
    done = read_json_lines_in_a_process(tmp_path / "in")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "1.jsonl' line 1: a record nests arrays and objects more than 100 deep" in done.stdout


def read_json_lines_in_a_process(directory: Path) -> Any:
    """Run ``read_files`` over the JSON Lines files of ``directory`` in a child process (a crash of pyarrow's
    parser kills that process, not the suite); its completed process, the ``WorkerFailed`` printed."""
    import subprocess
    import sys
    import textwrap

    program = textwrap.dedent(
        f"""
        from runtime import execute
        from runtime.errors import WorkerFailed
        from runtime.files import read_files
        try:
            execute(lambda worker: worker.dataflow(lambda scope: read_files(scope, {str(directory)!r},
                                                                            format="jsonl")), workers=1)
        except WorkerFailed as error:
            print(error)
        """
    )
    root = Path(__file__).resolve().parent.parent
    return subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )


@pytest.mark.parametrize("before", [0, 1 << 20], ids=["first line", "first line of pyarrow's second block"])
def test_a_json_lines_null_record_is_refused_naming_its_line_not_a_crash(tmp_path, before):
    """A line holding ``null`` where pyarrow's JSON parser starts a block (the file's start, then every MiB) killed the
    process (SIGSEGV), found by fuzzing read_files with byte changes: records that are no objects are refused
    before pyarrow reads the file."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "0.jsonl").write_bytes(b'{"a":1}\n' * (before // 8) + b'null\n{"a":2}\n')
    done = read_json_lines_in_a_process(tmp_path / "in")
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    line = before // 8 + 1
    assert f"0.jsonl' line {line} (byte offset {before}): a record that is not a JSON object" in done.stdout


def test_json_lines_brackets_in_strings_and_nesting_up_to_the_limit_read(tmp_path):
    at_limit = '{"a": ' + "[" * 99 + "1" + "]" * 99 + "}"
    in_strings = '{"a": [[1]], "s": "\\\\\\"[[[' + "[" * 500 + '\\\\", "t": "{{{' + "{" * 500 + '"}'
    for name, line in (("limit", at_limit), ("strings", in_strings)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "a.jsonl").write_text(line + "\n")
    [(_, _, deepest)] = collect(tmp_path / "limit", format="jsonl")
    assert deepest["a"] == json.loads(at_limit)["a"]
    [(_, _, strings)] = collect(tmp_path / "strings", format="jsonl")
    assert strings["s"] == '\\"[[[' + "[" * 500 + "\\" and strings["t"] == "{{{" + "{" * 500


def _write_not_utf8(directory: Path, format: str) -> Path:
    """A file whose string column holds bytes that are not UTF-8, which pyarrow's JSON and Parquet readers pass on."""
    directory.mkdir()
    if format == "json":
        target = directory / "bad.jsonl"
        target.write_bytes(b'{"word": "fine"}\n{"word": "\xff\xfe"}\n')
    else:
        target = directory / "bad.parquet"
        offsets = pa.py_buffer((0).to_bytes(4, "little") + (4).to_bytes(4, "little") + (6).to_bytes(4, "little"))
        words = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(b"fine\xff\xfe")])
        pq.write_table(pa.table({"word": words}), target)
    return target


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("columnar", [False, True])
@pytest.mark.parametrize("format", ["json", "parquet"])
def test_a_string_that_is_not_utf8_is_refused_naming_the_file(tmp_path, format, columnar, workers):
    """Rows failed with a bare UnicodeDecodeError; columnar batches went on, invalid, to the next operator."""
    target = _write_not_utf8(tmp_path / "in", format)
    with pytest.raises(WorkerFailed) as failure:
        collect(tmp_path / "in", workers=workers, format=format, columnar=columnar)
    cause = root_cause(failure.value)
    assert isinstance(cause, FileSourceError), repr(cause)
    assert str(target) in str(cause) and "UTF8" in str(cause)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("change", ["grow", "shrink"])
def test_a_file_that_changes_after_its_rows_were_counted_is_refused(tmp_path, change, workers):
    """rows_per_epoch numbers rows from the counts taken when the dataflow is built; a file that grew or shrank
    before it was read gave epochs of 10 rows for 5, or a missing epoch, silently."""
    directory = tmp_path / "in"
    directory.mkdir()
    first = directory / "a.csv"
    first.write_text("n\n" + "".join(f"{i}\n" for i in range(10)))
    (directory / "b.csv").write_text("n\n" + "".join(f"{100 + i}\n" for i in range(10)))
    built = threading.Barrier(workers, timeout=60)

    def main(worker):
        probe = worker.dataflow(lambda scope: read_files(scope, directory, format="csv", rows_per_epoch=5).probe())
        if built.wait() == 0:  # every worker has counted; one changes the file before any reads it
            if change == "grow":
                with open(first, "a") as more:
                    more.write("".join(f"{50 + i}\n" for i in range(10)))
            else:
                first.write_text("n\n1\n")
        built.wait()
        worker.step_while(lambda: not probe.done())

    with pytest.raises(WorkerFailed) as failure:
        execute(main, workers=workers)
    cause = root_cause(failure.value)
    assert isinstance(cause, FileSourceError), repr(cause)
    assert f"{str(first)!r} changed while the dataflow ran: it held 10 rows" in str(cause)


@pytest.mark.parametrize("kind", ["fifo", "symlink-loop"])
def test_a_path_that_is_no_file_or_directory_says_what_it_is(tmp_path, kind):
    """A FIFO was refused as 'cannot list PATH: PATH' and a symbolic link loop as 'no such file or directory'."""
    target = tmp_path / "in.csv"
    if kind == "fifo":
        os.mkfifo(target)
        expected = "is neither a file nor a directory"
    else:
        target.symlink_to(tmp_path / "other.csv")
        (tmp_path / "other.csv").symlink_to(target)
        expected = "symbolic link to nothing (or in a loop)"
    for workers in (1, 2):
        with pytest.raises(WorkerFailed) as failure:
            collect(target, workers=workers, format="csv")
        cause = root_cause(failure.value)
        assert isinstance(cause, FileSourceError) and expected in str(cause), str(cause)


def write_epoch_files(directory: Path, format: str, epochs: list[list[dict]]) -> None:
    """One file per epoch, as a producer writes them: an epoch without records is a CSV header or an empty file."""
    import pyarrow.csv as pcsv

    directory.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([("user", pa.string()), ("plan", pa.string()), ("ts", pa.int64())])
    for epoch, rows in enumerate(epochs):
        path = directory / f"clicks-{epoch:02d}.{format}"
        if format == "jsonl":
            path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        elif format == "csv":  # pyarrow writes a header only for no rows, and an empty field for a null
            pcsv.write_csv(pa.Table.from_pylist(rows, schema=schema), path)
        else:  # each file typed by its own rows, as pandas or from_pylist without a schema writes it
            pq.write_table(pa.Table.from_pylist(rows) if rows else pa.Table.from_pylist([], schema=schema), path)


NULL_EPOCHS = [
    [],  # the first epoch has no records: no types at all in a CSV or JSON Lines file
    [{"user": "ann", "plan": None, "ts": 1}],  # no plan in this file: the column's type is null
    [{"user": "bob", "plan": "pro", "ts": 2}, {"user": "ann", "plan": None, "ts": 2}],
    [],
    [{"user": "cy", "plan": "free", "ts": 4}],
]


@pytest.mark.parametrize("format", ["csv", "jsonl", "parquet"])
@pytest.mark.parametrize("workers", [1, 2])
def test_epochs_without_records_and_columns_of_only_nulls_are_read(tmp_path, format, workers):
    """A CSV file with a header and no rows, a JSON Lines file with no lines, and a file whose column holds only nulls
    (Arrow's null type) were refused: 'has column 'user' of type string, but the first file has null', or pyarrow's
    'Empty JSON stream'. A null column takes the type the column has in the other files."""
    write_epoch_files(tmp_path / "in", format, NULL_EPOCHS)
    got = sorted(((time, record) for _, time, record in collect(tmp_path / "in", workers, format=format)), key=repr)
    expected = [(epoch, row) for epoch, rows in enumerate(NULL_EPOCHS) for row in rows]
    if format == "csv":  # a CSV field holds no null string: an empty field reads back as ""
        expected = [(epoch, {**row, "plan": row["plan"] or ""}) for epoch, row in expected]
    assert got == sorted(expected, key=repr)


def test_empty_json_lines_files_are_counted_as_no_rows_and_times_come_from_a_column_typed_later(tmp_path):
    write_epoch_files(tmp_path / "in", "jsonl", NULL_EPOCHS)
    by_column = collect(tmp_path / "in", 2, format="jsonl", time_column="ts")
    assert sorted((time, r["user"]) for _, time, r in by_column) == [(1, "ann"), (2, "ann"), (2, "bob"), (4, "cy")]
    by_rows = collect(tmp_path / "in", 2, format="jsonl", rows_per_epoch=2)
    assert sorted((time, r["user"]) for _, time, r in by_rows) == [(0, "ann"), (0, "bob"), (1, "ann"), (1, "cy")]


def test_a_parquet_row_group_is_decoded_a_batch_at_a_time_not_whole(tmp_path):
    """A row group's values may be run-length encoded: 4 million zeros take 25 KB of file, and pyarrow.dataset,
    which decodes a whole row group before its first batch, made read_files hold 32 MB for a 512 KB batch (found
    by fuzzing Parquet inputs; a few bytes can declare any row count).  The source reads row groups page by page."""
    import numpy as np

    rows = 4_000_000
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"z": np.zeros(rows, np.int64)}), tmp_path / "in" / "0.parquet", row_group_size=rows)
    assert (tmp_path / "in" / "0.parquet").stat().st_size < 100_000
    held: list[int] = []
    seen: list[int] = []
    baseline = pa.total_allocated_bytes()

    def main(worker):
        def build(scope):
            rows_read = read_files(scope, tmp_path / "in", columnar=True, batch_rows=65_536)
            rows_read.inspect_batch(lambda t, b: (held.append(pa.total_allocated_bytes()), seen.append(b.num_rows)))
            return rows_read.probe()

        probe = worker.dataflow(build)
        worker.step_while(lambda: not probe.done())

    execute(main, workers=1)
    assert sum(seen) == rows and max(seen) == 65_536
    assert max(held) - baseline < 8 << 20, (max(held) - baseline) >> 20  # a batch is 512 KB; the row group 32 MB


def dictionary_of_uuids() -> Any:
    import uuid

    return pa.DictionaryArray.from_arrays(
        pa.array([0, 1, 0], pa.int32()), pa.array([uuid.uuid4().bytes] * 2, pa.uuid())
    )


@pytest.mark.parametrize("nested", [False, True], ids=["dictionary", "list of dictionary"])
def test_a_dictionary_of_an_extension_type_is_refused_for_parquet_naming_the_column_and_the_cast(
    tmp_path: Path, nested: bool
) -> None:
    """pyarrow failed with ``Column 2 had 3 while previous column had 0`` (FileSinkError: cannot write ...)."""
    column = dictionary_of_uuids()
    if nested:
        column = pa.ListArray.from_arrays(pa.array([0, 1, 2, 3], pa.int32()), column)
    table = pa.table({"n": [1, 2, 3], "id": column})
    with pytest.raises(WorkerFailed) as failure:
        run_sink(tmp_path / "out", [table], workers=1)
    error = root_cause(failure.value)
    message = str(error)
    assert isinstance(error, FileSinkError) and "had 0" not in message, message
    assert "at time 0 the column 'id' is" in message and "dictionary of the extension type" in message, message
    decoded = pa.list_(pa.uuid()) if nested else pa.uuid()
    assert f"cast it to {decoded}" in message and "fixed_size_binary[16]" in message, message
    assert not [path for path in (tmp_path / "out").rglob("*") if path.is_file()]
    run_sink(tmp_path / "cast", [table.cast(pa.schema([("n", pa.int64()), ("id", decoded)]))], workers=1)
    (written,) = (tmp_path / "cast").rglob("*.parquet")
    assert pq.read_table(written).column("id").type == decoded
