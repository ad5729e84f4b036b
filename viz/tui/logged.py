"""Run a Python program with pytimely logging turned on from ``PYTIMELY_LOG``.

``python -m viz.tui.logged SCRIPT [ARGS...]`` or ``python -m viz.tui.logged -m MODULE [ARGS...]``:
turns logging on as ``PYTIMELY_LOG`` says, waits (up to ``PYTIMELY_LOG_WAIT``
seconds, default 5) for a TCP viewer to accept the connection so that the
first events are not dropped, then runs the program as ``__main__``.
``python -m viz tui -- python prog.py`` starts programs this way.
"""

from __future__ import annotations

import math
import os
import runpy
import sys
import time

from runtime.instrument import TcpSink, configure_from

ENV = "PYTIMELY_LOG"


def log_wait(text: str | None) -> float:
    """The seconds ``PYTIMELY_LOG_WAIT`` (``text``) asks to wait for the viewer: 5 if unset; exits for a bad value."""
    if text is None or not text.strip():
        return 5.0
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds <= MAX_LOG_WAIT:  # NaN fails this too
        sys.exit(f"PYTIMELY_LOG_WAIT must be a number of seconds from 0 to {MAX_LOG_WAIT:g}, got {text!r}")
    return seconds


MAX_LOG_WAIT = 3600.0
"""The longest wait for the viewer ``PYTIMELY_LOG_WAIT`` may ask for."""


def main() -> None:
    """Turn logging on, then run the program named on the command line."""
    args = sys.argv[1:]
    if not args:
        sys.exit("usage: python -m viz.tui.logged SCRIPT [ARGS...] | -m MODULE [ARGS...]")
    pipeline = configure_from(os.environ.get(ENV))
    if pipeline is not None:
        deadline = time.monotonic() + log_wait(os.environ.get("PYTIMELY_LOG_WAIT"))
        sinks = [s for s in pipeline.sinks if isinstance(s, TcpSink)]
        while sinks and not all(s.connected for s in sinks) and time.monotonic() < deadline:
            time.sleep(0.01)
    if args[0] == "-m" and len(args) > 1:
        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(args)
        sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
        runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    main()
