"""Waiting on a condition, and measuring this process's memory and threads, for the listener flood tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path


def eventually(condition: Callable[[], bool], seconds: float, what: str) -> None:
    """Wait until ``condition()`` holds, failing after ``seconds`` with ``what`` in the message."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {seconds:g} s waiting for {what}"
        time.sleep(0.02)


def rss() -> int:
    """This process's resident memory in bytes (``VmRSS`` of ``/proc/self/status``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def threads() -> int:
    """Threads alive in this process (``threading.active_count()``)."""
    return threading.active_count()
