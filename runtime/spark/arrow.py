"""Arrow on both ends of a Spark dataflow: output records or batches to record batches of the schema.

Output contract
    The stream that ``build`` returns may carry, in any mix:

    * columnar batches (messages that are ``pyarrow.RecordBatch`` or
      ``pyarrow.Table``, or records that are), whose columns must be exactly
      the schema's (by name; any order) with exactly its types, but that a
      string or binary column may be in its large form or not (Spark hands
      them over large with ``spark.sql.execution.arrow.useLargeVarTypes``);
      a batch whose schema is the output schema is passed to Spark as it is;
    * numpy structured arrays (as messages or records), converted to Arrow
      column by column;
    * rows: ``tuple`` or ``list`` in the schema's column order, or ``dict`` by
      column name.

    Rows are gathered into columns and converted once per run of consecutive
    rows (``pyarrow.array(values, type=...)``), not one call per row.  Anything
    that does not fit raises :class:`~runtime.spark.errors.SchemaMismatch`,
    which names the column, the schema's type and what the dataflow produced.

    A batch that is not valid Arrow (built unchecked from buffers or views: a
    ``string`` that is not UTF-8, a time of day of 24 hours or more, which
    ``pyarrow.array`` also makes from integers) is refused before Spark or the
    output log takes it (:func:`refuse_invalid_output`): Spark would keep it as
    it is.
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]

from runtime.communication.arrow_validity import INVALID_ADVICE, refuse_invalid
from runtime.errors import InvalidArrowBatch
from runtime.spark.errors import FATAL_MARKER, InvalidOutputBatch, SchemaMismatch, SparkValueError
from scopes.arrow_values import refuse_wrapped_times, unconvertible_error
from scopes.batches import concat_batches

ROWS_PER_BATCH = 65_536
"""The largest record batch made from rows."""
_ROW_TYPES = {tuple, list, dict}


def _mismatch(message: str, column: str | None, expected: str, found: str) -> SchemaMismatch:
    return SchemaMismatch(f"{FATAL_MARKER} {message}", column, expected, found)


def conform_batch(batch: Any, schema: pa.Schema, what: str | None = None) -> list[pa.RecordBatch]:
    """``batch`` (a record batch or table) with the columns of ``schema`` in its order, or an error.

    ``what`` names what the dataflow emitted, for the error (default: ``an Arrow RecordBatch``/``Table``).
    """
    what = what or f"an Arrow {type(batch).__name__}"
    if batch.schema.equals(schema):
        check_nulls(batch, schema, what)
        return [batch] if isinstance(batch, pa.RecordBatch) else batch.to_batches()
    have = {field.name: field for field in batch.schema}
    for field in schema:
        found = have.get(field.name)
        if found is None:
            raise _mismatch(
                f"the dataflow produced {what} without column '{field.name}' "
                f"(type {field.type}) of the output schema; it has {', '.join(have) or 'no columns'}",
                field.name,
                str(field.type),
                "missing",
            )
        if found.type != field.type and _offset_width(found.type) != _offset_width(field.type):
            raise _mismatch(
                f"column '{field.name}' has type {field.type} in the output schema, but the dataflow "
                f"produced {what} where it has type {found.type}; "
                f"cast it (e.g. batch.cast(schema), or the array's dtype) or change the schema",
                field.name,
                str(field.type),
                str(found.type),
            )
    extra = [name for name in have if schema.get_field_index(name) < 0]
    if extra:
        raise _mismatch(
            f"the dataflow produced {what} with column(s) {', '.join(extra)} "
            f"that the output schema ({', '.join(schema.names)}) does not have",
            extra[0],
            "absent",
            str(have[extra[0]].type),
        )
    columns = [_same_type(batch.column(field.name), field.type) for field in schema]
    if isinstance(batch, pa.Table):
        table = pa.Table.from_arrays(columns, schema=schema)
        check_nulls(table, schema, what)
        return table.to_batches()
    conformed = pa.RecordBatch.from_arrays(columns, schema=schema)
    check_nulls(conformed, schema, what)
    return [conformed]


_WIDENED = {pa.string(): pa.large_string(), pa.binary(): pa.large_binary()}


def _offset_width(kind: pa.DataType) -> pa.DataType:
    """The large form of a string or binary type (the types differ only in their offsets' width), else ``kind``."""
    return _WIDENED.get(kind, kind)


def _same_type(column: Any, kind: pa.DataType) -> Any:
    """``column`` as type ``kind``: a string or binary column cast to or from its large form, others as they are."""
    return column if column.type == kind else column.cast(kind)


def check_nulls(batch: Any, schema: pa.Schema, what: str, first_row: int | None = None) -> None:
    """Refuse a null in a column the schema declares not nullable (Spark's JVM would fail reading it).

    One look at each such column's null count; ``first_row`` numbers rows for the error (``None``: a batch's).
    """
    for index, field in enumerate(schema):
        if field.nullable or not batch.column(index).null_count:
            continue
        import pyarrow.compute as pc  # type: ignore[import-untyped]

        row = pc.index(pc.is_null(batch.column(index)), True).as_py()
        where = f"output row {first_row + row}" if first_row is not None else f"row {row} of {what}"
        raise _mismatch(
            f"column '{field.name}' is not nullable in the output schema, but {where} has a null there; "
            f"declare the column nullable (StructField(..., nullable=True), or drop NOT NULL) or emit no null",
            field.name,
            f"{field.type} not null",
            "null",
        )


def _bulk_columns(rows: list[Any], schema: pa.Schema) -> list[Any] | None:
    """The columns of ``rows`` as lists, made in C (``map(itemgetter)``), or ``None`` if a row needs a closer look.

    Every row must be a tuple or list of the schema's width, or every row a
    dict with exactly the schema's keys; anything else takes the row-by-row
    path of :func:`_rows_to_batch`, which names what is wrong.
    """
    width = len(schema.names)
    kinds = set(map(type, rows))
    if kinds <= {tuple, list}:
        if set(map(len, rows)) != {width}:
            return None
        return [list(map(operator.itemgetter(index), rows)) for index in range(width)]
    if kinds == {dict}:
        names = schema.names
        if set(map(len, rows)) != {width} or not all(map(set(names).issuperset, rows)):
            return None
        return [list(map(operator.itemgetter(name), rows)) for name in names]
    return None


def _rows_to_batch(rows: list[Any], schema: pa.Schema, first_row: int) -> pa.RecordBatch:
    bulk = _bulk_columns(rows, schema)
    if bulk is not None:
        arrays = []
        for field, values in zip(schema, bulk, strict=True):
            try:
                arrays.append(column_array(values, field.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as error:
                raise _column_error(field, values, first_row, error) from None
        batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
        check_nulls(batch, schema, "rows", first_row)
        return batch
    names = schema.names
    width = len(names)
    columns: list[list[Any]] = [[] for _ in range(width)]
    appends = [column.append for column in columns]
    for offset, row in enumerate(rows):
        if type(row) is dict:
            if len(row) != width or any(name not in row for name in names):
                missing = [name for name in names if name not in row]
                extra = [key for key in row if key not in names]
                raise _mismatch(
                    f"output row {first_row + offset} is a dict with keys {sorted(map(str, row))}, but the "
                    f"output schema has columns {names}"
                    + (f"; missing {missing}" if missing else "")
                    + (f"; not in the schema {extra}" if extra else ""),
                    (missing or extra or [None])[0],
                    ", ".join(names),
                    ", ".join(map(str, row)),
                )
            for append, name in zip(appends, names, strict=True):
                append(row[name])
        else:
            if len(row) != width:
                raise _mismatch(
                    f"output row {first_row + offset} has {len(row)} field(s) {row!r}, but the output schema "
                    f"has {width} column(s) {names}",
                    None,
                    f"{width} fields",
                    f"{len(row)} fields",
                )
            for append, value in zip(appends, row, strict=True):
                append(value)
    arrays = []
    for field, values in zip(schema, columns, strict=True):
        try:
            arrays.append(column_array(values, field.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as error:
            raise _column_error(field, values, first_row, error) from None
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    check_nulls(batch, schema, "rows", first_row)
    return batch


def column_array(values: list[Any], kind: pa.DataType) -> pa.Array:
    """``values`` (Python objects) as an Arrow array of type ``kind``, refusing what would change a value.

    Arrow converts a Python float to an integer type by truncating it
    (``1.5`` becomes ``1``) without a word.  An integer column is therefore
    first converted as Arrow infers it: integers alone (the common case) are
    cast to ``kind`` with Arrow's safe cast, which refuses a value out of
    range; otherwise (a float among them, or values Arrow infers no one type
    for) each float must be a whole number, as Spark's own schema check
    requires, and becomes an int (:func:`_whole_numbers`) before the typed
    conversion.  Any other column converts to ``kind`` directly.
    """
    if pa.types.is_integer(kind):
        try:
            inferred = pa.array(values, from_pandas=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            inferred = None  # mixed, or out of int64's (or a double's exact) range
        if inferred is not None and pa.types.is_integer(inferred.type):
            return inferred.cast(kind)
        if inferred is None or pa.types.is_floating(inferred.type):
            values = _whole_numbers(values)
    return pa.array(values, type=kind, from_pandas=False)


def _whole_numbers(values: list[Any]) -> list[Any]:
    """``values`` with each float (Python's or NumPy's) made an int; one with a fraction, NaN or inf is refused.

    Runs only for an integer column that holds floats (or values of mixed kinds), never for integers alone.
    """
    whole = []
    for value in values:
        if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
            number = float(value)
            if not number.is_integer():
                raise pa.ArrowInvalid(f"{value!r} is not a whole number")
            value = int(number)
        whole.append(value)
    return whole


def _column_error(field: pa.Field, values: list[Any], first_row: int, error: Exception) -> SchemaMismatch:
    """Find the first value of ``values`` that does not convert to ``field.type`` and describe it."""
    for offset, value in enumerate(values):
        try:
            column_array([value], field.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            return _mismatch(
                f"column '{field.name}' has type {field.type} in the output schema, but output row "
                f"{first_row + offset} has {type(value).__name__} {value!r} there",
                field.name,
                str(field.type),
                type(value).__name__,
            )
    return _mismatch(
        f"column '{field.name}' (type {field.type}) cannot hold the dataflow's values: {error}",
        field.name,
        str(field.type),
        "values",
    )


def numpy_to_arrow(array: Any, schema: pa.Schema) -> pa.RecordBatch:
    """A numpy structured array as a record batch, one Arrow column per field (no per-row work)."""
    names = array.dtype.names
    if array.ndim != 1 or not names:
        raise _mismatch(
            f"the dataflow produced a numpy array of dtype {array.dtype} and shape {array.shape}; only a 1-D "
            f"structured array (one field per column of the output schema: {', '.join(schema.names)}) or an "
            f"Arrow batch becomes output rows",
            None,
            "structured array or Arrow batch",
            f"numpy array of dtype {array.dtype}",
        )
    columns = []
    for name in names:
        try:
            columns.append(pa.array(array[name]))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
            raise _mismatch(
                f"field '{name}' of a numpy output array (dtype {array.dtype[name]}) has no Arrow equivalent: {error}",
                name,
                "an Arrow type",
                str(array.dtype[name]),
            ) from None
    return pa.RecordBatch.from_arrays(columns, names=list(names))


def output_records(messages: Iterable[Any]) -> Iterator[Any]:
    """The records of an output stream's messages: a list's records, and a columnar batch as one record."""
    for message in messages:
        if message.__class__ is list:
            yield from message
        else:
            yield message


class OutputBatcher:
    """Turns a dataflow's output messages into record batches of ``schema`` as they arrive.

    :meth:`add` takes one output message and returns the record batches that
    are ready: a columnar message's at once, rows once :data:`ROWS_PER_BATCH`
    of them are waiting; :meth:`finish` returns the rows still waiting.
    """

    def __init__(self, schema: pa.Schema) -> None:
        """Batches of ``schema``; nothing is waiting yet."""
        self.schema = schema
        self.rows: list[Any] = []
        self.seen = 0

    def add(self, message: Any) -> list[pa.RecordBatch]:
        """The record batches that ``message`` (a list of records or a columnar batch) completes."""
        if message.__class__ is list and set(map(type, message)) <= _ROW_TYPES:  # rows alone: taken in bulk
            return self._add_rows(message)
        ready: list[pa.RecordBatch] = []
        for record in output_records([message]):
            ready.extend(self.add_record(record))
        return ready

    def _add_rows(self, rows: list[Any]) -> list[pa.RecordBatch]:
        """Take a list of rows at once; the record batches of :data:`ROWS_PER_BATCH` rows now complete."""
        ready: list[pa.RecordBatch] = []
        start = 0
        while start < len(rows):
            room = ROWS_PER_BATCH - len(self.rows)
            chunk = rows[start : start + room]
            self.rows.extend(chunk)
            self.seen += len(chunk)
            start += len(chunk)
            if len(self.rows) >= ROWS_PER_BATCH:
                ready.extend(self.finish())
        return ready

    def add_record(self, record: Any) -> list[pa.RecordBatch]:
        """The record batches that one output record (a row or a columnar batch) completes."""
        schema = self.schema
        columnar = isinstance(record, pa.RecordBatch | pa.Table)
        what = None
        if not columnar and type(record).__name__ == "ndarray" and type(record).__module__ == "numpy":
            what = f"a numpy structured array (dtype {record.dtype})"
            record = numpy_to_arrow(record, schema)
            columnar = True
        if columnar:
            return [*self.finish(), *conform_batch(record, schema, what)]
        if not isinstance(record, tuple | list | dict):
            raise _mismatch(
                f"output record {self.seen} is a {type(record).__name__} ({record!r:.80}); the output stream must "
                f"carry tuples or lists in schema order, dicts by column name, or Arrow record batches "
                f"(or numpy structured arrays) with columns {schema.names}",
                None,
                "row or record batch",
                type(record).__name__,
            )
        self.rows.append(record)
        self.seen += 1
        if len(self.rows) >= ROWS_PER_BATCH:
            return self.finish()
        return []

    def finish(self) -> list[pa.RecordBatch]:
        """The rows still waiting, as one record batch (none if no row waits)."""
        if not self.rows:
            return []
        rows, self.rows = self.rows, []
        return [_rows_to_batch(rows, self.schema, self.seen - len(rows))]


def refuse_invalid_output(
    batch: pa.RecordBatch, task: int, time: object, where: str, fate: str, unit: str = "time"
) -> None:
    """Raise :class:`~runtime.spark.errors.InvalidOutputBatch` if ``batch`` is not valid Arrow.

    ``task`` is the task (its worker) whose output it is, ``time`` the output's
    time (``None``: rows gathered at the end; ``unit`` says what it counts),
    ``where`` names the output, and ``fate`` says what was not done with the
    batch.  The checks are
    :func:`~runtime.communication.arrow_validity.refuse_invalid`'s: Arrow's
    validation and NumPy, no Python work per row.
    """
    try:
        refuse_invalid(batch)
    except InvalidArrowBatch as error:
        when = "at the end of the dataflow" if time is None else f"at {unit} {time!r}"
        raise InvalidOutputBatch(
            f"{FATAL_MARKER} task {task} (worker {task}): {where} {when} has {error.part}, which is not "
            f"valid Arrow: {error.problem}. Spark would take it as it is (a "
            f"string that is not UTF-8 comes back as replacement characters, a time of day of 24 hours or more "
            f"fails whatever reads the result later), so {fate}, and the job is not retried: another attempt "
            f"would build the same batch. {INVALID_ADVICE[0].upper()}{INVALID_ADVICE[1:]}",
            error.column,
            error.column_type,
            error.problem,
            time,
            task,
        ) from None


def to_record_batches(records: Iterable[Any], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Turn the output records of a dataflow into record batches of ``schema``."""
    batcher = OutputBatcher(schema)
    for record in records:
        yield from batcher.add_record(record)
    yield from batcher.finish()


def column_values(column: Any) -> list[Any]:
    """A column's values as Python objects, in one call: through NumPy for integers, floats and booleans
    without nulls (about twice as fast as Arrow's ``to_pylist``), else ``to_pylist``."""
    kind = column.type
    numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)
    if column.null_count == 0 and numeric:
        return column.to_numpy(zero_copy_only=False).tolist()
    return column.to_pylist()


def coalesced(batches: Iterable[pa.RecordBatch], rows: int = ROWS_PER_BATCH) -> Iterator[pa.RecordBatch]:
    """``batches`` joined, in order, into record batches of at least ``rows`` rows (the last may hold fewer).

    Spark hands ``mapInArrow`` batches of ``spark.sql.execution.arrow.maxRecordsPerBatch``
    rows, 10,000 by default.  Each message costs the dataflow a pass of its
    operators and a step, and a per-batch aggregation only combines what one
    batch holds (at 10,000 rows over 50,000 keys, hardly anything), so a
    columnar task gathers them: one copy of the columns per joined batch.  A
    batch already of ``rows`` rows or more passes as it is.  Row mode does not:
    its rows become Python tuples, and 65,536 of them a message outgrow the
    CPU's cache (the keyed sum of ``benchmarks/spark_forms.py`` took about 8%
    longer record-wise with joined batches, while its columnar form took about
    14% less, in scratch A/B runs).
    """
    group: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        if not group and batch.num_rows >= rows:
            yield batch
            continue
        group.append(batch)
        held += batch.num_rows
        if held >= rows:
            yield concat_batches(group)
            group, held = [], 0
    if group:
        yield concat_batches(group)


def input_rows(batch: pa.RecordBatch, first_row: int | None = None) -> list[tuple[Any, ...]]:
    """The rows of an input record batch as tuples in column order (one conversion per column, zipped in C).

    A value Python cannot hold (a timestamp past year 9999, say) is a :class:`SparkValueError` naming the column
    and the row (``first_row``: the partition's rows before ``batch``; ``None``: the row in ``batch``); so is a
    time of day of 24 hours or more, which ``to_pylist()`` would wrap around midnight.
    """
    where = f"{FATAL_MARKER} the dataflow's Spark input"
    advice = (
        "run the dataflow with columnar=True, which takes Spark's Arrow batches as they are, or cast or fix "
        "the column in Spark first (to a string or a long, or replace out-of-range sentinels, say by null)"
    )
    row_text = None if first_row is None else lambda found: _input_row(found.row + first_row)
    refuse_wrapped_times(batch, where, advice, SparkValueError, row_text)
    try:
        columns = [column_values(column) for column in batch.columns]
    except Exception as error:
        failure = unconvertible_error(batch, error, where, advice, SparkValueError, row_text)
        if failure is None:
            raise
        raise failure from error
    if not columns:
        return [() for _ in range(batch.num_rows)]
    return list(zip(*columns, strict=True))


def _input_row(row: int) -> tuple[int, str]:
    return row, f"row {row} of this task's partition (counting from 0)"


def register_arrow_codec() -> None:
    """Nothing to do any more: the wire carries Arrow record batches and tables natively (Arrow IPC).

    Kept so that code written for earlier versions, which had to register a
    codec for ``pyarrow.RecordBatch`` in every process, keeps working.
    """
