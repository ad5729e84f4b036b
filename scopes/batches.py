"""Batches: the containers that carry records between operators.

A *batch* is the second half of every ``(time, batch)`` message.  Four kinds
exist:

=============================  ==============================================
kind                           rows
=============================  ==============================================
``list``                       its elements (the record-wise operators' kind)
``numpy.ndarray``              its first axis: a 1-D array, or a structured
                               array whose named fields are the columns
``pyarrow.RecordBatch``        its rows; columns by name
``pyarrow.Table``              its rows; columns by name
=============================  ==============================================

NumPy arrays and Arrow batches are *columnar*.  The engine moves them as they
are and never iterates them: progress counts use ``len`` (the row count), a
fan-out to several receivers copies an array with ``ndarray.copy()`` and shares
an Arrow batch (Arrow data is immutable), and the columnar exchange
(:class:`~scopes.channels.ExchangeBatch`) partitions rows with NumPy index
arrays.  Operators built for columnar data (``map_batch``, ``exchange_batch``,
``accumulate_batch``, ``inspect_batch``) give the user's function the batch
itself.

NumPy is imported with this module; ``pyarrow`` is optional (the ``spark``
extra) and imported only when an Arrow batch has to be built (concatenation,
taking rows); recognising an Arrow batch never imports it.

The functions here work on every kind:

* :func:`batch_len` - the number of rows;
* :func:`is_columnar` - whether a batch is a NumPy array or an Arrow batch;
* :func:`is_batch` - whether a value is a batch at all;
* :func:`copy_batch` - a copy the receiver may own (lists and arrays copied,
  Arrow batches shared);
* :func:`concat_batches` - one batch holding the rows of several of one kind;
* :func:`take` - the rows at an array of indices, as a batch of the same kind;
* :func:`column` - a named field or column as a NumPy array.

Misuse raises :class:`BatchError` (a :class:`~scopes.errors.ScopeError`), or
:class:`KeyColumnError` for a column that does not exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeGuard

from scopes.errors import BatchError, KeyColumnError
from scopes.lazy_import import lazy_module, loaded

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")


class Columnar(Protocol):
    """What the engine asks of a columnar batch (a NumPy array, an Arrow record batch or table): its row count.

    The engine never iterates one; the functions of this module do the rest.
    """

    def __len__(self) -> int:
        """The number of rows."""
        ...


Batch: TypeAlias = "list[Any] | Columnar"
"""The second half of every ``(time, batch)`` message: a list of records, or a columnar batch."""

__all__ = [
    "Batch",
    "BatchError",
    "Columnar",
    "KeyColumnError",
    "batch_kind",
    "batch_len",
    "column",
    "column_names",
    "combined",
    "concat_batches",
    "copy_batch",
    "decoded",
    "filter_rows",
    "is_arrow",
    "is_batch",
    "is_columnar",
    "take",
]

_ARROW_KINDS = frozenset({"RecordBatch", "Table"})


def is_arrow(batch: Any) -> bool:
    """Whether ``batch`` is a ``pyarrow.RecordBatch`` or ``pyarrow.Table`` (without importing pyarrow)."""
    cls = batch.__class__
    return cls.__name__ in _ARROW_KINDS and cls.__module__.startswith("pyarrow")


def is_columnar(batch: Any) -> TypeGuard[Columnar]:
    """Whether ``batch`` is a NumPy array or an Arrow record batch or table."""
    cls = batch.__class__
    if cls is list:
        return False
    numpy = loaded("numpy")  # no array exists before NumPy is imported: a list program never imports it
    return (numpy is not None and isinstance(batch, numpy.ndarray)) or is_arrow(batch)


def is_batch(value: Any) -> bool:
    """Whether ``value`` is a batch of one of the four kinds (a NumPy array must have at least one axis)."""
    cls = value.__class__
    if cls is list:
        return True
    if isinstance(value, np.ndarray):
        return value.ndim >= 1
    return is_arrow(value)


def batch_kind(batch: Any) -> str:
    """A short name of the batch's kind: ``list``, ``ndarray``, ``RecordBatch``, ``Table`` (or the type's name)."""
    cls = batch.__class__
    if cls is list:
        return "list"
    if isinstance(batch, np.ndarray):
        return "ndarray"
    return cls.__name__


def describe_value(value: Any) -> str:
    """A short description of any value for error messages: its type and a bounded repr.

    Never raises: an Arrow scalar Python cannot hold (a timestamp in a time zone Python does not
    know, say) has a ``repr`` that raises, and is shown as Arrow writes it; any other value whose
    ``repr`` raises is shown by what it raised.
    """
    try:
        text = repr(value)
    except Exception as error:  # noqa: BLE001 - a message must not fail on the value it describes
        if value.__class__.__module__.startswith("pyarrow"):
            from scopes.arrow_values import safe_as_py

            text = repr(safe_as_py(value))
        else:
            text = f"(its repr raised {type(error).__name__})"
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{type(value).__qualname__} {text}"


TEXT_TYPES = (str, bytes, bytearray)
"""Iterables that are refused where records are expected: iterated, they would be characters or byte values."""


def text_as_records(records: Any, where: str, time: Any, one: str) -> BatchError:
    """The error for a string or bytes value given where an iterable of records belongs; ``one`` sends it whole."""
    return BatchError(
        f"{where}: got {describe_value(records)} as the records to send at time {time!r}, which would send "
        f"each {'character' if isinstance(records, str) else 'byte value'} as a record of its own; use {one} "
        f"to send it as one record, or pass a list (list(value) if you do mean one record per "
        f"{'character' if isinstance(records, str) else 'byte'})"
    )


def arrow_as_records(batch: Any, where: str, time: Any) -> BatchError:
    """The error for an Arrow batch that reached a record-wise operator (``map``, ``filter``, ``branch``, ...).

    Python iterates a ``pyarrow.Table`` or ``RecordBatch`` by index, which gives
    its columns: the operator would take each column as a record, a plausible
    wrong answer.  The operators check the class once per message, not per record.
    """
    return BatchError(
        f"{where}: got {describe_value(batch)} at time {time!r}; a record-wise operator takes each record of a "
        "batch, and an Arrow batch iterates as its columns, not its rows: use map_batch and the columnar "
        "operators on Arrow batches, or turn them into records first (map_batch(lambda table: table.to_pylist()))"
    )


def batch_len(batch: Any) -> int:
    """The number of rows of ``batch`` (``len`` for every kind: an array's first axis, an Arrow batch's rows)."""
    return len(batch)


def copy_batch(batch: Any) -> Any:
    """A copy of ``batch`` that its receiver may own and change.

    Lists are copied (``list(batch)``), NumPy arrays with ``ndarray.copy()``;
    Arrow batches are immutable and returned as they are.
    """
    cls = batch.__class__
    if cls is list:
        return list(batch)
    if isinstance(batch, np.ndarray):
        return batch.copy()
    if is_arrow(batch):
        return batch
    return list(batch)


def concat_batches(batches: Sequence[Any]) -> Any:
    """One batch with the rows of ``batches`` in order.  All must be of one kind (Arrow ``RecordBatch``
    and ``Table`` may be mixed: the result is then a ``Table``).

    Lists are concatenated into a new list, NumPy arrays with
    ``numpy.concatenate`` (their dtypes must agree), record batches with
    ``pyarrow.concat_batches`` and tables with ``pyarrow.concat_tables`` (the
    schemas must agree).  A single batch is returned as it is.
    """
    if not batches:
        raise BatchError("concat_batches needs at least one batch")
    first = batches[0]
    if len(batches) == 1:
        return first
    kinds = {batch_kind(batch) for batch in batches}
    if kinds == {"list"}:
        result: list[Any] = []
        for batch in batches:
            result.extend(batch)
        return result
    if kinds == {"ndarray"}:
        dtypes = {batch.dtype for batch in batches}
        if len(dtypes) > 1 and any(dtype.names is not None for dtype in dtypes):
            raise BatchError(
                f"concat_batches: structured arrays with different dtypes cannot be concatenated: "
                f"{sorted(map(str, dtypes))}"
            )
        return np.concatenate(batches)
    if kinds <= _ARROW_KINDS and all(is_arrow(batch) for batch in batches):
        import pyarrow as pa  # type: ignore[import-untyped]

        if _half_dictionaries(first.schema):  # Arrow concatenates these wrong: as their bits (see combined)
            return _as_halves(concat_batches([_as_bits(batch) for batch in batches]), first.schema)

        if kinds == {"RecordBatch"}:
            if hasattr(pa, "concat_batches"):  # pyarrow 19 and later
                return pa.concat_batches(batches)
            joined = pa.Table.from_batches(batches).combine_chunks().to_batches()
            return joined[0] if joined else first.slice(0, 0)
        if not first.num_columns and all(not batch.num_columns for batch in batches):  # concat_tables loses the rows
            return _rows_only(pa.Table.from_batches([], schema=first.schema), sum(len(batch) for batch in batches))
        tables = [batch if batch_kind(batch) == "Table" else pa.Table.from_batches([batch]) for batch in batches]
        return pa.concat_tables(tables)
    raise BatchError(
        f"concat_batches: cannot concatenate batches of different kinds ({', '.join(sorted(kinds))}); "
        "convert them to one kind first"
    )


def take(batch: Any, indices: np.ndarray) -> Any:
    """The rows of ``batch`` at ``indices`` (a NumPy integer array), in that order, as a batch of the same kind."""
    cls = batch.__class__
    if cls is list:
        count = len(indices)
        if count == 0:
            return []
        if count == 1:
            return [batch[int(indices[0])]]
        return list(itemgetter(*indices.tolist())(batch))
    if isinstance(batch, np.ndarray):
        return batch[indices]
    if is_arrow(batch):
        if not batch.num_columns:  # Arrow's Table.take gives no rows at all then
            return _rows_only(batch, len(indices))
        if batch_kind(batch) == "Table" and _half_dictionaries(batch.schema):  # a batch's columns are one chunk
            return _as_halves(take(_as_bits(batch), indices), batch.schema)
        try:
            return batch.take(indices)
        except Exception as error:  # pyarrow's ArrowNotImplementedError: some types have no take (see below)
            return _rows_by_column(batch, indices, error)
    raise BatchError(f"take: {describe_value(batch)} is not a batch (a list, NumPy array or Arrow batch)")


def _rows_only(batch: Any, rows: int) -> Any:
    """A batch of ``batch``'s kind and schema (no columns) with ``rows`` rows.

    Arrow allows a batch of rows and no columns, but ``Table.take`` and
    ``concat_tables`` give such tables no rows (Arrow 26), which lost rows the
    progress counts had counted, and stalled an exchange.
    """
    import pyarrow as pa

    single = pa.record_batch([pa.nulls(rows)], names=["_"]).select([]).replace_schema_metadata(batch.schema.metadata)
    return pa.Table.from_batches([single]) if batch_kind(batch) == "Table" else single


def filter_rows(batch: Any, mask: Any) -> Any:
    """The rows of the Arrow batch ``batch`` where ``mask`` (a boolean array) is true, as a batch of the same kind.

    ``batch.filter(mask)``, also for columns of the types Arrow has no filter for (see :func:`take`).
    """
    if batch_kind(batch) == "Table" and _half_dictionaries(batch.schema):  # a batch's columns are one chunk
        return _as_halves(filter_rows(_as_bits(batch), mask), batch.schema)
    try:
        return batch.filter(mask)
    except Exception as error:
        import pyarrow.compute as pc  # type: ignore[import-untyped]

        kept = mask if isinstance(mask, np.ndarray) else pc.fill_null(mask, False)  # a null drops its row
        return _rows_by_column(batch, np.flatnonzero(np.asarray(kept, dtype=bool)), error)


def combined(values: Any) -> Any:
    """An Arrow chunked array's chunks as one array (``combine_chunks``), dictionaries of ``float16`` kept right.

    Arrow (26 at least) concatenates dictionaries of ``float16`` whose
    dictionaries differ (or hold a NaN, which is not equal to itself) into wrong
    values (``-0.0`` becomes ``32768.0``, its bits as a number); their bits are
    concatenated as ``uint16`` instead, which Arrow does right.
    """
    import pyarrow as pa

    kind = values.type
    if pa.types.is_dictionary(kind) and pa.types.is_float16(kind.value_type):
        bits = pa.dictionary(kind.index_type, pa.uint16(), kind.ordered)
        return pa.chunked_array([chunk.view(bits) for chunk in values.chunks], bits).combine_chunks().view(kind)
    return values.combine_chunks()


_HALF_DICTIONARIES: dict[Any, tuple[int, ...]] = {}
"""The positions of each schema's dictionary-of-``float16`` columns (see :func:`combined`); most have none."""


