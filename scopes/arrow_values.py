"""Arrow values that Python cannot hold: finding them, writing them safely, and the error that names them.

Arrow holds values that Python's types cannot: a ``timestamp[s]``, ``[ms]`` or
``[us]`` or a ``date32``/``date64`` past year 9999 or before year 1
(``datetime`` holds years 1 to 9999), a ``duration[s]`` or ``[ms]`` past
``timedelta.max``, a timestamp in a time zone this Python does not know, a
decimal whose scale is larger than its precision (``decimal128(38, 40)``), a
string that is not UTF-8.  ``to_pylist()`` and ``as_py()`` raise a bare
``OverflowError``, ``ValueError``, ``KeyError`` or ``UnicodeDecodeError`` for
them, and so do ``str()`` and ``repr()`` of such a scalar.  (A ``time32`` or
``time64`` of 24 hours or more is not refused: pyarrow wraps it around midnight.
Arrow calls it invalid, and ``read_files``, which validates every batch, refuses it.)

Where pytimely turns an Arrow batch into records, it calls ``to_pylist()`` as
before and only when that raises does it look for the value that failed
(:func:`records`, :func:`unconvertible_error`): nothing is checked on the way of
batches that convert.  The error, :class:`~scopes.errors.ArrowValueError` or a
subclass, names the column, the row, the type and the value in Arrow's own text
(:func:`value_text`, which never raises), and says what to do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from scopes.errors import ArrowValueError

__all__ = [
    "CONVERTIBLE",
    "Unconvertible",
    "find_unconvertible",
    "records",
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
    """``scalar.as_py()``, or Arrow's text of it where Python cannot hold it (for error messages)."""
    try:
        return scalar.as_py()
    except Exception:  # noqa: BLE001 - any failure converting: quote Arrow's text instead
        try:
            import pyarrow as pa  # type: ignore[import-untyped]

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
    row, text = (found.row, None) if row_text is None else row_text(found)
    message = f"{where}: {describe(found, text)}; {advice}"
    return error_type(message, found.column, row, found.arrow_type, found.text)


def records(data: Any, where: str, advice: str = OPERATOR_ADVICE) -> list[Any]:
    """``data.to_pylist()``, or an :class:`~scopes.errors.ArrowValueError` naming the value Python cannot hold."""
    try:
        return data.to_pylist()
    except Exception as error:
        failure = unconvertible_error(data, error, where, advice)
        if failure is None:
            raise
        raise failure from error
