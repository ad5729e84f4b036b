"""Columnar batches as bytes: numpy arrays and Arrow batches, copied as memory, never pickled.

The wire (:mod:`runtime.communication.wire`) and event logs (:mod:`runtime.eventlog`) both
carry columnar batches through this module, as the payloads of msgpack
extension types (and, on the wire, as whole message payloads).

numpy arrays
    ``[u32 header length][header][padding][data]``: the length's top byte
    counts the zero bytes of padding (0 in files written before it existed)
    that start ``data`` at a multiple of :data:`DATA_ALIGNMENT` bytes from
    the encoding's start, and its low 24 bits the header's.  The header is a msgpack array
    ``[dtype, shape]``; ``data`` is the array's bytes in C order (one copy of
    its memory, whatever its shape).  ``dtype`` is the dtype's string
    (``"<i8"``, ``"<U5"``, ``"|S3"``, ``"<M8[ns]"``, ...), or for a structured
    dtype ``["struct", names, dtypes, offsets, itemsize, titles]`` and for a sub-array
    field ``["sub", dtype, shape]``.  Arrays whose dtype holds Python objects
    (``dtype=object``, anywhere in a structured dtype) are refused: their items
    would have to be pickled.  Only exact ``numpy.ndarray`` travels (not
    subclasses such as masked arrays, whose extra state would be lost).

Arrow batches
    ``pyarrow.RecordBatch`` and ``pyarrow.Table`` in Arrow's IPC *stream*
    format (schema, then the batches).  A received record batch or table is
    rebuilt without copying its buffers.  pyarrow is imported only when an
    Arrow batch is decoded (an Arrow batch can only be encoded by a process
    that has pyarrow); decoding one without pyarrow installed raises
    :class:`ColumnarUnavailable` saying what to install.

Decoded numpy arrays are writable and own (or share only with the received
frame) their memory, like an array received in the same process.
"""

from __future__ import annotations

import math
import struct
import sys
from typing import Any

import msgpack  # type: ignore[import-untyped]

from runtime.communication.arrow_validity import refuse_invalid
from runtime.errors import ColumnarDecodeError, ColumnarEncodeError, ColumnarUnavailable

_LENGTH = struct.Struct("!I")
_HEAD_MASK = (1 << 24) - 1
DATA_ALIGNMENT = 16
"""An encoded array's data starts this many bytes (or a multiple) after its encoding's start, so that a
receiver that places the encoding aligned can use the array where it lies (see
:class:`runtime.communication.wire.FrameReader`)."""

NDARRAY = "numpy.ndarray"
"""Kind name of a numpy array."""
ARROW_BATCH = "pyarrow.RecordBatch"
"""Kind name of an Arrow record batch."""
ARROW_TABLE = "pyarrow.Table"
"""Kind name of an Arrow table."""


# ---------------------------------------------------------------------- which kind


def columnar_kind(value: Any) -> str | None:
    """:data:`NDARRAY`, :data:`ARROW_BATCH` or :data:`ARROW_TABLE` for a columnar batch, else ``None``.

    Imports nothing: a value can only be a numpy array or an Arrow batch if its
    library is already imported.
    """
    cls = value.__class__
    numpy = sys.modules.get("numpy")
    if numpy is not None and cls is numpy.ndarray:
        return NDARRAY
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is not None:
        if cls is pyarrow.RecordBatch:
            return ARROW_BATCH
        if cls is pyarrow.Table:
            return ARROW_TABLE
    return None


# ---------------------------------------------------------------------- numpy


def _object_dtype_error(dtype: Any) -> ColumnarEncodeError:
    return ColumnarEncodeError(
        f"a numpy array of dtype {dtype} holds Python objects, which pytimely never pickles, so it cannot "
        f"be sent to another process or written to an event log. Convert it to a fixed-width dtype first "
        f"(strings: array.astype(str) gives numpy's 'U' dtype; bytes: array.astype(bytes)), or send a list "
        f"of records instead"
    )


