"""File sources and sinks: directories of Parquet, CSV and JSON Lines files, through ``pyarrow.dataset``.

:func:`read_files` is an input that closes when its files are read.  The files
(and, for Parquet, their row groups) are listed in path order by every worker
the same way, and worker ``i`` reads units ``i, i + peers, ...`` of that list.
Each record's time is chosen in one of three ways:

- ``per_file`` (the default): the ``k``-th file in path order is epoch ``k``;
- ``rows_per_epoch=N``: row ``r`` of the whole dataset, in path order, is epoch ``r // N``;
- ``time_column="name"``: the integer column ``name`` gives each row's time.

Records leave as Arrow record batches with ``columnar=True``, or as one dict per
row otherwise.  With ``per_file`` and ``rows_per_epoch`` each worker's units
come in time order, so the source advances its capability after each unit and
downstream operators see epochs complete while later files are still being
read; with ``time_column`` any file may hold any time, so nothing completes
before the source has read all its files.

:func:`write_files` writes what reaches it as one file per epoch and worker,
``DIRECTORY/epoch=T/part-WWWWW.EXT``, as soon as epoch ``T`` is complete at the
sink.  Each file is written under a name starting with ``.`` (which
``pyarrow.dataset`` and Spark skip), flushed to disk, then renamed into place,
so a crash never leaves a half-written file where a reader would take it for a
whole one.  The directory reads back with ``pyarrow.dataset.dataset(DIRECTORY,
partitioning="hive")``.

``pyarrow`` is needed (``pip install pyarrow``); it is imported when a file
source or sink is built.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.errors import ConfigurationError, FileSinkError, FileSourceError
from scopes.channels import Pipeline
from scopes.operator import Capability, OperatorInfo, OperatorInput, OperatorOutput

if TYPE_CHECKING:
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.dataset as ds  # type: ignore[import-untyped]

    from scopes.builder import ScopeBuilder
    from scopes.stream import Stream

FORMATS = {"parquet": "parquet", "csv": "csv", "jsonl": "json", "json": "json"}
"""The formats by the name a user gives, and the ``pyarrow.dataset`` format each one reads as."""

SUFFIXES = {"parquet": ".parquet", "csv": ".csv", "json": ".jsonl"}
"""The file name ending the sink writes for each ``pyarrow.dataset`` format."""

DEFAULT_BATCH_ROWS = 65_536
"""Rows per record batch a source reads (and sends) at a time."""


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow
        import pyarrow.dataset
    except ImportError:
        raise ConfigurationError(
            "file sources and sinks read and write through pyarrow.dataset; install it with `pip install pyarrow`"
        ) from None
    return pyarrow, pyarrow.dataset


def _format(format: str) -> str:
    try:
        return FORMATS[format]
    except KeyError:
        raise ConfigurationError(f"unknown file format {format!r}; use one of {sorted(FORMATS)}") from None


# ---------------------------------------------------------------------- the source


@dataclass(frozen=True)
class _Unit:
    """One piece of work: a whole file, or one row group of a Parquet file."""

    file_index: int
    path: str
    fragment: Any
    rows: int | None
    first_row: int | None


def _dataset(path: str | os.PathLike[str], format: str, where: str) -> ds.Dataset:
    _, dataset_module = _pyarrow()
    location = Path(path)
    if not location.exists():
        raise FileSourceError(f"{where}: no such file or directory: {str(location)!r}")
    try:
        dataset = dataset_module.dataset(str(location), format=format)
    except Exception as error:  # pyarrow raises several kinds while it inspects the first file
        raise FileSourceError(f"{where}: cannot open {str(location)!r} as {format}: {error}") from error
    if not dataset.files:
        raise FileSourceError(
            f"{where}: {str(location)!r} holds no {format} files (names starting with . or _ are skipped)"
        )
    return dataset


def _units(dataset: Any, format: str, rows_per_epoch: int | None, where: str) -> list[_Unit]:
    """Every worker's list of units, in path order: row groups for Parquet, whole files otherwise."""
    fragments = sorted(dataset.get_fragments(), key=lambda fragment: fragment.path)
    units: list[_Unit] = []
    offset = 0
    for file_index, fragment in enumerate(fragments):
        pieces: list[tuple[Any, int | None]]
        try:
            if format == "parquet":
                pieces = [(piece, piece.row_groups[0].num_rows) for piece in fragment.split_by_row_group()]
            else:
                pieces = [(fragment, fragment.count_rows() if rows_per_epoch is not None else None)]
        except Exception as error:
            raise FileSourceError(f"{where}: cannot read {fragment.path!r}: {error}") from error
        for piece, rows in pieces:
            units.append(_Unit(file_index, fragment.path, piece, rows, offset if rows is not None else None))
            offset += rows or 0
    return units


