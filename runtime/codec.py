"""The one msgpack codec of pytimely: one extension table, the encoders, and one bounded decoder.

The wire (:mod:`runtime.communication.wire`), capture logs (:mod:`runtime.eventlog`) and
recordings (:mod:`runtime.instrument`) all encode values here and decode them
here; each keeps only its own framing.  Everything read from outside (a socket,
a file) is hostile, so :func:`decode` is the only place that turns such bytes
into values, and it is bounded:

* **size**: a value longer than its dialect's ``max_size`` is refused before
  anything is decoded;
* **lengths**: msgpack refuses any string, bytes, array, map or extension whose
  declared length is longer than the bytes that remain, so a declared length
  never allocates anything; what a value decodes to is at most about 64 times
  its bytes (one pointer and one small object per byte at worst);
* **depth**: arrays and maps nest at most 1024 deep inside one msgpack value
  (msgpack's own fixed stack), and extension values (tuples, products, codec
  values, ...) nest at most :data:`MAX_DEPTH` deep in one another.  Each level
  of extension nesting is one more call of msgpack's decoder on the C stack
  (about 40 KiB each), so that bound is what keeps a hostile value from
  overflowing the stack: without it, 200 nested extensions (about 700 bytes)
  crashed the process;
* **hash flooding**: a set, frozenset or map with more than
  :data:`~runtime.collisions.MAX_SHARED_HASH` distinct keys of one hash value
  (crafted: Python's hash of ints and tuples is not randomized) is refused in
  time linear in its size (:mod:`runtime.collisions`), where building it would
  take quadratic time.  Maps are first decoded natively with at most that many
  keys each; a value holding a longer map is decoded again with every long
  map checked before it is built;
* **types**: a dialect lists the extension types its format holds; any other
  is refused, and a registered codec (:func:`register_codec`) is only ever
  called for the ``CODEC`` extension of the wire dialect.

Past any limit, and for any malformed input, :func:`decode` raises
:class:`~runtime.errors.DecodeError` (never a raw ``TypeError``,
``ValueError`` or msgpack exception), except that an Arrow batch arriving
where pyarrow is not installed raises
:class:`~runtime.communication.arraycodec.ColumnarUnavailable` (nothing is damaged).

The extension table
    ===========  ====  =========================================================
    name         code  payload
    ===========  ====  =========================================================
    PRODUCT      1     a :class:`~scopes.progress.timestamp.Product`: ``[outer, inner]``
    TUPLE        2     a ``tuple``: an array of its items
    SET          3     a ``set``: an array of its items
    FROZENSET    4     a ``frozenset``: an array of its items
    NDARRAY      5     a numpy array (:mod:`runtime.communication.arraycodec`)
    ARROW_BATCH  6     a ``pyarrow.RecordBatch``, Arrow's IPC stream
    ARROW_TABLE  7     a ``pyarrow.Table``, Arrow's IPC stream
    CODEC        8     a value of a registered type: ``[codec name, encoded]``
    BIGINT       9     an ``int`` beyond 64 bits: big-endian two's complement
    REPR         10    any other value in a recording: its ``repr``, UTF-8
    ===========  ====  =========================================================

    Codes 1 to 7 are the ones capture logs have always used.  Recordings of
    format version 1 used 1 for PRODUCT and 2 for REPR, and the wire before
    protocol version 3 used 1 for TUPLE and 2 for PRODUCT: a :class:`Dialect`
    maps a format's old codes onto this table (:data:`RECORDING_V1`).
"""

from __future__ import annotations

import reprlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgpack  # type: ignore[import-untyped]

from runtime.collisions import MAX_SHARED_HASH, check_keys, pairs_hook
from runtime.communication.arraycodec import (
    ARROW_BATCH,
    ARROW_TABLE,
    NDARRAY,
    ColumnarDecodeError,
    ColumnarEncodeError,
    ColumnarUnavailable,
    columnar_kind,
    decode_arrow,
    encode_arrow,
    ndarray_from,
    ndarray_parts,
    split_ndarray,
)
from runtime.errors import DecodeError, EncodingError
from scopes.progress.antichain import Antichain
from scopes.progress.timestamp import Product

