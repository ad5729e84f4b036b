"""The wire encoding between processes: length-prefixed msgpack frames, records and timestamps.

Nothing here ever unpickles: every value received from the network is rebuilt by
msgpack or by a codec the user registered.

Values
    Built-in values travel as they are: ``int`` (any size), ``float``, ``str``,
    ``bytes``, ``bool``, ``None``, ``list``, ``tuple`` and ``dict`` (exact types,
    nested freely), and the timestamps of :mod:`scopes.progress.timestamp` (integers and
    :class:`~scopes.progress.timestamp.Product`).  Tuples come back
    as tuples and lists as lists: tuples, products, integers beyond 64 bits and
    codec values are msgpack *extension types* of :mod:`runtime.codec`'s one
    table, and every value received is decoded by its bounded decoder
    (extension values nest at most :data:`runtime.codec.MAX_DEPTH` deep).  Any other type (subclasses of
    the built-ins included) needs a codec registered with :func:`register_codec`
    in every process; otherwise encoding raises :class:`EncodingError`, which
    names the type and says how to register one.

Batches
    A batch (a list of records) is encoded once per message.  A batch of at
    least :data:`COLUMNS_MIN` tuples of one width whose fields are scalars (the
    ``(key, value)`` pairs of an exchange, say) travels column by column: a
    column of strings as one NUL-joined string, any other as one array; the
    receiver zips the columns back into tuples.  Other batches whose records are
    scalars or (nested) tuples of scalars take a fast path: msgpack packs tuples
    as arrays, and the receiver reads every array back as a tuple.  Any other
    batch takes the general path above.
    :func:`encode_batch` returns the path taken; the frame header carries it.

Columnar batches
    A numpy array (exact ``numpy.ndarray``, any shape, any dtype but object,
    structured dtypes included) and a ``pyarrow.RecordBatch`` or
    ``pyarrow.Table`` travel as themselves, never as rows: a message whose
    batch is one of them has a path of its own (:data:`BATCH_NDARRAY`,
    :data:`BATCH_ARROW`, :data:`BATCH_ARROW_TABLE`) and its payload is the
    array's memory, or Arrow's IPC stream (see :mod:`runtime.communication.arraycodec`).
    A large native ``str`` array of ASCII text travels at one byte a character
    (:data:`BATCH_NDARRAY_ASCII`): a quarter of the bytes to copy and send.
    Inside other values they are the extension types 5 (numpy), 6 (record
    batch) and 7 (table).  Encoding and decoding copy memory; nothing is done
    per row.  pyarrow is imported only to decode an Arrow batch; a process
    without it that receives one raises :class:`WireError` saying so.  An
    array of dtype object is refused (:class:`EncodingError`): its items would
    need pickling.

Frames
    A frame is ``[u32 body length][u32 header length][header][payload]``, big
    endian.  The header is a msgpack array (general path); the payload is raw
    bytes whose meaning the header gives (an encoded batch, say).
    :class:`FrameReader` splits a byte stream back into ``(header, payload)``.
"""

from __future__ import annotations

import os
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from itertools import chain
from operator import itemgetter
from typing import Any

import msgpack  # type: ignore[import-untyped]

from runtime import codec as _codec
from runtime.codec import (
    Codec,
    EncodingError,
    decode_ndarray,
    pack_wire,
    register_codec,
    type_name,
    unregister_codec,
)
from runtime.communication.arraycodec import (
    ARROW_BATCH,
    ARROW_TABLE,
    DATA_ALIGNMENT,
    NDARRAY,
    ColumnarDecodeError,
    ColumnarEncodeError,
    ColumnarUnavailable,
    arrow_ipc,
    ascii_packed,
    ascii_unpacked,
    columnar_kind,
    decode_arrow,
    ndarray_parts,
)
from runtime.communication.byte_sizes import byte_setting
from runtime.errors import DecodeError, WireError
from runtime.errors import FrameTooLarge as FrameTooLarge

