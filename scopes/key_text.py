"""Arrow string key columns holding bytes that are not UTF-8: refused at every worker count.

Arrow builds a ``string`` (or ``large_string``) array from any bytes and checks
them only when asked.  Routing by such a column on several workers hashes its
values, and wherever the hashing makes Python strings of them (a column with a
null or of more than :data:`~scopes.hashing.DIRECT_ROWS` rows, a dictionary) it
met the value that is no ``str`` and refused the batch; a single worker routes
nothing, so it passed, and so did a short column without nulls on several.
Every exchange in front of a keyed columnar operator (``exchange_batch``,
``aggregate_batch``, ``join_batch``, the columnar windows, ``join_latest``) now
calls :func:`refuse_invalid_text` on each string key column of each batch, on
every worker count, before anything is hashed: the same
:class:`~scopes.errors.ArrowValueError`, naming the column, the row, the value
in Arrow's text and what to do (:func:`unhashable_error`).

The check is C-level and only for string-typed key columns (and dictionaries of
strings); other types cost one look at the type.  Measured on a column of 1 M
rows (15.8 MB of text, pyarrow 26): its bytes as a NumPy ``uint8`` view, whose
``max()`` below 128 proves them ASCII and so UTF-8, take 0.3 to 0.4 ms; only text
beyond ASCII is validated by Arrow, with a cast of its ``binary`` view to
``string`` (3.0 ms; ``validate(full=True)`` took 3.8 ms, ``string_is_ascii`` 3.5
ms, and pyarrow has no ``utf8_is_valid`` kernel).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scopes.arrow_values import records, unconvertible_error
from scopes.errors import ArrowValueError
from scopes.lazy_import import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

__all__ = ["KEY_ADVICE", "ascii_text", "refuse_invalid_text", "row_offsets", "unhashable_error"]

KEY_ADVICE = "fix or cast the key column first (pyarrow.compute.cast, or replace the value), or route by another key"
"""What to do about a key column holding a value Python cannot hold."""

_TEXT_IDS: dict[int, Any] = {}
"""The type ids of ``string`` and ``large_string``, each with the ``binary`` type of its offsets' width."""


def _text_ids() -> dict[int, Any]:
    if not _TEXT_IDS:
        import pyarrow as pa  # type: ignore[import-untyped]

        _DICTIONARY_ID.append(pa.dictionary(pa.int32(), pa.string()).id)
        _TEXT_IDS.update({pa.string().id: pa.binary(), pa.large_string().id: pa.large_binary()})
    return _TEXT_IDS


_DICTIONARY_ID: list[int] = []
"""The id of the dictionary types (set with :data:`_TEXT_IDS`)."""


def row_offsets(array: Any) -> np.ndarray:
    """The ``len(array) + 1`` offsets that the rows of the string or binary ``array`` (not chunked, 32- or 64-bit
    offsets) use, a NumPy view of its offsets buffer (Arrow's cheap ``validate()`` has checked its length)."""
    width = np.int64 if array.type.id in _large_ids() else np.int32
    start = array.offset
    return np.frombuffer(array.buffers()[1], width)[start : start + len(array) + 1]


def ascii_text(array: Any, offsets: np.ndarray) -> bool:
    """Whether the bytes of the string or binary ``array`` from the first of its row ``offsets`` to the last are
    all below 128: ASCII, so every value (a slice of them) is UTF-8.  One ``max()`` over a ``uint8`` view, in C."""
    start, end = int(offsets[0]), int(offsets[-1])
    data = array.buffers()[2]
    return end <= start or data is None or int(np.frombuffer(data, np.uint8)[start:end].max()) < 128


_LARGE: list[int] = []
"""The type ids of ``large_string`` and ``large_binary`` (64-bit offsets)."""


def _large_ids() -> list[int]:
    if not _LARGE:
        import pyarrow as pa

        _LARGE.extend([pa.large_string().id, pa.large_binary().id])
    return _LARGE


def _utf8(array: Any) -> bool:
    """Whether every value of the string ``array`` (not chunked) is UTF-8: ASCII bytes by NumPy
    (:func:`ascii_text`), else Arrow's cast of the bytes (as ``binary`` of the same offsets' width) to ``string``,
    which validates them."""
    if not len(array) or ascii_text(array, row_offsets(array)):
        return True
    import pyarrow as pa

    try:
        array.view(_text_ids()[array.type.id]).cast(array.type)
    except pa.ArrowInvalid:
        return False
    return True


def _invalid(column: Any) -> Any:
    """The first chunk of ``column`` (an Arrow array or chunked array of strings, or of a dictionary of strings)
    whose text, or whose dictionary's text, is not all UTF-8; ``None`` when there is none (or it holds no text)."""
    ids = _text_ids()
    kind = column.type
    plain = kind.id in ids
    if not plain and not (kind.id == _DICTIONARY_ID[0] and kind.value_type.id in ids):
        return None
    chunks = getattr(column, "chunks", None)
    for chunk in chunks if chunks is not None else [column]:
        if not _utf8(chunk if plain else chunk.dictionary):
            return chunk
    return None


def refuse_invalid_text(column: Any, name: str, where: str, time: Any) -> None:
    """Raise :func:`unhashable_error` if the key column ``name`` (an Arrow array or chunked array) of the batch at
    ``time`` holds a string that is not UTF-8 (a dictionary column: among its dictionary's values, which routing
    hashes all).  A column of another type costs a look at its type; see the module for the cost of strings."""
    chunk = _invalid(column)
    if chunk is None:
        return
    cause: ArrowValueError | None = None
    if chunk.type.id == _DICTIONARY_ID[0]:
        try:  # the refusal that hashing the dictionary's values met: the error when no row uses the value
            records(chunk.dictionary, "hashing the distinct values of an Arrow key column")
        except ArrowValueError as error:
            cause = error
    raise unhashable_error(column, name, where, time, cause)


def unhashable_error(
    keys: Any, name: str, where: str, time: Any, error: ArrowValueError | None = None
) -> ArrowValueError:
    """The error for Arrow ``keys`` (the key column ``name``, or a key function's keys) of the batch at ``time``
    that routing cannot hash, as it hashes them as Python values: the row whose key Python cannot hold, found in
    ``keys`` themselves, or else ``error`` (which names a row of their distinct values)."""
    import pyarrow as pa

    failure = unconvertible_error(
        pa.table({name: keys}),
        error or ValueError(name),
        f"{where}: routing the batch at time {time!r} by its keys",
        KEY_ADVICE,
    )
    if failure is not None:
        return failure
    if error is not None:
        return error
    return ArrowValueError(
        f"{where}: routing the batch at time {time!r} by its keys: the key column {name!r} holds a string that is "
        f"not UTF-8; {KEY_ADVICE}",
        name,
        0,
        str(keys.type),
        "(not UTF-8)",
    )