EXT_PRODUCT = 1
"""Extension code of a :class:`~scopes.progress.timestamp.Product`: payload ``[outer, inner]``."""
EXT_TUPLE = 2
"""Extension code of a ``tuple``: payload an array of its items."""
EXT_SET = 3
"""Extension code of a ``set``: payload an array of its items."""
EXT_FROZENSET = 4
"""Extension code of a ``frozenset``: payload an array of its items."""
EXT_NDARRAY = 5
"""Extension code of a numpy array: ``[u32 header length][header][memory]``
(:mod:`runtime.communication.arraycodec`)."""
EXT_ARROW_BATCH = 6
"""Extension code of a ``pyarrow.RecordBatch``: Arrow's IPC stream format."""
EXT_ARROW_TABLE = 7
"""Extension code of a ``pyarrow.Table``: Arrow's IPC stream format."""
EXT_CODEC = 8
"""Extension code of a value of a registered type: payload ``[codec name, encoded value]``."""
EXT_BIGINT = 9
"""Extension code of an ``int`` beyond 64 bits: big-endian two's complement bytes."""
EXT_REPR = 10
"""Extension code of a value a recording cannot hold otherwise: its ``repr`` in UTF-8."""

MAX_DEPTH = 32
"""How deep extension values (tuples, products, codec values, ...) may nest in one another."""

MAX_SIZE = 1 << 30
"""The largest encoded value any dialect accepts (1 GiB)."""

PLAIN_MAX_SIZE = 1 << 16
"""The largest value :data:`PLAIN` accepts (64 KiB): a handshake or a header is small."""

_COLUMNAR_EXT = {NDARRAY: EXT_NDARRAY, ARROW_BATCH: EXT_ARROW_BATCH, ARROW_TABLE: EXT_ARROW_TABLE}
_SCALARS = frozenset({int, float, str, bytes, bool, type(None)})


# ---------------------------------------------------------------------- registered codecs


@dataclass(frozen=True)
class Codec:
    """How values of one type travel: ``encode(value)`` gives an encodable value, ``decode`` inverts it."""

    cls: type
    name: str
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


_codecs_by_type: dict[type, Codec] = {}
_codecs_by_name: dict[str, Codec] = {}


def type_name(cls: type) -> str:
    """``module.QualifiedName`` of ``cls``.

    The script a program runs is ``__main__`` in the process that started it and
    ``__mp_main__`` in the processes started for it; both are called ``__main__``
    here, so that a class defined in the script has one name in every process.
    """
    module = "__main__" if cls.__module__ == "__mp_main__" else cls.__module__
    return f"{module}.{cls.__qualname__}"


def _is_columnar_type(cls: type) -> bool:
    """Whether ``cls`` is ``numpy.ndarray``, ``pyarrow.RecordBatch`` or ``pyarrow.Table`` (imports nothing)."""
    return type_name(cls) in ("numpy.ndarray", "pyarrow.lib.RecordBatch", "pyarrow.lib.Table")


