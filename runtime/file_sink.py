"""The file sink: every worker's part of an epoch is written out of sight, then the whole epoch appears at once.

``DIRECTORY`` holds committed epochs, ``DIRECTORY/epoch=T/part-WWWWW.EXT``, and
the staging directory ``DIRECTORY/_pytimely_staging/`` (its name starts with
``_``, so ``pyarrow.dataset``, Spark and :func:`runtime.files.read_files` skip
it).  The sink is two operators:

1. ``WriteFiles`` (on every worker, no exchange) keeps a capability at each time
   ``T`` it has records for.  Once its input frontier has passed ``T`` it writes
   its part to ``_pytimely_staging/epoch=T/`` (under a hidden name, flushed to
   disk, then renamed), sends a report of the part on, and only then drops the
   capability.
2. ``CommitFiles`` receives every report on one worker, which commits epochs
   in time order.  Its input frontier passes ``T`` only when every worker's
   ``WriteFiles`` has dropped its capability at ``T``, that is, when every part
   of ``T`` is written and reported.  It then checks that the staging directory
   holds exactly the reported parts, flushes it, and renames it to ``epoch=T``
   in one step.  Its output carries the committed directory's path at ``T``.

A crash at any moment leaves each epoch either committed whole or invisible,
and (for integer times) the committed epochs are a prefix of those with records.
A directory holding another run's epochs (or a crashed run's staging) is
refused when the dataflow is built, unless ``overwrite=True`` (then worker 0
removes them first, before any worker can write).  Under a checkpoint, the store
records that its job writes the directory, so a run resumed at epoch 0 (killed
before its first checkpoint) writes its own earlier epochs again.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.communication.arrow_validity import refuse_invalid
from runtime.errors import ConfigurationError, FileSinkError, FileSinkValueError, InvalidArrowBatch
from runtime.file_formats import SUFFIXES, arrow_format, pyarrow_module
from scopes.arrow_values import (
    CONVERTIBLE,
    Unconvertible,
    find_unconvertible,
    find_wrapped_time,
    refuse_wrapped_times,
    unconvertible_error,
)
from scopes.capability import Capability
from scopes.contracts import Exchange, Pipeline
from scopes.generic_operators import unary
from scopes.handles import OperatorInput, OperatorOutput
from scopes.operator import OperatorInfo
from scopes.state_registry import registry_of

if TYPE_CHECKING:
    import pyarrow as pa  # type: ignore[import-untyped]

    from scopes.stream import Stream

STAGING = "_pytimely_staging"
"""The staging directory inside the sink's directory, where epochs are written before they are committed."""

Report = tuple[str, int, str, int]
"""What ``WriteFiles`` tells ``CommitFiles`` of one part: ``(epoch directory name, worker, file name, rows)``."""


