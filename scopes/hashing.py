"""A stable hash for routing records between workers.

Python's built-in :func:`hash` of ``str`` and ``bytes`` is salted per process
(``PYTHONHASHSEED``), so two processes would send the same key to different
workers.  :func:`stable_hash` gives the same 64-bit value in every process, on
every platform, for every Python version this project supports:

========================  ===================================================
key                       hash
========================  ===================================================
``int`` (and ``bool``)    the value modulo ``2**64`` (two's complement for
                          negative values), so ``True`` hashes as ``1``
``float``                 an integral float hashes as the equal ``int``
                          (``1.0`` and ``1`` meet on the same worker); every
                          NaN (any sign, any payload) one fixed constant, so
                          all NaN keys are one key; any other float is the
                          CRC-32 of its IEEE-754 bytes
``str``                   ``zlib.crc32`` of its UTF-8 bytes (lone surrogates
                          allowed)
``bytes``, ``bytearray``  ``zlib.crc32`` of the bytes
``None``                  a fixed constant
``tuple`` (``Product``)   the elements' hashes combined in order (FNV-style),
                          recursively; a ``Product`` time hashes as the tuple
                          of its coordinates
========================  ===================================================

Values that compare equal hash equally across these types (``1 == 1.0 ==
True``), which is what routing by key needs.  NaN, which equals nothing, is
the one exception made on purpose: all NaN keys are one key
(:mod:`scopes.key_equality`), so they must all reach one worker.  A subclass of ``int`` or ``str``
(an ``IntEnum``, a ``str`` Enum, ``numpy.str_``) hashes as its value, which it
compares equal to, whatever its ``str()`` reads; one with an ``__eq__`` or
``__hash__`` of its own is refused, as it could call keys equal that hash apart.  CRC-32 was chosen over
``hashlib.blake2b`` because it is about four times faster on short strings
(155 ns against 706 ns per key, measured) and routing needs spread, not
cryptographic strength.

NumPy scalars (``numpy.int64(3)``, ``numpy.str_("a")``, ...) hash as the equal
Python value, so records taken out of an array route like the array's rows.

Any other key type raises :class:`KeyHashError`: its hash could differ between
processes (objects hash by identity by default), so records with equal keys
could meet on different workers.  Return one of the supported types from the
key function instead.

Columnar batches are routed with :func:`stable_hash_array`, which hashes a
whole NumPy array of keys at once and is element-wise equal to
:func:`stable_hash`:

* integers (any width, signed or not) and booleans: the values reinterpreted
  as unsigned 64-bit integers, which is ``k & (2**64 - 1)``, in one NumPy
  operation;
* floats: integral values below ``2**63`` in magnitude as the equal integer,
  and NaN (of any bits) as its constant, in NumPy operations; the others
  (fractions, infinities, huge values) one Python call per *distinct* value;
* strings, bytes and object arrays (for example an Arrow string column
  converted to NumPy, or keys of mixed types): the distinct values are found
  with a ``dict`` (C speed, no Python call per row; measured four times faster
  than ``numpy.unique`` on strings) and :func:`stable_hash` is called once per
  distinct value, so a batch with many repeated keys costs one Python call per
  distinct key.  An object array holding an unhashable or unsupported value
  raises :class:`KeyHashError`.

:func:`stable_hash_arrow` does the same for an Arrow array, dictionary-encoding
string columns in Arrow itself and hashing nulls as ``None``.  A decimal column
is dictionary-encoded too, and each distinct decimal hashed as the number it is:
an integral one as the equal ``int`` (so ``2**53 + 1`` meets the equal
``int64``, which a float could not), any other as the float it converts to.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from scopes.arrow_values import records
from scopes.batches import combined
from scopes.errors import KeyHashError as KeyHashError
from scopes.lazy_import import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

MASK64 = 2**64 - 1
"""Stable hashes are integers in ``[0, 2**64)``."""

T = TypeVar("T")
"""What :func:`through_cache`'s caller collects the cached values into."""