def _half_dictionaries(schema: Any) -> tuple[int, ...]:
    """The positions of ``schema``'s columns that are dictionaries of ``float16`` (one lookup per schema seen)."""
    try:
        return _HALF_DICTIONARIES[schema]
    except KeyError:
        pass
    except TypeError:  # a user's extension type without __hash__: looked at every time
        return _find_half_dictionaries(schema)
    found = _find_half_dictionaries(schema)
    if len(_HALF_DICTIONARIES) > 256:  # a program making ever new schemas: start over
        _HALF_DICTIONARIES.clear()
    _HALF_DICTIONARIES[schema] = found
    return found


def _find_half_dictionaries(schema: Any) -> tuple[int, ...]:
    import pyarrow as pa

    types = pa.types
    return tuple(
        index
        for index, kind in enumerate(schema.types)
        if types.is_dictionary(kind) and types.is_float16(kind.value_type)
    )


def _as_bits(batch: Any) -> Any:
    """``batch`` with its dictionaries of ``float16`` seen as dictionaries of ``uint16`` (the same bits)."""
    import pyarrow as pa

    for index in _half_dictionaries(batch.schema):
        kind = batch.schema.field(index).type
        batch = batch.set_column(
            index,
            batch.schema.field(index).name,
            _viewed(pa, batch.column(index), pa.dictionary(kind.index_type, pa.uint16(), kind.ordered)),
        )
    return batch