def write_files(
    stream: Stream,
    directory: str | os.PathLike[str],
    *,
    format: str = "parquet",
    columns: Sequence[str] | None = None,
    partition: str = "epoch",
    overwrite: bool = False,
    schema: pa.Schema | None = None,
    name: str = "WriteFiles",
) -> Stream:
    """Write ``stream`` as one file per epoch and worker, ``directory/PARTITION=T/part-WWWWW.EXT``.

    Batches may be Arrow record batches or tables, NumPy structured arrays,
    lists of dicts, or lists of tuples (then ``columns`` names their fields).
    An epoch's directory appears only once every worker's part of it is on disk
    (see the module documentation); read it back with
    ``pyarrow.dataset.dataset(directory, partitioning="hive")``, which adds the
    column ``partition``, so a record field of that name is refused.  A
    directory that already holds epochs or a staging directory is refused unless
    ``overwrite=True``.  Without ``schema`` each part's column types are those
    of its own records (a field that is ``None`` in every record of a part has
    Arrow's ``null`` type there); with a ``pyarrow.Schema`` every part is written
    with exactly its columns and types, and records that do not fit it are
    refused.  Returns a stream with the committed directory's path at
    each committed time (probe it to know an epoch is visible).
    """
    pa = pyarrow_module()
    file_format = arrow_format(format)
    root = Path(directory)
    where = f"file sink {name!r} in scope {'/'.join(stream.scope.path)} on worker {stream.scope.index}"
    _check_partition(partition, columns, where)
    if schema is not None and not isinstance(schema, pa.Schema):
        raise ConfigurationError(f"{where}: schema must be a pyarrow.Schema, not {type(schema).__name__}")
    if schema is not None and partition in schema.names:
        raise ConfigurationError(
            f"{where}: the schema has a field {partition!r}, the column a hive reader adds from the directory "
            f"names ({partition}=T); rename that field or pass partition='another_name'"
        )
    worker = stream.scope.index
    registry = registry_of(stream.scope)
    if registry is None:
        _prepare(root, partition, overwrite, worker, where)
    else:  # resumed from a checkpoint, the epochs before it stay and the later ones are written again
        claim = registry.claim_output
        registry.on_settle(
            lambda boundary: _prepare_to_resume(root, partition, overwrite, worker, where, boundary, claim)
        )
    part_name = f"part-{worker:05d}{SUFFIXES[file_format]}"

    def write(time: Any, batches: list[Any]) -> Report | None:
        table = _table(pa, batches, columns, where, time)
        if schema is not None and table.num_columns:
            table = _conform(table, schema, where, time)
        if not table.num_columns:
            return None
        if partition in table.column_names:
            raise FileSinkError(
                f"{where}: at time {time!r} the records have a field {partition!r}, the column a hive reader adds "
                f"from the directory names ({partition}=T); rename the field or pass partition='another_name'"
            )
        epoch = f"{partition}={time}"
        _write_atomically(table, root / STAGING / epoch / part_name, file_format, where, time)
        return (epoch, worker, part_name, table.num_rows)

    def writer(capability: Capability, info: OperatorInfo) -> Callable[[OperatorInput, OperatorOutput], None]:
        capability.drop()
        return _Held(write)

    reports = unary(stream, Pipeline, name, writer, None, notify=True)

    def committer(capability: Capability, info: OperatorInfo) -> Callable[[OperatorInput, OperatorOutput], None]:
        capability.drop()
        return _Held(lambda time, batches: _commit(root, [r for batch in batches for r in batch], where))

    # one worker commits every epoch, in time order: a visible epoch T means every earlier epoch is visible too
    return unary(reports, Exchange(lambda report: 0), f"Commit{name}", committer, None, notify=True)


class _Held:
    """Logic that gathers each time's batches under a capability and calls ``act(time, batches)`` once it is complete.

    The capability is dropped only after ``act`` has returned (and its result, if
    not ``None``, was sent at that time): downstream frontiers pass a time only
    once its action is done everywhere.
    """

    def __init__(self, act: Callable[[Any, list[Any]], Any]) -> None:
        self.act = act
        self.held: dict[Any, tuple[Capability, list[Any]]] = {}

    def __call__(self, input: OperatorInput, output: OperatorOutput) -> None:
        held = self.held
        for ref, batch in input:
            entry = held.get(ref.time)
            if entry is None:
                held[ref.time] = (ref.retain(), [batch])
            else:
                entry[1].append(batch)
        frontier = input.frontier
        ready = [time for time in held if not frontier.less_equal(time)]
        if all(time.__class__ is int for time in ready):
            ready.sort()
        for time in ready:
            capability, batches = held.pop(time)
            result = self.act(time, batches)
            if result is not None:
                output.session(capability).give(result)
            capability.drop()


def _check_partition(partition: str, columns: Sequence[str] | None, where: str) -> None:
    if not isinstance(partition, str) or not partition or partition[0] in "._" or any(c in partition for c in "/=\\"):
        raise ConfigurationError(
            f"{where}: partition must be a column name not starting with '.' or '_' and without '/', '=' or '\\', "
            f"got {partition!r}"
        )
    if columns is not None and partition in columns:
        raise ConfigurationError(
            f"{where}: columns {list(columns)} include {partition!r}, the column a hive reader adds from the "
            f"directory names ({partition}=T); rename that field or pass partition='another_name'"
        )