def _dtype_spec(dtype: Any) -> Any:
    """A msgpack-able description of ``dtype`` (see the module docstring)."""
    if dtype.fields is not None and dtype.names is not None:
        names = list(dtype.names)
        formats = []
        offsets = []
        titles = []
        for name in names:
            field = dtype.fields[name]
            formats.append(_dtype_spec(field[0]))
            offsets.append(int(field[1]))
            titles.append(field[2] if len(field) > 2 else None)
        return ["struct", names, formats, offsets, int(dtype.itemsize), titles]
    if dtype.subdtype is not None:
        base, shape = dtype.subdtype
        return ["sub", _dtype_spec(base), list(shape)]
    return str(dtype.str)


MAX_DTYPE_DEPTH = 16
"""How deep structured and sub-array dtype descriptions may nest in a received array header."""


def _dtype_from_spec(spec: Any, depth: int = 0) -> Any:
    import numpy

    if depth > MAX_DTYPE_DEPTH:
        raise ColumnarDecodeError(f"a numpy dtype description nests more than {MAX_DTYPE_DEPTH} deep")
    if spec.__class__ is str:
        return numpy.dtype(spec)
    if spec.__class__ is list and spec and spec[0] == "struct" and len(spec) == 6:
        _, names, formats, offsets, itemsize, titles = spec
        if titles.__class__ is not list or not all(title is None or title.__class__ is str for title in titles):
            # numpy takes any object as a title, and a dtype with a map as one is unhashable: a set of dtypes
            # (concat_batches) then raised TypeError
            raise ColumnarDecodeError(f"the field titles of a numpy dtype must be strings or nil: {titles!r:.100}")
        return numpy.dtype(
            {
                "names": list(names),
                "formats": [_dtype_from_spec(item, depth + 1) for item in formats],
                "offsets": list(offsets),
                "itemsize": int(itemsize),
                "titles": list(titles),
            }
        )
    if spec.__class__ is list and spec and spec[0] == "sub" and len(spec) == 3:
        return numpy.dtype((_dtype_from_spec(spec[1], depth + 1), tuple(spec[2])))
    raise ColumnarDecodeError(f"not a numpy dtype description: {spec!r:.100}")


