"""Writing recordings: the header, frames of events, and the end frame.

Files (format version 2) start with the 8 magic bytes
:data:`~runtime.framing.RECORDING_MAGIC`, then frames of
:mod:`runtime.framing` (length, CRC-32, payload): first a header map
``{"format": "pytimely-recording", "version": 2, "process": P, "pid": N}``,
then one frame per batch of events (a msgpack array of event arrays), and
last, when the program closes its log, an end map ``{"end": True}``.  A file
without that end frame is reported as truncated (the program was killed, or
is still writing); a damaged frame is refused naming the file and its byte
offset.  Files of format version 1 (a bare msgpack stream: the header map
``{"format": "pytimely-events", "version": 1, ...}`` then the events, with
REPR as extension type 2) are still read.  A single process writes exactly
the file named; process ``P`` of a multi-process cluster writes
``STEM.P.SUFFIX`` (``run.msgpack`` -> ``run.0.msgpack``, ``run.1.msgpack``);
``python -m viz`` merges several files.  A TCP sink sends the same bytes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from runtime import codec
from runtime.framing import RECORDING_MAGIC, frame

FORMAT = "pytimely-recording"
"""The header's ``format`` field (format version 2 on)."""
FORMAT_V1 = "pytimely-events"
"""The header's ``format`` field in recordings of format version 1."""
VERSION = 2
"""The recording format version this module writes (version 1 is still read)."""


def encode_header(process: int) -> bytes:
    """The start of a recording written by ``process``: the magic bytes and the header frame."""
    header = {"format": FORMAT, "version": VERSION, "process": process, "pid": os.getpid()}
    return RECORDING_MAGIC + frame(codec.pack_recording(header))


def encode_events(events: Sequence[tuple[Any, ...]]) -> bytes:
    """One frame holding raw events (``(kind, worker, seq, t, *fields)`` tuples)."""
    return frame(codec.pack_recording(events))


END_FRAME = frame(codec.pack_recording({"end": True}))
"""The last frame of a recording whose program closed its log."""