def _prepare(root: Path, partition: str, overwrite: bool, worker: int, where: str) -> None:
    """Create ``root``; refuse (or, with ``overwrite``, let worker 0 remove) another run's epochs and staging."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        found = sorted(
            entry.name
            for entry in root.iterdir()
            if entry.name.startswith(f"{partition}=") or (entry.name == STAGING and _holds_anything(entry))
        )
    except OSError as error:
        raise FileSinkError(f"{where}: cannot create the directory {str(root)!r}: {error}") from error
    if not found:
        return
    if not overwrite:
        shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        raise FileSinkError(
            f"{where}: {str(root)!r} already holds another run's output ({shown}); this run's epochs would mix "
            "with it. Remove them, write to another directory, or pass overwrite=True to have them removed"
        )
    if worker == 0:  # no worker can write before every worker has built its dataflow
        try:
            for entry in found:
                shutil.rmtree(root / entry)
        except OSError as error:
            raise FileSinkError(f"{where}: cannot clear {str(root / entry)!r}: {error}") from error


def _holds_anything(directory: Path) -> bool:
    """Whether ``directory`` holds any entry; ``False`` once it is gone: with ``overwrite=True`` worker 0 may remove
    it between another worker's listing of the output directory and this look inside."""
    try:
        return any(directory.iterdir())
    except FileNotFoundError:
        return False


def _prepare_to_resume(
    root: Path,
    partition: str,
    overwrite: bool,
    worker: int,
    where: str,
    boundary: int,
    claim: Callable[[str, bool], bool] | None,
) -> None:
    """Prepare ``root`` for a run resumed at epoch ``boundary`` (0: a fresh start).

    Committed epochs before ``boundary`` are this job's own and stay; worker 0
    removes the later ones and the staging directory, which the run writes again.
    At epoch 0 the directory is prepared as for any run, unless the checkpoint
    store says (``claim``) that an earlier run of this job wrote it: then that
    run crashed before its first checkpoint, and its epochs are all written again.
    Worker 0 records the claim before any epoch can be committed.
    """
    if boundary == 0:
        location = str(root.resolve())
        if claim is None or not claim(location, False):
            _prepare(root, partition, overwrite, worker, where)
            if claim is not None and worker == 0:
                try:
                    claim(location, True)
                except OSError as error:
                    raise FileSinkError(
                        f"{where}: cannot record in the checkpoint store that this job writes {location!r}: {error}"
                    ) from error
            return
    if worker != 0 or not root.is_dir():
        return
    try:
        for entry in sorted(root.iterdir()):
            value = entry.name[len(partition) + 1 :] if entry.name.startswith(f"{partition}=") else None
            if entry.name == STAGING or (value is not None and (not value.isdigit() or int(value) >= boundary)):
                shutil.rmtree(entry)
    except OSError as error:
        raise FileSinkError(f"{where}: cannot clear {str(root)!r} to resume at epoch {boundary}: {error}") from error


def _commit(root: Path, reports: list[Report], where: str) -> str | None:
    """Rename the staging directory of one epoch into place once it holds exactly the reported parts."""
    if not reports:
        return None
    epoch = reports[0][0]
    staged = root / STAGING / epoch
    target = root / epoch
    expected = sorted(report[2] for report in reports)
    try:
        present = sorted(entry for entry in os.listdir(staged) if entry[0] not in "._")
    except OSError as error:
        present = [f"none ({error})"]
    if present != expected:
        raise FileSinkError(
            f"{where}: cannot commit {str(target)!r}: the workers wrote {expected} but {str(staged)!r} holds "
            f"{present}; every process must write to the same directory (one shared file system) and no other "
            "run may write there"
        )
    try:
        _sync_directory(staged)
        os.rename(staged, target)
        _sync_directory(root)
    except OSError as error:
        raise FileSinkError(f"{where}: cannot commit {str(staged)!r} as {str(target)!r}: {error}") from error
    return str(target)