def ndarray_parts(array: Any) -> tuple[bytes, Any]:
    """``(prefix, data)``: the length-prefixed header and the array's memory (a buffer, C order).

    Their concatenation is the encoding; callers that assemble frames can
    join them with the rest in one copy.
    """
    dtype = array.dtype
    if dtype.hasobject:
        raise _object_dtype_error(dtype)
    if dtype.itemsize == 0:
        raise ColumnarEncodeError(
            f"a numpy array of dtype {dtype} has elements of no bytes, which no reader accepts (their count "
            f"could not be checked against the data); give it a dtype of at least one byte, or send a list"
        )
    try:
        header = msgpack.packb([_dtype_spec(dtype), list(array.shape)], use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as error:
        raise ColumnarEncodeError(
            f"the dtype {dtype} of a numpy array cannot be described on the wire ({error}); field titles "
            f"must be strings"
        ) from None
    if len(header) > _HEAD_MASK:
        raise ColumnarEncodeError(f"the description of dtype {dtype} takes {len(header)} bytes, over 16 MiB")
    if array.flags.c_contiguous:
        try:
            data: Any = memoryview(array).cast("B")
        except (TypeError, ValueError):  # dtypes the buffer protocol cannot describe (datetime64, ...)
            data = array.tobytes()
    else:
        data = array.tobytes()
    pad = -(4 + len(header)) % DATA_ALIGNMENT
    return _LENGTH.pack(pad << 24 | len(header)) + header + bytes(pad), data


def encode_ndarray(array: Any) -> bytes:
    """The bytes of ``array`` (see the module docstring); raise :class:`ColumnarEncodeError` for object dtypes.

    :func:`runtime.codec.decode_ndarray` reads them back."""
    prefix, data = ndarray_parts(array)
    return b"".join((prefix, data))


ASCII_PACK_MIN = 4096
"""Unicode arrays of fewer elements than this travel as they are: packing them is not worth a pass."""


def ascii_packed(array: Any) -> Any | None:
    """A native ``str`` array (NumPy ``U<n>``, 4 bytes a character) whose characters are all ASCII, as ``S<n>``.

    A quarter of the bytes to copy, send and receive, at the cost of one pass
    over the characters; :func:`ascii_unpacked` gives the same array back.
    ``None`` when the array is not C-contiguous native ``U<n>`` of at least
    :data:`ASCII_PACK_MIN` elements, or holds a character beyond ASCII.
    (NumPy's own ``astype("S")`` encodes element by element, 50 times slower.)
    """
    import numpy

    dtype = array.dtype
    if dtype.kind != "U" or not dtype.isnative or not dtype.itemsize or array.ndim == 0:
        return None
    if array.size < ASCII_PACK_MIN or not array.flags.c_contiguous:
        return None
    units = array.view(numpy.uint32)
    if units.max() >= 128:
        return None
    return units.astype(numpy.uint8).view(f"S{dtype.itemsize // 4}")


def ascii_unpacked(packed: Any) -> Any:
    """The ``U<n>`` array :func:`ascii_packed` packed as ``packed``; raise :class:`ColumnarDecodeError` if it is
    not a C-contiguous ``S<n>`` array of ASCII bytes (a peer sent something else under that name)."""
    import numpy

    dtype = packed.dtype
    if dtype.kind != "S" or not dtype.itemsize or packed.ndim == 0 or not packed.flags.c_contiguous:
        raise ColumnarDecodeError(f"an ASCII-packed string array must be a C-contiguous bytes array, got {dtype}")
    units = packed.view(numpy.uint8)
    if units.size and units.max() >= 128:
        raise ColumnarDecodeError("an ASCII-packed string array holds a byte beyond ASCII")
    return units.astype(numpy.uint32).view(f"U{dtype.itemsize}")


def split_ndarray(data: bytes | bytearray | memoryview) -> tuple[memoryview, memoryview]:
    """``(header, body)`` of an encoded array: the msgpack header's bytes and the array's memory.

    The header is decoded by :func:`runtime.codec.decode_ndarray` (with the
    project's bounded decoder), which then calls :func:`ndarray_from`.
    """
    view = memoryview(data)
    if len(view) < 4:
        raise ColumnarDecodeError(f"a numpy array needs at least 4 bytes, got {len(view)}")
    (word,) = _LENGTH.unpack_from(view)
    head, pad = word & _HEAD_MASK, word >> 24
    if 4 + head + pad > len(view):
        raise ColumnarDecodeError(
            f"the array header claims {head} bytes and {pad} of padding, but only {len(view) - 4} follow"
        )
    return view[4 : 4 + head], view[4 + head + pad :]


MAX_CODE_POINT = 0x10FFFF
"""The largest Unicode code point: a ``U`` array's UTF-32 units beyond it are no characters."""


def _checked_leaves_dtype(dtype: Any) -> Any:
    """``dtype`` with each leaf whose bytes must be checked seen as integers, and every other leaf as opaque bytes;
    ``None`` if no such leaf is in it.  A ``U<n>`` is seen as ``n`` unsigned 32-bit units, a datetime or timedelta
    of generic unit (``M8``, ``m8``) as a signed 64-bit integer, each in its byte order."""
    import numpy

    if dtype.names is not None:
        fields = [_checked_leaves_dtype(dtype.fields[name][0]) for name in dtype.names]
        if all(field is None for field in fields):
            return None
        return numpy.dtype(
            {
                "names": list(dtype.names),
                "formats": [
                    field if field is not None else numpy.dtype(f"V{dtype.fields[name][0].itemsize}")
                    for name, field in zip(dtype.names, fields, strict=True)
                ],
                "offsets": [dtype.fields[name][1] for name in dtype.names],
                "itemsize": dtype.itemsize,
            }
        )
    if dtype.subdtype is not None:
        base, shape = dtype.subdtype
        inner = _checked_leaves_dtype(base)
        return None if inner is None else numpy.dtype((inner, shape))
    if dtype.kind == "U":
        return numpy.dtype((numpy.dtype(dtype.byteorder + "u4"), (dtype.itemsize // 4,)))
    if dtype.kind in "Mm" and numpy.datetime_data(dtype)[0] == "generic":
        return numpy.dtype(dtype.byteorder + "i8")
    return None


def _leaf_arrays(view: Any) -> Any:
    """The integer leaves of an array viewed with :func:`_checked_leaves_dtype`'s dtype."""
    if view.dtype.names is None:
        if view.dtype.kind in "ui":
            yield view
        return
    for name in view.dtype.names:
        yield from _leaf_arrays(view[name])


def _check_leaves(array: Any) -> None:
    """Refuse an array whose ``U`` data (anywhere in its dtype) holds a unit beyond :data:`MAX_CODE_POINT`, or whose
    datetimes or timedeltas of generic unit are not all ``NaT``.

    NumPy reads such a unit into a ``str`` that CPython cannot represent: printing the array raised
    ``SystemError``, and ``tolist()`` gave strings whose methods raised it.  NumPy makes no generic-unit datetime
    but ``NaT``, and cannot show any other: printing or iterating the array raised ``ValueError``.
    """
    import numpy

    leaves = _checked_leaves_dtype(array.dtype)
    if leaves is None:
        return
    for leaf in _leaf_arrays(array.view(leaves)):
        if not leaf.size:
            continue
        if leaf.dtype.kind == "u" and leaf.max() > MAX_CODE_POINT:
            raise ColumnarDecodeError(
                f"a numpy array of dtype {array.dtype} holds a character beyond Unicode's last code point "
                f"(U+{MAX_CODE_POINT:X}): its data is damaged"
            )
        if leaf.dtype.kind == "i" and (leaf != numpy.iinfo(numpy.int64).min).any():
            raise ColumnarDecodeError(
                f"a numpy array of dtype {array.dtype} holds a datetime or timedelta of generic unit other than "
                "NaT, which numpy never makes: its data is damaged"
            )


MAX_EMPTY_EXTENTS = 1 << 16
"""The largest product of the non-zero extents of a received array of no elements (``(n, 0)`` is ``n`` empty rows)."""


def ndarray_from(header: Any, body: memoryview) -> Any:
    """The array described by a decoded ``header`` (``[dtype, shape]``) whose memory is ``body``.

    When ``body`` is writable (a view of a ``bytearray``) and starts at a
    multiple of :data:`DATA_ALIGNMENT`, the array shares its memory;
    otherwise the array is a copy (writable, and aligned).  Raises :class:`ColumnarDecodeError`
    if the header does not describe an array of exactly ``len(body)`` bytes.
    """
    import numpy

    try:
        if header.__class__ is not list or len(header) != 2 or header[1].__class__ is not list:
            raise ColumnarDecodeError(f"not a numpy array header: {header!r:.100}")
        spec, shape_list = header
        dtype = _dtype_from_spec(spec)
        if dtype.hasobject:
            raise ColumnarDecodeError(f"received a numpy array of dtype {dtype}, which would need unpickling")
        if dtype.itemsize == 0:
            # zero bytes an element: any element count fits in no data, so 20 bytes could declare 2**40 records
            raise ColumnarDecodeError(f"received a numpy array of dtype {dtype}, whose elements take no bytes")
        shape = tuple(shape_list)
        if any(extent.__class__ is not int or extent < 0 for extent in shape):
            raise ColumnarDecodeError(f"not an array shape: {shape_list!r:.100}")
        count = 1
        for extent in shape:
            count *= extent
        if not count and math.prod(extent for extent in shape if extent) > MAX_EMPTY_EXTENTS:
            # no elements, so no data to check the other extents against: (2**62, 0) was a batch of 2**62 rows
            # in 20 bytes, as a dtype of no bytes once was
            raise ColumnarDecodeError(
                f"an array of shape {shape} holds no elements, and no data can back its other extents "
                f"(their product is over {MAX_EMPTY_EXTENTS})"
            )
        size = count * dtype.itemsize
        if len(body) != size:
            raise ColumnarDecodeError(
                f"an array of dtype {dtype} and shape {shape} needs {size} bytes of data, got {len(body)}"
            )
        if size == 0:
            return numpy.zeros(shape, dtype)
        array = numpy.frombuffer(body, dtype=dtype, count=count).reshape(shape)
        _check_leaves(array)
        if body.readonly or array.ctypes.data % DATA_ALIGNMENT:
            # a copy: writable, and as aligned as the dtype's layout allows (NumPy's slow paths for
            # misaligned memory made np.minimum.at 20x slower on a received structured array)
            return array.copy()
        return array
    except ColumnarDecodeError:
        raise
    except Exception as error:  # numpy raises several unrelated types on a malformed description
        raise ColumnarDecodeError(f"malformed numpy array: {type(error).__name__}: {error}") from error


# ---------------------------------------------------------------------- Arrow


def _pyarrow(what: str) -> Any:
    try:
        import pyarrow  # type: ignore[import-untyped]
    except ImportError:
        raise ColumnarUnavailable(
            f"received {what} (Arrow IPC), but pyarrow is not installed in this process; install it in "
            f"every process of the computation (pip install pyarrow, or pip install 'pytimely[spark]')"
        ) from None
    return pyarrow


def arrow_ipc(value: Any) -> memoryview:
    """A ``pyarrow.RecordBatch`` or ``pyarrow.Table`` in Arrow's IPC stream format, as a view of Arrow's buffer.

    Raises :class:`ColumnarEncodeError` for a dictionary of an extension type,
    which Arrow's IPC reader gives back wrong (see :func:`_refuse_extension_dictionaries`), or for a
    batch of more rows than :data:`ROWS_PER_BYTE` times its encoding's bytes, which a receiver refuses, and
    :class:`~runtime.errors.InvalidArrowBatch` for a batch that is not valid Arrow, which the receiver's
    validation (:func:`decode_arrow`) would refuse as damage (see :mod:`runtime.communication.arrow_validity`).
    """
    import pyarrow

    _refuse_extension_dictionaries(pyarrow, value.schema)
    refuse_invalid(value)
    sink = pyarrow.BufferOutputStream()
    with pyarrow.ipc.new_stream(sink, value.schema) as writer:
        if value.__class__ is pyarrow.Table:
            if not value.num_columns and value.num_rows:  # its rows may be in no batch (Table.select([]) makes one)
                rows = pyarrow.record_batch([pyarrow.nulls(value.num_rows)], names=["_"]).select([])
                writer.write_batch(rows.replace_schema_metadata(value.schema.metadata))
            else:
                writer.write_table(value)
        else:
            writer.write_batch(value)
    encoded = memoryview(sink.getvalue())
    if value.num_rows > ROWS_PER_BYTE * len(encoded):
        raise ColumnarEncodeError(
            f"an Arrow {'table' if value.__class__ is pyarrow.Table else 'record batch'} of {value.num_rows} rows "
            f"encodes to {len(encoded)} bytes: its columns hold no bytes for their rows (it has none, or only null "
            f"or run-end encoded ones), and a receiver accepts at most {ROWS_PER_BYTE} rows a byte (its guard "
            "against bytes that declare rows they do not hold); send the row count instead, or add a column that "
            "holds the rows (a boolean or an integer column)"
        )
    return encoded


_SENDABLE_SCHEMAS: dict[Any, None] = {}
"""Schemas :func:`_refuse_extension_dictionaries` has passed (kept, as :data:`_CHECKED_SCHEMAS` are, 64 at most)."""


def _refuse_extension_dictionaries(pyarrow: Any, schema: Any) -> None:
    """Raise :class:`ColumnarEncodeError` if a column of ``schema`` holds a dictionary of an extension type.

    Arrow (26 at least) writes such a column in its IPC format but reads it back
    as the extension type over dictionary storage: a type that is not the one
    sent (empty columns), or a batch its validation refuses, so it arrived as
    damage in another process or a capture log.  It is refused when sent, naming
    the column and what to do.  One lookup per schema already passed.
    """
    try:
        if schema in _SENDABLE_SCHEMAS:
            return
        keep = True
    except TypeError:  # a user's extension type without __hash__
        keep = False
    for field in schema:
        found = _extension_dictionary(pyarrow, field.type)
        if found is not None:
            raise ColumnarEncodeError(
                f"the Arrow column {field.name!r} is {field.type}: Arrow's IPC format, which carries Arrow batches "
                f"between processes and into capture logs, gives a dictionary of the extension type {found} back "
                "wrong; decode it before it leaves the process (column.cast(its value type)), or dictionary-encode "
                "the extension's storage instead"
            )
    if keep:
        if len(_SENDABLE_SCHEMAS) >= _CHECKED_SCHEMAS_KEPT:
            _SENDABLE_SCHEMAS.clear()
        _SENDABLE_SCHEMAS[schema] = None


def _extension_dictionary(pyarrow: Any, kind: Any, depth: int = 0) -> Any:
    """The extension type of a dictionary's values anywhere in ``kind``, or ``None``."""
    if isinstance(kind, pyarrow.DictionaryType):
        if isinstance(kind.value_type, pyarrow.BaseExtensionType):
            return kind.value_type
        kind = kind.value_type
    if isinstance(kind, pyarrow.BaseExtensionType):
        kind = kind.storage_type
    if depth > _MAX_TYPE_DEPTH:
        return None
    for index in range(kind.num_fields):
        found = _extension_dictionary(pyarrow, kind.field(index).type, depth + 1)
        if found is not None:
            return found
    return None


def encode_arrow(value: Any) -> bytes:
    """A ``pyarrow.RecordBatch`` or ``pyarrow.Table`` in Arrow's IPC stream format."""
    return bytes(arrow_ipc(value))


def _aligned_reads(pyarrow: Any) -> Any:
    """IPC read options that copy a buffer to aligned memory when it sits at an odd offset of a received frame.

    Acero (``group_by``, ``join``, ``sort_by``) warns about, and some hardware
    faults on, misaligned buffers; pyarrow before 16 has no such option.
    """
    try:
        return pyarrow.ipc.IpcReadOptions(ensure_alignment=pyarrow.ipc.Alignment.DataTypeSpecific)
    except (AttributeError, TypeError):
        return None


_MESSAGE_DICTIONARY_BATCH = 2
_MESSAGE_RECORD_BATCH = 3


def _fb_field(meta: bytes, table: int, index: int) -> int:
    """The position of field ``index`` of the flatbuffer table at ``table``, or 0 when absent (bounds-checked)."""
    (back,) = struct.unpack_from("<i", meta, table)
    vtable = table - back
    if not 0 <= vtable <= len(meta) - 4:
        raise ColumnarDecodeError("an Arrow IPC message's metadata points outside itself")
    (size,) = struct.unpack_from("<H", meta, vtable)
    slot = 4 + 2 * index
    if slot + 2 > size:
        return 0
    (offset,) = struct.unpack_from("<H", meta, vtable + slot)
    return table + offset if offset else 0


def _fb_table(meta: bytes, at: int) -> int:
    """The table an offset field at ``at`` refers to."""
    (offset,) = struct.unpack_from("<I", meta, at)
    if not 0 <= at + offset <= len(meta) - 4:
        raise ColumnarDecodeError("an Arrow IPC message's metadata points outside itself")
    return at + offset


def _compressed(meta: bytes) -> bool:
    """Whether the Arrow IPC message whose flatbuffer metadata is ``meta`` declares compressed buffers.

    Reads the ``Message`` table (``header_type``, ``header``) and its record
    batch (directly, or inside a dictionary batch) for the ``compression`` field.
    """
    try:
        message = _fb_table(meta, 0)
        kind_at = _fb_field(meta, message, 1)
        kind = meta[kind_at] if kind_at else 0
        header_at = _fb_field(meta, message, 2)
        if kind not in (_MESSAGE_RECORD_BATCH, _MESSAGE_DICTIONARY_BATCH) or not header_at:
            return False
        batch = _fb_table(meta, header_at)
        if kind == _MESSAGE_DICTIONARY_BATCH:
            data_at = _fb_field(meta, batch, 1)
            if not data_at:
                return False
            batch = _fb_table(meta, data_at)
        return _fb_field(meta, batch, 3) != 0
    except (struct.error, IndexError):
        raise ColumnarDecodeError("an Arrow IPC message's metadata is malformed") from None


def refuse_compressed(pyarrow: Any, buffer: Any, what: str) -> None:
    """Refuse an IPC stream with compressed buffers before any is decompressed.

    pytimely never writes them; a compressed buffer declares the size it
    decompresses to, so 24 KB could make a reader allocate 800 MB (and a frame
    of 1 GiB, terabytes).
    """
    for message in pyarrow.ipc.MessageReader.open_stream(buffer):
        if _compressed(message.metadata.to_pybytes()):
            raise ColumnarDecodeError(
                f"{what} holds compressed Arrow buffers, which pytimely never writes and does not read (their "
                "declared sizes are not bounded by the bytes received)"
            )


def _check_names(pyarrow: Any, field: Any, depth: int = 0) -> None:
    """Read every name in ``field``'s type (its children's names, a timestamp's time zone), which raises
    ``UnicodeDecodeError`` for one that is not UTF-8: ``validate`` checks the data, not the schema's names, and a
    struct child named in damaged bytes made every read of the struct's values raise it.  Each type is also given
    to pyarrow's Python classes once (an empty array of it): a type the IPC format holds but pyarrow's Python side
    has no array class for (an interval of months) made every read of its column raise ``KeyError``."""
    if depth > _MAX_TYPE_DEPTH:
        raise ColumnarDecodeError(f"an Arrow schema's types nest more than {_MAX_TYPE_DEPTH} deep")
    field.name  # noqa: B018 - decoded on access
    data_type = field.type
    pyarrow.nulls(0, data_type)
    while True:
        if isinstance(data_type, pyarrow.TimestampType):
            data_type.tz  # noqa: B018 - decoded on access
        if isinstance(data_type, pyarrow.DictionaryType):
            data_type = data_type.value_type
        elif isinstance(data_type, pyarrow.BaseExtensionType):
            data_type = data_type.storage_type
        else:
            break
    for index in range(data_type.num_fields):
        _check_names(pyarrow, data_type.field(index), depth + 1)


_MAX_TYPE_DEPTH = 64
"""How deep the types of a received Arrow schema may nest (Arrow's own readers stop far deeper)."""

_CHECKED_SCHEMAS: dict[Any, None] = {}
"""Schemas of received batches that :func:`_check_names` has passed (equal schemas need no second walk)."""
_CHECKED_SCHEMAS_KEPT = 64
"""How many passed schemas :data:`_CHECKED_SCHEMAS` keeps before it starts over."""

ROWS_PER_BYTE = 8
"""The most rows a received Arrow batch may have per byte of its IPC stream: one bit a row, as a boolean column or
a validity bitmap takes (a column of no bytes a row, null or run-end encoded, could declare any count)."""


def decode_arrow(kind: str, data: bytes | bytearray | memoryview) -> Any:
    """The record batch (``kind`` :data:`ARROW_BATCH`) or table (:data:`ARROW_TABLE`) in ``data``.

    The data is validated fully (``validate(full=True)``: every offset, dictionary index and child
    length) before it is returned, so hostile bytes raise :class:`ColumnarDecodeError` instead of
    crashing the process when a column is read; so does a batch of more rows than :data:`ROWS_PER_BYTE`
    times its bytes.
    """
    what = "an Arrow record batch" if kind == ARROW_BATCH else "an Arrow table"
    pyarrow = _pyarrow(what)
    try:
        buffer = pyarrow.py_buffer(data)
        refuse_compressed(pyarrow, buffer, what)
        reader = pyarrow.ipc.open_stream(buffer, options=_aligned_reads(pyarrow))
        table = reader.read_all()
        # Arrow's IPC reader checks only that buffers lie inside the message: an offset that points
        # outside its data (a checksum cannot tell a crafted batch) crashed the process when the column
        # was read.  Full validation checks every offset, index and child before anything uses the data.
        table.validate(full=True)
        schema = table.schema
        try:
            checked: bool | None = schema in _CHECKED_SCHEMAS  # a stream's batches share a schema: walked once
        except TypeError:  # a user's pyarrow.ExtensionType without __hash__ makes its schema unhashable
            checked = None  # walked every time
        if not checked:
            for field in schema:
                _check_names(pyarrow, field)
            if checked is not None:
                if len(_CHECKED_SCHEMAS) >= _CHECKED_SCHEMAS_KEPT:
                    _CHECKED_SCHEMAS.clear()
                _CHECKED_SCHEMAS[schema] = None
    except ColumnarDecodeError:
        raise
    except Exception as error:  # ArrowInvalid, ArrowIOError, ...: all mean damaged bytes
        raise ColumnarDecodeError(f"malformed {what} (Arrow IPC stream): {type(error).__name__}: {error}") from error
    if table.num_rows > ROWS_PER_BYTE * len(data):
        # columns of no bytes a row (none at all, null, empty structs, run-end encoded) hold any row count, and
        # operators allocate by it: 224 bytes declaring 2**60 null rows made the columnar operators' key column
        # (scopes.batches.column) ask NumPy for 2**60 items; 2**31 - 1 rows, which Arrow writes, ask for 16 GiB
        raise ColumnarDecodeError(
            f"{what} declares {table.num_rows} rows, more than its {len(data)} bytes hold at one bit a row; "
            "a batch needs a column that takes bytes for its rows (not only null or run-end encoded columns)"
        )
    if kind == ARROW_TABLE:
        return table
    batches = table.to_batches()
    if len(batches) == 1:
        return batches[0]
    if not batches:
        # not from_pylist([]), which raises ArrowNotImplementedError for unions and dictionaries of null or float16
        return pyarrow.RecordBatch.from_arrays(
            [pyarrow.nulls(0, field.type) for field in table.schema], schema=table.schema
        )
    raise ColumnarDecodeError(f"{what} arrived as {len(batches)} batches in its IPC stream, not one")


def encode_columnar(value: Any) -> tuple[str, bytes]:
    """``(kind, bytes)`` of a columnar batch (see :func:`columnar_kind`); ``TypeError`` if it is not one."""
    kind = columnar_kind(value)
    if kind == NDARRAY:
        return kind, encode_ndarray(value)
    if kind is not None:
        return kind, encode_arrow(value)
    raise TypeError(f"{value.__class__.__qualname__} is not a columnar batch")


__all__ = [
    "ARROW_BATCH",
    "ARROW_TABLE",
    "NDARRAY",
    "ColumnarDecodeError",
    "ColumnarEncodeError",
    "ColumnarUnavailable",
    "arrow_ipc",
    "columnar_kind",
    "decode_arrow",
    "encode_arrow",
    "encode_columnar",
    "encode_ndarray",
    "ndarray_from",
    "ndarray_parts",
    "refuse_compressed",
    "split_ndarray",
]
