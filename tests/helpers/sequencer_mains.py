"""Mains for the sequencer tests that also run as processes (each process imports them by name)."""

from __future__ import annotations

import time

from runtime.sequencer import Sequencer
from runtime.worker import Worker


def skewed_rounds(worker: Worker, skew: int, rounds: int) -> list[tuple[int, int]]:
    """Every worker proposes one item a round and takes every worker's; the upper half of the workers' clocks run
    ``skew`` microseconds ahead (hosts whose clocks differ).  Each take fails after 10 s."""
    offset = skew if worker.index >= worker.peers // 2 else 0
    sequencer: Sequencer[tuple[int, int]] = Sequencer(worker, clock=lambda: time.time_ns() // 1000 + offset)
    seen: list[tuple[int, int]] = []
    for round_ in range(rounds):
        sequencer.push((worker.index, round_))
        seen.extend(sequencer.take(worker.peers, timeout=10))
    return seen
