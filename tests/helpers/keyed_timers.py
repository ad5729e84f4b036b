"""``process``'s two functions for the tests of keyed timers: count each key's records, report the count later.

The timer is set 2 epochs after the key's first record; when it fires the count is emitted and forgotten, so the
key's next record starts a new count with a new timer.
"""

from __future__ import annotations

from typing import Any


def count_records(context: Any, value: Any) -> None:
    """``process``'s per-record function: count the key's records, with a timer 2 epochs after its first."""
    if context.state is None:
        context.state = 0
        context.set_timer(context.time + 2)
    context.state += 1


def emit_count(context: Any) -> None:
    """``process``'s timer function: emit the key's count and forget it."""
    context.emit(context.state)
    context.state = None
