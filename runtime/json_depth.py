"""A bound on the nesting of JSON Lines files, and their records being objects, checked before pyarrow's JSON parser
sees them.

pyarrow's parser recurses once per level of nesting and kills the process on a
line nested some thousands of arrays deep.  :func:`check_json_depth` reads a
file in chunks and, with NumPy over the bytes, follows the nesting depth the
parser would see: ``[`` and ``{`` open a level and ``]`` and ``}`` close one,
except inside strings.  A quote opens or closes a string unless an odd number
of backslashes precedes it.

It errs only towards counting more depth than the parser sees, never less: a
newline ends any string (a JSON string cannot hold one, and the parser may start
a block of lines there), the depth never falls below zero (so stray closing
brackets cannot hide the openers after them), and it is carried across lines (a
value may span lines within one of the parser's blocks).  A valid file's lines
are measured exactly.

Outside every record (depth 0, no string open) only whitespace and ``{`` may
start, and a byte order mark at the file's start: a record that is not an
object is refused with its line and byte offset.  pyarrow's parser killed the
process (SIGSEGV) on a ``null`` record where it starts a block of lines (the
file's first line, then one about every MiB); it refuses the other non-objects
itself, and the scan refuses them all alike.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from runtime.errors import FileSourceError

MAX_JSON_DEPTH = 100
"""The deepest nesting of arrays and objects a JSON Lines record may have; pyarrow's parser crashes far deeper."""

CHUNK_BYTES = 1 << 20
"""Bytes scanned at a time (the scan holds a few arrays of this length)."""

_BACKSLASH, _QUOTE, _NEWLINE = 0x5C, 0x22, 0x0A
_OPENERS, _CLOSERS = (0x5B, 0x7B), (0x5D, 0x7D)


@dataclass
class _State:
    """What the scan carries from one chunk to the next."""

    depth: int = 0
    in_string: int = 0
    backslashes: int = 0  # parity of the run of backslashes the last chunk ended with
    lines: int = 0  # newlines before this chunk
    offset: int = 0  # bytes before this chunk
    outside: Any = None  # after _scan: the kept bytes' positions, whether each leaves the scan outside any record,
    # and whether the chunk starts outside one (None: no kept byte in the chunk)


def check_json_depth(
    path: str | os.PathLike[str], where: str, limit: int = MAX_JSON_DEPTH, objects: bool = True
) -> None:
    """Raise :class:`FileSourceError` naming ``path`` and the line if any record nests deeper than ``limit``, or
    (``objects``) naming the line and byte offset of any record that is not an object."""
    state = _State()
    try:
        with open(path, "rb") as source:
            while chunk := source.read(CHUNK_BYTES):
                lines = state.lines
                line = _scan(chunk, state, limit)
                if line is not None:
                    raise FileSourceError(
                        f"{where}: {str(path)!r} line {line}: a record nests arrays and objects more than {limit} "
                        "deep; such records are refused before they reach pyarrow's JSON parser (which could crash)"
                    )
                stray = _not_an_object(chunk, state, lines) if objects else None
                if stray is not None:
                    line, offset, byte = stray
                    raise FileSourceError(
                        f"{where}: {str(path)!r} line {line} (byte offset {offset}): a record that is not a JSON "
                        f"object (it starts with {bytes([byte])!r}); each line of a JSON Lines file must hold one "
                        "object. Such records are refused before they reach pyarrow's JSON parser (a null "
                        "starting a block of lines crashed it)"
                    )
                state.offset += len(chunk)
    except OSError as error:
        raise FileSourceError(f"{where}: cannot read {str(path)!r}: {error}") from error


