"""Arrow values that Python cannot hold: finding them, writing them safely, and the error that names them.

Arrow holds values that Python's types cannot: a ``timestamp[s]``, ``[ms]`` or
``[us]`` or a ``date32``/``date64`` past year 9999 or before year 1
(``datetime`` holds years 1 to 9999), a ``duration[s]`` or ``[ms]`` past
``timedelta.max``, a timestamp in a time zone this Python does not know, a
decimal whose scale is larger than its precision (``decimal128(38, 40)``), a
string that is not UTF-8.  ``to_pylist()`` and ``as_py()`` raise a bare
``OverflowError``, ``ValueError``, ``KeyError`` or ``UnicodeDecodeError`` for
them, and so do ``str()`` and ``repr()`` of such a scalar.

A ``time32`` or ``time64`` of 24 hours or more, or a negative one, is worse:
pyarrow does not raise but wraps it around midnight (``time32[s]`` 90000 becomes
``01:00:00``), a plausible wrong value.  Arrow calls such a value invalid, and
``read_files``, which validates every batch, refuses it; a batch built by user
code is not validated, so where records are made of it :func:`records` (and
:func:`refuse_wrapped_times`, for the places that call ``to_pylist()``
themselves) refuses it.  Only columns whose type is or holds a time of day are
examined (a look at the schema's types decides), with Arrow's ``min_max`` on
the values' integers, in C; the row is found by halving only once one is out
of range (:func:`find_wrapped_time`).

Where pytimely turns an Arrow batch into records, it calls ``to_pylist()`` as
before and only when that raises does it look for the value that failed
(:func:`records`, :func:`unconvertible_error`): apart from the times of day,
nothing is checked on the way of batches that convert.  The error,
:class:`~scopes.errors.ArrowValueError` or a subclass, names the column, the
row, the type and the value in Arrow's own text (:func:`value_text`, which never
raises), and says what to do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from scopes.errors import ArrowValueError

__all__ = [
    "CONVERTIBLE",
    "Unconvertible",
    "find_unconvertible",
    "find_wrapped_time",
    "holds_time",
    "records",
    "refuse_wrapped_times",
    "safe_as_py",
    "unconvertible_error",
    "value_text",
]

_WINDOW = 1024
"""Rows converted at a time while looking for the one that fails (one at a time inside the window that fails)."""

_TEXT_LIMIT = 200
"""The longest value text a message quotes."""

ErrorType = TypeVar("ErrorType", bound=ArrowValueError)


class Unconvertible(NamedTuple):
    """Where a value Python cannot hold is: its column (``None`` for a bare array), row, type and Arrow text."""

    column: str | None
    row: int
    arrow_type: str
    text: str
    error: BaseException


def value_text(array: Any, row: int) -> str:
    """Row ``row`` of the Arrow ``array`` (or chunked array) as Arrow writes it; never raises.

    ``str()`` and ``repr()`` of a scalar convert it to Python first, and fail as
    ``as_py()`` does; Arrow's own printer does not.
    """
    try:
        value = array.slice(row, 1)
        if hasattr(value, "combine_chunks"):  # a chunked array: its one value as an array
            value = value.combine_chunks()
        kind = value.type
        valid = value.is_valid()[0].as_py()
        if kind.__class__.__name__ == "DictionaryType" and valid:  # Arrow prints the whole dictionary: its value
            return value_text(value.dictionary, value.indices[0].as_py())
        if kind.__class__.__name__ == "StructType" and valid:  # Arrow prints it by column
            fields = ", ".join(f"{kind.field(i).name}: {value_text(value.field(i), 0)}" for i in range(kind.num_fields))
            text = "{" + fields + "}"
        else:
            text = " ".join(str(value.to_string(window=1, container_window=1, skip_new_lines=True)).split())
            if text.startswith("[") and text.endswith("]"):  # one value of an array: [value]
                text = text[1:-1]
    except Exception:  # noqa: BLE001 - a message must never fail on the value it quotes
        return f"(a {_type_text(array)} value Arrow cannot print)"
    return text if len(text) <= _TEXT_LIMIT else text[: _TEXT_LIMIT - 3] + "..."


def safe_as_py(scalar: Any) -> Any:
    """``scalar.as_py()``, or Arrow's text of it where Python cannot hold it (for error messages); a time of day
    that ``as_py()`` would wrap around midnight is quoted as Arrow writes it too."""
    try:
        if holds_time(scalar.type):
            import pyarrow as pa  # type: ignore[import-untyped]

            if _out_of_day(pa.array([scalar], type=scalar.type)):
                raise ValueError(_OUT_OF_DAY)
        return scalar.as_py()
    except Exception:  # noqa: BLE001 - any failure converting: quote Arrow's text instead
        try:
            import pyarrow as pa

            return _Quoted(value_text(pa.array([scalar], type=scalar.type), 0))
        except Exception:  # noqa: BLE001 - the message must still be made
            return _Quoted(f"(a {_type_text(scalar)} value Python cannot hold)")


class _Quoted(str):
    """Arrow's text of a value, shown bare (not quoted as a string) by ``repr``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


