"""Byte counts written as people write them in settings: ``65536``, ``64K``, ``8M``, ``1G`` (``KiB`` and ``kb`` too)."""

from __future__ import annotations

import re

__all__ = ["parse_byte_count"]

_BYTES = re.compile(r"\s*([0-9]{1,18})\s*([kKmMgG]?)i?[bB]?\s*")
"""ASCII digits, at most 18 of them (so ``int()`` cannot fail or grow), then an optional binary unit."""
_SHIFTS = {"": 0, "k": 10, "m": 20, "g": 30}


def parse_byte_count(text: str) -> int | None:
    """The number of bytes ``text`` says, or ``None`` if it says none; the caller checks the range."""
    match = _BYTES.fullmatch(text)
    if match is None:
        return None
    return int(match.group(1)) << _SHIFTS[match.group(2).lower()]
