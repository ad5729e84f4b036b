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

Each worker lists the files, and (``rows_per_epoch``) counts their rows, when it
builds the dataflow, and each process builds its own: a file added, removed or
rewritten between two workers' builds would give them different lists to share
out (a file read twice or not at all) or different row offsets (records in the
wrong epochs).  So with several workers the workers agree first, inside the
dataflow: ``List<name>`` sends every worker this worker's listing (each file,
by its path under the source's directory, and its units' row counts) and the
schema it took from the first file, at the source's first time, and the reader
compares each listing that reaches it with its own.  The listings' input is connected to the reader's output, so nothing
the source sends can complete, on any worker, until every worker has compared
every listing with its own and found them equal; the reader reads on meanwhile.
A difference is a :class:`~runtime.errors.FileSourceError` on every worker
(each compares all listings with its own) naming the files and what each of the
two workers counted.  Once they agree, a unit whose rows differ from the count
when it is read is refused as well (the file changed while the dataflow ran).
With one worker there is nothing to agree on, and no ``List<name>`` operator.

:func:`write_files` (in :mod:`runtime.file_sink`) writes what reaches it as
one file per epoch and worker, ``DIRECTORY/epoch=T/part-WWWWW.EXT``.  Each
worker writes its part of epoch ``T`` into the hidden staging directory
``DIRECTORY/_pytimely_staging/epoch=T/`` once ``T`` is complete at its sink;
once every worker's part is written, one worker renames that directory to
``DIRECTORY/epoch=T``.  A reader therefore sees an epoch whole or not at all,
whatever crashes.  The directory reads back with ``pyarrow.dataset.dataset(DIRECTORY,
partitioning="hive")``.

A file that lacks a column of the first file, has a column the first file lacks
or has one of another type is refused, naming it.  A JSON Lines record nested
more than :data:`~runtime.json_depth.MAX_JSON_DEPTH` arrays and objects deep is
refused, naming its file and line, before pyarrow's parser reads the file.

``pyarrow`` is needed (``pip install pyarrow``); it is imported when a file
source or sink is built.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.errors import ConfigurationError, FileSourceError, FileValueError
from runtime.file_formats import FORMATS, SUFFIXES, arrow_format, pyarrow_modules
from runtime.file_schema import is_blank, source_schema
from runtime.file_sink import STAGING, write_files
from runtime.json_depth import MAX_JSON_DEPTH, check_json_depth
from scopes.arrow_values import CONVERTIBLE, Unconvertible, unconvertible_error
from scopes.capability import Capability
from scopes.contracts import Broadcast
from scopes.handles import OperatorOutput
from scopes.operator import OperatorInfo
from scopes.operator_builder import OperatorBuilder
from scopes.ports import InputPort
from scopes.sources import programmable
from scopes.state_registry import registry_of

if TYPE_CHECKING:
    import pyarrow.dataset as ds  # type: ignore[import-untyped]

    from scopes.builder import ScopeBuilder
    from scopes.stream import Stream

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "FORMATS",
    "MAX_JSON_DEPTH",
    "STAGING",
    "SUFFIXES",
    "read_files",
    "write_files",
]

DEFAULT_BATCH_ROWS = 65_536
"""Rows per record batch a source reads (and sends) at a time."""


# ---------------------------------------------------------------------- the source


@dataclass(frozen=True)
class _Unit:
    """One piece of work: a whole file, or one row group of a Parquet file."""

    file_index: int
    path: str
    fragment: Any
    rows: int | None
    first_row: int | None


