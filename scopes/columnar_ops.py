"""Columnar operators that keep the user's work in C: a per-key aggregation and an equi-join.

Both take NumPy structured arrays or Arrow record batches and tables, and never
iterate rows in Python.

``aggregate_batch(keys, aggregations)``
    One row per distinct key and time, emitted when the time is complete, with
    ``count``, ``sum``, ``min``, ``max`` or ``mean`` of value columns.  Each
    aggregation is ``(column, function)`` (output column ``column_function``, as
    Arrow names it) or ``(column, function, output name)``.  Work happens in
    three steps: every batch is reduced to partial aggregates on the worker
    that holds it (the batches of one time that arrive in one invocation are
    combined into one partial batch), only the partials are exchanged by key,
    and the owner of a key combines them once the time is complete (a mean
    travels as a float sum and a count).  NumPy batches are grouped with a sort and
    ``ufunc.reduceat``; Arrow batches with ``Table.group_by(...).aggregate``.
    The output has the key columns, then the aggregations, in the kind of the
    input (a structured array, or an Arrow table when any partial was Arrow: a
    structured array with ``object`` fields, or ``min`` or ``max`` of strings,
    is aggregated by Arrow).
    Sums of integers and booleans are ``int64`` (``uint64`` for unsigned) and wrap, as pandas'
    and Arrow's do; a mean adds its values as ``float64``, as they do;
    Arrow's ``count`` skips nulls, a NumPy column counts every row.  ``min``
    and ``max`` skip NaN unless a key has only NaN (then NaN), in both kinds,
    so partials combine to one answer however the rows are split into batches
    and workers; a NaN still makes a ``sum`` and a ``mean`` NaN.  All NaN
    keys are one key, and ``-0.0`` is the key ``0.0``, in both kinds and at
    every worker count (:mod:`scopes.key_equality`); a null key (NumPy's
    ``NaT`` too) is one group of its own, as in pandas' ``groupby(dropna=False)``.
    ``sum`` and ``mean`` take numbers, ``min`` and ``max`` also strings, binary,
    dates and times, ``count`` any column; another column is refused naming it.

``join_batch(other, keys)``
    Per time, the equi-join of this stream's rows with ``other``'s on key
    columns, as Arrow ``Table.join`` computes it on the worker that owns the
    key (both sides are exchanged by key).  The result, one Arrow table per
    worker and time, is emitted when the time is complete on both inputs; it
    has the left key columns, the left's other columns, then the right's other
    columns, a suffix telling apart names present on both sides.  The join
    types are ``inner``, ``left semi`` and ``left anti`` (an outer join would
    need the columns of a side that a worker may never have seen).  A NaN
    key joins a NaN key (of any bits), as in pandas' ``merge`` and the
    record-wise ``join``, and ``-0.0`` joins ``0.0``; a null key joins a null
    key, as ``None`` does in the record-wise ``join`` (and pandas' ``merge``;
    not SQL).  Key columns of two types of one kind join in their common type,
    and every column comes out as it went in (:mod:`scopes.arrow_joins`).  NumPy
    batches with ``object`` fields are refused: their rows could not cross
    processes.  Needs pyarrow.

Key columns may be of the types :mod:`scopes.key_types` lists (numbers,
strings, binary, dictionaries, dates and times, decimals, nulls); another type
is refused by the first batch that has it, on every worker count, with a
:class:`~scopes.errors.KeyTypeError` naming the operator, the column and its type.

When the program has imported pyarrow, building either operator imports
Arrow's query engine (``pyarrow.acero``, which ``group_by`` and ``join`` load on
first use), so that its half second of imports is not spent in the first time
with data.

Misuse that can be seen when the dataflow is built (an unknown function, no
key, an output name used twice, an unknown join type, pyarrow missing for a
join) raises :class:`~scopes.errors.BuildError` naming the operator.  A batch
without a named column the operator needs fails the operator with a
:class:`~scopes.errors.KeyColumnError` naming the operator, the column, the
time and the columns the batch has.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from scopes.arrow_joins import join_tables
from scopes.batches import (
    batch_kind,
    column_names,
    concat_batches,
    decoded,
    describe_value,
    is_arrow,
    refuse_repeated_names,
)
from scopes.channels import ExchangeBatch, Pipeline
from scopes.core import StreamCore
from scopes.errors import BatchError, BuildError, KeyColumnError
from scopes.generic_operators import generic, unary
from scopes.hashing import stable_hash_array, stable_hash_arrow
from scopes.joins import check_same_scope
from scopes.key_equality import NAN, canonical_arrow_keys, differing_rows
from scopes.key_text import refuse_invalid_text
from scopes.key_types import check_aggregated_columns, check_key_columns, numpy_needs_arrow
from scopes.lazy_import import lazy_module, loaded
from scopes.operator import Capability, OperatorInfo, OperatorInput, OperatorOutput
from scopes.progress.order import in_time_order, natural_order
from scopes.signatures import describe_operator

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

S = TypeVar("S", bound=StreamCore)
"""The class of the streams read and made (for users, :class:`~scopes.stream.Stream`)."""

FUNCTIONS = ("count", "sum", "min", "max", "mean")
"""The aggregation functions :func:`aggregate_batch` knows."""
JOIN_TYPES = ("inner", "left semi", "left anti")
"""The join types :func:`join_batch` knows."""

_PARTS = {"count": ("count",), "sum": ("sum",), "min": ("min",), "max": ("max",), "mean": ("total", "count")}
"""The partial aggregates each function is computed from.