PROTOCOL_VERSION = 6
"""Bumped whenever the wire format changes; peers with another version are refused.

Version 3: extension types of :mod:`runtime.codec`'s one table (tuples were 1 and products 2 before).
Version 4: the batch path :data:`BATCH_NDARRAY_ASCII`.
Version 5: after the handshake, frames travel in records sealed with a keyed MAC (:mod:`runtime.communication.seal`).
Version 6: ``hello`` and ``challenge`` carry the settings every process must share
(:mod:`runtime.communication.agreement`)."""

MAX_FRAME_SETTING = "PYTIMELY_MAX_FRAME_BYTES"
"""The environment variable that lowers (or raises) :data:`MAX_FRAME`, in bytes; the same in every process."""


DEFAULT_MAX_FRAME = 1 << 30
"""The frame limit when ``$PYTIMELY_MAX_FRAME_BYTES`` is unset."""
MIN_MAX_FRAME = 1 << 16
"""The smallest frame limit the setting may ask for."""
MAX_MAX_FRAME = (1 << 32) - 1
"""The largest frame limit the setting may ask for: a frame's length prefix holds 32 bits."""


def max_frame_from(text: str | None) -> int:
    """The frame limit ``text`` (``$PYTIMELY_MAX_FRAME_BYTES``: ``65536``, ``64K``, ``512M``) asks for; the default if
    unset.  Read as the other byte-count settings are (:func:`runtime.communication.byte_sizes.byte_setting`)."""
    return byte_setting(MAX_FRAME_SETTING, text, DEFAULT_MAX_FRAME, MIN_MAX_FRAME, MAX_MAX_FRAME, "64K or 512M")


MAX_FRAME = max_frame_from(os.environ.get(MAX_FRAME_SETTING))
"""The largest frame sent or accepted (1 GiB unless ``$PYTIMELY_MAX_FRAME_BYTES`` says otherwise);
a larger length prefix is a protocol violation, and a larger message is refused by its sender."""

BATCH_FAST = 0
"""Batch path: scalars and tuples of scalars, tuples packed as arrays."""
BATCH_GENERAL = 1
"""Batch path: any encodable value, tuples and products as extension types."""
BATCH_COLUMNS = 2
"""Batch path: tuples of one width whose columns hold scalars, sent column by column."""
BATCH_NDARRAY = 3
"""Batch path: a numpy array, its memory as it is (:func:`runtime.communication.arraycodec.encode_ndarray`)."""
BATCH_ARROW = 4
"""Batch path: a ``pyarrow.RecordBatch`` in Arrow's IPC stream format."""
BATCH_ARROW_TABLE = 5
"""Batch path: a ``pyarrow.Table`` in Arrow's IPC stream format."""

BATCH_NDARRAY_ASCII = 6
"""Batch path: a numpy ``str`` array of ASCII text, one byte a character instead of four
(:func:`runtime.communication.arraycodec.ascii_packed`)."""

_COLUMNAR_PATHS = {NDARRAY: BATCH_NDARRAY, ARROW_BATCH: BATCH_ARROW, ARROW_TABLE: BATCH_ARROW_TABLE}

LARGE_FRAME = 1 << 16
"""Frames of at least this many bytes are gathered into a buffer of their own (see :class:`FrameReader`)."""

COLUMNS_MIN = 16
"""Batches of fewer tuples than this are not worth transposing."""

FRAME_PREFIX = struct.Struct("!II")
"""A frame's prefix: the length of its body (header and payload), then of its header, each a big-endian ``u32``."""
_SCALARS = frozenset({int, float, str, bytes, bool, type(None)})
_TUPLE_ONLY = frozenset({tuple})
_STR_ONLY = frozenset({str})


__all__ = ["Codec", "EncodingError", "register_codec", "unregister_codec"]  # re-exported from runtime.codec