def _dataset(path: str | os.PathLike[str], format: str, where: str, scanned: set[str]) -> ds.Dataset:
    """The dataset of the files under ``path`` in path order; its schema is the first file's.

    The files are listed before any is opened, so that a JSON Lines file is
    checked (and added to ``scanned``) before pyarrow's parser reads it.
    """
    pa, dataset_module = pyarrow_modules()
    location = Path(path)
    if not location.exists():
        if location.is_symlink():
            raise FileSourceError(f"{where}: {str(location)!r} is a symbolic link to nothing (or in a loop)")
        raise FileSourceError(f"{where}: no such file or directory: {str(location)!r}")
    if not location.is_file() and not location.is_dir():
        raise FileSourceError(
            f"{where}: {str(location)!r} is neither a file nor a directory (a FIFO, a socket or a device); "
            "give a file or a directory of files"
        )
    try:
        files = sorted(dataset_module.dataset(str(location), format=format, schema=pa.schema([])).files)
    except Exception as error:
        raise FileSourceError(f"{where}: cannot list {str(location)!r}: {error}") from error
    if not files:
        raise FileSourceError(
            f"{where}: {str(location)!r} holds no {format} files (names starting with . or _ are skipped)"
        )
    if format == "json":
        check_json_depth(files[0], where)
        scanned.add(files[0])

    def check(file: str) -> None:  # a file parsed for its schema is bounded first, whichever it is
        if format == "json":
            _check_depths([file], scanned, where)

    schema = source_schema(pa, dataset_module, files, format, where, check)
    try:
        return dataset_module.dataset(files, format=format, schema=schema if schema is not None else pa.schema([]))
    except Exception as error:  # pyarrow raises several kinds while it lists the files
        raise FileSourceError(f"{where}: cannot open {files[0]!r} as {format}: {error}") from error


def _check_depths(paths: list[str], scanned: set[str], where: str) -> None:
    """Bound the nesting of the JSON Lines files in ``paths`` not yet scanned (see :mod:`runtime.json_depth`)."""
    for path in paths:
        if path not in scanned:
            check_json_depth(path, where)
            scanned.add(path)


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
            elif is_blank(fragment.path, format):  # no records: its epoch is empty
                pieces = [(None, 0 if rows_per_epoch is not None else None)]
            else:
                pieces = [(fragment, fragment.count_rows() if rows_per_epoch is not None else None)]
        except Exception as error:
            raise FileSourceError(f"{where}: cannot read {fragment.path!r}: {error}") from error
        for piece, rows in pieces:
            units.append(_Unit(file_index, fragment.path, piece, rows, offset if rows is not None else None))
            offset += rows or 0
    return units


Listing = list[list[Any]]
"""What one worker listed and counted when it built the dataflow: ``[[name, [rows, ...]], ...]``, each file in path
order by its path under the source's directory, with the rows of each of its units (``None``: not counted)."""


def _listing(units: list[_Unit], base: str) -> Listing:
    """This worker's :data:`Listing` of ``units``, the files' names relative to ``base``.

    Relative names let workers that reach the same directory by another path agree.
    """
    listing: Listing = []
    for unit in units:
        name = os.path.relpath(unit.path, base)
        if listing and listing[-1][0] == name:
            listing[-1][1].append(unit.rows)
        else:
            listing.append([name, [unit.rows]])
    return listing


class _Announcer:
    """The logic of ``List<name>``: sends this worker's listing to every worker once, at its capability's time."""

    def __init__(self, capability: Capability, worker: int, schema: str, listing: Listing) -> None:
        self.capability: Capability | None = capability
        self.record: tuple[int, str, Listing] | None = (worker, schema, listing)

    def resume(self, boundary: int) -> None:
        """Resumed from a checkpoint at epoch ``boundary``: send at that epoch, not before it."""
        if boundary and self.capability is not None and self.capability.time < boundary:
            self.capability.downgrade(boundary)

    def __call__(self, output: OperatorOutput) -> None:
        capability, record = self.capability, self.record
        if capability is None or record is None:
            return
        output.session(capability).give(record)
        capability.drop()
        self.capability = self.record = None