def _as_halves(batch: Any, schema: Any) -> Any:
    """:func:`_as_bits` undone: the columns of ``schema``'s dictionaries of ``float16`` seen as such again."""
    import pyarrow as pa

    for index in _half_dictionaries(schema):
        batch = batch.set_column(index, schema.field(index), _viewed(pa, batch.column(index), schema.field(index).type))
    return batch


def _viewed(pa: Any, values: Any, kind: Any) -> Any:
    """An Arrow array or chunked array's buffers seen as ``kind`` (of the same layout)."""
    if isinstance(values, pa.ChunkedArray):
        return pa.chunked_array([chunk.view(kind) for chunk in values.chunks], kind)
    return values.view(kind)


def _rows_by_column(batch: Any, indices: Any, error: Exception) -> Any:
    """The rows at ``indices`` of each column of an Arrow batch whose whole ``take`` or ``filter`` failed.

    Arrow (26 at least) has no take or filter of ``string_view``, ``binary_view``
    and run-end encoded columns, nor of nested columns holding them: such a column
    is widened (views to ``large_string`` and ``large_binary``, run-end encoded
    columns decoded), its rows taken, and cast back to its type.  Nor can it take
    the rows of a chunked dictionary column whose chunks' dictionaries it cannot
    unify (dictionaries of lists, structs or unions): their rows are taken chunk by
    chunk, each keeping its dictionary.  So the rows come out as they went in.
    Only batches Arrow refused come here: the others pay nothing.
    """
    import pyarrow as pa

    if not isinstance(error, pa.ArrowNotImplementedError):
        raise error
    columns = [
        _column_rows(pa, batch.column(index), indices, batch.schema.names[index]) for index in range(batch.num_columns)
    ]
    if batch_kind(batch) == "Table":
        return pa.Table.from_arrays(columns, schema=batch.schema)
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


