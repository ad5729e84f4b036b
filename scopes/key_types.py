"""Key column types of the columnar keyed operators: which are taken, and the refusal of the others.

The columnar operators that keep state per key (``aggregate_batch``,
``join_batch``, the columnar windows and sessions, ``join_latest``) and the
routing by key columns (``exchange_batch(column)``) hash, group, sort and join
key columns in NumPy and Arrow.  Every key column type either works, with the
same answer at every worker count, or is refused when the first batch with it
arrives, by :func:`check_key_columns` (called by the operators on every
batch, and by the exchange in front of them), with a
:class:`~scopes.errors.KeyTypeError` that names the operator, the column, its
type and what to convert it to.  The check is one dictionary lookup per key
column and batch: the verdict on each type is kept.

Taken (Arrow types, and the NumPy dtypes that convert to them):

* integers of every width, signed or not; floats, ``float16`` included (Arrow
  sorts and compares it as ``float32``; the output keeps ``float16``); booleans;
* ``string``, ``large_string``, ``binary``, ``large_binary`` and fixed-size
  binary (NumPy ``U`` and ``S``);
* dictionary-encoded columns of any taken type: decoded to their values as the
  operator starts, so that batches with different dictionaries, or a dictionary
  in one batch and plain strings in the next, hold one key per value (the output
  has the value type);
* ``date32``, ``date64``, ``timestamp`` of any unit, with or without a time
  zone, ``time32``, ``time64``, ``duration`` (NumPy ``datetime64`` and
  ``timedelta64`` in the units Arrow has: days for dates, and ``s``, ``ms``,
  ``us``, ``ns``);
* ``decimal`` columns;
* the ``null`` type, and nulls in a column of any taken type (NumPy ``NaT``
  is a null);
* NumPy ``object`` fields, which are converted to Arrow (Arrow infers one type
  for them, for example ``string`` for Python strings); a field whose values
  have no common Arrow type (strings and numbers, say) is refused then.  The
  joins refuse NumPy batches with ``object`` fields outright: they send whole
  rows to the key's worker, and objects cannot cross processes, so they would
  work on threads and fail on processes (``exchange_batch`` routes them, and the
  wire encoding refuses them between processes, as it does every object array).

Refused, with what to do instead: nested types (lists, structs, maps, unions),
Arrow's string and binary views, intervals, extension types; NumPy complex
numbers, ``longdouble``, sub-arrays and raw ``void`` fields, and date and time
units Arrow does not have (``datetime64[h]``, ``[Y]``, ...).

The aggregated columns of ``aggregate_batch`` and the columnar windows are
checked the same way (:func:`check_aggregated_columns`): ``count`` takes any
column, ``sum`` and ``mean`` numbers (``float16`` is added as ``float32``),
``min`` and ``max`` numbers, strings, binary, dates and times.

How keys compare, at every worker count: all NaN are one key and ``-0.0`` is
``0.0`` (:mod:`scopes.key_equality`); a null is a key of its own (one group in
an aggregation or window, and a null key joins a null key, as ``None`` does in
the record-wise operators); equal values of different types (``int32`` and
``int64``, a dictionary and plain strings, ``timestamp[ms]`` and
``timestamp[ns]``) are one key and reach one worker
(:func:`~scopes.hashing.stable_hash_arrow`), and batches of such types are
combined in their common type (Arrow's permissive promotion: ``int64`` for
``int32`` and ``int64``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from scopes.batches import is_arrow
from scopes.errors import BatchError, KeyTypeError
from scopes.lazy_import import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

NUMPY_DATE_UNITS = frozenset({"D", "s", "ms", "us", "ns"})
"""The ``datetime64`` units Arrow converts (``D`` to ``date32``, the others to ``timestamp``)."""
NUMPY_DURATION_UNITS = frozenset({"s", "ms", "us", "ns"})
"""The ``timedelta64`` units Arrow converts (to ``duration``)."""

_verdicts: dict[Any, str | None] = {}
"""Each type seen so far (an Arrow type or a NumPy dtype): ``None`` when it is taken, else why not and what to do."""


def _ordered(kind: Any) -> bool:
    """Whether an Arrow type is text, binary, a date or a time: not a number, but ordered (min, max, sort)."""
    import pyarrow as pa  # type: ignore[import-untyped]

    types = pa.types
    return bool(
        types.is_string(kind)
        or types.is_large_string(kind)
        or types.is_binary(kind)
        or types.is_large_binary(kind)
        or types.is_fixed_size_binary(kind)
        or types.is_date(kind)
        or types.is_timestamp(kind)
        or types.is_time(kind)
    )


def _arrow_problem(kind: Any) -> str | None:
    """Why an Arrow key column of type ``kind`` is refused, with what to do, or ``None`` when it is taken."""
    import pyarrow as pa

    types = pa.types
    if types.is_dictionary(kind):
        return _arrow_problem(kind.value_type)
    if (
        types.is_integer(kind)
        or types.is_floating(kind)
        or types.is_boolean(kind)
        or _ordered(kind)
        or types.is_duration(kind)
        or types.is_decimal(kind)
        or types.is_null(kind)
    ):
        return None
    if types.is_struct(kind):
        return (
            "Arrow cannot group or join by a struct: key by its fields instead (pyarrow.compute.struct_field, or "
            "Table.flatten, then name those columns as the keys)"
        )
    nested = (types.is_list(kind), types.is_large_list(kind), types.is_fixed_size_list(kind), types.is_map(kind))
    if any(nested) or "list" in str(kind):
        return (
            "Arrow cannot group or join by a list or map, and it has no stable hash to route by: make it a scalar "
            "column first (for example a string, with pyarrow.compute.cast to a list of strings and then "
            "pyarrow.compute.binary_join)"
        )
    if str(kind) in ("string_view", "binary_view"):  # pyarrow 16 and later
        plain = "pa.string()" if str(kind) == "string_view" else "pa.binary()"
        return f"cast the column to {plain} with pyarrow.compute.cast before the operator"
    return (
        "keys must be numbers, booleans, strings, binary, dates and times, decimals or nulls: cast the column "
        "to one of these with pyarrow.compute.cast before the operator"
    )


def _numpy_problem(dtype: Any) -> str | None:
    """Why a NumPy key field of ``dtype`` is refused, with what to do, or ``None`` when it is taken."""
    if dtype.shape:
        return "a field of sub-arrays has no single key per row: make each element a field of its own"
    kind = dtype.kind
    if kind in "biuUSO" or (kind == "f" and dtype.itemsize <= 8):
        return None
    if kind == "f":
        return "Arrow has no float wider than 64 bits: convert the field with astype('float64') first"
    if kind in "mM":
        unit, count = np.datetime_data(dtype)
        units = NUMPY_DATE_UNITS if kind == "M" else NUMPY_DURATION_UNITS
        if unit in units and count == 1:
            return None
        wanted = "datetime64[s]" if kind == "M" else "timedelta64[s]"
        return (
            f"its unit is not one Arrow has ({', '.join(sorted(units))}): convert the field with "
            f"astype('{wanted}') (or another of those units) first"
        )
    if kind == "c":
        return "complex numbers neither sort nor convert to Arrow: split the field into two float fields (real, imag)"
    return "convert the field to numbers, strings ('U'), bytes ('S') or datetime64 first"


def key_type_problem(kind: Any) -> str | None:
    """Why a key column of ``kind`` (an Arrow type or a NumPy dtype) is refused, or ``None`` when it is taken."""
    try:
        return _verdicts[kind]
    except KeyError:
        pass
    except TypeError:  # an unhashable type object: judge it every time
        return _numpy_problem(kind) if isinstance(kind, np.dtype) else _arrow_problem(kind)
    verdict = _numpy_problem(kind) if isinstance(kind, np.dtype) else _arrow_problem(kind)
    if len(_verdicts) > 4096:  # a program making ever new types (decimal precisions, time zones): start over
        _verdicts.clear()
    _verdicts[kind] = verdict
    return verdict


def describe_key_type(kind: Any) -> str:
    """``kind`` as the text messages show: an Arrow type as Arrow prints it, a NumPy dtype as ``numpy dtype ...``."""
    return f"numpy dtype {kind}" if isinstance(kind, np.dtype) else f"{kind}"


def check_key_type(kind: Any, column: str, where: str, time: Any = None) -> None:
    """Raise :class:`~scopes.errors.KeyTypeError` unless a key column ``column`` of type ``kind`` is taken."""
    problem = key_type_problem(kind)
    if problem is None:
        return
    at = f" at time {time!r}" if time is not None else ""
    described = describe_key_type(kind)
    raise KeyTypeError(
        f"{where}: the key column {column!r}{at} is {described}, which it cannot key by: {problem}",
        column,
        str(kind),
    )


def check_key_columns(batch: Any, keys: Sequence[str], where: str, time: Any = None) -> None:
    """:func:`check_key_type` of every key column of ``batch`` (an Arrow batch or a structured array that has them)."""
    if is_arrow(batch):
        schema = batch.schema
        for key in keys:
            check_key_type(schema.field(key).type, key, where, time)
        return
    dtype = batch.dtype
    for key in keys:
        check_key_type(dtype[key], key, where, time)


# ---------------------------------------------------------------------------------------------- aggregated columns

_NUMBERS = "sum and mean add numbers (integers, floats, booleans, decimals)"


def _arrow_aggregate_problem(kind: Any, function: str) -> str | None:
    """Why ``function`` cannot aggregate an Arrow column of type ``kind``, with what to do, or ``None``."""
    import pyarrow as pa

    types = pa.types
    if types.is_dictionary(kind):
        return _arrow_aggregate_problem(kind.value_type, function)  # decoded before it is aggregated
    numeric = types.is_integer(kind) or types.is_floating(kind) or types.is_boolean(kind) or types.is_decimal(kind)
    if numeric or types.is_null(kind):
        return None
    if function in ("sum", "mean"):
        return f"{_NUMBERS}: cast the column with pyarrow.compute.cast first, or count it"
    if _ordered(kind):
        return None
    if types.is_duration(kind):
        return "Arrow has no min or max of durations: cast the column to int64 (its count of units) first"
    return "min and max need numbers, strings, binary, dates or times: count the column, or cast it first"


def _numpy_aggregate_problem(dtype: Any, function: str) -> str | None:
    """Why ``function`` cannot aggregate a NumPy field of ``dtype``, with what to do, or ``None``."""
    kind = dtype.kind
    if dtype.shape or kind == "V":
        return "a field of sub-arrays or raw bytes has no value per row to aggregate: count it, or split it"
    if kind in "biuO" or (kind == "f" and dtype.itemsize <= 8):  # object fields are aggregated as Arrow
        return None
    if kind == "m":
        return "Arrow has no sum, min or max of durations: convert the field with astype('int64') first"
    if kind == "c":
        return "complex numbers neither order nor convert to Arrow: split the field into two float fields"
    if function in ("sum", "mean"):
        return f"{_NUMBERS}: convert the field with astype first, or count it"
    if kind in "USM":  # strings and bytes are aggregated as Arrow; dates by NumPy
        return None
    return "min and max need numbers, strings, bytes or dates: convert the field with astype first"


def aggregate_problem(kind: Any, function: str) -> str | None:
    """Why ``function`` (``count``, ``sum``, ``min``, ``max``, ``mean``) cannot aggregate a column of ``kind``.

    ``None`` when it can.  ``count`` counts any column.  ``kind`` is an Arrow
    type or a NumPy dtype; the verdicts are kept, as for key types.
    """
    if function == "count":
        return None
    entry: tuple[Any, str] | None = (kind, function)
    try:
        return _verdicts[entry]
    except KeyError:
        pass
    except TypeError:
        entry = None
    is_numpy = isinstance(kind, np.dtype)
    verdict = _numpy_aggregate_problem(kind, function) if is_numpy else _arrow_aggregate_problem(kind, function)
    if entry is not None:
        if len(_verdicts) > 4096:  # as for key types: a program making ever new types starts over
            _verdicts.clear()
        _verdicts[entry] = verdict
    return verdict


def check_aggregated_columns(batch: Any, outputs: Sequence[tuple[str, str, str]], where: str, time: Any) -> None:
    """Raise :class:`~scopes.errors.BatchError` unless each ``(column, function, name)`` of ``outputs`` can be
    computed on ``batch``'s column (columns the batch lacks are the operator's own, and skipped)."""
    names = batch.schema.names if is_arrow(batch) else batch.dtype.names
    for column, function, _ in outputs:
        if column not in names:
            continue
        kind = batch.schema.field(column).type if is_arrow(batch) else batch.dtype[column]
        problem = aggregate_problem(kind, function)
        if problem is not None:
            at = f" at time {time!r}" if time is not None else ""
            raise BatchError(
                f"{where}: cannot compute {function} of the column {column!r}{at}, which is "
                f"{describe_key_type(kind)}: {problem}"
            )


def numpy_needs_arrow(batch: Any, keys: Sequence[str], outputs: Sequence[tuple[str, str, str]]) -> bool:
    """Whether a structured array is aggregated as Arrow rather than by NumPy.

    So it is when a key or aggregated field holds Python objects (Arrow gives
    them one type; NumPy would compare them one by one, and cannot order
    ``None`` or a string against a number), or ``min`` or ``max`` is taken of
    strings or bytes (NumPy has no ``fmin`` of those).
    """
    fields = batch.dtype.fields
    if any(fields[key][0].kind == "O" for key in keys):
        return True
    for column, function, _ in outputs:
        field = fields.get(column)
        if field is not None and (field[0].kind == "O" or (function in ("min", "max") and field[0].kind in "US")):
            return True
    return False


def sortable(column: Any) -> Any:
    """An Arrow key column as Arrow can sort and compare it: ``float16`` as ``float32``, small decimals as 128 bits.

    ``None`` for a column of the ``null`` type (every row is null, so it orders
    and tells apart nothing).  Equal values stay equal and the order is kept.
    """
    import pyarrow as pa

    kind = column.type
    if pa.types.is_null(kind):
        return None
    if pa.types.is_float16(kind):
        return column.cast(pa.float32())
    if pa.types.is_decimal(kind) and kind.bit_width < 128:
        return column.cast(pa.decimal128(kind.precision, kind.scale))
    return column