def _check_schema(dataset: Any, unit: _Unit, where: str) -> None:
    try:
        physical = unit.fragment.physical_schema
    except Exception as error:
        raise FileSourceError(f"{where}: cannot read {unit.path!r}: {error}") from error
    expected = dataset.schema
    for field in physical:
        index = expected.get_field_index(field.name)
        if index < 0:
            raise FileSourceError(
                f"{where}: {unit.path!r} has column {field.name!r} ({field.type}) that the first file "
                f"{dataset.files[0]!r} does not have; every file must have the same schema ({expected.names})"
            )
        if not expected.field(index).type.equals(field.type):
            raise FileSourceError(
                f"{where}: {unit.path!r} has column {field.name!r} of type {field.type}, but the first file "
                f"{dataset.files[0]!r} has {expected.field(index).type}; every file must have the same schema"
            )


class _FileReader:
    """The source's logic: reads one record batch per activation and sends it at its time."""

    def __init__(
        self,
        capability: Capability,
        info: OperatorInfo,
        dataset: Any,
        units: list[_Unit],
        timing: Callable[[_Unit, Any, int], Iterator[tuple[int, Any]]],
        first_time: Callable[[_Unit], int] | None,
        columnar: bool,
        batch_rows: int,
        where: str,
    ) -> None:
        self.capability: Capability | None = capability
        self.info = info
        self.dataset = dataset
        self.units = units
        self.timing = timing
        self.first_time = first_time
        self.columnar = columnar
        self.batch_rows = batch_rows
        self.where = where
        self.position = 0
        self.batches: Iterator[Any] | None = None
        self.row = 0

    def __call__(self, output: OperatorOutput) -> None:
        capability = self.capability
        if capability is None:
            return
        if self.position >= len(self.units):
            capability.drop()
            self.capability = None
            return
        unit = self.units[self.position]
        if self.batches is None:
            if self.first_time is not None and capability.time != self.first_time(unit):
                capability.downgrade(self.first_time(unit))
            self.batches = self._read(unit)
            self.row = 0
        # an error reading it names the file and the earliest epoch still to come (not "time None")
        self.info.position = f"reading {unit.path!r} (row {self.row}, epoch {capability.time!r} or later)"
        try:
            batch = next(self.batches, None)
        except FileSourceError:
            raise
        except Exception as error:
            raise FileSourceError(f"{self.where}: cannot read {unit.path!r}: {error}") from error
        if batch is None:
            self.position += 1
            self.batches = None
        elif batch.num_rows:
            for time, piece in self.timing(unit, batch, self.row):
                records = piece if self.columnar else piece.to_pylist()
                output.session(capability, time).give_batch(records)
            self.row += batch.num_rows
        self.info.activate()

    def _read(self, unit: _Unit) -> Iterator[Any]:
        try:
            yield from unit.fragment.to_batches(schema=self.dataset.schema, batch_size=self.batch_rows)
        except Exception as error:
            raise FileSourceError(f"{self.where}: cannot read {unit.path!r}: {error}") from error


