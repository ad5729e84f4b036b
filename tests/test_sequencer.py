"""Sequencer (seed 001): every worker sees every proposed item, in one order, by proposal time.

These tests run 4 workers as threads.  Every worker communicates only through
the dataflows and returns its observations from ``main``, so once the process
cluster lands the 2 processes x 2 workers variant needs only ``run`` below to
call ``execute(main, processes=2, workers=2)``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import DataflowStuck, TimelyRuntimeError, WorkerFailed, execute
from runtime.barrier import SynchronizationTimeout
from runtime.sequencer import Sequencer


def run(main):
    """Run ``main`` on 4 workers (change to ``processes=2, workers=2`` for the process variant)."""
    return execute(main, workers=4, stall_timeout=10)


def test_a_thousand_items_from_every_worker_arrive_in_the_same_order_everywhere():
    def main(worker):
        sequencer: Sequencer[tuple[int, int]] = Sequencer(worker)
        for number in range(1000):
            sequencer.push((worker.index, number))
            if number % 100 == 0:
                worker.step()  # proposals spread over time, interleaving with other workers'
        return sequencer.take(1000 * worker.peers, timeout=60)

    results = run(main)
    first = results[0]
    assert all(order == first for order in results)
    assert sorted(first) == sorted((w, n) for w in range(len(results)) for n in range(1000))
    for proposer in range(len(results)):
        assert [n for w, n in first if w == proposer] == list(range(1000))  # each proposer's own order
    assert len({w for w, _ in first[:1100]}) > 1, "items of different workers interleave"


def test_items_come_out_in_the_order_they_were_proposed():
    """Each round's item is proposed (by a different worker) only after the previous one was sequenced."""

    def main(worker):
        sequencer: Sequencer[str] = Sequencer(worker)
        seen = []
        for round_ in range(12):
            proposer = (round_ * 3) % worker.peers
            if worker.index == proposer:
                sequencer.push(f"round {round_} from worker {proposer}")
            seen.extend(sequencer.take(1, timeout=30))
        return seen

    results = run(main)
    expected = [f"round {r} from worker {(r * 3) % len(results)}" for r in range(12)]
    assert all(seen == expected for seen in results)


def test_next_is_none_until_an_item_is_ready_and_iteration_yields_what_is_ready():
    def main(worker):
        sequencer: Sequencer[int] = Sequencer(worker)
        assert sequencer.next() is None
        assert list(sequencer) == []
        sequencer.push(worker.index)
        assert sequencer.next() is None  # not ready until the workers have stepped
        got = sequencer.take(1, timeout=30)
        worker.step_while(lambda: len(sequencer._state.ready) < worker.peers - 1)
        got += list(sequencer)
        assert sequencer.next() is None
        return got

    results = run(main)
    assert all(got == results[0] for got in results) and sorted(results[0]) == [0, 1, 2, 3]


def test_a_closed_sequencer_refuses_items_and_lets_the_computation_finish():
    def main(worker):
        sequencer: Sequencer[int] = Sequencer(worker)
        sequencer.push(worker.index)
        sequencer.close()
        assert sequencer.closed
        with pytest.raises(TimelyRuntimeError, match="is closed; cannot push 7"):
            sequencer.push(7)
        return sequencer.take(worker.peers, timeout=30)

    results = run(main)
    assert all(got == results[0] for got in results)


def test_waiting_for_items_that_never_come_times_out():
    def main(worker):
        sequencer: Sequencer[int] = Sequencer(worker)
        sequencer.take(1, timeout=0.2)

    with pytest.raises(WorkerFailed) as failure:
        run(main)
    error = failure.value.__cause__
    assert isinstance(error, SynchronizationTimeout)
    assert "waited 0.2 s for 1 items but only 0 are ready" in str(error)


@pytest.mark.parametrize("workers", [1, 2])
def test_asking_for_more_items_than_every_closed_sequencer_proposed_fails_instead_of_waiting_for_ever(workers):
    """Once every worker's sequencer is closed and its items delivered, ``take`` waited with no timeout for items
    that could never come (at every worker count); it now fails, saying how many are left."""

    def main(worker):
        sequencer: Sequencer[int] = Sequencer(worker)
        sequencer.push(worker.index)
        sequencer.close()
        with pytest.raises(TimelyRuntimeError, match=f"asked for {worker.peers + 1} items but only {worker.peers} are"):
            sequencer.take(worker.peers + 1)
        return sequencer.take(0)

    assert execute(main, workers=workers, stall_timeout=10) == [[]] * workers


@pytest.mark.parametrize("processes", [0, 2])
def test_a_worker_with_a_slow_clock_does_not_hold_the_others_items_back(processes: int) -> None:
    """Workers on hosts whose clocks differ by a minute: an item stamped by the fast clock used to wait until every
    slow clock had caught up with it (each slow worker held its capability at the item's time, not past it), so each
    round took the skew, here a minute.  A Lamport clock moves past every item seen."""
    from functools import partial

    from helpers.sequencer_mains import skewed_rounds

    main = partial(skewed_rounds, skew=60_000_000, rounds=10)
    if processes:
        results = execute(main, processes=processes, workers=2, stall_timeout=10)
    else:
        results = execute(main, workers=4, stall_timeout=10)
    assert all(order == results[0] for order in results)
    assert sorted(results[0]) == sorted((w, r) for w in range(4) for r in range(10))


SHAPES = {"1 worker": {"workers": 1}, "2 threads": {"workers": 2}, "2 processes": {"workers": 1, "processes": 2}}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shape", SHAPES)
def test_a_take_that_no_main_can_still_feed_raises_instead_of_waiting_for_ever(shape: str) -> None:
    """Every worker takes one item more than all push, with no timeout: ``take`` stepped for ever, with no error and
    no warning (a randomized campaign of stuck programs found it). Judged as a step_while now, it is a certain stall."""
    from helpers import sequencer_mains

    with pytest.raises(WorkerFailed) as failure:
        execute(sequencer_mains.take_too_many, **SHAPES[shape])
    cause = failure.value.__cause__
    assert isinstance(cause, DataflowStuck)
    message = str(cause)
    lines = Path(sequencer_mains.__file__).read_text().splitlines()
    line = next(number for number, text in enumerate(lines, 1) if "the line the error names" in text)
    assert f"built at sequencer_mains.py:{line})" in message
    assert "waits in sequencer 'Orders'.take(" in message


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shape", ["2 threads", "2 processes"])
def test_a_take_on_one_worker_does_not_hide_a_certain_stall_on_another(shape: str) -> None:
    """Worker 1 waits on a probe its own unadvanced input holds while worker 0 is inside ``take``: worker 0's main
    cannot act either, so the stall is certain. Before, a worker inside ``take`` counted as one whose main may still
    act, so no worker ever raised and the computation hung."""
    from helpers import sequencer_mains

    with pytest.raises(WorkerFailed) as failure:
        execute(sequencer_mains.take_while_another_forgets, **SHAPES[shape])
    cause = failure.value.__cause__
    assert isinstance(cause, DataflowStuck)
    assert "input 'Forgotten' is still open at time 0" in str(cause)