def register_codec(
    cls: type, encode: Callable[[Any], Any], decode: Callable[[Any], Any], name: str | None = None
) -> None:
    """Let values of exactly type ``cls`` travel between processes.

    ``encode(value)`` must return something the wire carries (built-ins,
    timestamps, or values of other registered types); ``decode`` receives that
    and must rebuild the value.  Every process of the computation must register
    the same codecs under the same ``name`` (default: ``module.QualifiedName``,
    with the script being run called ``__main__`` in every process); registering
    at import time of the module that defines ``main`` does that.
    Registering ``cls`` again replaces its codec.  ``decode`` is only ever
    called by :func:`decode` on values of the wire dialect, which is only used
    once a peer has proved the cluster's token.
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_codec needs a class, got {cls!r}")
    if cls in _SCALARS or cls in (list, tuple, dict, Product) or _is_columnar_type(cls):
        raise ValueError(f"{type_name(cls)} travels natively and cannot have a codec")
    if not callable(encode) or not callable(decode):
        raise TypeError("register_codec needs callable encode and decode functions")
    codec_name = name if name is not None else type_name(cls)
    existing = _codecs_by_name.get(codec_name)
    if existing is not None and existing.cls is not cls:
        raise ValueError(f"codec name {codec_name!r} is already used by {type_name(existing.cls)}")
    old = _codecs_by_type.pop(cls, None)
    if old is not None:
        _codecs_by_name.pop(old.name, None)
    codec = Codec(cls, codec_name, encode, decode)
    _codecs_by_type[cls] = codec
    _codecs_by_name[codec_name] = codec


def unregister_codec(cls: type) -> None:
    """Forget the codec of ``cls`` (if any)."""
    codec = _codecs_by_type.pop(cls, None)
    if codec is not None:
        _codecs_by_name.pop(codec.name, None)


# ---------------------------------------------------------------------- encoding


def _unencodable(value: Any) -> EncodingError:
    name = type_name(value.__class__)
    return EncodingError(
        f"cannot send a value of type {name} to another process: the wire carries int, float, str, "
        f"bytes, bool, None, list, tuple, dict and timestamps (exact types) and types with a codec. "
        f"Register one in every process, for example at import time of the module that defines "
        f"main: runtime.register_codec({value.__class__.__qualname__}, encode=lambda v: ..., "
        f"decode=lambda data: ...)",
        name,
    )


def _columnar_ext(kind: str, value: Any) -> msgpack.ExtType:
    try:
        if kind == NDARRAY:
            prefix, data = ndarray_parts(value)
            return msgpack.ExtType(EXT_NDARRAY, b"".join((prefix, data)))
        return msgpack.ExtType(_COLUMNAR_EXT[kind], encode_arrow(value))
    except ColumnarEncodeError as error:
        raise EncodingError(str(error), type_name(value.__class__)) from None


def _wire_default(value: Any) -> msgpack.ExtType:
    cls = value.__class__
    if cls is tuple:
        return msgpack.ExtType(EXT_TUPLE, pack_wire(list(value)))
    if cls is Product:
        return msgpack.ExtType(EXT_PRODUCT, pack_wire([value[0], value[1]]))
    if cls is int:
        length = (value.bit_length() + 8) // 8
        return msgpack.ExtType(EXT_BIGINT, value.to_bytes(length, "big", signed=True))
    codec = _codecs_by_type.get(cls)
    if codec is not None:
        return msgpack.ExtType(EXT_CODEC, pack_wire([codec.name, codec.encode(value)]))
    kind = columnar_kind(value)
    if kind is not None:
        return _columnar_ext(kind, value)
    raise _unencodable(value)


class _PackState:
    """One thread's reusable packers and how many extension values it is packing inside."""

    __slots__ = ("free", "depth")

    def __init__(self) -> None:
        self.free: list[msgpack.Packer] = []
        self.depth = 0


_packers = threading.local()
KEEP_PACKER_BELOW = 1 << 20
"""A reused msgpack packer keeps its grown buffer, so only one that packed fewer bytes than this is kept."""


def pack_wire(value: Any) -> bytes:
    """``value`` in the wire dialect: exact built-in types, timestamps, columnar batches and codec values.

    Raises :class:`EncodingError` (or msgpack's ``TypeError``/``ValueError``/``OverflowError``,
    which :func:`runtime.communication.wire.encode_value` turns into one) for anything else, and for a value
    whose extension values nest deeper than receivers decode (:data:`MAX_DEPTH`).
    """
    # Building a msgpack Packer costs several microseconds (more than packing a frame
    # header), so each thread reuses its own; _wire_default packs nested values
    # re-entrantly, hence a small free list rather than one packer per thread.
    state: _PackState | None = getattr(_packers, "state", None)
    if state is None:
        state = _packers.state = _PackState()
    depth = state.depth
    if depth > MAX_DEPTH:
        raise EncodingError(
            f"a value nests extension values (tuples, products, codec values) more than {MAX_DEPTH} deep, "
            f"which no receiver decodes; flatten it, or give its type a codec with a flatter encoding",
            type_name(value.__class__),
        )
    free = state.free
    packer = free.pop() if free else msgpack.Packer(use_bin_type=True, strict_types=True, default=_wire_default)
    state.depth = depth + 1
    try:
        packed: bytes = packer.pack(value)  # on an exception the packer is dropped, never reused half-full
    finally:
        state.depth = depth
    if len(packed) < KEEP_PACKER_BELOW:
        free.append(packer)
    return packed