def read_files(
    scope: ScopeBuilder,
    path: str | os.PathLike[str],
    *,
    format: str = "parquet",
    columnar: bool = False,
    rows_per_epoch: int | None = None,
    time_column: str | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    name: str = "ReadFiles",
) -> Stream:
    """A stream of the rows of every ``format`` file under ``path`` (a file or a directory).

    See the module documentation for how files are shared among workers and
    how times are chosen.  A missing path, a directory without such files, a
    file whose schema differs from the first file's, or an unreadable file is
    a :class:`~runtime.errors.FileSourceError` naming the file; schemas are
    checked when the dataflow is built, reading errors when they happen.
    """
    where = f"file source {name!r} in scope {'/'.join(scope.path)} on worker {scope.index}"
    if rows_per_epoch is not None and time_column is not None:
        raise ConfigurationError(f"{where}: give rows_per_epoch or time_column, not both")
    if rows_per_epoch is not None and (rows_per_epoch.__class__ is not int or rows_per_epoch < 1):
        raise ConfigurationError(f"{where}: rows_per_epoch must be an int >= 1, got {rows_per_epoch!r}")
    if batch_rows.__class__ is not int or batch_rows < 1:
        raise ConfigurationError(f"{where}: batch_rows must be an int >= 1, got {batch_rows!r}")
    arrow_format = _format(format)
    dataset = _dataset(path, arrow_format, where)
    if time_column is not None:
        field_index = dataset.schema.get_field_index(time_column)
        if field_index < 0:
            raise FileSourceError(
                f"{where}: time_column {time_column!r} is not a column of {dataset.files[0]!r} ({dataset.schema.names})"
            )
        pa, _ = _pyarrow()
        if not pa.types.is_integer(dataset.schema.field(field_index).type):
            raise FileSourceError(
                f"{where}: time_column {time_column!r} has type {dataset.schema.field(field_index).type}, "
                "but times must be integers"
            )
    units = _units(dataset, arrow_format, rows_per_epoch, where)
    mine = units[scope.index :: scope.peers]
    for unit in mine:
        _check_schema(dataset, unit, where)
    timing: Callable[[_Unit, Any, int], Iterator[tuple[int, Any]]]
    first_time: Callable[[_Unit], int] | None
    if time_column is not None:
        column = time_column
        timing, first_time = (lambda unit, batch, row: _by_column(batch, column, where, unit)), None
    elif rows_per_epoch is not None:
        size = rows_per_epoch
        timing = lambda unit, batch, row: _by_rows(batch, (unit.first_row or 0) + row, size)  # noqa: E731
        first_time = lambda unit: (unit.first_row or 0) // size  # noqa: E731
    else:
        timing = lambda unit, batch, row: iter([(unit.file_index, batch)])  # noqa: E731
        first_time = lambda unit: unit.file_index  # noqa: E731

    def constructor(capability: Capability, info: OperatorInfo) -> Callable[[OperatorOutput], None]:
        return _FileReader(capability, info, dataset, mine, timing, first_time, columnar, batch_rows, where)

    return scope.source(name, constructor)


def _by_rows(batch: Any, first_row: int, size: int) -> Iterator[tuple[int, Any]]:
    """Slices of ``batch``, whose first row is row ``first_row`` of the dataset, at epoch ``row // size``."""
    start = 0
    while start < batch.num_rows:
        row = first_row + start
        epoch = row // size
        length = min(batch.num_rows - start, (epoch + 1) * size - row)
        yield epoch, batch.slice(start, length)
        start += length


def _by_column(batch: Any, column: str, where: str, unit: _Unit) -> Iterator[tuple[int, Any]]:
    """The rows of ``batch`` grouped by the integer time in ``column``, in time order."""
    import numpy as np

    values = batch.column(column)
    if values.null_count:
        raise FileSourceError(f"{where}: {unit.path!r} has rows whose time_column {column!r} is null")
    times = values.to_numpy(zero_copy_only=False)
    if times.size and times.min() < 0:
        raise FileSourceError(f"{where}: {unit.path!r} has a negative time {int(times.min())} in {column!r}")
    order = np.argsort(times, kind="stable")
    sorted_times = times[order]
    bounds = np.flatnonzero(np.diff(sorted_times)) + 1
    for start, end in zip(np.concatenate(([0], bounds)), np.concatenate((bounds, [len(order)])), strict=True):
        yield int(sorted_times[start]), batch.take(order[start:end])


