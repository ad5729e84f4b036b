"""Rows of Arrow batches that Arrow's own ``take``, ``filter`` and ``concat`` get wrong or refuse.

:func:`scopes.batches.take` and :func:`scopes.batches.concat_batches` call
Arrow first and come here only for what Arrow (26 at least) cannot do right:

* a batch of rows and no columns, to which ``Table.take`` and ``concat_tables``
  give no rows (:func:`rows_only`);
* dictionaries of ``float16``, which Arrow concatenates into their bits read as
  numbers when the chunks' dictionaries differ: they are handled as
  dictionaries of ``uint16`` (:func:`half_dictionaries`, :func:`as_bits`,
  :func:`as_halves`, :func:`combined`);
* columns Arrow has no take or filter for (``string_view``, ``binary_view``,
  run-end encoded, and nested columns holding them), and chunked dictionaries of
  nested values whose dictionaries Arrow cannot unify: taken column by column,
  widened and cast back, or chunk by chunk (:func:`rows_by_column`,
  :func:`filter_rows`, :func:`decoded`).

Batches Arrow handles pay one schema lookup at most.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scopes.errors import BatchError
from scopes.lazy_import import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

__all__ = [
    "as_bits",
    "as_halves",
    "combined",
    "decoded",
    "filter_rows",
    "half_dictionaries",
    "rows_by_column",
    "rows_only",
]


def _is_table(batch: Any) -> bool:
    """Whether the Arrow batch ``batch`` is a ``pyarrow.Table`` (else a ``RecordBatch``)."""
    return batch.__class__.__name__ == "Table"


def rows_only(batch: Any, rows: int) -> Any:
    """A batch of ``batch``'s kind and schema (no columns) with ``rows`` rows.

    Arrow allows a batch of rows and no columns, but ``Table.take`` and
    ``concat_tables`` give such tables no rows (Arrow 26), which lost rows the
    progress counts had counted, and stalled an exchange.
    """
    import pyarrow as pa  # type: ignore[import-untyped]

    single = pa.record_batch([pa.nulls(rows)], names=["_"]).select([]).replace_schema_metadata(batch.schema.metadata)
    return pa.Table.from_batches([single]) if _is_table(batch) else single


def filter_rows(batch: Any, mask: Any) -> Any:
    """The rows of the Arrow batch ``batch`` where ``mask`` (a boolean array) is true, as a batch of the same kind.

    ``batch.filter(mask)``, also for columns of the types Arrow has no filter for (see :func:`take`).
    """
    if _is_table(batch) and half_dictionaries(batch.schema):  # a batch's columns are one chunk
        return as_halves(filter_rows(as_bits(batch), mask), batch.schema)
    try:
        return batch.filter(mask)
    except Exception as error:
        import pyarrow.compute as pc  # type: ignore[import-untyped]

        kept = mask if isinstance(mask, np.ndarray) else pc.fill_null(mask, False)  # a null drops its row
        return rows_by_column(batch, np.flatnonzero(np.asarray(kept, dtype=bool)), error)


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


def half_dictionaries(schema: Any) -> tuple[int, ...]:
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


def as_bits(batch: Any) -> Any:
    """``batch`` with its dictionaries of ``float16`` seen as dictionaries of ``uint16`` (the same bits)."""
    import pyarrow as pa

    for index in half_dictionaries(batch.schema):
        kind = batch.schema.field(index).type
        batch = batch.set_column(
            index,
            batch.schema.field(index).name,
            _viewed(pa, batch.column(index), pa.dictionary(kind.index_type, pa.uint16(), kind.ordered)),
        )
    return batch


def as_halves(batch: Any, schema: Any) -> Any:
    """:func:`as_bits` undone: the columns of ``schema``'s dictionaries of ``float16`` seen as such again."""
    import pyarrow as pa

    for index in half_dictionaries(schema):
        batch = batch.set_column(index, schema.field(index), _viewed(pa, batch.column(index), schema.field(index).type))
    return batch


def _viewed(pa: Any, values: Any, kind: Any) -> Any:
    """An Arrow array or chunked array's buffers seen as ``kind`` (of the same layout)."""
    if isinstance(values, pa.ChunkedArray):
        return pa.chunked_array([chunk.view(kind) for chunk in values.chunks], kind)
    return values.view(kind)


def rows_by_column(batch: Any, indices: Any, error: Exception) -> Any:
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
    if _is_table(batch):
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