_NONE_HASH = 0x5F3759DF
_NAN_HASH = zlib.crc32(bytes.fromhex("000000000000f87f"))
"""Every NaN's hash: the CRC-32 of the quiet NaN's IEEE-754 bytes (what ``float('nan')`` hashed as before)."""
_TUPLE_SEED = 0xCBF29CE484222325  # FNV-1a offset basis
_TUPLE_PRIME = 0x100000001B3  # FNV-1a prime
_pack_double = struct.Struct("<d").pack
_SCALAR_KINDS = frozenset("biufUS")
_TWO_63 = float(2**63)

STRING_HASH_CACHE_LIMIT = 1 << 16
"""At most this many strings keep their stable hash between batches; past it the cache restarts."""
_string_hashes: dict[Any, int] = {}
"""Stable hashes of the strings of recent non-ASCII ``U`` key arrays and lists of ``str`` keys: a stream's keys
repeat from batch to batch (words, user ids), so each distinct string is usually hashed once per process rather
than once per batch.  Only exact ``str`` values (what ``tolist`` of such an array gives; a list's keys are checked)
enter it, and a value's entry is :func:`stable_hash` of that value, so a hit routes exactly as hashing it again
would."""


def stable_hash(key: Any) -> int:
    """Return a hash of ``key`` in ``[0, 2**64)`` that is the same in every process.

    Supported: ``int``, ``bool``, ``float``, ``str``, ``bytes``, ``bytearray``,
    ``None`` and tuples of these (recursively), which includes ``Product`` times.
    Raises :class:`KeyHashError` for anything else.
    """
    cls = key.__class__
    if cls is int:
        return key & MASK64
    if cls is str:
        return zlib.crc32(key.encode("utf-8", "surrogatepass"))
    if cls is bytes or cls is bytearray:
        return zlib.crc32(key)
    if isinstance(key, tuple):
        value = _TUPLE_SEED ^ len(key)
        for element in key:
            value = ((value ^ stable_hash(element)) * _TUPLE_PRIME) & MASK64
        return value
    if key is None:
        return _NONE_HASH
    if cls is bool:
        return int(key)
    if cls is float:
        if key.is_integer():
            return int(key) & MASK64
        if key != key:  # NaN, of any sign and payload: one key (scopes.key_equality)
            return _NAN_HASH
        return zlib.crc32(_pack_double(key))
    if isinstance(key, int):  # an int subclass (IntEnum, ...): hash its value, as it compares
        _check_subclass_equality(key, int)
        return int.__int__(key) & MASK64
    if isinstance(key, str):  # a str subclass (numpy.str_, a str Enum, ...): hash its value, not its str()
        _check_subclass_equality(key, str)
        return zlib.crc32(str.__str__(key).encode("utf-8", "surrogatepass"))
    if isinstance(key, np.generic) and key.dtype.kind in _SCALAR_KINDS:  # a NumPy scalar: its Python value
        return stable_hash(key.item())
    raise KeyHashError(
        f"cannot route by a key of type {cls.__qualname__} ({key!r}): its hash is not stable "
        "across processes, so equal keys could reach different workers; make the key "
        "function return an int, str, bytes, bool, float, None or a tuple of these"
    )


def _check_subclass_equality(key: Any, base: type) -> None:
    """Refuse a key of a subclass of ``base`` (``int`` or ``str``) whose equality is not ``base``'s.

    :func:`stable_hash` hashes such a key by its ``base`` value, which is right only
    when the key compares (and hashes, for the dicts that group keys) as that value:
    a subclass with an ``__eq__`` or ``__hash__`` of its own (a case-insensitive
    string, say) would send keys it calls equal to different workers, while one
    worker would group them, so the answer would depend on the worker count.  NumPy
    scalars define both and agree with the Python value, so they pass.
    """
    cls = key.__class__
    if cls.__eq__ is base.__eq__ and cls.__hash__ is base.__hash__:
        return
    if isinstance(key, np.generic):
        return
    raise KeyHashError(
        f"cannot route by a key of type {cls.__qualname__} ({key!r}): it is a {base.__name__} subclass with "
        f"an __eq__ or __hash__ of its own, so keys it calls equal could reach different workers (and be "
        f"grouped on one worker but not on several); return a plain {base.__name__} from the key function, "
        "normalised as the key should compare (for example key.lower())"
    )