class _Agreement:
    """Compares this worker's listing with every worker's as they arrive; a difference is a FileSourceError.

    The reader's output is connected to the listings' input, so no time at or
    after the listings' (the source's first time) can complete downstream while
    a listing is on its way or not yet compared on any worker.
    """

    def __init__(
        self,
        schema: str,
        listing: Listing,
        worker: int,
        peers: int,
        base: str,
        rows_per_epoch: int | None,
        where: str,
    ) -> None:
        self.schema = schema
        """The schema this worker took from the first file, which every worker's batches carry."""
        self.listing = listing
        self.worker = worker
        self.peers = peers
        self.base = base
        self.rows_per_epoch = rows_per_epoch
        self.where = where
        self.heard = 0
        self.waiting = True

    def hear(self, listings: InputPort, info: OperatorInfo) -> None:
        """Compare the listings that have arrived with this worker's own."""
        differing: tuple[int, Listing] | None = None
        schema: tuple[int, str] | None = None
        while (message := listings.pull()) is not None:
            for sender, their_schema, theirs in message[1]:
                self.heard += 1
                if schema is None and their_schema != self.schema:
                    schema = (sender, their_schema)
                if differing is None and theirs != self.listing:
                    differing = (sender, theirs)
        if differing is not None:
            info.position = "comparing the files each worker listed and counted"
            raise self._disagreement(*differing)
        if schema is not None:
            info.position = "comparing the schema each worker took from the first file"
            raise self._other_schema(*schema)
        if self.heard >= self.peers:
            self.waiting = False
            self.listing = []  # agreed: nothing more to compare it with

    def _other_schema(self, them: int, theirs: str) -> FileSourceError:
        return FileSourceError(
            f"{self.where}: the workers took different schemas from the first file when they built the dataflow "
            f"(it changed meanwhile): worker {self.worker} has ({_one_line(self.schema)}) but worker {them} has "
            f"({_one_line(theirs)}), so their batches would not have the same columns. Nothing this source sent "
            "has completed; do not change input files while a dataflow that reads them is being built; rerun"
        )

    def _disagreement(self, them: int, theirs: Listing) -> FileSourceError:
        me = self.worker
        mine = {name: rows for name, rows in self.listing}
        others = {name: rows for name, rows in theirs}
        found: list[str] = []
        listed = shared = counted = False  # a file listed by one only; units shared out differently; rows differ
        for name in sorted(mine.keys() | others.keys()):
            ours, their = mine.get(name), others.get(name)
            if ours == their:
                continue
            shown = repr(os.path.join(self.base, name))
            if ours is None or their is None:
                listed = shared = True
                having, lacking = (them, me) if ours is None else (me, them)
                found.append(f"{shown} is listed on worker {having} but not on worker {lacking}")
                continue
            if len(ours) != len(their):  # row groups: the units to share out differ
                shared = True
            if len(ours) == len(their) or sum(r or 0 for r in ours) != sum(r or 0 for r in their):
                counted = True
            detailed = _rows_text(ours, False) == _rows_text(their, False)
            found.append(
                f"{shown} has {_rows_text(ours, detailed)} on worker {me} but {_rows_text(their, detailed)} on "
                f"worker {them}"
            )
        if not found:  # the same files and counts in another order: path order differs between the workers
            shared = True
            found.append(f"worker {me} and worker {them} listed the same files in another order")
        effects = []
        if counted and self.rows_per_epoch is not None:
            effects.append("every row's epoch is numbered from these counts, so records would land in wrong epochs")
        if shared:
            effects.append(
                "each worker reads its share of the units it listed, so rows could be read twice or not at all"
            )
        if not effects:
            effects.append("a file changed while the workers built the dataflow")
        shown_found = "; ".join(found[:5]) + (f"; and {len(found) - 5} more files" if len(found) > 5 else "")
        mode = " with rows_per_epoch" if self.rows_per_epoch is not None else ""
        return FileSourceError(
            f"{self.where}: the workers did not list and count the same files when they built the dataflow: "
            f"{shown_found} ({'; '.join(effects)}). Nothing this source sent has completed; do not "
            f"{'add, remove or ' if listed else ''}change input files while a dataflow that reads them{mode} is "
            "being built; rerun"
        )


def _one_line(schema: str) -> str:
    """A schema's text on one line, bounded for a message."""
    text = ", ".join(line.strip() for line in schema.splitlines() if line.strip())
    return text if len(text) <= 300 else text[:297] + "..."


def _rows_text(rows: list[int | None], detailed: bool) -> str:
    """A file's rows as a message gives them: ``10 rows``, ``10 rows in 3 row groups`` (``detailed``: ``(4, 4, 2)``)."""
    counts = [count for count in rows if count is not None]
    if len(counts) < len(rows):
        return "rows not counted"
    text = f"{sum(counts)} rows" if len(counts) == 1 else f"{sum(counts)} rows in {len(counts)} row groups"
    if detailed and len(counts) > 1:
        text += f" ({', '.join(str(count) for count in counts[:8])}{', ...' if len(counts) > 8 else ''})"
    return text