def _type_text(value: Any) -> str:
    try:
        return str(value.type)
    except Exception:  # noqa: BLE001
        return "Arrow"


def _first_failing_row(column: Any) -> tuple[int, BaseException] | None:
    """The first row of ``column`` (an array or chunked array) that ``to_pylist`` refuses, with its error."""
    chunks = getattr(column, "chunks", None)
    offset = 0
    for chunk in chunks if chunks is not None else [column]:
        for start in range(0, len(chunk), _WINDOW):
            window = chunk.slice(start, _WINDOW)
            try:
                window.to_pylist()
                continue
            except Exception:  # noqa: BLE001 - this window holds it: find the row
                pass
            for row in range(len(window)):
                try:
                    window[row].as_py()
                except Exception as error:  # noqa: BLE001
                    return offset + start + row, error
        offset += len(chunk)
    return None


def find_unconvertible(data: Any) -> Unconvertible | None:
    """The first value Python cannot hold in ``data`` (an Arrow table, record batch, array or chunked array),
    column by column; ``None`` when every value converts.  Only for error paths: it converts every value."""
    names = getattr(data, "column_names", None)
    if names is None:  # an array or a chunked array
        found = _first_failing_row(data)
        if found is None:
            return None
        return Unconvertible(None, found[0], _type_text(data), value_text(data, found[0]), found[1])
    for index, name in enumerate(names):
        column = data.column(index)
        found = _first_failing_row(column)
        if found is not None:
            return Unconvertible(str(name), found[0], _type_text(column), value_text(column, found[0]), found[1])
    return None


def why(found: Unconvertible) -> str:
    """Why Python cannot hold the value ``found``, as a phrase (``Python's datetime holds years 1 to 9999``)."""
    kind = found.arrow_type
    error = found.error
    if isinstance(error, UnicodeDecodeError):
        return "it is not valid UTF-8, so it is no Python str"
    nested = any(kind.startswith(prefix) for prefix in ("struct", "list", "large_list", "fixed_size_list", "map"))
    inside = "a value inside it: " if nested else ""
    if isinstance(error, OverflowError) and ("timestamp" in kind or "date" in kind):
        return f"{inside}Python's datetime holds years 1 to 9999 only"
    if isinstance(error, OverflowError) and "duration" in kind:
        return f"{inside}Python's timedelta holds at most 999999999 days"
    if "decimal" in kind and type(error).__name__ == "InvalidOperation":
        return f"{inside}Python's Decimal cannot take it (the type's scale is larger than its precision)"
    if ("time32" in kind or "time64" in kind) and _OUT_OF_DAY in str(error):
        return (
            f"{inside}Python's datetime.time holds 00:00:00 to 23:59:59.999999 only, and pyarrow would wrap it "
            "around midnight without an error"
        )
    if "timestamp" in kind and "tz=" in kind:
        return f"{inside}its time zone is unknown to this Python (install the tzdata package, or fix the zone's name)"
    return f"{inside}Python cannot hold it"