A mean adds its values as floats (``total``), as pandas and Arrow do: an
integer sum (``sum``) wraps past ``2**63``, and a sum past ``2**53`` does not
convert to a float exactly.
"""
_COMBINE = {"count": "sum", "sum": "sum", "total": "sum", "min": "min", "max": "max"}
"""How partial aggregates of one part combine."""
_REDUCE = {"sum": "add", "total": "add", "min": "fmin", "max": "fmax"}
"""The NumPy ufunc that reduces a part: ``fmin`` and ``fmax`` skip NaN unless a group has only NaN, as Arrow's do."""
_SEPARATOR = "\x1f"
"""Joins a part and a column into a partial column's name (a name no user column is expected to have)."""

# ---------------------------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class AggregationPlan:
    """What :func:`aggregate_batch` computes: key columns, outputs ``(column, function, name)`` and partials."""

    where: str
    keys: tuple[str, ...]
    outputs: tuple[tuple[str, str, str], ...]

    @property
    def partials(self) -> tuple[tuple[str, str], ...]:
        """The distinct ``(column, part)`` partial aggregates, in a fixed order."""
        found: dict[tuple[str, str], None] = {}
        for column, function, _ in self.outputs:
            for part in _PARTS[function]:
                found[(column, part)] = None
        return tuple(found)

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns a batch must have: the keys and the aggregated columns."""
        return tuple(dict.fromkeys(self.keys + tuple(column for column, _, _ in self.outputs)))


def partial_name(column: str, part: str) -> str:
    """The name of the partial column holding ``part`` of ``column``."""
    return f"{part}{_SEPARATOR}{column}"


def key_columns(keys: str | Sequence[str], where: str, role: str = "key") -> tuple[str, ...]:
    """``keys`` as a non-empty tuple of distinct column names, or a :class:`BuildError`."""
    names = (keys,) if isinstance(keys, str) else tuple(keys)
    if not names:
        raise BuildError(f"{where}: no {role} column given; name at least one column")
    for name in names:
        if not isinstance(name, str):
            raise BuildError(f"{where}: {role} columns must be column names (str), got {name!r}")
    if len(set(names)) != len(names):
        raise BuildError(f"{where}: a {role} column is named twice in {list(names)}")
    return names


def plan_aggregation(keys: str | Sequence[str], aggregations: Sequence[Sequence[str]], where: str) -> AggregationPlan:
    """Check the arguments of :func:`aggregate_batch` and return its plan, or raise :class:`BuildError`."""
    key_names = key_columns(keys, where)
    if isinstance(aggregations, Mapping):  # pandas' agg({column: function}) style
        pairs = [(column, function) for column, function in aggregations.items()]
        raise BuildError(
            f"{where}: aggregations must be a list of (column, function) or (column, function, name), not a "
            f"dict (a column may be aggregated more than once); write {pairs!r}"
        )
    if (
        isinstance(aggregations, Sequence)
        and len(aggregations) in (2, 3)
        and all(isinstance(part, str) for part in aggregations)
        and not isinstance(aggregations, str)
    ):
        raise BuildError(
            f"{where}: aggregations must be a list of (column, function) or (column, function, name); for one "
            f"aggregation, put it in a list: [{tuple(aggregations)!r}]"
        )
    if isinstance(aggregations, str) or not aggregations:
        raise BuildError(
            f"{where}: aggregations must be a non-empty list of (column, function) or (column, function, name), "
            f"got {aggregations!r}"
        )
    outputs: list[tuple[str, str, str]] = []
    for item in aggregations:
        if isinstance(item, str) or len(item) not in (2, 3) or not all(isinstance(part, str) for part in item):
            raise BuildError(
                f"{where}: an aggregation must be (column, function) or (column, function, name), got {item!r}"
            )
        column, function = item[0], item[1]
        if function not in FUNCTIONS:
            raise BuildError(
                f"{where}: unknown aggregation function {function!r} for column {column!r}; "
                f"the functions are {', '.join(FUNCTIONS)}"
            )
        outputs.append((column, function, item[2] if len(item) == 3 else f"{column}_{function}"))
    names = list(key_names) + [name for _, _, name in outputs]
    for name in names:
        if names.count(name) > 1:
            raise BuildError(
                f"{where}: the output column {name!r} is named twice (keys and aggregations must have distinct "
                "names); give the aggregation a name: (column, function, name)"
            )
        if _SEPARATOR in name:
            raise BuildError(f"{where}: the column name {name!r} contains the reserved character \\x1f")
    return AggregationPlan(where, key_names, tuple(outputs))


# ---------------------------------------------------------------------------------------------- checks and keys


def check_columns(batch: Any, needed: Sequence[str], where: str, time: Any, keys: Sequence[str] = ()) -> None:
    """Raise unless ``batch`` is a structured array or Arrow batch with every column in ``needed``.

    The key columns among them, ``keys``, must also be of a type the operator
    can key by (:func:`~scopes.key_types.check_key_columns`).
    """
    at = f" at time {time!r}" if time is not None else ""  # None: routing, which names the time itself
    if not is_arrow(batch) and not (isinstance(batch, np.ndarray) and batch.dtype.names is not None):
        raise BatchError(
            f"{where}: the batch{at} is {batch_kind(batch)} {describe_value(batch)}; this operator "
            "needs named columns: a NumPy structured array or an Arrow RecordBatch or Table"
        )
    if not is_arrow(batch) and batch.ndim != 1:
        raise BatchError(
            f"{where}: the batch{at} is a structured array of shape {batch.shape}; this operator needs one row "
            "per element, a 1-D structured array (np.array(rows, dtype) makes one from a list of tuples, not of "
            "lists)"
        )
    names = column_names(batch)
    if is_arrow(batch):
        refuse_repeated_names(batch, names, where, at)
    for name in needed:
        if name not in names:
            raise KeyColumnError(
                f"{where}: no column {name!r} in the {batch_kind(batch)}{at}; its columns are {list(names)}",
                name,
                names,
            )
    if keys:
        check_key_columns(batch, keys, where, time)


def key_hashes(batch: Any, keys: Sequence[str]) -> np.ndarray:
    """One ``uint64`` per row combining :func:`~scopes.hashing.stable_hash` of each key column (on every worker)."""
    result: np.ndarray | None = None
    for key in keys:
        hashes = stable_hash_arrow(batch.column(key)) if is_arrow(batch) else stable_hash_array(batch[key])
        result = hashes.copy() if result is None else (result * np.uint64(0x100000001B3)) ^ hashes
    assert result is not None
    return result


class KeyColumnsHash:
    """The routing key of several key columns: the columns checked (present, of a key type), then :func:`key_hashes`."""

    __slots__ = ("keys", "where")

    def __init__(self, keys: tuple[str, ...], where: str) -> None:
        """Hash the columns ``keys`` of each batch for the operator ``where``."""
        self.keys = keys
        self.where = where

    def __call__(self, batch: Any) -> np.ndarray:
        """One ``uint64`` per row of ``batch``."""
        return self.keys_at(batch, None)

    def keys_at(self, batch: Any, time: Any) -> np.ndarray:
        """One ``uint64`` per row of ``batch``, the batch of ``time`` (which an error names)."""
        check_columns(batch, self.keys, self.where, time, self.keys)
        if is_arrow(batch):
            for key in self.keys:  # a string that is not UTF-8: refused before hashing, which meets it only at times
                refuse_invalid_text(batch.column(key), key, self.where, time)
        return key_hashes(batch, self.keys)


def key_contract(keys: Sequence[str], where: str, objects: bool = True) -> ExchangeBatch:
    """The exchange that sends rows with equal keys to one worker: by the column, or by :func:`key_hashes`.

    Either way a key column of a type the operators cannot key by is refused
    there, at every worker count (:mod:`scopes.key_types`); so are NumPy
    batches with ``object`` fields when ``objects`` is false (the joins, which
    send whole rows: objects cannot cross processes).
    """
    if len(keys) == 1:
        return ExchangeBatch(keys[0], where, objects)
    return ExchangeBatch(KeyColumnsHash(tuple(keys), where), where, objects)


# ---------------------------------------------------------------------------------------------- NumPy grouping


def _group(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(order, starts, distinct keys)``: rows sorted by key, where each group starts, and its key.

    ``keys`` is a key column, or a structured array of key columns.  All NaN are
    one key (:func:`~scopes.key_equality.differing_rows`; NaN sorts last, so a
    group's NaN rows are adjacent), and ``-0.0`` is ``0.0``: a float key comes out as
    ``0.0`` or the one NaN of :data:`~scopes.key_equality.NAN`, whichever row came first.
    """
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    if len(ordered) == 0:
        return order, np.empty(0, np.intp), ordered
    names = ordered.dtype.names
    columns = [ordered] if names is None else [ordered[name] for name in names]
    starts = np.concatenate(([0], np.flatnonzero(differing_rows(columns)) + 1))
    distinct = ordered[starts]
    for name in [None] if names is None else names:
        column = distinct if name is None else distinct[name]
        if column.dtype.kind == "f":  # each group's key as Arrow's grouping gives it: 0.0 for -0.0, one NaN
            column[...] = np.where(np.isnan(column), NAN, column + 0.0)
    return order, starts, distinct