def _capture_default(value: Any) -> Any:
    if isinstance(value, Product):
        return msgpack.ExtType(EXT_PRODUCT, pack_capture([value[0], value[1]]))
    if type(value) is tuple:
        return msgpack.ExtType(EXT_TUPLE, pack_capture(list(value)))
    if isinstance(value, frozenset):
        return msgpack.ExtType(EXT_FROZENSET, pack_capture(list(value)))
    if isinstance(value, set):
        return msgpack.ExtType(EXT_SET, pack_capture(list(value)))
    kind = columnar_kind(value)
    if kind is not None:
        return _columnar_ext(kind, value)
    raise TypeError(
        f"cannot encode a {type(value).__module__}.{type(value).__qualname__} ({value!r:.80}): event logs hold "
        "None, bool, int (64-bit), float, str, bytes, list, tuple, dict, set, frozenset, Product, numpy arrays "
        "(of any dtype but object) and Arrow record batches and tables"
    )


_file_depth = threading.local()


def _pack_bounded(value: Any, default: Callable[[Any], Any]) -> bytes:
    """``msgpack.packb`` with ``default``, refusing values nested deeper than any reader decodes."""
    depth: int = getattr(_file_depth, "depth", 0)
    if depth > MAX_DEPTH:
        raise EncodingError(
            f"a value nests tuples or products more than {MAX_DEPTH} deep, which no reader decodes; flatten it",
            type_name(value.__class__),
        )
    _file_depth.depth = depth + 1
    try:
        packed: bytes = msgpack.packb(value, default=default, strict_types=True, use_bin_type=True)
    finally:
        _file_depth.depth = depth
    return packed


def pack_capture(value: Any) -> bytes:
    """``value`` in the capture-log dialect; ``TypeError`` (or ``OverflowError``) if it cannot be."""
    return _pack_bounded(value, _capture_default)


def _recording_default(value: Any) -> Any:
    if isinstance(value, Product):
        return msgpack.ExtType(EXT_PRODUCT, pack_recording([value[0], value[1]]))
    if isinstance(value, tuple):
        return list(value)
    return msgpack.ExtType(EXT_REPR, repr(value).encode())


def pack_recording(value: Any) -> bytes:
    """``value`` in the recording dialect: tuples as arrays, products, and anything else as its ``repr``."""
    return _pack_bounded(value, _recording_default)


# ---------------------------------------------------------------------- decoding


ExtHook = Callable[[int, bytes], Any]
"""msgpack's ``ext_hook``: ``(code, payload) -> value``."""
PairsHook = Callable[[list[tuple[Any, Any]]], dict[Any, Any]]
"""msgpack's ``object_pairs_hook``: a map's ``(key, value)`` pairs -> the ``dict``."""
Nested = tuple[ExtHook, PairsHook | None, int]
"""How to decode msgpack nested in an extension value: its ``ext_hook``, ``object_pairs_hook`` and ``max_map_len``
(msgpack's ``None`` and ``-1`` are its defaults)."""
Handler = Callable[["Dialect", Nested, bytes], Any]
"""Decodes one extension type: ``(dialect, nested, payload) -> value``."""