def _column_rows(pa: Any, values: Any, indices: Any, name: str) -> Any:
    """The rows at ``indices`` of one column (an Arrow array or chunked array), widened first when Arrow cannot.

    ``indices`` is a NumPy array or an Arrow array of integers; a null index takes a null, as in Arrow's take.
    """
    kind = values.type
    try:
        return values.take(indices)
    except pa.ArrowNotImplementedError:
        pass
    import pyarrow.compute as pc

    if isinstance(values, pa.ChunkedArray) and values.num_chunks > 1:  # chunk by chunk, in runs of one chunk
        if isinstance(indices, np.ndarray):
            numbers = indices.astype(np.int64)
            valid = np.ones(len(numbers), dtype=bool)
        else:  # an Arrow array (or chunked array) of row numbers, maybe with nulls
            valid = np.asarray(pc.is_valid(indices), dtype=bool)
            numbers = np.asarray(pc.fill_null(indices, 0), dtype=np.int64)
        ends = np.cumsum([len(chunk) for chunk in values.chunks])
        chunk_of = np.where(valid, np.searchsorted(ends, numbers, side="right"), -1)
        cuts = np.flatnonzero(np.diff(chunk_of)) + 1
        parts = []
        for run in np.split(np.arange(len(numbers)), cuts):
            if not len(run):
                continue
            chunk = int(chunk_of[run[0]])
            if chunk < 0:
                parts.append(pa.nulls(len(run), kind))
                continue
            start = int(ends[chunk - 1]) if chunk else 0
            parts.append(_column_rows(pa, values.chunk(chunk), numbers[run] - start, name))
        return pa.chunked_array(parts, kind)
    if isinstance(values, pa.ChunkedArray):
        values = values.chunk(0) if values.num_chunks else pa.array([], kind)
    if pa.types.is_run_end_encoded(kind):
        plain = _column_rows(pa, pc.run_end_decode(values), indices, name)
        return pc.run_end_encode(plain, run_end_type=kind.run_end_type)
    wide = _widened_type(pa, kind)
    try:
        if wide is not None:
            return values.cast(wide).take(indices).cast(kind)
    except pa.ArrowNotImplementedError:
        pass
    raise BatchError(
        f"Arrow cannot take or filter the rows of the column {name!r}, which is {kind}: cast it to another "
        "type with pyarrow.compute.cast first"
    )


