"""A bound on the nesting of JSON Lines files, checked before pyarrow's JSON parser sees them.

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


def check_json_depth(path: str | os.PathLike[str], where: str, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise :class:`FileSourceError` naming ``path`` and the line if any record nests deeper than ``limit``."""
    state = _State()
    try:
        with open(path, "rb") as source:
            while chunk := source.read(CHUNK_BYTES):
                line = _scan(chunk, state, limit)
                if line is not None:
                    raise FileSourceError(
                        f"{where}: {str(path)!r} line {line}: a record nests arrays and objects more than {limit} "
                        "deep; such records are refused before they reach pyarrow's JSON parser (which could crash)"
                    )
    except OSError as error:
        raise FileSourceError(f"{where}: cannot read {str(path)!r}: {error}") from error


def _scan(chunk: bytes, state: _State, limit: int) -> int | None:
    """Follow the depth through ``chunk``; return the 1-based line first deeper than ``limit``, or ``None``.

    Only the bytes that matter (brackets, quotes, backslashes, newlines) are
    kept, each with its position; a backslash the last chunk ended an odd run
    with is put back in front, at position -1.
    """
    import numpy as np

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
    state.depth = int(depth[-1])
    state.in_string = int(in_string[-1])
    state.backslashes = int(ends_odd_run and int(where[-1]) == data.size - 1)
    state.lines += int(lines_at.size)
    return None


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