def _encode_columnar(kind: str, value: Any) -> bytes:
    try:
        if kind == NDARRAY:
            prefix, data = ndarray_parts(value)
            return b"".join((prefix, data))
        return bytes(arrow_ipc(value))
    except ColumnarEncodeError as error:
        raise EncodingError(str(error), type_name(value.__class__)) from None


class Parts:
    """An encoded payload in several buffers (an array's prefix, then its memory), sent without joining them.

    ``len()`` is its size in bytes; a sender writes :attr:`buffers` one after
    the other (:func:`payload_pieces`), so the array's memory is copied once,
    into the socket or the shared-memory ring, never into a joined copy first.
    """

    __slots__ = ("buffers", "size")

    def __init__(self, *buffers: Any) -> None:
        """The payload that is the concatenation of ``buffers`` (bytes-like, C-contiguous)."""
        self.buffers = tuple(memoryview(buffer).cast("B") for buffer in buffers)
        self.size = sum(map(len, self.buffers))

    def __len__(self) -> int:
        """The payload's size in bytes."""
        return self.size

    def __bytes__(self) -> bytes:
        """The payload joined (a copy: for tests and rare paths)."""
        return b"".join(self.buffers)


def payload_pieces(pieces: list[Any], payload: Any) -> None:
    """Append ``payload``'s buffers to ``pieces`` (a :class:`Parts` gives each of its own)."""
    if payload.__class__ is Parts:
        pieces.extend(payload.buffers)
    else:
        pieces.append(payload)


def encode_value(value: Any) -> bytes:
    """Encode any wire-carried value (see the module docstring); raise :class:`EncodingError` if impossible."""
    try:
        return pack_wire(value)
    except EncodingError:
        raise
    except (TypeError, ValueError, OverflowError) as error:
        raise EncodingError(
            f"cannot encode {type_name(value.__class__)}: {error}", type_name(value.__class__)
        ) from error


def decode_value(data: bytes | bytearray | memoryview) -> Any:
    """Rebuild a value encoded by :func:`encode_value`; raise :class:`WireError` on malformed bytes.

    Decoded by :func:`runtime.codec.decode` (bounded in size, lengths and depth).
    """
    try:
        return _codec.decode(data, _codec.WIRE)
    except ColumnarUnavailable as error:
        raise WireError(f"cannot decode a columnar batch received from the wire: {error}") from error
    except DecodeError as error:
        raise WireError(f"malformed value on the wire: {error}") from error


def decode_plain_value(data: bytes | bytearray | memoryview, max_size: int = _codec.PLAIN_MAX_SIZE) -> Any:
    """A value of built-in types only, for bytes from a peer that has not authenticated; :class:`WireError` else.

    No extension type is accepted (so no registered codec is ever called),
    and nothing longer than ``max_size`` bytes.
    """
    try:
        return _codec.decode_plain(data, max_size)
    except DecodeError as error:
        raise WireError(f"malformed handshake value: {error}") from error


def _tuple_of_scalars(record: tuple[Any, ...]) -> bool:
    scalars = _SCALARS
    for item in record:
        cls = item.__class__
        if cls in scalars:
            continue
        if cls is tuple and _tuple_of_scalars(item):
            continue
        return False
    return True


SMALL_BATCH = 16
"""Batches of at most this many records are checked for the fast path record by record (a progress batch, every
step): building the sets of types costs more than the loop for a handful."""


def _is_fast(batch: list[Any], kinds: set[type] | frozenset[type] | None = None) -> bool:
    """Whether every record is a scalar or a (nested) tuple of scalars; ``kinds``: the records' types, if known."""
    scalars = _SCALARS
    if kinds is None and len(batch) <= SMALL_BATCH:
        for record in batch:
            cls = record.__class__
            if cls in scalars:
                continue
            if cls is not tuple:
                return False
            for item in record:  # the first level here, not in a call per record (a progress triple)
                if item.__class__ not in scalars and not (item.__class__ is tuple and _tuple_of_scalars(item)):
                    return False
        return True
    if kinds is None:
        kinds = set(map(type, batch))
    if kinds <= scalars:
        return True
    if not kinds - scalars <= _TUPLE_ONLY:
        return False
    records = [record for record in batch if record.__class__ is tuple] if kinds - {tuple} else batch
    items = set(map(type, chain.from_iterable(records)))
    if items <= scalars:
        return True
    if not items - scalars <= _TUPLE_ONLY:
        return False
    for record in records:
        for item in record:
            if item.__class__ is tuple and not _tuple_of_scalars(item):
                return False
    return True


