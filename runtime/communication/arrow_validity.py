"""Arrow batches built without validation: refused by the process that would send them, not by the receiver.

pyarrow builds arrays without checking their values unless asked: a ``string``
column may hold bytes that are not UTF-8 (``pyarrow.Array.from_buffers``, a
``binary`` array's ``view(pyarrow.string())``), a ``time32`` 24 hours or more,
a dictionary's indices may point past its dictionary
(``DictionaryArray.from_arrays(..., safe=False)``).  Every process validates
each Arrow batch it receives in full (bytes from a peer are hostile,
:func:`~runtime.communication.arraycodec.decode_arrow`), so such a batch made
the receiver fail with a :class:`~runtime.errors.WireError` blaming the wire and
the deployment.  :func:`refuse_invalid` runs where a batch is encoded to leave
its process (:func:`~runtime.communication.arraycodec.arrow_ipc`: between
processes, in a process's results, into a capture log) and raises
:class:`~runtime.errors.InvalidArrowBatch` naming the column and Arrow's text.

The verdict is ``validate(full=True)``'s, column by column, with cheaper
equivalents in NumPy for the columns where Arrow's full validation costs more
than encoding them.  Measured (pyarrow 26, NumPy 2.4, one core, best of 25): the
IPC encode alone, Arrow's ``validate(full=True)`` of the batch, and this check:

=================================================  ==========  ==========  ==========
batch                                              IPC encode  full        this check
=================================================  ==========  ==========  ==========
1 M ``int64``                                      580 us      0.2 us      1 us
1 M short ASCII strings (4.8 MB)                   920 us      2,190 us    410 us
5,000 rows of ``string`` and ``int64`` (the        12 us       12 us       11 us
columnar wordcount's partial counts)
100,000 rows of 10 columns (``int64``, ``int32``,  1,090 us    860 us      640 us
``float64``, ``bool``, ``timestamp``, ASCII and
non-ASCII text, a dictionary, ``time32``, a list)
the same without the non-ASCII text                1,020 us    430 us      140 us
1 M ``time32[s]``                                  320 us      990 us      150 us
1 M dictionary (``int32`` indices, 10 strings)     320 us      850 us      150 us
1 M short non-ASCII strings                        980 us      4,030 us    4,000 us
=================================================  ==========  ==========  ==========

Text beyond ASCII costs Arrow's UTF-8 validation, which nothing cheaper replaces
(pyarrow has no UTF-8 kernel but its validation and its cast, which costs about
as much; a column with 1 accented word in 100 takes 2.5 ms a million rows).

Arrow validates fixed-width columns (integers, floats, booleans, timestamps,
dates of days) without reading them; what it reads, and what is done instead:

* ``string`` and ``large_string``: the offsets must not decrease (Arrow's cheap
  ``validate()``, run first, has checked that the first and last lie inside the
  data) and every value must be UTF-8.  NumPy compares the offsets with their
  successors and finds the maximum byte between the first and the last offset:
  below 128 the bytes are ASCII, so every value (a slice of them) is UTF-8.
  ``binary`` and ``large_binary`` take the same offsets check.
* ``time32`` and ``time64``: every value must lie in ``[0, 24 hours)``.  NumPy
  takes the maximum of the values as unsigned integers (a negative one becomes
  huge), null slots included.
* dictionaries: every index must point into the dictionary, which must itself be
  valid.  NumPy takes the maximum index as unsigned, null slots included, and
  the dictionary is checked the same way.

The NumPy checks look at more than Arrow does (null slots, the bytes between
values), so they only ever *prove* a column valid: whenever one cannot, Arrow's
``validate(full=True)`` decides, and gives the text of the error.  Columns of
other types (lists, structs, decimals, ``date64``, extension types), short
columns (fewer than :data:`NUMPY_FROM` rows, where NumPy's calls cost more than
Arrow's loop) and processes without NumPy are validated by Arrow.  Nothing is
done per row in Python.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime.errors import InvalidArrowBatch
from scopes.key_text import ascii_text, row_offsets

__all__ = ["INVALID_ADVICE", "NUMPY_FROM", "column_problem", "refuse_invalid"]

NUMPY_FROM = 4096
"""Columns of at least this many rows take the NumPy checks where a type has them; shorter ones Arrow's full
validation (short strings: Arrow takes 2.5 us for 1,000 and the NumPy calls 8 us; 12 us against 9 us for 5,000)."""

INVALID_ADVICE = (
    "the batch was built without validation (pyarrow.Array.from_buffers, Array.view, "
    "DictionaryArray.from_arrays(..., safe=False), ...), and batch.validate(full=True) shows the problem; build "
    "the column with pyarrow.array(...) from Python values, or fix or cast it before it is sent"
)
"""What to do about a batch :func:`refuse_invalid` refuses."""

_CHECKS: dict[int, Callable[[Any, Any], bool]] = {}
"""The NumPy checks by Arrow type id (filled on first use, when pyarrow is loaded)."""
_DAY = 86_400
_TIME_LIMITS = {"s": _DAY, "ms": _DAY * 10**3, "us": _DAY * 10**6, "ns": _DAY * 10**9}


def _numpy() -> Any:
    """NumPy, or ``None`` if it is not installed (pyarrow runs without it)."""
    try:
        import numpy
    except ImportError:  # pragma: no cover - the test environment has NumPy
        return None
    return numpy


def _binary_fine(numpy: Any, array: Any) -> bool:
    """Whether the offsets of ``array`` (valid by ``validate()``) never decrease."""
    offsets = row_offsets(array)
    return bool((offsets[1:] >= offsets[:-1]).all())


def _text_fine(numpy: Any, array: Any) -> bool:
    """Whether the offsets never decrease and the bytes between the first and the last are ASCII (so UTF-8)."""
    offsets = row_offsets(array)
    return bool((offsets[1:] >= offsets[:-1]).all()) and ascii_text(array, offsets)


def _unsigned_max(numpy: Any, buffer: Any, bits: int, start: int, rows: int) -> int:
    """The largest of ``rows`` integers of ``bits`` bits from row ``start`` of ``buffer``, read as unsigned."""
    values = numpy.frombuffer(buffer, numpy.dtype(f"u{bits // 8}"))[start : start + rows]  # Arrow's own byte order
    return int(values.max())


def _time_fine(numpy: Any, array: Any) -> bool:
    """Whether every slot of the time of day ``array`` (nulls' too) lies in ``[0, 24 hours)``."""
    bits = array.type.bit_width
    return _unsigned_max(numpy, array.buffers()[1], bits, array.offset, len(array)) < _TIME_LIMITS[array.type.unit]


def _dictionary_fine(numpy: Any, array: Any) -> bool:
    """Whether every index slot (nulls' too) points into the dictionary, and the dictionary is valid."""
    indices = array.indices
    bits = indices.type.bit_width
    if _unsigned_max(numpy, indices.buffers()[1], bits, indices.offset, len(indices)) >= len(array.dictionary):
        return False
    return _proved_valid(numpy, array.dictionary)


def _checks() -> dict[int, Callable[[Any, Any], bool]]:
    if not _CHECKS:
        import pyarrow  # type: ignore[import-untyped]

        _CHECKS.update(
            {
                pyarrow.string().id: _text_fine,
                pyarrow.large_string().id: _text_fine,
                pyarrow.binary().id: _binary_fine,
                pyarrow.large_binary().id: _binary_fine,
                pyarrow.time32("s").id: _time_fine,
                pyarrow.time64("ns").id: _time_fine,
                pyarrow.dictionary(pyarrow.int32(), pyarrow.string()).id: _dictionary_fine,
            }
        )
    return _CHECKS


def _proved_valid(numpy: Any, array: Any) -> bool:
    """Whether ``array`` (not chunked) is valid Arrow; ``False`` also when only Arrow's full validation can say.

    Short arrays and types without a NumPy check are validated by Arrow here; a NumPy check runs after Arrow's
    cheap ``validate()``, which makes its reads of the buffers safe.
    """
    import pyarrow

    check = _checks().get(array.type.id)
    try:
        if check is None or numpy is None or len(array) < NUMPY_FROM:
            array.validate(full=True)
            return True
        array.validate()
        return not len(array) or check(numpy, array)
    except pyarrow.ArrowException:
        return False


def column_problem(column: Any) -> str | None:
    """What Arrow's ``validate(full=True)`` says is wrong with ``column`` (an array or chunked array), or ``None``
    if it is valid (see the module for how it is decided)."""
    import pyarrow

    numpy = _numpy()
    chunks = getattr(column, "chunks", None)
    for chunk in chunks if chunks is not None else (column,):
        if _proved_valid(numpy, chunk):
            continue
        try:
            chunk.validate(full=True)
        except pyarrow.ArrowException as error:
            return str(error)
    return None


def refuse_invalid(batch: Any) -> None:
    """Raise :class:`~runtime.errors.InvalidArrowBatch` if a column of ``batch`` (a ``pyarrow.RecordBatch`` or
    ``Table``) is not valid Arrow, naming the first such column, its type and Arrow's validation text.

    A batch of fewer than :data:`NUMPY_FROM` rows, or without a column of a type that has a NumPy check, is
    validated by Arrow in one call, and looked at column by column only if that fails.  A longer one has its
    layout (lengths, schema, buffer sizes) checked by Arrow's cheap ``validate()``, then each column.  A batch
    whose columns are each valid while the batch is not is refused too, naming no column.
    """
    import pyarrow

    whole: str | None = None
    full = _checks().keys().isdisjoint([field.type.id for field in batch.schema]) or batch.num_rows < NUMPY_FROM
    try:
        batch.validate(full=full)
        if full:
            return
    except pyarrow.ArrowException as error:
        whole = str(error)  # which column: found below
    kind = "record batch" if batch.__class__ is pyarrow.RecordBatch else "table"
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        problem = column_problem(column)
        if problem is not None:
            raise InvalidArrowBatch(
                f"the Arrow {kind}'s column {name!r} ({column.type}) is not valid Arrow: {problem}; {INVALID_ADVICE}",
                f"pyarrow.{batch.__class__.__name__}",
                name,
                str(column.type),
                problem,
            )
    if whole is not None:
        # each column is valid alone, so the batch's layout is not (pyarrow checks it when it builds a table or a
        # batch: only one made some other way gets here); never let such a batch pass
        raise InvalidArrowBatch(
            f"the Arrow {kind} is not valid Arrow, though each of its columns is: {whole}; {INVALID_ADVICE}",
            f"pyarrow.{batch.__class__.__name__}",
            "",
            "",
            whole,
        )