def _check_schema(dataset: Any, unit: _Unit, where: str) -> None:
    """Refuse ``unit``'s file if its columns differ from the source's, or one has another type (``null`` is any type,
    :mod:`runtime.file_schema`)."""
    if unit.fragment is None:  # a blank file: no columns to differ
        return
    try:
        physical = unit.fragment.physical_schema
    except Exception as error:
        raise FileSourceError(f"{where}: cannot read {unit.path!r}: {error}") from error
    expected = dataset.schema
    for field in expected:
        if physical.get_field_index(field.name) < 0:
            raise FileSourceError(
                f"{where}: {unit.path!r} lacks column {field.name!r} ({field.type}) that the first file "
                f"{dataset.files[0]!r} has; every file must have the same schema ({expected.names})"
            )
    for field in physical:
        index = expected.get_field_index(field.name)
        if index < 0:
            raise FileSourceError(
                f"{where}: {unit.path!r} has column {field.name!r} ({field.type}) that the first file "
                f"{dataset.files[0]!r} does not have; every file must have the same schema ({expected.names})"
            )
        if not expected.field(index).type.equals(field.type) and str(field.type) != "null":
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
        self.resume_at = 0
        self.timing_is_per_file = False

    def resume(self, boundary: int) -> None:
        """Resumed from a checkpoint at epoch ``boundary``: send only rows of that epoch and later."""
        self.resume_at = boundary
        if boundary and self.capability is not None and self.capability.time < boundary:
            self.capability.downgrade(boundary)
        if boundary and self.first_time is not None and self.timing_is_per_file:
            self.units = [unit for unit in self.units if unit.file_index >= boundary]

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
            if self.first_time is not None and capability.time < self.first_time(unit):
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
            self._check_count(unit, self.row, ended=True)
            self.position += 1
            self.batches = None
        elif batch.num_rows:
            self._check_count(unit, self.row + batch.num_rows, ended=False)
            for time, piece in self.timing(unit, batch, self.row):
                if time < self.resume_at:  # in the checkpoint this run resumed from
                    continue
                if self.columnar:
                    records = piece
                else:
                    try:
                        records = piece.to_pylist()
                    except Exception as error:  # a value Python cannot hold: name it (found only now)
                        raise self._unconvertible(unit, batch, piece, error) from error
                output.session(capability, time).give_batch(records)
            self.row += batch.num_rows
        self.info.activate()

    def _unconvertible(self, unit: _Unit, batch: Any, piece: Any, error: Exception) -> FileSourceError:
        """The error for a ``piece`` of ``batch`` (read from ``unit`` after ``self.row`` rows) that ``to_pylist``
        refused: a :class:`FileValueError` naming the file, the row (for Parquet, the row group and the byte
        offset of the column chunk), the column and the value.  ``batch`` is searched, in file order, so that the
        row is the file's; only a failure it does not repeat falls back to the piece, then to the bare error."""
        advice = (
            "read the files with columnar=True, which keeps Arrow's values (map_batch and the columnar operators "
            f"take them), or {CONVERTIBLE}"
        )
        where = f"{self.where}: {unit.path!r}"
        failure = unconvertible_error(
            batch, error, where, advice, FileValueError, lambda found: self._row_text(unit, batch, found)
        )
        if failure is None:
            failure = unconvertible_error(piece, error, f"{where} (a row of a batch it read)", advice, FileValueError)
        if failure is None:
            return FileSourceError(f"{self.where}: cannot make records of {unit.path!r}: {error}")
        return failure

    def _row_text(self, unit: _Unit, batch: Any, found: Unconvertible) -> tuple[int, str]:
        """Where row ``found.row`` of ``batch`` is in ``unit``'s file: its number there, and for the message
        ``row 2 of the file (counting from 0`` and, for Parquet, ``; row 0 of row group 1, column chunk at byte
        offset 4)`` (the row in the row group, if the file's metadata cannot be read again)."""
        row = self.row + found.row
        groups = getattr(unit.fragment, "row_groups", None)
        if not groups:
            return row, f"row {row} of the file (counting from 0)"
        try:
            import pyarrow.parquet as parquet  # type: ignore[import-untyped]

            group = groups[0].id
            with parquet.ParquetFile(unit.path) as file:
                metadata = file.metadata
            before = sum(metadata.row_group(index).num_rows for index in range(group))
            chunk = ""
            chunks = metadata.row_group(group)
            for index in range(chunks.num_columns):  # a flat column is one column chunk, by its name
                if chunks.column(index).path_in_schema == found.column:
                    chunk = f", column chunk at byte offset {chunks.column(index).data_page_offset}"
            return (
                before + row,
                f"row {before + row} of the file (counting from 0; row {row} of row group {group}{chunk})",
            )
        except Exception:  # noqa: BLE001 - the file changed or is unreadable: the row in the unit still holds
            return row, f"row {row} of row group {groups[0].id} (counting from 0)"

    def _check_count(self, unit: _Unit, rows: int, ended: bool) -> None:
        """Refuse a unit whose rows were counted when the dataflow was built (``rows_per_epoch``) if it now holds
        ``rows`` rows, more than then, or (``ended``) another number: each row's epoch came from that count."""
        if unit.rows is not None and (rows > unit.rows or (ended and rows != unit.rows)):
            raise FileSourceError(
                f"{self.where}: {unit.path!r} changed while the dataflow ran: it held {unit.rows} rows when the "
                f"dataflow was built and now holds {'more' if rows > unit.rows else rows}, so rows_per_epoch "
                "cannot number its rows; do not change input files while they are read"
            )

    def _read(self, unit: _Unit) -> Iterator[Any]:
        """The unit's batches, each checked whole: a string that is not UTF-8 (which pyarrow's JSON and Parquet
        readers pass on) is refused here, not later as a ``UnicodeDecodeError`` or by a downstream operator."""
        if unit.fragment is None:  # a blank file: no rows
            return
        try:
            if hasattr(unit.fragment, "row_groups"):  # a Parquet row group
                batches = _row_group_batches(self.dataset.schema, unit, self.batch_rows)
            else:
                batches = unit.fragment.to_batches(schema=self.dataset.schema, batch_size=self.batch_rows)
            for batch in batches:
                batch.validate(full=True)
                yield batch
        except Exception as error:
            raise FileSourceError(f"{self.where}: cannot read {unit.path!r}: {error}") from error