def all_of_type(values: list[Any], kind: type) -> bool:
    """Whether every value is exactly of type ``kind``.

    One ``list.count`` over the types: about half the cost of building their set
    (7 against 12 ns a value, measured).  It compares the types with ``==``
    (identity first), as a set compares them with ``hash`` and ``==``: only a
    metaclass that calls another type equal to ``kind`` could pass, and with a
    matching ``__hash__`` it passes a comparison of sets too.
    """
    return list(map(type, values)).count(kind) == len(values)


def _encode_columns(batch: list[Any]) -> bytes | None:
    """Tuples of one width, transposed: a column of strings is one joined string, any other column
    of scalars one msgpack array; ``None`` if the batch does not have that shape."""
    width = len(batch[0])
    count = len(batch)
    if not width or list(map(len, batch)).count(width) != count:
        return None
    encoded: list[Any] = [count]
    for index in range(width):
        column = list(map(itemgetter(index), batch))
        first = column[0].__class__
        # a column of one scalar type (the common case) is tested without building the set of its types
        kinds = {first} if first in _SCALARS and all_of_type(column, first) else set(map(type, column))
        if kinds == _STR_ONLY:
            joined = "\0".join(column)
            if joined.count("\0") != count - 1:
                return None  # a string contains NUL: it would split wrongly
            encoded.append(joined)
        elif kinds <= _SCALARS:
            encoded.append(column)
        else:
            return None
    try:
        return msgpack.packb(encoded, use_bin_type=True)
    except (OverflowError, ValueError):
        return None


def _decode_columns(data: bytes | bytearray | memoryview) -> list[Any]:
    decoded = _codec.decode(data, _codec.WIRE_RECORDS)
    if decoded.__class__ is not tuple or len(decoded) < 2 or decoded[0].__class__ is not int:
        raise WireError("a columnar batch on the wire is not [count, column, ...] with at least one column")
    count, *encoded = decoded
    columns: list[list[Any]] = []
    for column in encoded:
        if column.__class__ is str:
            column = column.split("\0")
        elif column.__class__ is not tuple:
            raise WireError("a column on the wire is neither a string nor an array")
        if len(column) != count:
            raise WireError("a column on the wire has the wrong length")
        columns.append(column)
    return list(zip(*columns, strict=True))


def _decode_columnar(path: int, data: bytes | bytearray | memoryview) -> Any:
    try:
        if path == BATCH_NDARRAY:
            array = decode_ndarray(data)
            if not array.ndim:  # a batch's rows are its first axis: a scalar is no batch
                raise ColumnarDecodeError("a numpy batch has no axes (a scalar), so no rows")
            return array
        if path == BATCH_NDARRAY_ASCII:
            return ascii_unpacked(decode_ndarray(data))
        return decode_arrow(ARROW_BATCH if path == BATCH_ARROW else ARROW_TABLE, data)
    except ColumnarDecodeError as error:  # ColumnarUnavailable included: said so, not called damage
        raise WireError(f"cannot decode a columnar batch received from the wire: {error}") from error


_PACKERS = threading.local()