def _sync_directory(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


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


def _conform(table: Any, schema: Any, where: str, time: Any) -> Any:
    """``table`` with exactly the columns of ``schema``, in its order and types, or a :class:`FileSinkError`."""
    missing = [name for name in schema.names if name not in table.column_names]
    extra = [name for name in table.column_names if name not in schema.names]
    if missing or extra:
        raise FileSinkError(
            f"{where}: at time {time!r} the records' fields {table.column_names} are not the schema's "
            f"{schema.names} (missing {missing}, not in the schema {extra}); send records with the schema's fields"
        )
    try:
        return table.select(schema.names).cast(schema)
    except Exception as error:
        found = ", ".join(f"{field.name}: {field.type}" for field in table.schema)
        raise FileSinkError(
            f"{where}: at time {time!r} the records do not fit the schema (theirs is {found}): {error}"
        ) from error


def _json_rows(table: Any, where: str, time: Any) -> list[dict[str, Any]]:
    """``table``'s rows as Python dicts for JSON Lines, or a :class:`FileSinkValueError` naming the value that
    Python cannot hold (a timestamp past year 9999, say, or a time of day of 24 hours or more, which
    ``to_pylist()`` would wrap around midnight), its column and row, and the time."""
    at = f"{where}: at time {time!r}"
    advice = (
        "JSON Lines are written from Python values: write format='parquet' or 'csv', which take Arrow's "
        f"values, or {CONVERTIBLE}"
    )

    def row_text(found: Unconvertible) -> tuple[int, str]:
        return found.row, f"row {found.row} of the epoch's records on this worker (counting from 0)"

    refuse_wrapped_times(table, at, advice, FileSinkValueError, row_text)
    try:
        return table.to_pylist()
    except Exception as error:
        failure = unconvertible_error(table, error, at, advice, FileSinkValueError, row_text)
        if failure is None:
            raise
        raise failure from error


def _write_atomically(table: Any, target: Path, format: str, where: str, time: Any = None) -> None:
    """Write ``table`` to a hidden file beside ``target``, flush it to disk, then rename it to ``target``."""
    hidden = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if format == "parquet":
            import pyarrow.parquet as pq  # type: ignore[import-untyped]

            _refuse_dictionaries_of_extensions(table, where, time)
            _refuse_invalid(table, where, time)
            pq.write_table(table, hidden)
        elif format == "csv":
            import pyarrow.csv as pcsv  # type: ignore[import-untyped]

            _refuse_invalid(table, where, time)
            pcsv.write_csv(table, hidden)
        else:
            with open(hidden, "w", encoding="utf-8") as lines:
                for row in _json_rows(table, where, time):
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


def _refuse_dictionaries_of_extensions(table: Any, where: str, time: Any) -> None:
    """Raise :class:`FileSinkError` if a column of ``table`` is, or holds, a dictionary of an extension type's
    values (``uuid``, say), which Parquet cannot write: pyarrow fails with ``Column 2 had 2 while previous column
    had 0`` (an extension of a fixed-size type) or ``... cannot be written to Parquet type column descriptor``.
    The message names the column and its type, and the type to cast it to, which decodes the dictionary."""
    pa = pyarrow_module()
    for field in table.schema:
        found = _dictionary_of_extension(pa, field.type)
        if found is None:
            continue
        value = found.value_type
        try:
            target = f"cast it to {_decoded(pa, field.type)}, which keeps the values"
        except Exception:  # noqa: BLE001 - a type this cannot rebuild: the advice without it
            target = f"cast it to a type whose {found} is {value}"
        raise FileSinkError(
            f"{where}: at time {time!r} the column {field.name!r} is {field.type}, which holds a dictionary of the "
            f"extension type {value}; Parquet cannot write a dictionary of an extension type. Decode it before the "
            f"sink: {target} (pyarrow.compute.cast(column, type), or table.cast(schema)), or cast it to the "
            f"extension's storage type, {value.storage_type}"
        )


def _dictionary_of_extension(pa: Any, kind: Any) -> Any:
    """The first dictionary type in ``kind`` (itself or a type nested in it) whose values are of an extension
    type, or ``None``."""
    if pa.types.is_dictionary(kind):
        if isinstance(kind.value_type, pa.BaseExtensionType):
            return kind
        return _dictionary_of_extension(pa, kind.value_type)
    storage = getattr(kind, "storage_type", None)
    if storage is not None:
        return _dictionary_of_extension(pa, storage)
    for index in range(kind.num_fields):
        found = _dictionary_of_extension(pa, kind.field(index).type)
        if found is not None:
            return found
    return None


def _decoded(pa: Any, kind: Any) -> Any:
    """``kind`` with every dictionary of extension values replaced by its value type (lists, structs and maps
    rebuilt around it; ``ValueError`` for another kind of type that holds one)."""
    if _dictionary_of_extension(pa, kind) is None:
        return kind
    if pa.types.is_dictionary(kind):
        if isinstance(kind.value_type, pa.BaseExtensionType):
            return kind.value_type
        return pa.dictionary(kind.index_type, _decoded(pa, kind.value_type), kind.ordered)
    if pa.types.is_map(kind):
        items = kind.item_field
        return pa.map_(kind.key_field, items.with_type(_decoded(pa, items.type)), kind.keys_sorted)
    if pa.types.is_struct(kind):
        return pa.struct([field.with_type(_decoded(pa, field.type)) for field in kind])
    if pa.types.is_fixed_size_list(kind):
        return pa.list_(kind.value_field.with_type(_decoded(pa, kind.value_type)), kind.list_size)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        build = pa.list_ if pa.types.is_list(kind) else pa.large_list
        return build(kind.value_field.with_type(_decoded(pa, kind.value_type)))
    raise ValueError(f"cannot rebuild {kind}")


def _refuse_invalid(table: Any, where: str, time: Any) -> None:
    """Raise :class:`FileSinkValueError` if ``table`` is not valid Arrow, which pyarrow builds unchecked from
    buffers or views (a ``string`` that is not UTF-8, a ``time32``/``time64`` of 24 hours or more, ...): Parquet and
    CSV would write it as it is, a file that ``read_files`` (which validates every batch) and other readers refuse
    or misread (CSV writes ``<value out of range: 90000>`` for such a time).  The message names the time, the
    column and, where :mod:`scopes.arrow_values` finds it, the row and the value.

    The check is the one a batch leaving its process takes
    (:func:`~runtime.communication.arrow_validity.refuse_invalid`: NumPy proofs, Arrow's full validation as the
    verdict); the row is looked for only once a column is refused.
    """
    try:
        refuse_invalid(table)
    except InvalidArrowBatch as error:
        name, kind = error.column, error.column_type
        if not name:  # no column is invalid alone: the table's layout is
            raise FileSinkError(
                f"{where}: at time {time!r} the table's {error.part} is not valid Arrow ({error.problem}); no file "
                "was written for it"
            ) from None
        column = table.select([table.column_names.index(name)])
        found = find_wrapped_time(column) or find_unconvertible(column)
        what = error.part + ("" if found is None else f", row {found.row}, holds {found.text},")
        raise FileSinkValueError(
            f"{where}: at time {time!r} {what} is not valid Arrow ({error.problem}), so no reader could take it "
            "back: no file was written for it. Arrow builds arrays from buffers or views without checking "
            "them; build the column with pyarrow.array(values, type), which checks them, or fix or cast it",
            name,
            -1 if found is None else found.row,
            kind,
            "" if found is None else found.text,
        ) from None