def route(key: Any, peers: int) -> int:
    """The worker (``0 .. peers - 1``) that records with ``key`` are sent to."""
    if key.__class__ is int:
        return (key & MASK64) % peers
    return stable_hash(key) % peers


def stable_hash_array(keys: Any) -> np.ndarray:
    """:func:`stable_hash` of every element of a 1-D NumPy array, as a ``uint64`` array, vectorised.

    Supported dtypes: booleans, signed and unsigned integers, floats, unicode
    (``U``) and bytes (``S``) strings, and object arrays whose elements
    :func:`stable_hash` accepts.  A list or tuple of exact ``int`` keys (within
    64 bits) is converted in one step, and one of exact ``str`` keys goes
    through the cache of recent strings; any other sequence is converted to an
    object array first, element by element (a sequence of tuples stays a
    sequence of tuple keys).  Raises :class:`KeyHashError` for other dtypes
    (dates, structured records, complex numbers) and for arrays that are not
    1-D.  Other array-likes (objects with ``__array__``, such as a pandas
    Series) are converted with ``numpy.asarray``.
    """
    if not isinstance(keys, np.ndarray):
        if hasattr(keys, "__array__") and not isinstance(keys, (list, tuple)):
            keys = np.asarray(keys)  # an array-like (a pandas Series, ...): its own dtype, without a Python loop
        else:
            if keys.__class__ is list or keys.__class__ is tuple:
                found = _hash_sequence(keys)
                if found is not None:
                    return found
            keys = _object_array(keys)
    if keys.ndim != 1:
        raise KeyHashError(
            f"cannot route by an array of keys of shape {keys.shape}: keys must be a 1-D array with one "
            "key per row; combine several key columns into one (for example a string or an integer)"
        )
    kind = keys.dtype.kind
    if kind == "i":
        return keys.astype(np.int64, copy=False).view(np.uint64)
    if kind == "u" or kind == "b":
        return keys.astype(np.uint64, copy=False)
    if kind == "f":
        return _hash_floats(keys)
    if kind in "US":
        return _hash_strings(keys)
    if kind == "O":
        return _hash_by_distinct(keys)
    if kind in "mM":
        return _hash_numpy_temporal(keys)
    raise KeyHashError(
        f"cannot route by keys of dtype {keys.dtype}: only booleans, integers, floats, strings, bytes and "
        "object arrays of int, str, bytes, bool, float, None or tuples of these hash stably; convert the key "
        "column to one of these"
    )


INT_KEY_TYPES = frozenset({int, bool})
"""The exact types of integer keys, which hash as ``k & (2**64 - 1)`` (``True`` and ``False`` as 1 and 0)."""
_STR_ONLY = frozenset({str})


def int_key_hashes(keys: Sequence[int], numpy: Any = None) -> Any:
    """:func:`stable_hash` of exact ``int`` (or ``bool``) keys as one ``uint64`` array, or ``None`` for a key
    beyond 64 bits (the exact Python arithmetic then serves).

    One NumPy conversion: a signed 64-bit value viewed as unsigned is its two's
    complement, ``k & (2**64 - 1)``, as :func:`stable_hash` computes.  ``numpy``:
    the module to use (a caller that must not import NumPy passes the one already
    loaded); by default this module's.
    """
    numpy = np if numpy is None else numpy
    try:
        values = numpy.fromiter(keys, dtype=numpy.int64, count=len(keys))
    except OverflowError:
        return None
    return values.view(numpy.uint64)


def _hash_sequence(keys: list[Any] | tuple[Any, ...]) -> np.ndarray | None:
    """:func:`stable_hash` of a list or tuple of keys of one common kind without a call per key, or ``None``.

    * Exact ``int`` (or ``bool``) keys that fit 64 bits: one NumPy conversion
      (:func:`int_key_hashes`).
    * Exact ``str`` keys: the cache of recent strings (:func:`_hash_strings_cached`).

    ``None`` for anything else (mixed kinds, subclasses, an int beyond 64 bits):
    the general path hashes those.
    """
    kinds = set(map(type, keys))
    if kinds <= INT_KEY_TYPES:
        hashes: np.ndarray | None = int_key_hashes(keys)
        return hashes  # None beyond 64 bits: the general path
    if kinds == _STR_ONLY:
        return _hash_strings_cached(keys)
    return None