def _widened(values: np.ndarray) -> np.ndarray:
    """``values`` in the type sums are kept in: ``int64``, ``uint64`` or ``float64`` (others unchanged)."""
    kind = values.dtype.kind
    if kind in "ib":
        return values.astype(np.int64, copy=False)
    if kind == "u":
        return values.astype(np.uint64, copy=False)
    if kind == "f":
        return values.astype(np.float64, copy=False)
    return values


def _reduce_numpy(batch: np.ndarray, keys: Sequence[str], parts: Sequence[tuple[str, str, str]]) -> np.ndarray:
    """Group ``batch`` by ``keys``; each ``(source column, reduction, output column)`` is reduced per group.

    The reduction is ``count`` (rows) or ``sum``, ``min``, ``max``.  Returns a
    structured array of the key columns and the output columns.
    """
    from numpy.lib import recfunctions

    key_values = batch[keys[0]] if len(keys) == 1 else recfunctions.repack_fields(batch[list(keys)])
    order, starts, distinct = _group(key_values)
    columns: list[tuple[str, np.ndarray]] = []
    for source, reduction, output in parts:
        if reduction == "count":
            ends = np.append(starts[1:], len(batch)) if len(starts) else starts
            columns.append((output, (ends - starts).astype(np.int64)))
            continue
        values = batch[source][order]
        if reduction == "total":
            values = values.astype(np.float64, copy=False)
        elif reduction == "sum":
            values = _widened(values)
        reduced = getattr(np, _REDUCE[reduction]).reduceat(values, starts) if len(starts) else values[:0]
        columns.append((output, reduced))
    key_fields = [(keys[0], distinct.dtype)] if len(keys) == 1 else [(k, distinct.dtype[k]) for k in keys]
    result = np.empty(len(distinct), [*key_fields] + [(name, values.dtype) for name, values in columns])
    if len(keys) == 1:
        result[keys[0]] = distinct
    else:
        for key in keys:
            result[key] = distinct[key]
    for name, values in columns:
        result[name] = values
    return result


