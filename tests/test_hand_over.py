"""Worker threads of one process hand the GIL to a peer that waits with work, instead of running on alone."""

from __future__ import annotations

import threading

import pytest

from runtime.communication import fabric
from runtime.communication.fabric import ThreadFabric
from runtime.testing import assert_agree
from scopes import ScopeBuilder, Stream


def park_with_work(signal: fabric.WorkerSignal, timeout: float) -> threading.Thread:
    """A thread that steps aside (as a worker handing over) with an activation pending, for ``timeout`` s."""
    signal.pending.append((0,))
    thread = threading.Thread(target=signal.hand_over, args=(timeout, lambda: False), daemon=True)
    thread.start()
    while not signal.parked:  # wait until it is really waiting
        threading.Event().wait(0.001)
    return thread


def test_a_worker_with_more_work_steps_aside_for_a_peer_that_waits_with_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fabric, "HAND_OVER_AFTER", 0.0)
    monkeypatch.setattr(fabric, "HAND_OVER_TIMEOUT", 60.0)
    shared = ThreadFabric(2)
    first, second = shared.communicators()
    peer = park_with_work(shared.signals[1], timeout=60.0)
    handing = threading.Thread(target=first.end_step, args=(True,), daemon=True)
    handing.start()
    peer.join(10)  # end_step woke the waiting peer...
    assert not peer.is_alive()
    while not shared.signals[0].parked:  # ...and now waits itself, until the peer lets it go on
        assert handing.is_alive()
        threading.Event().wait(0.001)
    shared.signals[1].pending.clear()
    second.park(0.0)  # the peer parks: it wakes the worker that stepped aside for it
    handing.join(10)
    assert not handing.is_alive()


def test_a_worker_without_more_work_or_without_a_waiting_peer_does_not_step_aside(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fabric, "HAND_OVER_AFTER", 0.0)
    monkeypatch.setattr(fabric, "HAND_OVER_TIMEOUT", 60.0)
    shared = ThreadFabric(2)
    first, _ = shared.communicators()
    first.end_step(True)  # nobody waits: returns at once (a wait would take a minute)
    peer = park_with_work(shared.signals[1], timeout=60.0)
    first.end_step(False)  # nothing more to do here: the next park hands over instead
    assert peer.is_alive() and not shared.signals[1].event.is_set()
    shared.signals[1].wake()
    peer.join(10)


def test_a_short_burst_of_work_keeps_going(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fabric, "HAND_OVER_AFTER", 60.0)
    monkeypatch.setattr(fabric, "HAND_OVER_TIMEOUT", 60.0)
    shared = ThreadFabric(2)
    first, _ = shared.communicators()
    first.park(0.0)  # the worker just came back from parking
    peer = park_with_work(shared.signals[1], timeout=60.0)
    first.end_step(True)  # it has run for less than HAND_OVER_AFTER: no hand-over
    assert peer.is_alive()
    shared.signals[1].wake()
    peer.join(10)


def test_a_stop_ends_a_hand_over() -> None:
    shared = ThreadFabric(2)
    signal = shared.signals[0]
    signal.pending.append((0,))
    waiter = threading.Thread(target=signal.hand_over, args=(60.0, lambda: shared.stop_reason is not None))
    waiter.start()
    while not signal.parked:
        threading.Event().wait(0.001)
    shared.stop(fabric.Stop("error", "test"))
    waiter.join(10)
    assert not waiter.is_alive()


def collatz_steps(scope: ScopeBuilder, stream: Stream) -> Stream:
    """The Collatz loop with an exchange: ``(number, current, steps)`` in, ``(number, 1, steps to reach 1)`` out."""

    def body(inner: ScopeBuilder) -> Stream:
        loop, feedback = inner.loop_variable(1)
        running, finished = stream.enter(inner).concat(feedback).branch(lambda item: item[1] == 1)
        (
            running.map(lambda item: (item[0], 3 * item[1] + 1 if item[1] % 2 else item[1] // 2, item[2] + 1))
            .exchange(lambda item: item[1])
            .connect_loop(loop)
        )
        return finished.leave()

    return scope.iterative(body)


def test_a_loop_with_an_exchange_on_threads_that_hand_over_gives_the_one_worker_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fabric, "HAND_OVER_AFTER", 0.0)  # hand over after every step that leaves work
    numbers = [[(n, n, 0) for n in range(1, 301)]]
    one, _, _ = assert_agree(collatz_steps, numbers, configurations=[(1, 1), (2, 1), (3, 1)])
    steps = {number: count for number, _, count in one.records()}
    assert len(one.records()) == len(steps) == 300 and steps[27] == 111