def _object_array(keys: Any) -> np.ndarray:
    """A 1-D object array with the elements of ``keys`` as they are (tuples are not unpacked into a 2-D array)."""
    try:
        items = list(keys)
    except TypeError as error:
        raise KeyHashError(
            f"cannot route by keys {keys!r}: expected a NumPy array or a sequence with one key per row"
        ) from error
    return np.fromiter(items, dtype=object, count=len(items))


def _hash_floats(keys: np.ndarray) -> np.ndarray:
    """Integral floats below ``2**63`` in magnitude hash as the equal int, NaN as one constant; the rest one by one."""
    with np.errstate(invalid="ignore"):  # a signalling NaN warns as it is widened
        values = keys.astype(np.float64, copy=False)
        integral = (np.floor(values) == values) & (np.abs(values) < _TWO_63)
    hashes = np.where(integral, values, 0.0).astype(np.int64).view(np.uint64)
    if integral.all():
        return hashes
    rest = ~integral
    hashes = hashes.copy()
    nan = np.isnan(values)
    if nan.any():
        hashes[nan] = _NAN_HASH
        rest &= ~nan
    hashes[rest] = _hash_by_distinct(values[rest])
    return hashes


NANOSECONDS = {"W": 604_800 * 10**9, "D": 86_400 * 10**9, "h": 3_600 * 10**9, "m": 60 * 10**9, "s": 10**9}
"""Nanoseconds per unit of ``datetime64`` and ``timedelta64`` (and ``ms``, ``us``, ``ns`` below) of fixed length."""
NANOSECONDS.update({"ms": 10**6, "us": 10**3, "ns": 1})


def _hash_nanoseconds(counts: np.ndarray, unit: str, count: int = 1) -> np.ndarray:
    """:func:`stable_hash` of the integer nanoseconds of ``counts`` (``int64`` counts of ``count`` ``unit``).

    Multiplied in unsigned 64-bit arithmetic, which wraps: the product is the
    count of nanoseconds modulo ``2**64``, exactly what :func:`stable_hash` of
    that integer is, without the overflow a wider unit would risk.
    """
    factor = np.uint64(NANOSECONDS[unit] * count)
    hashes: np.ndarray = counts.astype(np.int64, copy=False).view(np.uint64) * factor
    return hashes


def _hash_numpy_temporal(keys: np.ndarray) -> np.ndarray:
    """Dates, times and durations as nanoseconds (:func:`_hash_nanoseconds`); ``NaT`` as ``None``."""
    unit, count = np.datetime_data(keys.dtype)
    if unit not in NANOSECONDS:
        raise KeyHashError(
            f"cannot route by keys of dtype {keys.dtype}: months, years and units finer than nanoseconds have no "
            "fixed length in nanoseconds; convert the keys with astype('datetime64[s]') (or timedelta64[s]) first"
        )
    hashes = _hash_nanoseconds(keys.view(np.int64), unit, count)
    missing = np.isnat(keys)
    if missing.any():
        hashes[missing] = _NONE_HASH
    return hashes


def _hash_by_distinct(keys: np.ndarray) -> np.ndarray:
    """One :func:`stable_hash` call per distinct element, mapped back to every row at C speed."""
    return _hash_distinct_values(keys.tolist(), f"dtype {keys.dtype}")


def _hash_distinct_values(values: Sequence[Any], kind: str) -> np.ndarray:
    """:func:`_hash_by_distinct` of the Python values of ``values``; ``kind`` names them in errors."""
    try:
        table = {key: stable_hash(key) for key in dict.fromkeys(values)}
    except TypeError as error:
        if isinstance(error, KeyHashError):
            raise
        raise KeyHashError(
            f"cannot route by keys of {kind}: an element is unhashable ({error}); keys must be int, "
            "str, bytes, bool, float, None or tuples of these"
        ) from error
    return np.fromiter(map(table.__getitem__, values), dtype=np.uint64, count=len(values))


