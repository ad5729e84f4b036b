"""Loaders for ``benchmarks/ceilings.py``'s fault tests: top-level, so that spawned processes can import them."""

from __future__ import annotations

import os
import time


def dies_in_a_half(index: int, peers: int) -> list[int]:
    """The whole input (``peers == 1``) loads; a half kills its process, as a crash would."""
    if peers == 1:
        return [index]
    os._exit(3)


def hangs_in_a_half(index: int, peers: int) -> list[int]:
    """The whole input loads; a half never returns (a process that stopped answering)."""
    if peers == 1:
        return [index]
    while True:
        time.sleep(60)


def slow_halves(index: int, peers: int) -> list[int]:
    """The whole input loads at once; the halves take longer than the whole's process lives."""
    if peers == 2:
        time.sleep(1.5)
    return [index]
