"""Barrier (seed 001): reusable, waits for every worker, keeps other dataflows running.

These tests run 4 workers as threads.  Every worker communicates only through
the dataflows and returns its observations from ``main``, so once the process
cluster lands the 2 processes x 2 workers variant needs only ``run`` below to
call ``execute(main, processes=2, workers=2)``, except the two tests that make a latecomer: it waits on
a condition the other threads set (their processed records, a timed-out wait), not on a sleep.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from helpers import eventually

from runtime import TimelyRuntimeError, WorkerFailed, execute
from runtime.barrier import Barrier, SynchronizationTimeout


def run(main):
    """Run ``main`` on 4 workers (change to ``processes=2, workers=2`` for the process variant)."""
    return execute(main, workers=4, stall_timeout=10)


def test_wait_returns_only_after_every_worker_has_reached_it_round_after_round():
    def main(worker):
        barrier = Barrier(worker)
        rounds = []
        for round_ in range(4):
            time.sleep(0.02 * ((worker.index + round_) % worker.peers))  # a different latecomer each round
            arrived = time.monotonic()
            barrier.wait(timeout=30)
            rounds.append((arrived, time.monotonic()))
        assert barrier.rounds == 4
        return rounds

    results = run(main)
    for round_ in range(4):
        last_arrival = max(per_worker[round_][0] for per_worker in results)
        assert all(per_worker[round_][1] >= last_arrival for per_worker in results)


def test_other_dataflows_keep_running_while_a_worker_waits():
    seen: dict[int, list[float]] = {}  # each worker's records as processed (threads of this process)

    def main(worker):
        barrier = Barrier(worker)
        processed = seen.setdefault(worker.index, [])

        def build(scope):
            handle, stream = scope.new_input()
            stream.inspect(lambda _: processed.append(time.monotonic()))
            return handle

        handle = worker.dataflow(build)
        handle.send_batch(range(10))  # not processed yet: nothing has stepped the worker
        handle.advance_to(1)
        handle.flush()
        assert processed == []
        if worker.index == worker.peers - 1:  # the latecomer: arrives once the others processed theirs waiting
            others = range(worker.peers - 1)
            eventually(lambda: all(len(seen.get(index, ())) == 10 for index in others), timeout=30)
        arrived = time.monotonic()
        barrier.wait(timeout=30)
        return worker.index, processed, arrived

    results = run(main)
    latest = max(arrived for _, _, arrived in results)
    for index, processed, _ in results[:-1]:
        assert len(processed) == 10, index
        assert max(processed) < latest, "the records were processed while waiting for the latecomer"


def test_a_wait_that_takes_too_long_raises_naming_the_worker():
    timed_out = threading.Event()

    def main(worker):
        barrier = Barrier(worker)
        if worker.index == 0:
            try:
                barrier.wait(timeout=0.2)
            finally:
                timed_out.set()
        else:
            assert timed_out.wait(30)  # busy elsewhere: never reaches the barrier before worker 0 gave up

    with pytest.raises(WorkerFailed) as failure:
        run(main)
    error = failure.value.__cause__
    assert isinstance(error, SynchronizationTimeout) and error.worker == 0
    assert "worker 0 waited 0.2 s at wait number 1" in str(error)


def test_a_closed_barrier_cannot_be_waited_on_and_no_longer_holds_others_back():
    def main(worker):
        barrier = Barrier(worker)
        if worker.index == 0:
            barrier.close()
            with pytest.raises(TimelyRuntimeError, match="barrier 'Barrier' on worker 0 is closed"):
                barrier.wait()
        else:
            barrier.wait(timeout=30)
        return repr(barrier)

    assert run(main)[1] == "Barrier('Barrier', worker=1, rounds=1)"


def only_worker_0_waits(worker):
    """Worker 0 waits at the barrier; worker 1 never comes and waits on a probe that worker 0's input holds."""
    worker.certain_stall = 0.2
    handle, probe = worker.dataflow(lambda scope: (lambda pair: (pair[0], pair[1].probe()))(scope.new_input("Data")))
    barrier = Barrier(worker)  # the line the error names
    if worker.index == 0:
        barrier.wait()
    handle.advance_to(1)
    worker.step_while(lambda: probe.less_than(1))


@pytest.mark.parametrize("shape", [{"workers": 2}, {"workers": 1, "processes": 2}])
def test_a_barrier_that_can_never_be_passed_is_a_certain_stall(shape):
    """Found attacking stalls: every worker waited for ever, and nothing was reported (stall_timeout stops it here)."""
    with pytest.raises(WorkerFailed) as failure:
        execute(only_worker_0_waits, stall_timeout=8, **shape)
    message = str(failure.value.__cause__)
    assert "This cannot change" in message, message
    lines = Path(__file__).read_text().splitlines()
    site = next(number for number, line in enumerate(lines, 1) if "# the line the error names" in line)
    assert f"input 'Barrier' is still open at time 0 (created at test_barrier.py:{site})" in message