def _hash_strings(keys: np.ndarray) -> np.ndarray:
    """:func:`stable_hash` of each string of a ``U`` or ``S`` array.

    Byte strings, and unicode strings that are all ASCII (their UTF-8 bytes are
    their code points), get their CRC-32 computed column by column with NumPy
    (:func:`_crc32_rows`), without a Python object per row; other unicode arrays
    go through the cache of recent strings.
    """
    rows = len(keys)
    if not keys.dtype.isnative:  # a big-endian U array: its code units in this machine's order
        keys = keys.astype(keys.dtype.newbyteorder("="))
    keys = np.ascontiguousarray(keys)  # a view of another size needs contiguous rows
    if keys.dtype.kind == "S":
        octets = keys.view(np.uint8).reshape(rows, keys.dtype.itemsize)
        return _crc32_rows(octets, _string_lengths(keys, octets))
    units = keys.view(np.uint32).reshape(rows, keys.dtype.itemsize // 4)
    if units.max(initial=0) < 0x80:
        return _crc32_rows(units, _string_lengths(keys, units))
    return _hash_cached(keys)


def _string_lengths(keys: np.ndarray, units: np.ndarray) -> np.ndarray:
    """Each string's length in code units: NumPy's own ``strings.str_len`` (2.0 on), else :func:`_lengths`."""
    strings = getattr(np, "strings", None)
    if strings is not None and keys.dtype.itemsize:
        return strings.str_len(keys)
    return _lengths(units)


def _lengths(units: np.ndarray) -> np.ndarray:
    """Each row's length: the position after its last nonzero unit (NumPy strips trailing NULs, keeps inner ones)."""
    width = units.shape[1]
    if width == 0:
        return np.zeros(units.shape[0], dtype=np.intp)
    nonzero = units != 0
    return np.where(nonzero.any(axis=1), width - np.argmax(nonzero[:, ::-1], axis=1), 0)


def _crc32_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint32)
    for index in range(256):
        value = index
        for _ in range(8):
            value = (value >> 1) ^ 0xEDB88320 if value & 1 else value >> 1
        table[index] = value
    return table


_crc32_lookup: np.ndarray | None = None


