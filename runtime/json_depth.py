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

from runtime.errors import FileSourceError

MAX_JSON_DEPTH = 100
"""The deepest nesting of arrays and objects a JSON Lines record may have; pyarrow's parser crashes far deeper."""

CHUNK_BYTES = 1 << 18
"""Bytes scanned at a time (the scan holds a few int32 arrays of this length)."""

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
    """Follow the depth through ``chunk``; return the 1-based line first deeper than ``limit``, or ``None``."""
    import numpy as np

    data = np.frombuffer(chunk, dtype=np.uint8)
    index = np.arange(data.size, dtype=np.int32)
    backslash = data == _BACKSLASH
    # the last byte at or before each position that is not a backslash (a carried run counts as before 0)
    other = np.maximum.accumulate(np.where(backslash, np.int32(-1 - state.backslashes), index))
    run = index - other  # backslashes ending at each position
    escaped = np.empty(data.size, dtype=bool)
    escaped[0] = bool(state.backslashes & 1)
    escaped[1:] = (run[:-1] & 1).astype(bool)
    newline = data == _NEWLINE
    quotes = np.cumsum((data == _QUOTE) & ~escaped, dtype=np.int32)
    line_start = np.maximum.accumulate(np.where(newline, index, np.int32(-1)))
    base = np.where(line_start >= 0, quotes[np.maximum(line_start, 0)], np.int32(-state.in_string))
    in_string = ((quotes - base) & 1).astype(bool)
    outside = ~in_string
    steps = ((data == _OPENERS[0]) | (data == _OPENERS[1])) & outside
    closing = ((data == _CLOSERS[0]) | (data == _CLOSERS[1])) & outside
    walk = state.depth + np.cumsum(steps.astype(np.int32) - closing, dtype=np.int64)
    depth = walk - np.minimum(np.minimum.accumulate(walk), 0)
    over = np.flatnonzero(depth > limit)
    if over.size:
        return state.lines + int(np.count_nonzero(newline[: over[0]])) + 1
    state.depth = int(depth[-1])
    state.in_string = int(in_string[-1])
    state.backslashes = int(run[-1] & 1)
    state.lines += int(np.count_nonzero(newline))
    return None
