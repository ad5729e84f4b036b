"""Barrier and Sequencer on a real cluster: 2 processes of 2 workers each, joined over TCP."""

from __future__ import annotations

import time

from runtime import Barrier, Sequencer, execute
from runtime.worker import Worker


def barrier_rounds(worker: Worker) -> list[tuple[float, float]]:
    """Four barrier rounds with a different latecomer each; return (arrived, released) per round."""
    barrier = Barrier(worker)
    rounds = []
    for round_ in range(4):
        time.sleep(0.05 * ((worker.index + round_) % worker.peers))
        arrived = time.monotonic()  # CLOCK_MONOTONIC is shared by every process on the machine
        barrier.wait(timeout=60)
        rounds.append((arrived, time.monotonic()))
    return rounds


def sequence_items(worker: Worker) -> list[tuple[int, int]]:
    """Push 1,000 items from this worker; return the order in which every item came out here."""
    sequencer: Sequencer[tuple[int, int]] = Sequencer(worker)
    for number in range(1000):
        sequencer.push((worker.index, number))
        if number % 100 == 0:
            worker.step()
    return sequencer.take(1000 * worker.peers, timeout=60)


def test_barrier_releases_no_worker_before_the_last_one_arrives_on_two_processes() -> None:
    results = execute(barrier_rounds, processes=2, workers=2, stall_timeout=30)
    assert len(results) == 4
    for round_ in range(4):
        last_arrival = max(per_worker[round_][0] for per_worker in results)
        assert all(per_worker[round_][1] >= last_arrival for per_worker in results), round_


def test_sequencer_gives_every_worker_of_two_processes_the_same_order() -> None:
    results = execute(sequence_items, processes=2, workers=2, stall_timeout=30)
    first = [tuple(item) for item in results[0]]
    assert all([tuple(item) for item in order] == first for order in results)
    assert sorted(first) == sorted((w, n) for w in range(4) for n in range(1000))
    for proposer in range(4):
        assert [n for w, n in first if w == proposer] == list(range(1000))