class Dialect:
    """What one format may hold: which extension codes (and what they mean), arrays as lists or tuples, a size bound.

    ``codes`` maps each code the format uses to the code of this module's
    table it means (an identity, except for a format's old versions).
    """

    __slots__ = ("name", "codes", "use_list", "max_size", "_handlers", "_hooks", "_pairs")

    def __init__(self, name: str, codes: Mapping[int, int], *, use_list: bool = True, max_size: int = MAX_SIZE) -> None:
        """A dialect called ``name`` (it appears in errors) holding the extension ``codes``."""
        self.name = name
        self.codes = dict(codes)
        self.use_list = use_list
        self.max_size = max_size
        self._handlers: dict[int, Handler] = {code: _HANDLERS[meaning] for code, meaning in self.codes.items()}
        self._hooks = threading.local()
        self._pairs = pairs_hook(f"a map in {name}")

    def ext_hook(self) -> ExtHook:
        """This thread's msgpack ``ext_hook`` for the dialect: it decodes extension values, counting their depth.

        One per thread (made on first use), so the depth it counts is that of
        the value this thread is decoding.  Maps in extension values are
        checked for hash flooding (:func:`runtime.collisions.check_keys`).
        """
        return self.passes()[1][0]

    def passes(self) -> tuple[Nested, Nested]:
        """This thread's two ways of decoding the dialect: the fast one, then the checking one.

        The fast one decodes maps natively and refuses (with msgpack's
        ``ValueError``) any longer than :data:`MAX_SHARED_HASH`; the checking
        one checks every longer map (:func:`runtime.collisions.pairs_hook`).
        """
        passes: tuple[Nested, Nested] | None = getattr(self._hooks, "passes", None)
        if passes is None:
            passes = self._hooks.passes = (self._make_hook(checked=False), self._make_hook(checked=True))
        return passes

    def _make_hook(self, checked: bool) -> Nested:
        handlers = self._handlers
        depth = 0

        def hook(code: int, data: bytes) -> Any:
            nonlocal depth
            handler = handlers.get(code)
            if handler is None:
                raise DecodeError(f"extension type {code} is not part of {self.name}")
            if depth >= MAX_DEPTH:
                raise DecodeError(f"extension values in {self.name} nest more than {MAX_DEPTH} deep")
            depth += 1
            try:
                return handler(self, nested, data)
            finally:
                depth -= 1

        nested: Nested = (hook, self._pairs, -1) if checked else (hook, None, MAX_SHARED_HASH)
        return nested

    def cached(self, limit: int = 100_000, limit_bytes: int = 1 << 20) -> Dialect:
        """A copy of this dialect that decodes each distinct product once (up to ``limit`` of them).

        For a stream in which the same times recur in almost every value (a
        recording sent to the live viewer).  Only for dialects that read
        arrays as tuples, so that the products shared are immutable.  The
        encodings kept as keys add up to at most ``limit_bytes`` (a time is a
        few bytes; a stream of large distinct ones must not be held for ever).
        """
        if self.use_list:
            raise ValueError(f"{self.name} reads arrays as lists: its products cannot be shared")
        copy = Dialect(self.name, self.codes, use_list=False, max_size=self.max_size)
        cache: dict[bytes, Any] = {}
        held = [0]  # bytes of the keys in cache

        def product(dialect: Dialect, nested: Nested, data: bytes) -> Any:
            value = cache.get(data)
            if value is None:
                value = _decode_product(dialect, nested, data)
                if len(cache) < limit and held[0] + len(data) <= limit_bytes:
                    cache[data] = value
                    held[0] += len(data)
            return value

        for code, meaning in self.codes.items():
            if meaning == EXT_PRODUCT:
                copy._handlers[code] = product
        return copy

    def unpacker(self, max_buffer_size: int) -> msgpack.Unpacker:
        """A streaming msgpack reader of this dialect for this thread, buffering at most ``max_buffer_size`` bytes.

        Its items raise msgpack's own exceptions: wrap them with :func:`decode_error`.  Every map
        and set it reads is checked for hash flooding (:func:`runtime.collisions.check_keys`).
        """
        return msgpack.Unpacker(
            ext_hook=self.ext_hook(),
            object_pairs_hook=self._pairs,
            raw=False,
            strict_map_key=False,
            use_list=self.use_list,
            max_buffer_size=max_buffer_size,
        )

    def __repr__(self) -> str:
        return f"Dialect({self.name!r})"


_unpackb = msgpack.unpackb


