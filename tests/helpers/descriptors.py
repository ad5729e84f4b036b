"""Descriptor numbers above 1023, where ``select.select`` fails: a process with many files or sockets open."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator

import pytest

SELECT_LIMIT = 1024
"""``FD_SETSIZE``: ``select.select`` refuses a descriptor at or above it."""


@contextlib.contextmanager
def descriptors_above_select_limit(spare: int = 64) -> Iterator[None]:
    """Hold every descriptor number below :data:`SELECT_LIMIT` open, so that what the body opens is numbered
    above it; the soft limit is raised to the hard one if it is too low, and the test skipped if it cannot be."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = SELECT_LIMIT + spare
    if soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.skip(f"needs {wanted} open files; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    held: list[int] = []
    try:
        while True:
            fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
            held.append(fd)
            if fd >= SELECT_LIMIT:
                break
        os.close(held.pop())  # the body's first descriptor gets this number, above the limit
        yield
    finally:
        for fd in held:
            os.close(fd)
        if soft < wanted:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
