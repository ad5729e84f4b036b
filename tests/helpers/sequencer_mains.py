"""Mains for the sequencer tests that also run as processes (each process imports them by name)."""

from __future__ import annotations

import time
from typing import Any

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


def take_too_many(worker: Worker) -> list[int]:
    """Every worker pushes one item and takes one more than all push, with no timeout: no main can still push."""
    worker.certain_stall = 0.2
    sequencer: Sequencer[int] = Sequencer(worker, "Orders")  # the line the error names
    sequencer.push(worker.index)
    return sequencer.take(worker.peers + 1)


def take_while_another_forgets(worker: Worker) -> list[int]:
    """Worker 0 takes what every worker pushes; the others push, then wait on a probe their unadvanced input holds."""
    worker.certain_stall = 0.2

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Forgotten")
        return handle, stream.probe()

    handle, probe = worker.dataflow(build)
    sequencer: Sequencer[int] = Sequencer(worker, "Orders")
    sequencer.push(worker.index)
    if worker.index == 0:
        return sequencer.take(worker.peers + 1)  # one more than anyone pushes
    handle.send(1)  # never advanced
    worker.step_while(lambda: probe.less_than(1))
    return []