def describe(found: Unconvertible, row_text: str | None = None) -> str:
    """``found`` for a message: ``column 'when' (timestamp[s]), row 2, holds 10000-01-01 00:00:00, which ...``."""
    column = "the array" if found.column is None else f"column {found.column!r}"
    row = row_text if row_text is not None else f"row {found.row}"
    return (
        f"{column} ({found.arrow_type}), {row}, holds {found.text}, which Python cannot hold as a record's value: "
        f"{why(found)} ({type(found.error).__name__}: {found.error})"
    )


CONVERTIBLE = (
    "make the column convertible first (cast it to int64 or string, or replace out-of-range sentinels, for "
    "example by null)"
)
"""The advice every such error ends with: how to make a column Python can hold."""

OPERATOR_ADVICE = (
    f"keep such batches columnar (map_batch and the columnar operators keep Arrow's values), or {CONVERTIBLE}"
)
"""What to do, for an operator that made records of an Arrow batch."""


def unconvertible_error(
    data: Any,
    error: BaseException,
    where: str,
    advice: str = OPERATOR_ADVICE,
    error_type: type[ErrorType] = ArrowValueError,  # type: ignore[assignment]
    row_text: Callable[[Unconvertible], tuple[int, str]] | None = None,
) -> ErrorType | None:
    """The error for ``data``, whose conversion to Python raised ``error``: an ``error_type`` naming the value
    that fails, or ``None`` when every value converts on its own (then ``error`` was not about a value).

    ``row_text`` gives the row's number and text where the row is not ``data``'s (a file's, say).
    """
    found = find_unconvertible(data)
    if found is None:
        return None
    return _error(found, where, advice, error_type, row_text)


def _error(
    found: Unconvertible,
    where: str,
    advice: str,
    error_type: type[ErrorType],
    row_text: Callable[[Unconvertible], tuple[int, str]] | None,
) -> ErrorType:
    row, text = (found.row, None) if row_text is None else row_text(found)
    message = f"{where}: {describe(found, text)}; {advice}"
    return error_type(message, found.column, row, found.arrow_type, found.text)


def refuse_wrapped_times(
    data: Any,
    where: str,
    advice: str = OPERATOR_ADVICE,
    error_type: type[ErrorType] = ArrowValueError,  # type: ignore[assignment]
    row_text: Callable[[Unconvertible], tuple[int, str]] | None = None,
) -> None:
    """Raise an ``error_type`` naming the first time of day of ``data`` (an Arrow table, record batch, array or
    chunked array) that ``to_pylist()`` would wrap around midnight (24 hours or more, or negative).

    Call it before making records of ``data``: a column whose type holds no ``time32``/``time64`` costs a look at
    its type, one that does a ``min_max`` in C (:func:`find_wrapped_time`).  ``where``, ``advice`` and ``row_text``
    are as for :func:`unconvertible_error`.
    """
    found = find_wrapped_time(data)
    if found is not None:
        raise _error(found, where, advice, error_type, row_text)


def records(data: Any, where: str, advice: str = OPERATOR_ADVICE) -> list[Any]:
    """``data.to_pylist()``, or an :class:`~scopes.errors.ArrowValueError` naming the value Python cannot hold
    (a time of day that ``to_pylist()`` would wrap around midnight included: :func:`refuse_wrapped_times`)."""
    refuse_wrapped_times(data, where, advice)
    try:
        return data.to_pylist()
    except Exception as error:
        failure = unconvertible_error(data, error, where, advice)
        if failure is None:
            raise
        raise failure from error


_OUT_OF_DAY = "not within the acceptable range"
"""What Arrow's full validation says of a time of day of 24 hours or more (or negative)."""

_DAY = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}
"""A day in each unit of a time of day: its values are from 0 up to this, not including it."""


def holds_time(kind: Any) -> bool:
    """Whether the Arrow type ``kind`` is a ``time32``/``time64`` or holds one (in a struct's field, a list's or
    map's items, a dictionary's values, an extension's storage, a union's or run-end encoded column's values)."""
    if kind.id in _PLAIN:
        return False
    import pyarrow as pa

    if pa.types.is_time(kind):
        return True
    if pa.types.is_dictionary(kind):
        return holds_time(kind.value_type)
    storage = getattr(kind, "storage_type", None)  # an extension type
    if storage is not None:
        return holds_time(storage)
    if not kind.num_fields:
        _PLAIN.add(kind.id)
        return False
    return any(holds_time(kind.field(index).type) for index in range(kind.num_fields))


