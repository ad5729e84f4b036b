"""The last error of a program the viewer started: found at the end of its output."""

from __future__ import annotations

ERROR_LINES = 8
"""How many lines of a failed program's last error the viewer shows."""
TAIL_BYTES = 64 * 1024
"""How much of the end of a program's output is read to find its last error."""


def last_error(lines: list[str], limit: int = ERROR_LINES) -> list[str]:
    """The final exception in ``lines`` of output (its type, message and explanation), at most ``limit`` lines.

    That is what follows the last ``Traceback`` header's indented frames; with
    no traceback, the last non-empty lines.
    """
    starts = [index for index, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if not starts:
        return [line for line in lines if line.strip()][-limit:]
    after = lines[starts[-1] + 1 :]
    first = next((index for index, line in enumerate(after) if line and not line[0].isspace()), len(after))
    found = [line for line in after[first:] if line.strip()]
    return found[: limit - 1] + ["…"] if len(found) > limit else found


def died_stuck(lines: list[str]) -> bool:
    """Whether the error in ``lines`` (see :func:`last_error`) says no worker could make progress."""
    return bool(lines) and "DataflowStuck" in lines[0]