def _items(dialect: Dialect, nested: Nested, data: bytes, what: str) -> Any:
    hook, pairs, limit = nested  # raw=False is msgpack's default: each keyword costs a few ns per value
    items = _unpackb(
        data, ext_hook=hook, strict_map_key=False, use_list=dialect.use_list, object_pairs_hook=pairs, max_map_len=limit
    )
    if items.__class__ is not list and items.__class__ is not tuple:
        raise DecodeError(f"a {what} in {dialect.name} holds {type(items).__name__}, not an array")
    return items


def _decode_product(dialect: Dialect, nested: Nested, data: bytes) -> Product:
    hook, pairs, limit = nested  # raw=False is msgpack's default: each keyword costs a few ns per value
    items = _unpackb(
        data, ext_hook=hook, strict_map_key=False, use_list=dialect.use_list, object_pairs_hook=pairs, max_map_len=limit
    )
    if (items.__class__ is list or items.__class__ is tuple) and len(items) == 2:
        return Product(items[0], items[1])
    raise DecodeError(f"a product in {dialect.name} holds {describe(items)}, not [outer, inner]")


def _decode_tuple(dialect: Dialect, nested: Nested, data: bytes) -> tuple[Any, ...]:
    hook, pairs, limit = nested  # raw=False is msgpack's default: each keyword costs a few ns per value
    items = _unpackb(
        data, ext_hook=hook, strict_map_key=False, use_list=dialect.use_list, object_pairs_hook=pairs, max_map_len=limit
    )
    if items.__class__ is list or items.__class__ is tuple:
        return tuple(items)
    raise DecodeError(f"a tuple in {dialect.name} holds {describe(items)}, not an array")


class _ShortRepr(reprlib.Repr):
    """``reprlib``'s bounded ``repr``, which also shows an ``int`` too long for ``str`` by its size."""

    def repr_int(self, x: int, level: int) -> str:
        """``x``, or its size in bits when it has more digits than are worth showing (or ``str`` would give)."""
        if x.bit_length() > 128:
            return f"<an int of {x.bit_length()} bits>"
        return super().repr_int(x, level)


_SHORT = _ShortRepr()
_SHORT.maxlevel = 3
_SHORT.maxtuple = _SHORT.maxlist = _SHORT.maxdict = _SHORT.maxset = _SHORT.maxfrozenset = 6
_SHORT.maxstring = _SHORT.maxother = _SHORT.maxlong = 40


def shown(value: Any, limit: int = 80) -> str:
    """The start of ``value``'s ``repr`` for an error message, at most ``limit`` characters, never raising.

    A decoded value may nest a thousand arrays deep, hold a million items or
    an ``int`` past ``str``'s digit limit: a plain ``repr`` of it (even cut
    with ``{value!r:.80}``, which cuts only after building all of it) could
    raise ``RecursionError`` or ``ValueError``, or take time and memory
    out of proportion to the message.  This one looks at most 3 levels deep
    and 6 items wide.
    """
    try:
        text = _SHORT.repr(value)
    except Exception:  # a repr that fails: say what it is
        text = f"<a {type(value).__name__}>"
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


def describe(value: Any) -> str:
    """A short description of a decoded value for an error message (never a deep, unbounded ``repr``)."""
    if isinstance(value, list | tuple | dict | set | frozenset):
        return f"a {type(value).__name__} of {len(value)} items"
    if isinstance(value, int | float | bool | None):
        return shown(value)
    return f"a {type(value).__name__} ({shown(value, 60)})"


def _decode_set(dialect: Dialect, nested: Nested, data: bytes) -> set[Any]:
    items = _items(dialect, nested, data, "set")
    check_keys(items, f"a set in {dialect.name}")
    return set(items)


def _decode_frozenset(dialect: Dialect, nested: Nested, data: bytes) -> frozenset[Any]:
    items = _items(dialect, nested, data, "frozenset")
    check_keys(items, f"a frozenset in {dialect.name}")
    return frozenset(items)


def _decode_ndarray_ext(dialect: Dialect, nested: Nested, data: bytes) -> Any:
    return decode_ndarray(data)


def _decode_arrow_batch(dialect: Dialect, nested: Nested, data: bytes) -> Any:
    return decode_arrow(ARROW_BATCH, data)