# ---------------------------------------------------------------------------------------------- Arrow grouping


def _reduce_arrow(table: Any, keys: Sequence[str], parts: Sequence[tuple[str, str, str]]) -> Any:
    """:func:`_reduce_numpy` for an Arrow table, with ``Table.group_by(...).aggregate`` (one thread).

    Arrow has no kernels for ``float16`` nor for dictionaries: a ``float16``
    column is reduced as ``float32`` (its ``min`` and ``max`` given back as
    ``float16``, which holds them exactly; its ``sum`` is ``float64``, as
    NumPy's), a dictionary column as its values.  A ``total`` is the ``sum`` of
    the column's integers or booleans as ``float64`` (other numbers as they are).
    """
    import pyarrow as pa  # type: ignore[import-untyped]

    if batch_kind(table) == "RecordBatch":
        table = pa.Table.from_batches([table])
    table = canonical_arrow_keys(table, keys)  # Arrow groups floats by their bits: one NaN, one zero
    halves: set[str] = set()
    for source in dict.fromkeys(source for source, _, _ in parts):
        kind = table.schema.field(source).type
        if pa.types.is_dictionary(kind):
            table = table.set_column(table.schema.get_field_index(source), source, decoded(table.column(source)))
            kind = kind.value_type
        if pa.types.is_float16(kind):
            halves.add(source)
            table = table.set_column(
                table.schema.get_field_index(source), source, table.column(source).cast(pa.float32())
            )
    table, parts = _float_totals(table, parts)
    grouped = table.group_by(list(keys), use_threads=False).aggregate(
        [(source, reduction) for source, reduction, _ in parts]
    )
    arrays = [grouped.column(key) for key in keys]
    for source, reduction, _ in parts:
        values = grouped.column(f"{source}_{reduction}")
        if source in halves and reduction in ("min", "max"):
            values = values.cast(pa.float16())
        arrays.append(values)
    return pa.table(arrays, names=list(keys) + [output for _, _, output in parts])