# ---------------------------------------------------------------------- the sink


def write_files(
    stream: Stream,
    directory: str | os.PathLike[str],
    *,
    format: str = "parquet",
    columns: Sequence[str] | None = None,
    name: str = "WriteFiles",
) -> None:
    """Write ``stream`` as one file per complete epoch and worker under ``directory``.

    Batches may be Arrow record batches or tables, NumPy structured arrays,
    lists of dicts, or lists of tuples (then ``columns`` names their fields).
    An epoch's file is written once the epoch is complete at the sink, under a
    hidden name, then renamed into place (see the module documentation).  A
    record that does not fit the format is a :class:`~runtime.errors.FileSinkError`
    naming the file; the hidden partial file is removed.
    """
    pa, _ = _pyarrow()
    arrow_format = _format(format)
    root = Path(directory)
    where = f"file sink {name!r} in scope {'/'.join(stream.scope.path)} on worker {stream.scope.index}"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise FileSinkError(f"{where}: cannot create the directory {str(root)!r}: {error}") from error
    worker = stream.scope.index
    pending: dict[Any, list[Any]] = {}

    def logic(input: OperatorInput) -> None:
        for time, batch in input.batches():
            pending.setdefault(time, []).append(batch)
        frontier = input.frontier
        for time in [time for time in pending if not frontier.less_equal(time)]:
            table = _table(pa, pending.pop(time), columns, where, time)
            target = root / f"epoch={time}" / f"part-{worker:05d}{SUFFIXES[arrow_format]}"
            _write_atomically(table, target, arrow_format, where)

    stream.sink(Pipeline, name, logic)


def _table(pa: Any, batches: list[Any], columns: Sequence[str] | None, where: str, time: Any) -> pa.Table:
    tables = []
    try:
        for batch in batches:
            if isinstance(batch, pa.Table):
                tables.append(batch)
            elif isinstance(batch, pa.RecordBatch):
                tables.append(pa.Table.from_batches([batch]))
            elif getattr(batch, "dtype", None) is not None and batch.dtype.names:
                tables.append(pa.table({field: batch[field] for field in batch.dtype.names}))
            elif batch and isinstance(batch[0], dict):
                tables.append(pa.Table.from_pylist(list(batch)))
            elif columns is not None:
                tables.append(pa.Table.from_pylist([dict(zip(columns, record, strict=True)) for record in batch]))
            elif len(batch):
                raise FileSinkError(
                    f"{where}: at time {time!r} the records are {type(batch[0]).__name__}s; send dicts or Arrow "
                    "batches, or give columns=[...] to name the fields of tuples"
                )
        return pa.concat_tables(tables, promote_options="default") if tables else pa.table({})
    except FileSinkError:
        raise
    except Exception as error:
        raise FileSinkError(f"{where}: at time {time!r} the records do not form one table: {error}") from error


def _write_atomically(table: Any, target: Path, format: str, where: str) -> None:
    """Write ``table`` to a hidden file beside ``target``, flush it to disk, then rename it to ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    hidden = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        if format == "parquet":
            import pyarrow.parquet as pq  # type: ignore[import-untyped]

            pq.write_table(table, hidden)
        elif format == "csv":
            import pyarrow.csv as pcsv  # type: ignore[import-untyped]

            pcsv.write_csv(table, hidden)
        else:
            with open(hidden, "w", encoding="utf-8") as lines:
                for row in table.to_pylist():
                    lines.write(json.dumps(row, default=str))
                    lines.write("\n")
        with open(hidden, "rb") as written:
            os.fsync(written.fileno())
        os.replace(hidden, target)
    except BaseException as error:
        hidden.unlink(missing_ok=True)
        if isinstance(error, Exception) and not isinstance(error, FileSinkError):
            raise FileSinkError(f"{where}: cannot write {str(target)!r}: {error}") from error
        raise
