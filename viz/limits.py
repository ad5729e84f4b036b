"""What the viewer keeps from events it did not write itself: names are clipped and the model's tables capped.

A live viewer reads whatever connects to its port, and a recording may come
from anywhere, so the text and the number of things an event stream can make
the viewer hold are bounded:

* every name, site and other text field of a structure event longer than
  :data:`MAX_NAME` characters is cut to that length and ends with a marker
  saying how much was cut (:func:`clip`, :func:`clip_raw`); the frequent
  events (progress, messages) are walked too, to the same effect, whenever
  the bytes that brought them average more than :data:`LARGE_EVENT` bytes an
  event (:func:`clip_deep`): long text or bytes there can only be a huge
  timestamp;
* a :class:`~viz.model.Model` holds at most :data:`MAX_OPERATORS` operators,
  :data:`MAX_SCOPES` scopes, :data:`MAX_EDGES` channels, :data:`MAX_WORKERS`
  workers and :data:`MAX_INPUTS` input handles per worker, scopes nested at
  most :data:`MAX_DEPTH` deep, and an operator at most :data:`MAX_PORTS`
  inputs and outputs (each one is drawn); events beyond those are not
  applied, and are counted in ``Model.over_limit``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MAX_NAME = 512
"""Characters kept of one name, site or other text field; a longer one is clipped with a marker."""
LARGE_EVENT = 1024
"""Bytes per event above which the viewer walks frequent events for long text (they are about 50 bytes)."""
MAX_OPERATORS = 100_000
"""Operators (scopes included) one model holds."""
MAX_SCOPES = 20_000
"""Scopes one model holds."""
MAX_EDGES = 200_000
"""Channels one model holds."""
MAX_WORKERS = 4_096
"""Workers one model holds a view of."""
MAX_INPUTS = 10_000
"""Input handles one worker's view holds."""
MAX_DEPTH = 100
"""Scopes one inside another, as addresses tell: an event at an address longer than this is not applied
(the diagram and the viewer's scope tree recurse once per level; real dataflows nest a few levels)."""
MAX_PORTS = 4_096
"""Inputs (and, apart, outputs) of one operator: one declaring more is not applied (20 bytes could declare 2**60)."""


_MARKER_ROOM = 40
"""Characters a clip marker may take: text up to ``MAX_NAME`` plus this is kept (clipping twice is clipping once)."""


def clip(text: str) -> str:
    """``text``, or its first :data:`MAX_NAME` characters and a marker saying how many more there were.

    Text at most ``MAX_NAME + 40`` characters long is kept whole (a clipped
    text is that short, so clipping again changes nothing).
    """
    if len(text) <= MAX_NAME + _MARKER_ROOM:
        return text
    return f"{text[:MAX_NAME]}…[{len(text) - MAX_NAME:,} more characters]"


def clip_optional(text: str | None) -> str | None:
    """:func:`clip` for a field that may be ``None`` (or not text: returned as it is)."""
    return clip(text) if isinstance(text, str) else text


def clip_raw(raw: Sequence[Any]) -> Sequence[Any]:
    """A raw event (``(kind, worker, seq, t, *fields)``) with every text field after the header clipped.

    Returns ``raw`` itself when nothing needs clipping (the usual case).
    """
    if not any(field.__class__ is str and len(field) > MAX_NAME + _MARKER_ROOM for field in raw):
        return raw
    return tuple(clip(field) if field.__class__ is str else field for field in raw)


def clip_deep(value: Any, depth: int = 0) -> Any:
    """``value`` with every ``str`` (and ``bytes``) inside tuples and lists clipped as :func:`clip` does.

    Returns ``value`` itself when nothing needs clipping.  Nesting deeper than
    64 levels is returned as it is (the decoder bounds nesting already).
    """
    kind = value.__class__
    if kind is str:
        return clip(value)
    if kind is bytes:
        if len(value) <= MAX_NAME + _MARKER_ROOM:
            return value
        return value[:MAX_NAME] + f"...[{len(value) - MAX_NAME:,} more bytes]".encode()
    if (kind is tuple or kind is list) and depth < 64:
        clipped = [clip_deep(item, depth + 1) for item in value]
        if all(new is old for new, old in zip(clipped, value, strict=True)):
            return value
        return tuple(clipped) if kind is tuple else clipped
    return value