def _decode_arrow_table(dialect: Dialect, nested: Nested, data: bytes) -> Any:
    return decode_arrow(ARROW_TABLE, data)


def _decode_codec(dialect: Dialect, nested: Nested, data: bytes) -> Any:
    items = _items(dialect, nested, data, "codec value")
    if len(items) != 2 or items[0].__class__ is not str:
        raise DecodeError(f"a codec value in {dialect.name} is not [name, encoded]")
    name, encoded = items
    codec = _codecs_by_name.get(name)
    if codec is None:
        raise DecodeError(
            f"received a value encoded by codec {name!r}, which is not registered in this "
            f"process; register the same codecs in every process (runtime.register_codec)"
        )
    return codec.decode(encoded)


def _decode_bigint(dialect: Dialect, nested: Nested, data: bytes) -> int:
    return int.from_bytes(data, "big", signed=True)


def _decode_repr(dialect: Dialect, nested: Nested, data: bytes) -> str:
    return data.decode(errors="replace")


_HANDLERS: dict[int, Handler] = {
    EXT_PRODUCT: _decode_product,
    EXT_TUPLE: _decode_tuple,
    EXT_SET: _decode_set,
    EXT_FROZENSET: _decode_frozenset,
    EXT_NDARRAY: _decode_ndarray_ext,
    EXT_ARROW_BATCH: _decode_arrow_batch,
    EXT_ARROW_TABLE: _decode_arrow_table,
    EXT_CODEC: _decode_codec,
    EXT_BIGINT: _decode_bigint,
    EXT_REPR: _decode_repr,
}


def _same(*codes: int) -> dict[int, int]:
    return {code: code for code in codes}


PLAIN = Dialect("a plain value (no extension types)", {}, max_size=PLAIN_MAX_SIZE)
"""No extension types at all, at most :data:`PLAIN_MAX_SIZE` bytes: handshakes, headers."""
WIRE = Dialect(
    "the wire",
    _same(EXT_PRODUCT, EXT_TUPLE, EXT_NDARRAY, EXT_ARROW_BATCH, EXT_ARROW_TABLE, EXT_CODEC, EXT_BIGINT),
)
"""Values between processes (protocol version 3 on)."""
WIRE_RECORDS = Dialect("a batch on the wire", {}, use_list=False)
"""The wire's fast and columnar batch paths: plain msgpack, arrays read back as tuples."""
CAPTURE = Dialect(
    "a capture log",
    _same(EXT_PRODUCT, EXT_TUPLE, EXT_SET, EXT_FROZENSET, EXT_NDARRAY, EXT_ARROW_BATCH, EXT_ARROW_TABLE),
)
"""Capture logs, every format version (their codes have always been this table's)."""
RECORDING = Dialect("a recording", _same(EXT_PRODUCT, EXT_REPR), use_list=False)
"""Recordings of format version 2 on."""
RECORDING_V1 = Dialect("a recording of format version 1", {1: EXT_PRODUCT, 2: EXT_REPR}, use_list=False)
"""Recordings of format version 1, whose REPR was code 2."""


def decode(data: bytes | bytearray | memoryview, dialect: Dialect) -> Any:
    """The value encoded in ``data``, read as ``dialect``; raise :class:`DecodeError` if it is not one.

    Bounded as the module docstring says.  An Arrow batch read where pyarrow
    is not installed raises :class:`~runtime.communication.arraycodec.ColumnarUnavailable`.
    A value that holds a map of more than :data:`~runtime.collisions.MAX_SHARED_HASH`
    keys, or that is refused, is decoded twice (so registered codecs may see
    some of its values twice).
    """
    if len(data) > dialect.max_size:
        raise DecodeError(
            f"{dialect.name}: a value of {len(data)} bytes is longer than the limit of {dialect.max_size}"
        )
    (fast, _, limit), (checking, pairs, _) = dialect.passes()
    use_list = dialect.use_list
    try:
        try:  # maps built natively, none longer than MAX_SHARED_HASH keys: none flooded
            return _unpackb(data, ext_hook=fast, raw=False, strict_map_key=False, use_list=use_list, max_map_len=limit)
        except Exception:  # a longer map (or damage): only the checking pass says which, and what
            pass
        return _unpackb(
            data, ext_hook=checking, raw=False, strict_map_key=False, use_list=use_list, object_pairs_hook=pairs
        )
    except (DecodeError, ColumnarUnavailable):
        raise
    except Exception as error:  # msgpack, numpy, Arrow and the types rebuilt raise many unrelated types
        raise decode_error(error, dialect) from error