def _row_group_batches(schema: Any, unit: _Unit, batch_rows: int) -> Iterator[Any]:
    """The batches of a Parquet unit (one row group) in ``schema``, decoded ``batch_rows`` rows at a time.

    ``pyarrow.dataset`` decodes a whole row group before it yields its first batch, and a row group's values may
    be run-length encoded: a 25 KB file of one row group of 4 million rows had it allocate 50 MB, and the row
    count a few bytes declare is unbounded.  ``ParquetFile.iter_batches`` decodes as it goes (1 MB there).
    """
    import pyarrow.parquet as parquet

    pa, _ = pyarrow_modules()
    groups = [group.id for group in unit.fragment.row_groups]
    with parquet.ParquetFile(unit.path) as file:
        for batch in file.iter_batches(
            batch_size=batch_rows, row_groups=groups, columns=schema.names, use_threads=False
        ):
            columns = []
            for field in schema:  # a column of nulls only in this file (type null) takes the source's type
                column = batch.column(batch.schema.get_field_index(field.name))
                columns.append(column if column.type.equals(field.type) else column.cast(field.type))
            yield pa.RecordBatch.from_arrays(columns, schema=schema)


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
    file whose schema differs from the first file's (a column more, a column
    less, or another type), a JSON Lines record nested too deep, or an
    unreadable file is a :class:`~runtime.errors.FileSourceError` naming the
    file; schemas and nesting are checked when the dataflow is built (each
    worker checks the files it reads), reading errors when they happen.  Workers
    that listed or counted the files differently when they built the dataflow
    (a file changed meanwhile) all fail with a ``FileSourceError`` naming the
    files, before any epoch of the source completes.
    """
    where = f"file source {name!r} in scope {'/'.join(scope.path)} on worker {scope.index}"
    if rows_per_epoch is not None and time_column is not None:
        raise ConfigurationError(f"{where}: give rows_per_epoch or time_column, not both")
    if rows_per_epoch is not None and (rows_per_epoch.__class__ is not int or rows_per_epoch < 1):
        raise ConfigurationError(f"{where}: rows_per_epoch must be an int >= 1, got {rows_per_epoch!r}")
    if batch_rows.__class__ is not int or batch_rows < 1:
        raise ConfigurationError(f"{where}: batch_rows must be an int >= 1, got {batch_rows!r}")
    file_format = arrow_format(format)
    scanned: set[str] = set()
    dataset = _dataset(path, file_format, where, scanned)
    if time_column is not None:
        field_index = dataset.schema.get_field_index(time_column)
        if field_index < 0:
            raise FileSourceError(
                f"{where}: time_column {time_column!r} is not a column of {dataset.files[0]!r} ({dataset.schema.names})"
            )
        pa, _ = pyarrow_modules()
        if not pa.types.is_integer(dataset.schema.field(field_index).type):
            raise FileSourceError(
                f"{where}: time_column {time_column!r} has type {dataset.schema.field(field_index).type}, "
                "but times must be integers"
            )
    if file_format == "json" and rows_per_epoch is not None:  # every file's rows are counted
        _check_depths(dataset.files, scanned, where)
    units = _units(dataset, file_format, rows_per_epoch, where)
    mine = units[scope.index :: scope.peers]
    if file_format == "json":
        _check_depths([unit.path for unit in mine], scanned, where)
    for unit in mine:
        _check_schema(dataset, unit, where)
    timing, first_time = _timing(rows_per_epoch, time_column, where)

    registry = registry_of(scope)

    def constructor(capability: Capability, info: OperatorInfo) -> Callable[[OperatorOutput], None]:
        reader = _FileReader(capability, info, dataset, mine, timing, first_time, columnar, batch_rows, where)
        reader.timing_is_per_file = rows_per_epoch is None and time_column is None
        if registry is not None:
            registry.on_settle(reader.resume)
        return reader

    if scope.peers == 1:  # one worker lists the files once: nothing to agree on
        return programmable(scope, name, constructor)
    location = Path(path)
    base = str(location if location.is_dir() else location.parent)
    agreement = _Agreement(
        str(dataset.schema), _listing(units, base), scope.index, scope.peers, base, rows_per_epoch, where
    )
    return _agreeing(scope, name, constructor, agreement)


Timing = Callable[[_Unit, Any, int], Iterator[tuple[int, Any]]]
"""``timing(unit, batch, row)``: the ``(time, rows)`` pieces of a batch read from ``unit`` at its row ``row``."""


def _timing(
    rows_per_epoch: int | None, time_column: str | None, where: str
) -> tuple[Timing, Callable[[_Unit], int] | None]:
    """How rows get their times in the chosen mode, and each unit's first time (``None``: any unit, any time)."""
    if time_column is not None:
        column = time_column
        return (lambda unit, batch, row: _by_column(batch, column, where, unit)), None
    if rows_per_epoch is not None:
        size = rows_per_epoch
        return (
            lambda unit, batch, row: _by_rows(batch, (unit.first_row or 0) + row, size),
            lambda unit: (unit.first_row or 0) // size,
        )
    return (lambda unit, batch, row: iter([(unit.file_index, batch)])), (lambda unit: unit.file_index)