_PLAIN: set[int] = set()
"""The ids of the Arrow types met that are no time and hold no other type (``int64``, ``string``, ...): most
columns' types, answered with one look (an id names a kind of type, not its parameters)."""


def _out_of_day(array: Any) -> bool:
    """Whether the Arrow ``array`` (not chunked) holds a time of day outside ``[0, 24 hours)`` among its rows'
    values (nulls' slots and unreferenced dictionary values are not values); C-level kernels only.

    A union's children are examined whole, whichever child each row selects.
    """
    import pyarrow as pa
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    kind = array.type
    if pa.types.is_time(kind):
        bounds = pc.min_max(array.view(pa.int32() if kind.bit_width == 32 else pa.int64()))
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        return low is not None and (low < 0 or high >= _DAY[kind.unit])
    if not holds_time(kind):
        return False
    if pa.types.is_dictionary(kind):  # the dictionary first (small); its rows only if a value is out of range
        return _out_of_day(array.dictionary) and _out_of_day(array.dictionary_decode())
    if isinstance(kind, pa.ExtensionType):
        return _out_of_day(array.storage)
    if pa.types.is_struct(kind):
        return any(_out_of_day(child) for child in array.flatten())
    if pa.types.is_map(kind):  # its entries, as a list of structs: list_flatten takes no map
        return _out_of_day(pc.list_flatten(pa.ListArray.from_arrays(array.offsets, array.values)))
    if pa.types.is_run_end_encoded(kind):
        return _out_of_day(array.values) and _out_of_day(pc.run_end_decode(array))
    if pa.types.is_union(kind):
        return any(_out_of_day(array.field(index)) for index in range(kind.num_fields))
    return _out_of_day(pc.list_flatten(array))  # the list types: their items, within the array's slice


def _first_out_of_day(array: Any) -> int:
    """The first row of ``array`` (not chunked; :func:`_out_of_day` holds for it) holding a time out of range,
    found by halving: a few ``min_max`` over shrinking slices, only on the way to an error."""
    low, high = 0, len(array)
    while high - low > 1:
        middle = (low + high) // 2
        if _out_of_day(array.slice(low, middle - low)):
            high = middle
        else:
            low = middle
    return low


def _out_of_day_error(column: Any, row: int) -> BaseException:
    """Arrow's own complaint about row ``row`` of ``column`` (its full validation refuses the time of day)."""
    value = column.slice(row, 1)
    try:
        if hasattr(value, "combine_chunks"):
            value = value.combine_chunks()
        value.validate(full=True)
    except Exception as error:  # noqa: BLE001 - the complaint is what the message quotes
        if _OUT_OF_DAY in str(error):
            return error
    return ValueError(f"{_type_text(column)}: a time of day {_OUT_OF_DAY} of [0, 24 hours)")


def find_wrapped_time(data: Any) -> Unconvertible | None:
    """The first time of day in ``data`` (an Arrow table, record batch, array or chunked array), column by
    column, that ``to_pylist()`` would wrap around midnight; ``None`` when there is none.

    Columns whose type holds no time of day are not looked at (:func:`holds_time`); the others are examined
    with ``min_max`` in C.
    """
    schema = getattr(data, "schema", None)
    kinds = [data.type] if schema is None else schema.types
    for index, kind in enumerate(kinds):
        if not holds_time(kind):
            continue
        column = data if schema is None else data.column(index)
        chunks = getattr(column, "chunks", None)
        offset = 0
        for chunk in chunks if chunks is not None else [column]:
            if _out_of_day(chunk):
                row = offset + _first_out_of_day(chunk)
                name = None if schema is None else str(schema.names[index])
                text = value_text(column, row)
                return Unconvertible(name, row, _type_text(column), text, _out_of_day_error(column, row))
            offset += len(chunk)
    return None