def _crc32_rows(units: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``zlib.crc32`` of each row's first ``lengths[row]`` units (each a byte value below 256), as ``uint64``.

    The table-driven CRC-32 (reflected polynomial ``0xEDB88320``), one byte
    position at a time for every row at once.
    """
    global _crc32_lookup
    if _crc32_lookup is None:
        _crc32_lookup = _crc32_table()
    table = _crc32_lookup
    rows, width = units.shape
    columns = units.T.astype(np.uint8)  # one byte position per contiguous row: each pass reads only its bytes
    crc = np.full(rows, 0xFFFFFFFF, dtype=np.uint32)
    shortest = int(lengths.min()) if rows else 0
    for position in range(width):
        step = np.take(table, crc.astype(np.uint8) ^ columns[position]) ^ (crc >> 8)  # take: faster than [ ]
        crc = step if position < shortest else np.where(lengths > position, step, crc)
    return (crc ^ np.uint32(0xFFFFFFFF)).astype(np.uint64)


def _hash_cached(keys: np.ndarray) -> np.ndarray:
    """:func:`stable_hash` of each string of a ``U`` array, through the cache of recent strings."""
    return _hash_strings_cached(keys.tolist())


def _hash_strings_cached(values: Sequence[str]) -> np.ndarray:
    """:func:`stable_hash` of exact ``str`` values, through the cache of recent strings (new ones hashed once)."""
    found = through_cache(
        _string_hashes,
        values,
        stable_hash,
        STRING_HASH_CACHE_LIMIT,
        lambda hashes: np.fromiter(hashes, dtype=np.uint64, count=len(values)),
    )
    if found is None:  # too many distinct keys to remember: this batch's alone
        return _hash_distinct_values(values, "str")
    return found


def through_cache(
    cache: dict[Any, Any],
    keys: Sequence[Any],
    value_of: Callable[[Any], Any],
    limit: int,
    collect: Callable[[Iterator[Any]], T],
    canonical: Callable[[Sequence[Any]], list[Any]] | None = None,
) -> T | None:
    """``collect`` of the cached value of every key, in order, adding the keys ``cache`` lacks (:func:`remember`);
    ``None`` when the batch has more new keys than ``limit``, or another worker thread of this process restarted
    the cache meanwhile (the caller computes the batch without it).

    ``canonical``, when given, maps a batch whose lookup missed to keys the cache
    can find (:func:`~scopes.key_equality.canonical_keys`: a NaN, found in a
    ``dict`` only by identity, becomes the one canonical NaN), so that NaN keys
    take one entry rather than one per record."""
    lookup = cache.__getitem__
    try:
        return collect(map(lookup, keys))
    except KeyError:
        pass
    if canonical is not None:
        keys = canonical(keys)
    if remember(cache, keys, value_of, limit):
        try:
            return collect(map(lookup, keys))
        except KeyError:
            pass
    return None


def remember(cache: dict[Any, Any], keys: Sequence[Any], value_of: Callable[[Any], Any], limit: int) -> bool:
    """Add ``value_of(key)`` to ``cache`` for every key of ``keys`` it lacks, keeping it at most ``limit`` entries.

    When the new keys would pass the limit the cache starts over with this
    batch's keys; when they alone pass it, nothing is added and the answer is
    ``False`` (the caller computes the batch without the cache).
    """
    new = set(keys).difference(cache)
    if len(new) > limit:
        return False
    if len(cache) + len(new) > limit:
        cache.clear()
        new = set(keys)
    for key in new:
        cache[key] = value_of(key)
    return True


_DISTINCT = "hashing the distinct values of an Arrow key column"
"""Where an Arrow value Python cannot hold (a string that is not UTF-8) was met while hashing keys."""


def _hash_dictionary(dictionary: Any) -> np.ndarray:
    """:func:`stable_hash` of each distinct value of an Arrow dictionary.

    Strings without nulls or NUL characters (which a NumPy ``U`` array would
    drop from their ends) are hashed as a ``U`` array, column by column when they
    are ASCII; other strings and binary values one by one, and values of other
    types as :func:`stable_hash_arrow` hashes a column of them.
    """
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    kind = dictionary.type
    if (
        (pa.types.is_string(kind) or pa.types.is_large_string(kind))
        and len(dictionary)
        and not dictionary.null_count
        and not pc.any(pc.match_substring(dictionary, "\x00")).as_py()
    ):
        return stable_hash_array(np.array(records(dictionary, _DISTINCT), dtype=str))
    textual = pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)
    if textual or pa.types.is_large_binary(kind):
        return stable_hash_array(_object_array(records(dictionary, _DISTINCT)))
    if pa.types.is_decimal(kind):
        return np.array([_decimal_hash(value) for value in records(dictionary, _DISTINCT)], dtype=np.uint64)
    return stable_hash_arrow(dictionary)


def _decimal_hash(value: Any) -> int:
    """:func:`stable_hash` of the number a ``Decimal`` is: an integral one as the equal ``int``, others as floats.

    So an integral decimal meets the equal integer (and integral float) exactly, past ``2**53`` too,
    which a float would round, and other decimals meet the floats they convert to, of any scale.
    """
    if value == value.to_integral_value():
        return stable_hash(int(value))
    return stable_hash(float(value))


DIRECT_ROWS = 1 << 14
"""String and binary Arrow arrays up to this many rows are hashed from their bytes directly (no dictionary)."""
DIRECT_SPREAD = 8
"""Direct hashing pads every value to the longest; it is skipped when that would pass this many times the bytes."""


def _crc32_arrow_bytes(values: Any) -> np.ndarray | None:
    """``zlib.crc32`` of every value of an Arrow string or binary array without nulls, from its buffers.

    A ``str`` hashes as the CRC-32 of its UTF-8 bytes (:func:`stable_hash`), which
    are exactly what Arrow stores, so no Python string is made.  Returns ``None``
    when padding the values to the longest would take too much memory.
    """
    rows = len(values)
    large = values.type.id in (_large_string_id(), _large_binary_id())
    offsets_buffer, data_buffer = values.buffers()[1:3]
    window = slice(values.offset, values.offset + rows + 1)
    offsets = np.frombuffer(offsets_buffer, np.int64 if large else np.int32)[window].astype(np.int64)
    starts = offsets[:-1]
    lengths = np.diff(offsets)
    width = int(lengths.max()) if rows else 0
    total = int(offsets[-1] - offsets[0]) if rows else 0
    if rows * width > DIRECT_SPREAD * total + 4096:
        return None
    data = np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    data = np.append(data[: int(offsets[-1]) if rows else 0], np.zeros(width, np.uint8))  # every index in range
    columns = data[np.arange(width)[:, None] + starts]  # one byte position per row: what _crc32_rows walks
    return _crc32_rows(columns.T, lengths)


def _large_string_id() -> int:
    import pyarrow as pa

    return int(pa.large_string().id)


def _large_binary_id() -> int:
    import pyarrow as pa

    return int(pa.large_binary().id)


def stable_hash_arrow(values: Any) -> np.ndarray:
    """:func:`stable_hash` of every element of an Arrow array or chunked array (nulls hash as ``None``).

    String and binary columns are dictionary-encoded in Arrow, so only the
    distinct values are hashed (:func:`_hash_dictionary`); numeric columns go through
    :func:`stable_hash_array` on a zero-copy NumPy view where Arrow allows one;
    dates, times and durations as nanoseconds, decimals once per distinct value, an
    integral one as the equal integer and others as floats (see the module).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(values, pa.ChunkedArray):
        values = combined(values) if values.num_chunks != 1 else values.chunk(0)
    kind = values.type
    if pa.types.is_decimal(kind) and kind.bit_width < 128:  # 32 and 64 bits: Arrow encodes 128 and 256
        values = values.cast(pa.decimal128(kind.precision, kind.scale))
        kind = values.type
    elif pa.types.is_temporal(kind) and not pa.types.is_interval(kind):
        return _hash_arrow_temporal(values)
    textual = pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)
    textual = textual or pa.types.is_large_binary(kind)
    if textual and not values.null_count and len(values) <= DIRECT_ROWS:  # few rows: hashing them beats encoding
        direct = _crc32_arrow_bytes(values)
        if direct is not None:
            return direct
    if pa.types.is_dictionary(kind):
        encoded = values
    elif (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_decimal(kind)
    ):
        encoded = pc.dictionary_encode(values)
    else:
        encoded = None
    if encoded is not None:
        distinct = _hash_dictionary(encoded.dictionary)
        indices = encoded.indices
        if indices.null_count:
            hashes = np.full(len(indices), _NONE_HASH, dtype=np.uint64)
            valid = indices.is_valid().to_numpy(zero_copy_only=False)
            hashes[valid] = distinct[indices.drop_null().to_numpy()]
            return hashes
        result: np.ndarray = distinct[indices.to_numpy()]
        return result
    if values.null_count:
        hashes = np.full(len(values), _NONE_HASH, dtype=np.uint64)
        valid = values.is_valid().to_numpy(zero_copy_only=False)
        hashes[valid] = stable_hash_array(values.drop_null().to_numpy(zero_copy_only=False))
        return hashes
    return stable_hash_array(values.to_numpy(zero_copy_only=False))


def _hash_arrow_temporal(values: Any) -> np.ndarray:
    """An Arrow date, time, timestamp or duration array as nanoseconds (:func:`_hash_nanoseconds`), nulls as None."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = values.type
    unit = "D" if pa.types.is_date32(kind) else "ms" if pa.types.is_date64(kind) else kind.unit
    counts = values.view(pa.int32() if kind.bit_width == 32 else pa.int64())
    if values.null_count:
        counts = pc.fill_null(counts, 0)
    hashes = _hash_nanoseconds(counts.to_numpy(), unit)
    if values.null_count:
        hashes[~values.is_valid().to_numpy(zero_copy_only=False)] = _NONE_HASH
    return hashes