def _pack_small(batch: list[Any]) -> bytes:
    """A small fast-path batch (a progress batch, every step) packed with this thread's msgpack packer: half the cost
    of ``msgpack.packb``, which builds a packer at every call.  A packer resets itself after each batch, and after an
    error; one that packed :data:`~runtime.codec.KEEP_PACKER_BELOW` bytes or more is dropped, and its buffer (which
    grows to the largest batch packed and never shrinks) with it, as :func:`~runtime.codec.pack_wire` drops its own."""
    try:
        packer = _PACKERS.packer
    except AttributeError:
        packer = _PACKERS.packer = msgpack.Packer(use_bin_type=True)
    packed: bytes = packer.pack(batch)
    if len(packed) >= _codec.KEEP_PACKER_BELOW:
        del _PACKERS.packer
    return packed


def encode_batch(batch: Any) -> tuple[int, bytes | memoryview | Parts]:
    """Encode a batch once; return ``(path, bytes)`` for :func:`decode_batch`.

    A batch is a list of records, or a columnar batch (a numpy array, an Arrow
    record batch or table), which is encoded as its memory, not row by row.
    """
    if batch.__class__ is not list:
        kind = columnar_kind(batch)
        if kind is None:
            numpy = sys.modules.get("numpy")
            if numpy is not None and isinstance(batch, numpy.ndarray):
                raise EncodingError(
                    f"a batch of type {type_name(batch.__class__)} (a subclass of numpy.ndarray) cannot be sent to "
                    f"another process: only exact numpy arrays travel, and its extra state (a mask, say) would be "
                    f"lost; send numpy.asarray(batch) (or, for a masked array, batch.filled() or its data and "
                    f"mask as two fields)",
                    type_name(batch.__class__),
                )
            raise EncodingError(
                f"a batch must be a list, a numpy array, or a pyarrow RecordBatch or Table; got "
                f"{type_name(batch.__class__)}",
                type_name(batch.__class__),
            )
        if kind == NDARRAY:
            if not batch.ndim:
                raise EncodingError(
                    "a numpy array of no axes (a scalar) is no batch: a batch's rows are its first axis",
                    type_name(batch.__class__),
                )
            packed = ascii_packed(batch)
            path = BATCH_NDARRAY if packed is None else BATCH_NDARRAY_ASCII
            try:
                prefix, data = ndarray_parts(batch if packed is None else packed)
            except ColumnarEncodeError as error:
                raise EncodingError(str(error), type_name(batch.__class__)) from None
            return path, Parts(prefix, data)  # the array's memory, not a copy
        try:
            return _COLUMNAR_PATHS[kind], arrow_ipc(batch)  # Arrow's buffer, joined once when sent
        except ColumnarEncodeError as error:
            raise EncodingError(str(error), type_name(batch.__class__)) from None
    kinds = None
    if len(batch) >= COLUMNS_MIN:  # the records' types, walked once for the columns and the fast path
        kinds = _TUPLE_ONLY if batch[0].__class__ is tuple and all_of_type(batch, tuple) else set(map(type, batch))
        if kinds == _TUPLE_ONLY:
            columns = _encode_columns(batch)
            if columns is not None:
                return BATCH_COLUMNS, columns
    if _is_fast(batch, kinds):
        try:
            if len(batch) <= SMALL_BATCH:
                return BATCH_FAST, _pack_small(batch)
            return BATCH_FAST, msgpack.packb(batch, use_bin_type=True)
        except (OverflowError, ValueError):  # an int beyond 64 bits: the general path carries it
            pass
    return BATCH_GENERAL, encode_value(batch)


def decode_batch(path: int, data: bytes | bytearray | memoryview | Parts) -> Any:
    """Rebuild a batch encoded by :func:`encode_batch` (a list, or the columnar batch that was sent)."""
    if isinstance(data, Parts):  # not sent: joined (a copy), as the receiver would have it
        data = memoryview(bytearray(bytes(data)))
    if path == BATCH_FAST:  # first: every progress batch
        try:
            batch = _codec.decode(data, _codec.WIRE_RECORDS)
        except DecodeError as error:
            raise WireError(f"malformed batch on the wire: {error}") from error
        if batch.__class__ is not tuple:
            raise WireError(f"a batch on the wire decoded to {type_name(batch.__class__)}, not an array")
        return list(batch)
    if path in (BATCH_NDARRAY, BATCH_NDARRAY_ASCII, BATCH_ARROW, BATCH_ARROW_TABLE):
        return _decode_columnar(path, data)
    if path == BATCH_COLUMNS:
        try:
            return _decode_columns(data)
        except WireError:
            raise
        except Exception as error:
            raise WireError(f"malformed batch on the wire: {type(error).__name__}: {error}") from error
    if path == BATCH_GENERAL:
        batch = decode_value(data)
        if batch.__class__ is not list:
            raise WireError(f"a batch on the wire decoded to {type_name(batch.__class__)}, not a list")
        return batch
    raise WireError(f"unknown batch encoding {path!r}")


