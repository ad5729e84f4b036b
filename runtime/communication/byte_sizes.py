"""Byte counts written as people write them in settings: ``65536``, ``64K``, ``8M``, ``1G`` (``KiB`` and ``kb`` too)."""

from __future__ import annotations

import re

from runtime.errors import ConfigurationError

__all__ = ["byte_setting", "parse_byte_count"]

_BYTES = re.compile(r"\s*([0-9]{1,18})\s*([kKmMgG]?)i?[bB]?\s*")
"""ASCII digits, at most 18 of them (so ``int()`` cannot fail or grow), then an optional binary unit."""
_SHIFTS = {"": 0, "k": 10, "m": 20, "g": 30}


def parse_byte_count(text: str) -> int | None:
    """The number of bytes ``text`` says, or ``None`` if it says none; the caller checks the range."""
    match = _BYTES.fullmatch(text)
    if match is None:
        return None
    return int(match.group(1)) << _SHIFTS[match.group(2).lower()]


def byte_setting(name: str, text: str | None, default: int, low: int, high: int | None, examples: str) -> int:
    """The byte count the setting ``name`` gives as ``text``: ``default`` when unset or blank.

    Anything else than a byte count from ``low`` to ``high`` (no upper bound
    when ``None``) is a :class:`~runtime.errors.ConfigurationError` naming the
    setting, the range and ``examples`` of what it takes (``"64K or 8M"``).
    """
    if text is None or not text.strip():
        return default
    size = parse_byte_count(text)
    if size is None or size < low or (high is not None and size > high):
        limits = f"from {low} to {high}" if high is not None else f"of at least {low}"
        shown = "" if size is None else f" ({size} bytes)"
        raise ConfigurationError(f"{name} must be a number of bytes {limits} (such as {examples}), got {text!r}{shown}")
    return size
