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

from scopes.arrow_rows import (
    as_bits,
    as_halves,
    combined,
    decoded,
    filter_rows,
    half_dictionaries,
    rows_by_column,
    rows_only,
)
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

        if half_dictionaries(first.schema):  # Arrow concatenates these wrong: as their bits (see combined)
            return as_halves(concat_batches([as_bits(batch) for batch in batches]), first.schema)

        if kinds == {"RecordBatch"}:
            if hasattr(pa, "concat_batches"):  # pyarrow 19 and later
                return pa.concat_batches(batches)
            joined = pa.Table.from_batches(batches).combine_chunks().to_batches()
            return joined[0] if joined else first.slice(0, 0)
        if not first.num_columns and all(not batch.num_columns for batch in batches):  # concat_tables loses the rows
            return rows_only(pa.Table.from_batches([], schema=first.schema), sum(len(batch) for batch in batches))
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
            return rows_only(batch, len(indices))
        if batch_kind(batch) == "Table" and half_dictionaries(batch.schema):  # a batch's columns are one chunk
            return as_halves(take(as_bits(batch), indices), batch.schema)
        try:
            return batch.take(indices)
        except Exception as error:  # pyarrow's ArrowNotImplementedError: some types have no take (see below)
            return rows_by_column(batch, indices, error)
    raise BatchError(f"take: {describe_value(batch)} is not a batch (a list, NumPy array or Arrow batch)")


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