def decoded(column: Any) -> Any:
    """A dictionary-encoded Arrow column (array or chunked array) as its values, of its value type.

    ``column.cast(value_type)``, also for dictionaries of ``string_view`` and
    ``binary_view``, which Arrow (26 at least) cannot decode (it has no take of
    views): their values are decoded as ``large_string`` or ``large_binary``
    and cast back to the view type; and for dictionaries of structs, lists,
    maps, unions and run-end encoded values, which Arrow does not cast: their
    values are taken at the indices.
    """
    import pyarrow as pa

    kind = column.type
    try:
        return column.cast(kind.value_type)
    except pa.ArrowNotImplementedError:
        pass
    wide = _widened_type(pa, kind.value_type)
    if wide is not None:
        return column.cast(pa.dictionary(kind.index_type, wide)).cast(wide).cast(kind.value_type)
    # Arrow casts no dictionary of structs, lists, maps, unions or run-end encoded values: take its values
    if isinstance(column, pa.ChunkedArray):
        return pa.chunked_array([_decoded_chunk(pa, chunk) for chunk in column.chunks], kind.value_type)
    return _decoded_chunk(pa, column)


def _decoded_chunk(pa: Any, array: Any) -> Any:
    """A dictionary array's values at its indices (a null index takes a null)."""
    return _column_rows(pa, array.dictionary, array.indices, "(dictionary values)")