def _scan(chunk: bytes, state: _State, limit: int) -> int | None:
    """Follow the depth through ``chunk``; return the 1-based line first deeper than ``limit``, or ``None``.

    Only the bytes that matter (brackets, quotes, backslashes, newlines) are
    kept, each with its position; a backslash the last chunk ended an odd run
    with is put back in front, at position -1.
    """
    import numpy as np

    state.outside = None
    data = np.frombuffer(chunk, dtype=np.uint8)
    special = data == _BACKSLASH
    for byte in (_QUOTE, _NEWLINE, *_OPENERS, *_CLOSERS):
        special |= data == byte
    where = np.flatnonzero(special)
    kinds = data[where]
    if state.backslashes:
        where = np.concatenate(([-1], where))
        kinds = np.concatenate(([_BACKSLASH], kinds)).astype(np.uint8)
    if not kinds.size:
        return None
    escaped, ends_odd_run = _escapes(where, kinds)
    newline = kinds == _NEWLINE
    quote = ((kinds == _QUOTE) & ~escaped).astype(np.int32)
    lines_at = np.flatnonzero(newline)
    if lines_at.size:  # a newline takes back its line's quotes: the count restarts at each line
        if not newline[0]:  # a string carried from the last chunk goes on until the first newline
            quote[0] += state.in_string
        before = np.cumsum(quote)[lines_at]
        quote[lines_at] = -np.diff(before, prepend=0)
        in_string = (np.cumsum(quote) & 1).astype(bool)
    else:
        in_string = ((np.cumsum(quote) + state.in_string) & 1).astype(bool)
    opening = ((kinds == _OPENERS[0]) | (kinds == _OPENERS[1])) & ~in_string
    closing = ((kinds == _CLOSERS[0]) | (kinds == _CLOSERS[1])) & ~in_string
    walk = state.depth + np.cumsum(opening.astype(np.int32) - closing, dtype=np.int64)
    depth = walk - np.minimum(np.minimum.accumulate(walk), 0)
    over = np.flatnonzero(depth > limit)
    if over.size:
        return state.lines + int(np.count_nonzero(newline[: over[0]])) + 1
    state.outside = (where, (depth == 0) & ~in_string, state.depth == 0 and not state.in_string)
    state.depth = int(depth[-1])
    state.in_string = int(in_string[-1])
    state.backslashes = int(ends_odd_run and int(where[-1]) == data.size - 1)
    state.lines += int(lines_at.size)
    return None


_WHITESPACE = (0x20, 0x09, 0x0A, 0x0D)
_BYTE_ORDER_MARK = b"\xef\xbb\xbf"


def _not_an_object(chunk: bytes, state: _State, lines: int) -> tuple[int, int, int] | None:
    """The first byte of ``chunk`` that starts a value other than an object outside every record, as ``(line,
    byte offset in the file, byte)``; ``None`` if there is none.  Call after :func:`_scan`, with the state it left
    and the newlines before the chunk (``state.offset`` still counts the bytes before it).

    A byte is outside every record when the depth before it is 0 and no string is open; there, only
    whitespace and ``{`` may start (a byte order mark may start the file).
    """
    import numpy as np

    data = np.frombuffer(chunk, dtype=np.uint8)
    if state.outside is None:  # no bracket, quote or newline in the chunk: outside throughout if it started so
        outside_at = np.full(data.size, state.depth == 0 and not state.in_string)
    else:
        where, after, starts_outside = state.outside
        # the state before each byte: the chunk's start up to its first kept byte, then each kept byte's after it
        lengths = np.concatenate(([where[0] + 1], np.diff(where), [data.size - 1 - where[-1]]))
        outside_at = np.repeat(np.concatenate(([starts_outside], after)), lengths)
    blank = data == _WHITESPACE[0]
    for byte in _WHITESPACE[1:]:
        blank |= data == byte
    if state.offset < len(_BYTE_ORDER_MARK) and chunk.startswith(_BYTE_ORDER_MARK[state.offset :]):
        blank[: len(_BYTE_ORDER_MARK) - state.offset] = True
    stray = np.flatnonzero(outside_at[: data.size] & ~blank & (data != _OPENERS[1]))
    if not stray.size:
        return None
    first = int(stray[0])
    line = lines + chunk.count(b"\n", 0, first) + 1
    return line, state.offset + first, int(data[first])


def _escapes(where: Any, kinds: Any) -> tuple[Any, bool]:
    """Which kept bytes follow an odd run of backslashes, and whether the last kept byte ends such a run."""
    import numpy as np

    backslash = kinds == _BACKSLASH
    if not backslash.any():
        return np.zeros(kinds.size, dtype=bool), False
    adjacent = np.zeros(kinds.size, dtype=bool)  # the byte just before this one is a kept backslash
    adjacent[1:] = backslash[:-1] & (where[1:] == where[:-1] + 1)
    order = np.arange(kinds.size, dtype=np.int32)
    run_start = np.maximum.accumulate(np.where(backslash & adjacent, np.int32(0), order))
    odd_run = backslash & ((order - run_start) % 2 == 0)  # ends an odd run of backslashes
    escaped = np.zeros(kinds.size, dtype=bool)
    escaped[1:] = adjacent[1:] & odd_run[:-1]
    return escaped, bool(odd_run[-1])