def copy_decoded(path: int, batch: Any) -> Any:
    """Another receiver's own copy of a batch :func:`decode_batch` returned for ``path``.

    A list is copied (receivers may change their batch in place), a numpy
    array too (its memory), and an Arrow batch, which is immutable, is shared.
    """
    if path in (BATCH_ARROW, BATCH_ARROW_TABLE):
        return batch
    if path in (BATCH_NDARRAY, BATCH_NDARRAY_ASCII):
        return batch.copy()
    return list(batch)


def frame_head(header: list[Any], payload_length: int) -> bytes:
    """The start of a frame whose payload (of ``payload_length`` bytes) follows: its length prefix and header.

    ``frame_head(h, len(p)) + p == frame(h, p)``; joining many heads and
    payloads at once copies each payload once.
    """
    encoded = encode_value(header)
    return FRAME_PREFIX.pack(len(encoded) + payload_length, len(encoded)) + encoded


def frame_size(header: list[Any], payload_length: int) -> int:
    """The length a frame's prefix would give (its header and payload), without packing it: any size, even one
    past the prefix's 32 bits, so that a sender can refuse a message too large with :class:`FrameTooLarge`."""
    return len(encode_value(header)) + payload_length


def prefixed_head(encoded_header: bytes, payload_length: int) -> bytes:
    """:func:`frame_head` for a header already encoded with :func:`encode_value` (a sender may keep it)."""
    return FRAME_PREFIX.pack(len(encoded_header) + payload_length, len(encoded_header)) + encoded_header


def frame(header: list[Any], payload: bytes | memoryview | Parts = b"") -> bytes:
    """One frame: the length prefix, the encoded ``header``, then ``payload``."""
    pieces: list[Any] = [frame_head(header, len(payload))]
    payload_pieces(pieces, payload)
    return b"".join(pieces)


def _aligned_buffer(size: int, head: int) -> memoryview:
    """A writable buffer of ``size`` bytes whose byte ``head`` (a frame's payload) lies at an aligned address.

    An array's data starts :data:`~runtime.communication.arraycodec.DATA_ALIGNMENT` bytes (or
    a multiple) into its encoding, so a payload placed aligned gives an array
    that NumPy can use where it lies, at full speed.
    """
    import ctypes

    storage = bytearray(size + DATA_ALIGNMENT)
    address = ctypes.addressof(ctypes.c_char.from_buffer(storage))
    offset = -(address + head) % DATA_ALIGNMENT
    return memoryview(storage)[offset : offset + size]


def frame_refused(body: int, head: int, limit: int) -> WireError:
    """The error for a frame of ``body`` bytes (``head`` of them its header) that a reader of frames of at most
    ``limit`` bytes refuses; past the frame limit of this process, it names the setting, which a peer may have
    set higher."""
    error = f"frame of {body} bytes (header {head}) exceeds the limit of {limit}"
    if limit == MAX_FRAME < body and head <= body:
        error += (
            f", set by ${MAX_FRAME_SETTING} in the receiving process (the sender's is higher: every process of a "
            "cluster needs the same value)"
        )
    return WireError(error)


