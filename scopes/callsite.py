"""Where the user's code is: the first stack frame outside pytimely's own packages, as ``file.py:LINE``.

A thread's start-up in the standard library (``threading.py``) is not the
user's code either: an operator pytimely builds in a worker thread of its own
(the output of a Spark task) has no user's line.

Called while building, once per input, operator and scope: errors about an open
input or a stuck operator name the line that made it. While running, only when
instrumentation is on (where the user's code came to hold a capability: those hook
sites are guarded), so a running program that does not log never walks its stack.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Collection
from types import CodeType

_OURS = tuple(
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), package) + os.sep
    for package in ("scopes", "runtime", "viz")
)
_THREAD_START = os.path.join(os.path.dirname(os.__file__), "threading.py")
"""The standard library's thread start-up, at the root of every worker thread's stack: never the user's line."""


def user_site(skip: int = 1, stop: Collection[CodeType] = ()) -> str | None:
    """``basename:line`` of the innermost caller outside ``scopes``, ``runtime`` and ``viz`` (``None``: none).

    ``stop`` bounds the walk: reaching a frame running one of those codes first means
    the call came from pytimely's own code running there (for example the
    logic of a built-in operator, called by the scheduler), and the answer is
    ``None`` rather than the line of the user's ``worker.step()`` far above.
    """
    frame = sys._getframe(skip)  # noqa: SLF001 - CPython's frame access, cheaper than inspect.stack()
    while frame is not None:
        code = frame.f_code
        if code in stop:
            return None
        filename = code.co_filename
        if not filename.startswith(_OURS) and not filename.startswith("<frozen") and filename != _THREAD_START:
            return f"{os.path.basename(filename)}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return None