def decode_error(error: BaseException, dialect: Dialect) -> DecodeError:
    """The :class:`DecodeError` to raise for any exception decoding ``dialect`` raised."""
    if isinstance(error, DecodeError):
        return error
    if isinstance(error, RecursionError):
        return DecodeError(f"{dialect.name}: a value nests too deep to decode")
    return DecodeError(f"{dialect.name}: malformed value ({type(error).__name__}: {error})")


def decode_plain(data: bytes | bytearray | memoryview, max_size: int = PLAIN_MAX_SIZE) -> Any:
    """A value of built-in types only (no extension type, so no tuples, products or codec values).

    For bytes from a peer that has not authenticated (a handshake frame's
    header): refuses anything longer than ``max_size`` bytes or holding an
    extension type with :class:`DecodeError`, and never calls a registered codec.
    """
    if len(data) > max_size:
        raise DecodeError(f"{PLAIN.name}: a value of {len(data)} bytes is longer than the limit of {max_size}")
    return decode(data, PLAIN)


def decode_ndarray(data: bytes | bytearray | memoryview) -> Any:
    """The numpy array :func:`runtime.communication.arraycodec.encode_ndarray` encoded in ``data``.

    The array header is decoded as :data:`PLAIN`.  Raises
    :class:`~runtime.communication.arraycodec.ColumnarDecodeError` if ``data`` is damaged.
    """
    header_bytes, body = split_ndarray(data)
    try:
        header = decode(header_bytes, PLAIN)
    except DecodeError as error:
        raise ColumnarDecodeError(f"malformed numpy array header: {error}") from error
    return ndarray_from(header, body)


def decode_columnar(kind: str, data: bytes | bytearray | memoryview) -> Any:
    """The columnar batch of ``kind`` encoded in ``data``.

    ``kind`` is as :func:`~runtime.communication.arraycodec.columnar_kind` names it.
    """
    if kind == NDARRAY:
        return decode_ndarray(data)
    if kind in (ARROW_BATCH, ARROW_TABLE):
        return decode_arrow(kind, data)
    raise ColumnarDecodeError(f"unknown columnar kind {kind!r}")


# ---------------------------------------------------------------------- built-in codecs

MAX_ANTICHAIN = 1024
"""The most elements an :class:`~scopes.progress.antichain.Antichain` decoded from the wire may have: building one
compares every pair, so the bound bounds the work a hostile value can ask for (frontiers hold a handful)."""


def _antichain_elements(chain: Antichain[Any]) -> list[Any]:
    return list(chain.elements)


def _antichain_of(elements: Any) -> Antichain[Any]:
    if elements.__class__ is not list or len(elements) > MAX_ANTICHAIN:
        raise DecodeError(f"an antichain on the wire must be a list of at most {MAX_ANTICHAIN} times")
    return Antichain(elements)


# A frontier (``probe.frontier()``, say) travels between processes as its elements: a worker's ``main`` may return
# one from every process, as it may from every thread.
register_codec(Antichain, _antichain_elements, _antichain_of, name="pytimely.Antichain")


__all__ = [
    "CAPTURE",
    "Codec",
    "Dialect",
    "EncodingError",
    "MAX_ANTICHAIN",
    "MAX_DEPTH",
    "MAX_SIZE",
    "PLAIN",
    "RECORDING",
    "RECORDING_V1",
    "WIRE",
    "WIRE_RECORDS",
    "decode",
    "decode_columnar",
    "decode_error",
    "decode_ndarray",
    "decode_plain",
    "describe",
    "pack_capture",
    "pack_recording",
    "pack_wire",
    "register_codec",
    "shown",
    "unregister_codec",
]
