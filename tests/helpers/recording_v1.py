"""Recordings of format version 1, written the way pytimely wrote them before version 2: to show they are still read.

Version 1 is a bare msgpack stream: the header map ``{"format": "pytimely-events",
"version": 1, "process": P, "pid": N}``, then one msgpack array per event;
products are extension type 1 holding ``[outer, inner]``, other values that
msgpack cannot hold extension type 2 holding their ``repr``.  Written here
independently of :mod:`runtime`, so a change there cannot change these bytes.
"""

from __future__ import annotations

import os
from typing import Any

import msgpack  # type: ignore[import-untyped]

from scopes.timestamp import Product

V1_PRODUCT = 1
V1_REPR = 2


def _default(value: Any) -> Any:
    if isinstance(value, Product):
        return msgpack.ExtType(V1_PRODUCT, pack([value[0], value[1]]))
    if isinstance(value, tuple):
        return list(value)
    return msgpack.ExtType(V1_REPR, repr(value).encode())


def pack(value: Any) -> bytes:
    """One value as version 1 wrote it."""
    packed: bytes = msgpack.packb(value, default=_default, strict_types=True, use_bin_type=True)
    return packed


def header(process: int = 0) -> bytes:
    """A version 1 header."""
    return pack({"format": "pytimely-events", "version": 1, "process": process, "pid": os.getpid()})