def _float_totals(table: Any, parts: Sequence[tuple[str, str, str]]) -> tuple[Any, list[tuple[str, str, str]]]:
    """``table`` and ``parts`` with each ``total`` part, and each ``sum`` of booleans, a ``sum`` of a column of its own.

    That column, named as the part's output, holds a ``total``'s integers and
    booleans as ``float64`` (other numbers as they are), and a ``sum``'s
    booleans as ``int64``: Arrow would sum booleans as ``uint64``, where NumPy
    (:func:`_widened`) and pandas give ``int64``.
    """
    import pyarrow as pa

    result = []
    for source, reduction, output in parts:
        if reduction == "total":
            values = table.column(source)
            kind = values.type
            if pa.types.is_integer(kind) or pa.types.is_boolean(kind) or pa.types.is_null(kind):
                values = values.cast(pa.float64(), safe=False)  # rounded, as a float sum rounds anyway
            table = table.append_column(output, values)
            source, reduction = output, "sum"
        elif reduction == "sum" and pa.types.is_boolean(table.schema.field(source).type):
            table = table.append_column(output, table.column(source).cast(pa.int64()))
            source = output
        result.append((source, reduction, output))
    return table, result


def to_arrow(batch: Any, where: str = "to_arrow") -> Any:
    """An Arrow table of ``batch`` (a structured array is converted column by column; Arrow is kept).

    A field Arrow cannot convert (an ``object`` field of values of no common
    type, an unknown unit) raises :class:`~scopes.errors.BatchError` naming
    ``where`` (the operator), the field and its dtype.
    """
    import pyarrow as pa

    if batch_kind(batch) == "Table":
        return batch
    if is_arrow(batch):
        return pa.Table.from_batches([batch])
    names = list(batch.dtype.names)
    arrays = []
    for name in names:
        try:
            arrays.append(pa.array(batch[name]))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as error:
            raise BatchError(
                f"{where}: the field {name!r} (numpy dtype {batch.dtype[name]}) does not convert to an Arrow "
                f"column ({error}); give it a dtype Arrow has (an object field needs values of one kind: all "
                "str, all int, ...), or send Arrow tables"
            ) from error
    return pa.table(arrays, names=names)