class FrameReader:
    """Splits a stream of bytes into frames: :meth:`feed` bytes, iterate ``(header, payload)``.

    Each payload is copied once.  A frame that lies whole in the bytes fed is
    split where it lies, and its payload copied out (``bytes``; a writable
    buffer of its own for a frame of at least :data:`LARGE_FRAME` bytes).  A
    frame that spans several :meth:`feed` calls is gathered straight into a
    buffer of its own as its bytes arrive, and its payload is handed out as a
    writable ``memoryview`` of that buffer; for a large frame the payload lies
    at an aligned address.  A numpy array decoded from a writable payload
    shares its memory instead of being copied again.  Only a length prefix cut in two is kept
    aside (at most 7 bytes); the bytes fed are never kept, so the caller may
    reuse their buffer once the frames yielded have been handled.
    """

    def __init__(self, max_frame: int = MAX_FRAME, plain: bool = False) -> None:
        """Accept frames whose body is at most ``max_frame`` bytes.

        With ``plain``, headers are decoded by :func:`decode_plain_value`: built-in
        types only, no extension type, no registered codec (for a handshake,
        before the peer has proved the token).
        """
        self._prefix = b""
        self._decode_header = decode_plain_value if plain else decode_value
        self._max = max_frame
        self._large: memoryview | None = None
        self._large_filled = 0
        self._large_head = 0

    def _check(self, body: int, head: int) -> None:
        if body > self._max or head > body:
            raise frame_refused(body, head, self._max)

    def _gather(self, body: int, head: int, data: memoryview) -> None:
        """Start gathering a frame of ``body`` bytes whose first bytes are ``data``."""
        large = _aligned_buffer(body, head) if body >= LARGE_FRAME else memoryview(bytearray(body))
        large[: len(data)] = data
        self._large, self._large_filled, self._large_head = large, len(data), head

    def feed(self, data: bytes | memoryview) -> Iterator[tuple[list[Any], bytes | memoryview]]:
        """Add received bytes; yield every frame now complete as ``(header, payload)``."""
        view = memoryview(data)
        decode = self._decode_header
        while view:
            if self._large is not None:
                large = self._large
                take = min(len(view), len(large) - self._large_filled)
                large[self._large_filled : self._large_filled + take] = view[:take]
                self._large_filled += take
                view = view[take:]
                if self._large_filled < len(large):
                    return
                self._large = None
                yield self._split(large, self._large_head, decode=decode)
                continue
            if self._prefix:  # a length prefix cut in two: complete it, then gather its frame
                need = 8 - len(self._prefix)
                self._prefix += bytes(view[:need])
                view = view[need:]
                if len(self._prefix) < 8:
                    return
                body, head = FRAME_PREFIX.unpack(self._prefix)
                self._prefix = b""
                self._check(body, head)
                self._gather(body, head, view[:0])
                continue
            start = 0
            size = len(view)
            while size - start >= 8:
                body, head = FRAME_PREFIX.unpack_from(view, start)
                self._check(body, head)
                end = start + 8 + body
                if end > size:
                    self._gather(body, head, view[start + 8 : size])
                    return
                yield self._split(view[start + 8 : end], head, copy=True, large=body >= LARGE_FRAME, decode=decode)
                start = end
            self._prefix = bytes(view[start:])
            return

    @staticmethod
    def _split(
        body: memoryview,
        head: int,
        copy: bool = False,
        large: bool = False,
        decode: Callable[[memoryview], Any] = decode_value,
    ) -> tuple[list[Any], bytes | memoryview]:
        """``(header, payload)`` of a frame body: the payload copied (``bytes``, or for a large frame a
        writable buffer that a decoded array can share) or, when ``body`` is the frame's own buffer, a view."""
        header = decode(body[:head])
        if header.__class__ is not list or not header:
            raise WireError("a frame header must be a non-empty array")
        if not copy:
            return header, body[head:]
        return header, memoryview(bytearray(body[head:])) if large else bytes(body[head:])

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a whole frame."""
        return len(self._prefix) + (self._large_filled + 8 if self._large is not None else 0)