def _widened_type(pa: Any, kind: Any) -> Any:
    """``kind`` with its string and binary views made ``large_string`` and ``large_binary``; ``None`` if it has none."""
    types = pa.types
    if types.is_string_view(kind):
        return pa.large_string()
    if types.is_binary_view(kind):
        return pa.large_binary()
    if types.is_struct(kind):
        fields = [kind.field(index) for index in range(kind.num_fields)]
        wides = [_widened_type(pa, field.type) for field in fields]
        if all(wide is None for wide in wides):
            return None
        return pa.struct([field.with_type(wide or field.type) for field, wide in zip(fields, wides, strict=True)])
    if types.is_map(kind):
        key, item = _widened_type(pa, kind.key_type), _widened_type(pa, kind.item_type)
        if key is None and item is None:
            return None
        return pa.map_(key or kind.key_type, kind.item_field.with_type(item or kind.item_type))
    lists = {
        types.is_list: pa.list_,
        types.is_large_list: pa.large_list,
        types.is_list_view: pa.list_view,
        types.is_large_list_view: pa.large_list_view,
    }
    for is_kind, make in lists.items():
        if is_kind(kind):
            item = _widened_type(pa, kind.value_type)
            return None if item is None else make(kind.value_field.with_type(item))
    if types.is_fixed_size_list(kind):
        item = _widened_type(pa, kind.value_type)
        return None if item is None else pa.list_(kind.value_field.with_type(item), kind.list_size)
    return None


def column_names(batch: Any) -> tuple[str, ...]:
    """The names of the columns (fields) of ``batch``; ``()`` for a list or an array without fields."""
    if isinstance(batch, np.ndarray):
        names = batch.dtype.names
        return tuple(names) if names is not None else ()
    if is_arrow(batch):
        return tuple(batch.schema.names)
    return ()


def repeated_names(names: Sequence[str]) -> list[str]:
    """The column names ``names`` holds more than once, each once, in order (Arrow allows them, NumPy does not)."""
    if len(set(names)) == len(names):
        return []
    seen: set[str] = set()
    repeated: list[str] = []
    for name in names:
        if name in seen and name not in repeated:
            repeated.append(name)
        seen.add(name)
    return repeated


def refuse_repeated_names(batch: Any, names: Sequence[str], where: str, at: str = "") -> None:
    """Raise :class:`BatchError` if an Arrow ``batch`` has more than one column named as one of ``names``.

    The columnar operators find their columns by name; pyarrow then raises a bare
    ``KeyError`` (that the field "exists 2 times", or "does not exist").  ``where``
    names the operator, ``at`` the time (`` at time 3``).
    """
    repeated = repeated_names(names)
    if repeated:
        raise BatchError(
            f"{where}: the Arrow {batch_kind(batch)}{at} has more than one column named "
            f"{', '.join(map(repr, repeated))}; columnar operators find columns by name, so each must be unique: "
            "rename them (rename_columns) or drop the extra ones"
        )


def column(batch: Any, key: str) -> np.ndarray:
    """The column (structured-array field) ``key`` of ``batch`` as a 1-D NumPy array.

    A structured array's field is a view (no copy).  An Arrow column is
    converted without copying when its type allows it (numbers without nulls),
    and with a copy otherwise (strings become an object array of ``str``;
    nulls become ``None`` in object columns and ``NaN`` in numeric ones).  Raises
    :class:`KeyColumnError` naming the available columns when there is no such
    column, and :class:`BatchError` for a batch without named columns.
    """
    if isinstance(batch, np.ndarray):
        names = batch.dtype.names
        if names is None:
            raise BatchError(
                f"column {key!r}: a NumPy array of dtype {batch.dtype} has no named columns; "
                "use a structured array (named fields), or a key function"
            )
        if key not in names:
            raise KeyColumnError(
                f"no column {key!r} in a structured array; its columns are {list(names)}", key, tuple(names)
            )
        return batch[key]
    if is_arrow(batch):
        names = tuple(batch.schema.names)
        if key not in names:
            raise KeyColumnError(
                f"no column {key!r} in an Arrow {batch_kind(batch)}; its columns are {list(names)}", key, names
            )
        if names.count(key) > 1:
            refuse_repeated_names(batch, [key, key], f"column {key!r}")
        values = batch.column(key)
        if batch_kind(batch) == "Table":
            values = combined(values) if values.num_chunks != 1 else values.chunk(0)
        result: np.ndarray = values.to_numpy(zero_copy_only=False)
        return result
    if batch.__class__ is list:
        raise BatchError(
            f"column {key!r}: a list batch has no named columns; use a key function, or a structured "
            "NumPy array or Arrow batch"
        )
    raise BatchError(f"column {key!r}: {describe_value(batch)} is not a batch (a list, NumPy array or Arrow batch)")