def _reduce(batch: Any, keys: Sequence[str], parts: Sequence[tuple[str, str, str]]) -> Any:
    """:func:`_reduce_arrow` or :func:`_reduce_numpy`, by the batch's kind."""
    if is_arrow(batch):
        return _reduce_arrow(batch, keys, parts)
    return _reduce_numpy(batch, keys, parts)


def _concat(batches: list[Any], where: str) -> Any:
    """One batch of partials: all NumPy, or all converted to Arrow when any is Arrow.

    Columns of one kind and different widths (``int32`` and ``int64``, ``string``
    and ``large_string``) are combined in their common type: Arrow's permissive
    promotion, NumPy's ``result_type`` of the structured dtypes.
    """
    if len(batches) == 1:
        return batches[0]
    if any(is_arrow(batch) for batch in batches):
        import pyarrow as pa

        tables = [to_arrow(batch, where) for batch in batches]
        try:
            return pa.concat_tables(tables, promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as error:
            schemas = sorted({str(table.schema).replace("\n", ", ") for table in tables})
            raise BatchError(
                f"{where}: the batches of one time do not have one type ({'; '.join(schemas)}); "
                "give every batch of the stream the same column types"
            ) from error
    try:
        dtypes = {batch.dtype for batch in batches}
        if len(dtypes) > 1:
            common = _exact_common_dtype(batches, np.result_type(*dtypes))
            batches = [batch.astype(common, copy=False) for batch in batches]
        return concat_batches(batches)
    except (BatchError, TypeError, ValueError) as error:
        kinds = sorted({str(getattr(batch, "dtype", None) or batch.schema) for batch in batches})
        raise BatchError(
            f"{where}: the partial aggregates of one time do not have one type ({'; '.join(kinds)}); "
            "give every batch of the stream the same column types"
        ) from error


def _exact_common_dtype(batches: list[np.ndarray], common: np.dtype) -> np.dtype:
    """``common`` (NumPy's ``result_type`` of the batches' structured dtypes) with integer fields kept integers.

    NumPy's common type of ``uint64`` and a signed integer is ``float64``, which
    would turn the keys 5 into 5.0 and make ``2**63 - 1`` and ``2**63`` one key.
    Such a field is combined as ``int64``, as Arrow's permissive promotion does,
    and a ``uint64`` value past ``2**63 - 1`` is refused (a ``ValueError``), as Arrow refuses it.
    """
    if common.names is None:
        return common
    fields = []
    for name in common.names:
        kind = common[name]
        kinds = {batch.dtype[name].kind for batch in batches}
        if kind.kind == "f" and kinds <= {"b", "i", "u"}:
            for batch in batches:
                if batch.dtype[name].kind == "u" and len(batch) and batch[name].max() > 2**63 - 1:
                    raise ValueError(f"the {name!r} value {batch[name].max()} does not fit a signed 64-bit integer")
            kind = np.dtype(np.int64)
        fields.append((name, kind))
    return np.dtype(fields)


# ---------------------------------------------------------------------------------------------- the operator


def partial_aggregates(plan: AggregationPlan, batch: Any) -> Any:
    """``batch`` reduced to one row of partial aggregates per distinct key.

    A structured array with ``object`` fields to key by or aggregate, or with
    strings to take the ``min`` or ``max`` of, is aggregated by Arrow
    (:func:`~scopes.key_types.numpy_needs_arrow`), so its partials are Arrow.
    """
    if not is_arrow(batch) and numpy_needs_arrow(batch, plan.keys, plan.outputs):
        batch = to_arrow(batch, plan.where)
    parts = [(column, part, partial_name(column, part)) for column, part in plan.partials]
    return _reduce(batch, plan.keys, parts)


def combine_partials(plan: AggregationPlan, partials: list[Any]) -> Any:
    """Several batches of partial aggregates (one time) combined into one, one row per distinct key."""
    batch = _concat(partials, plan.where)
    if len(partials) == 1:
        return batch
    parts = [(partial_name(c, p), _COMBINE[p], partial_name(c, p)) for c, p in plan.partials]
    return _reduce(batch, plan.keys, parts)


def finish(plan: AggregationPlan, partials: Any) -> Any:
    """The output batch (keys, then every aggregation) from combined partial aggregates."""
    if is_arrow(partials):
        import pyarrow as pa
        import pyarrow.compute as pc  # type: ignore[import-untyped]

        arrays = [partials.column(key) for key in plan.keys]
        for column, function, _ in plan.outputs:
            if function == "mean":
                total = pc.cast(partials.column(partial_name(column, "total")), pa.float64(), safe=False)
                arrays.append(pc.divide(total, partials.column(partial_name(column, "count"))))
            else:
                arrays.append(partials.column(partial_name(column, function)))
        return pa.table(arrays, names=list(plan.keys) + [name for _, _, name in plan.outputs])
    columns: list[tuple[str, np.ndarray]] = [(key, partials[key]) for key in plan.keys]
    for column, function, name in plan.outputs:
        if function == "mean":
            total = partials[partial_name(column, "total")].astype(np.float64)
            columns.append((name, total / partials[partial_name(column, "count")]))
        else:
            columns.append((name, partials[partial_name(column, function)]))
    result = np.empty(len(partials), [(name, values.dtype) for name, values in columns])
    for name, values in columns:
        result[name] = values
    return result


def prepare_arrow() -> None:
    """Import Arrow's query engine now if the program uses pyarrow (never imports pyarrow itself).

    ``Table.group_by`` and ``Table.join`` import ``pyarrow.acero`` (and with it
    ``pyarrow.dataset`` and pandas) on first use: half a second that would
    otherwise land in the first time with data.
    """
    if loaded("pyarrow") is not None:
        importlib.import_module("pyarrow.acero")


def aggregate_batch(stream: S, keys: str | Sequence[str], aggregations: Sequence[Sequence[str]], name: str) -> S:
    """Per key and time, the aggregations of the stream's columnar batches (see the module's docstring)."""
    where = describe_operator(name, stream.scope.path)
    plan = plan_aggregation(keys, aggregations, where)
    prepare_arrow()
    local = unary(stream, Pipeline, f"{name}Partial", _partial_constructor(plan, where), None, notify=False)
    return unary(local, key_contract(plan.keys, where), name, _final_constructor(plan), None, notify=True)


def _partial_constructor(plan: AggregationPlan, where: str) -> Callable[[Capability, OperatorInfo], Any]:
    """The local step: each invocation's batches of one time become one batch of partial aggregates."""

    def constructor(capability: Capability, info: OperatorInfo) -> Callable[[OperatorInput, OperatorOutput], None]:
        capability.drop()

        def logic(input: OperatorInput, output: OperatorOutput) -> None:
            found: dict[Any, tuple[Any, list[Any]]] = {}
            for ref, batch in input:
                if not len(batch):
                    continue
                check_columns(batch, plan.columns, where, ref.time, plan.keys)
                check_aggregated_columns(batch, plan.outputs, where, ref.time)
                entry = found.get(ref.time)
                if entry is None:
                    entry = found[ref.time] = (ref.retain(), [])
                entry[1].append(partial_aggregates(plan, batch))
            for capability, partials in found.values():
                info.position = f"combining the partial aggregates of time {capability.time!r}"
                output.session(capability).give_batch(combine_partials(plan, partials))
                capability.drop()
            info.position = None

        return logic

    return constructor


def sort_key_of(capability: Capability) -> Callable[[Any], Any] | None:
    """The sort key of the times of ``capability``'s scope: the order to handle times that complete together."""
    timestamp_type = capability.output_port.timestamp_type
    return natural_order if timestamp_type is None else timestamp_type.sort_key()


def _final_constructor(plan: AggregationPlan) -> Callable[[Capability, OperatorInfo], Any]:
    """The owner's step: partials of a time gathered, combined and finished once the time is complete."""

    def constructor(capability: Capability, info: OperatorInfo) -> Callable[[OperatorInput, OperatorOutput], None]:
        order = sort_key_of(capability)
        capability.drop()
        pending: dict[Any, tuple[Capability, list[Any]]] = {}

        def logic(input: OperatorInput, output: OperatorOutput) -> None:
            for ref, batch in input:
                entry = pending.get(ref.time)
                if entry is None:
                    entry = pending[ref.time] = (ref.retain(), [])
                entry[1].append(batch)
            frontier = input.frontier
            for time in in_time_order((time for time in pending if not frontier.less_equal(time)), order):
                info.position = f"combining the partial aggregates of the complete time {time!r}"
                capability, partials = pending.pop(time)
                output.session(capability).give_batch(finish(plan, combine_partials(plan, partials)))
                output.flush()
                capability.drop()
            info.position = None

        return logic

    return constructor


# ---------------------------------------------------------------------------------------------- the join


def join_batch(
    stream: S,
    other: S,
    keys: str | Sequence[str],
    right_keys: str | Sequence[str] | None,
    join_type: str,
    suffixes: tuple[str, str],
    name: str,
) -> S:
    """Per time, the equi-join of ``stream``'s rows with ``other``'s on key columns (see the module's docstring)."""
    where = check_same_scope(stream, other, name)
    left = key_columns(keys, where)
    right = left if right_keys is None else key_columns(right_keys, where, "right key")
    if len(right) != len(left):
        raise BuildError(f"{where}: {len(left)} left key column(s) {list(left)} but {len(right)} right {list(right)}")
    if join_type not in JOIN_TYPES:
        raise BuildError(f"{where}: unknown join type {join_type!r}; the join types are {', '.join(JOIN_TYPES)}")
    if len(suffixes) != 2 or suffixes[0] == suffixes[1] or not all(isinstance(s, str) for s in suffixes):
        raise BuildError(f"{where}: suffixes must be two different strings, got {suffixes!r}")
    if importlib.util.find_spec("pyarrow") is None:
        raise BuildError(f"{where}: join_batch joins with Arrow; install pyarrow (pip install 'pytimely[files]')")
    importlib.import_module("pyarrow")
    prepare_arrow()
    join = _Join(where, left, right, join_type, suffixes)
    inputs = [(stream, key_contract(left, where, objects=False)), (other, key_contract(right, where, objects=False))]
    return generic(stream.scope, name, inputs, 1, join.constructor, notify=True, frontiers=True)[0]


@dataclass(frozen=True)
class _Join:
    """The arguments of one :func:`join_batch`, and its operator's constructor."""

    where: str
    left: tuple[str, ...]
    right: tuple[str, ...]
    join_type: str
    suffixes: tuple[str, str]

    def join(self, lefts: list[Any], rights: list[Any]) -> Any:
        """The join of the rows of one time (``None`` when it has no rows)."""
        if not lefts or (not rights and self.join_type != "left anti"):
            return None
        table = self.side(lefts, self.left)
        if not rights:
            return table
        right = self.side(rights, self.right)
        return join_tables(table, right, self.left, self.right, self.join_type, self.suffixes, self.where)

    def side(self, batches: list[Any], keys: tuple[str, ...]) -> Any:
        """One side's batches of a time as one Arrow table, its key columns canonical (one NaN, decoded values).

        Arrow matches floats by their bits, and cannot combine differing
        dictionaries: each batch's keys are made canonical before the batches
        are combined (in their common types).
        """
        return _concat([canonical_arrow_keys(to_arrow(batch, self.where), keys) for batch in batches], self.where)

    def constructor(self, capabilities: list[Capability], info: OperatorInfo, frontiers: list[Any]) -> Any:
        """Gather both sides per time; join a time once neither input frontier can reach it."""
        order = sort_key_of(capabilities[0])
        capabilities[0].drop()
        pending: dict[Any, tuple[Capability, list[Any], list[Any]]] = {}

        def logic(inputs: list[OperatorInput], outputs: list[OperatorOutput]) -> None:
            for side, (input, needed) in enumerate(zip(inputs, (self.left, self.right), strict=True)):
                for ref, batch in input:
                    if not len(batch):
                        continue
                    check_columns(batch, needed, self.where, ref.time, needed)
                    entry = pending.get(ref.time)
                    if entry is None:
                        entry = pending[ref.time] = (ref.retain(), [], [])
                    (entry[2] if side else entry[1]).append(batch)
            done = [t for t in pending if not any(frontier.less_equal(t) for frontier in frontiers)]
            for time in in_time_order(done, order):
                info.position = f"joining the rows of the complete time {time!r}"
                capability, lefts, rights = pending.pop(time)
                result = self.join(lefts, rights)
                if result is not None and result.num_rows:
                    outputs[0].session(capability).give_batch(result)
                    outputs[0].flush()
                capability.drop()
            info.position = None

        return logic
