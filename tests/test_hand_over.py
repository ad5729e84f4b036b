"""Worker threads of one process hand the GIL to a peer that waits with work, instead of running on alone."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from runtime.communication import fabric
from runtime.communication.fabric import ThreadFabric
from runtime.testing import assert_agree
from scopes import ScopeBuilder, Stream


def step_aside(signal: fabric.WorkerSignal, timeout: float) -> threading.Thread:
    """A thread that steps aside (as a worker handing over) with an activation pending, for ``timeout`` s."""
    signal.pending.append((0,))
    thread = threading.Thread(target=signal.hand_over, args=(timeout, lambda: False), daemon=True)
    thread.start()
    while not signal.parked:  # wait until it is really waiting
        threading.Event().wait(0.001)
    return thread


def parked_and_woken(signal: fabric.WorkerSignal) -> None:
    """Put ``signal`` in the state of a worker that parked idle and was then activated by a peer's data
    (woken, but not yet running: it waits for the GIL)."""
    signal.parked = True
    signal.pending.append((0,))


def test_a_worker_with_more_work_steps_aside_at_once_for_a_peer_parked_with_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fabric, "HAND_OVER_TIMEOUT", 60.0)
    frozen = SimpleNamespace(perf_counter=lambda: 0.0, monotonic=time.monotonic)
    monkeypatch.setattr(fabric, "time", frozen)  # no time passes: the rule must not depend on a clock
    shared = ThreadFabric(2)
    first, second = shared.communicators()
    first.park(0.0)  # the worker has just come back from parking
    parked_and_woken(shared.signals[1])
    handing = threading.Thread(target=first.end_step, args=(True,), daemon=True)
    handing.start()
    while not shared.signals[0].handing_over:  # it steps aside...
        assert handing.is_alive()
        threading.Event().wait(0.001)
    assert shared.signals[1].event.is_set()  # ...having woken the peer
    shared.signals[1].parked = False  # the peer runs...
    shared.signals[1].pending.clear()
    second.park(0.0)  # ...and parks: that wakes the worker that stepped aside for it
    handing.join(10)
    assert not handing.is_alive()


def test_a_worker_does_not_step_aside_for_a_peer_that_steps_aside_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fabric, "HAND_OVER_TIMEOUT", 60.0)
    monkeypatch.setattr(fabric, "HAND_OVER_AFTER", 0.0, raising=False)  # the old timed rule, at its most eager
    shared = ThreadFabric(2)
    first, _ = shared.communicators()
    peer = step_aside(shared.signals[1], timeout=60.0)
    going_on = threading.Thread(target=first.end_step, args=(True,), daemon=True)
    going_on.start()  # the peer gave this worker the GIL: it keeps it (a hand-over would wait a minute)
    going_on.join(10)
    assert not going_on.is_alive() and peer.is_alive() and not shared.signals[1].event.is_set()
    first.park(0.0)  # parking gives it back
    peer.join(10)
    assert not peer.is_alive()


def test_a_worker_without_more_work_or_without_a_waiting_peer_does_not_step_aside(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fabric, "HAND_OVER_TIMEOUT", 60.0)
    shared = ThreadFabric(2)
    first, _ = shared.communicators()
    first.end_step(True)  # nobody waits: returns at once (a wait would take a minute)
    parked_and_woken(shared.signals[1])
    first.end_step(False)  # nothing more to do here: the next park hands over instead
    assert not shared.signals[1].event.is_set() and not shared.signals[0].handing_over


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


def test_a_loop_with_an_exchange_on_threads_that_hand_over_gives_the_one_worker_answer() -> None:
    numbers = [[(n, n, 0) for n in range(1, 301)]]
    one, _, _ = assert_agree(collatz_steps, numbers, configurations=[(1, 1), (2, 1), (3, 1)])
    steps = {number: count for number, _, count in one.records()}
    assert len(one.records()) == len(steps) == 300 and steps[27] == 111


def test_a_peer_parked_idle_is_woken_when_the_step_that_sent_to_it_ends_not_at_each_message() -> None:
    # Woken at the first message, the receiver would only wait for the GIL that the sender holds until its
    # step ends: one more sleep and wake-up per message, for nothing.
    shared = ThreadFabric(2)
    first, _ = shared.communicators()
    pushers, _ = first.allocate(7, (0, 1))
    receiver = shared.signals[1]
    receiver.parked = True  # parked idle, as in WorkerSignal.park
    first.take_activations()  # a step of the first worker begins
    pushers[1].push(0, [1, 2])
    pushers[1].push(1, [3])
    assert list(receiver.pending) == [(0, 1), (0, 1)] and not receiver.event.is_set()
    first.end_step(False)  # the step ends: the receiver is woken once
    assert receiver.event.is_set()


def sender_and_parked_receiver() -> tuple[Any, list[Any], fabric.WorkerSignal]:
    """The first of two thread workers, its pushers on a channel, and the second worker's signal, parked idle."""
    shared = ThreadFabric(2)
    first, _ = shared.communicators()
    pushers, _ = first.allocate(7, (0, 1))
    receiver = shared.signals[1]
    receiver.parked = True
    return first, pushers, receiver


def test_a_message_sent_outside_a_step_wakes_a_parked_peer_at_once() -> None:
    first, pushers, receiver = sender_and_parked_receiver()
    first.take_activations()
    first.end_step(False)  # between steps (the worker's main runs)
    pushers[1].push(0, [1])
    assert receiver.event.is_set()


def test_a_step_that_sent_to_a_parked_peer_and_parks_wakes_it() -> None:
    first, pushers, receiver = sender_and_parked_receiver()
    first.take_activations()
    pushers[1].push(0, [1])
    assert not receiver.event.is_set()
    first.park(0.0)  # parking wakes every peer that waits with work
    assert receiver.event.is_set()


def test_a_step_that_fails_after_sending_to_a_parked_peer_still_wakes_it() -> None:
    # The peer is woken when the sender's step ends; a step that raises does not reach its end, and a caller that
    # catches the error and waits on something else must not leave the peer asleep with its data.
    from runtime.worker import Worker
    from scopes.errors import OperatorFailed

    shared = ThreadFabric(2)
    workers = [Worker(communicator) for communicator in shared.communicators()]
    handles = []
    for worker in workers:

        def build(scope: ScopeBuilder, index: int = worker.index) -> object:
            handle, stream = scope.new_input()
            passed = stream.map(lambda n: n)
            passed.exchange(lambda n: 1).inspect(lambda n: None)  # to the second worker, during the step

            def fail(n: int) -> None:
                if index == 0:
                    raise ValueError("a failing operator")

            passed.inspect(fail)
            return handle

        handles.append(worker.dataflow(build))
    handles[0].send(1)
    receiver = shared.signals[1]
    receiver.parked = True  # parked idle, as in WorkerSignal.park
    receiver.event.clear()
    with pytest.raises(OperatorFailed, match="a failing operator"):
        while workers[0].step():
            pass
    assert receiver.pending and receiver.event.is_set()
