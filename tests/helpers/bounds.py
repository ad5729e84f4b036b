"""Waiting on a condition, and measuring this process's memory and threads, for the listener flood tests."""

from __future__ import annotations

import threading
from pathlib import Path

from helpers import eventually

__all__ = ["eventually", "rss", "threads"]


def rss() -> int:
    """This process's resident memory in bytes (``VmRSS`` of ``/proc/self/status``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def threads() -> int:
    """Threads alive in this process (``threading.active_count()``)."""
    return threading.active_count()