def _agreeing(
    scope: ScopeBuilder,
    name: str,
    constructor: Callable[[Capability, OperatorInfo], Callable[[OperatorOutput], None]],
    agreement: _Agreement,
) -> Stream:
    """The reader ``constructor`` makes, as an operator that also compares every worker's listing with this one's.

    ``List<name>`` sends this worker's listing to every worker (a broadcast) at
    the source's first time.  The reader reads it as an input, connected to its
    output: until every worker has compared every listing with its own, that
    input holds every time from the first one back, downstream of every worker's
    reader, whatever the readers have sent.  The listings are compared as they
    arrive, before the reader reads on; a difference fails the worker, and every
    worker hears of one (each compares all listings with its own).
    """
    registry = registry_of(scope)

    def announcer(capability: Capability, info: OperatorInfo) -> Callable[[OperatorOutput], None]:
        logic = _Announcer(capability, scope.index, agreement.schema, agreement.listing)
        if registry is not None:
            registry.on_settle(logic.resume)
        return logic

    listings = programmable(scope, f"List{name}", announcer)
    builder = OperatorBuilder(scope, name, reads=listings)
    port = builder.new_input(listings, Broadcast)
    _, stream = builder.new_output()
    operator = builder.build(None)
    _, outputs = builder.handles(operator)
    info = builder.info
    reader = constructor(builder.initial_capabilities()[0], info)
    output = outputs[0]

    def logic() -> None:
        if agreement.waiting:
            agreement.hear(port, info)
        reader(output)

    operator.set_logic(logic, outputs)
    return stream


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
