"""``write_files`` refuses a table that is not valid Arrow, which Parquet and CSV would write as it is.

pyarrow builds arrays from buffers or views without checking them: a ``string``
that is not UTF-8, a ``time32`` of 24 hours or more.  Parquet wrote them, and
``read_files`` (which validates every batch) refused the file it had written;
CSV wrote ``<value out of range: 90000>`` for the time and the raw bytes for the
string.  The sink now refuses such a table before anything is written for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import python_values_mains
from helpers.invalid_layout import BadLayout

pa = pytest.importorskip("pyarrow")

from runtime import execute  # noqa: E402
from runtime.errors import FileSinkError, FileSinkValueError, WorkerFailed  # noqa: E402
from runtime.file_sink import _refuse_invalid  # noqa: E402
from runtime.files import read_files  # noqa: E402


def not_utf8() -> Any:
    """A string column whose second value is the byte 0xff (a view of binary: never checked)."""
    return pa.array([b"ok", b"\xff"], pa.binary()).view(pa.string())


def sink_error(error: BaseException) -> BaseException:
    """The first :class:`FileSinkValueError` among ``error``'s causes, else the innermost cause."""
    while error.__cause__ is not None and not isinstance(error, FileSinkValueError):
        error = error.__cause__
    return error


@pytest.mark.parametrize("file_format", ["parquet", "csv"])
@pytest.mark.parametrize(
    ("column", "row", "text"),
    [
        (pa.array([5, 90_000], pa.time32("s")), 1, "<value out of range: 90000>"),
        (not_utf8(), 1, ""),
    ],
    ids=["time of 25 hours", "string not UTF-8"],
)
def test_an_invalid_column_is_refused_naming_it_and_nothing_is_written(
    tmp_path: Path, file_format: str, column: Any, row: int, text: str
) -> None:
    table = pa.table({"n": [1, 2], "bad": column})
    with pytest.raises(WorkerFailed) as failure:
        python_values_mains.write_table(tmp_path / "out", table, format=file_format)
    error = sink_error(failure.value)
    message = str(error)
    assert isinstance(error, FileSinkValueError), message
    assert f"at time 0 column 'bad' ({column.type}), row {row}" in message, message
    assert "is not valid Arrow" in message and "pyarrow.array(values, type)" in message, message
    assert error.column == "bad" and error.row == row and text in error.text
    assert not [path for path in (tmp_path / "out").rglob("*") if path.is_file()]


@pytest.mark.parametrize("file_format", ["parquet", "csv"])
def test_a_valid_table_of_the_same_types_is_written_and_reads_back(tmp_path: Path, file_format: str) -> None:
    table = pa.table({"n": [1, 2], "t": pa.array([5, 86_399], pa.time32("s")), "s": ["ok", "é"]})
    python_values_mains.write_table(tmp_path / "out", table, format=file_format)
    seen: list[Any] = []

    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            stream = read_files(scope, tmp_path / "out", format=file_format)
            stream.inspect_batch(lambda _time, batch: seen.extend(batch))
            return stream.probe()

        probe = worker.dataflow(build)
        worker.step_while(lambda: not probe.done())

    execute(main, workers=1)
    assert sorted(record["n"] for record in seen) == [1, 2]
    assert sorted(record["s"] for record in seen) == ["ok", "é"]


def test_a_table_invalid_only_as_a_whole_is_refused_naming_its_layout() -> None:
    with pytest.raises(FileSinkError) as failure:
        _refuse_invalid(BadLayout(pa.table({"n": [1, 2]})), "write_files 'Out'", 3)
    message = str(failure.value)
    assert not isinstance(failure.value, FileSinkValueError), message
    assert "write_files 'Out': at time 3 the table's layout" in message and "no file was written" in message, message
