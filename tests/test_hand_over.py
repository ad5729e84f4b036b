"""Worker threads of one process step in turns by design: a baton passed at step ends, in rounds."""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from typing import Any

import pytest

from runtime.communication import Stop, baton
from runtime.communication.baton import Baton
from runtime.communication.fabric import ThreadFabric, WorkerSignal
from runtime.execute import execute
from runtime.testing import assert_agree
from scopes import ScopeBuilder, Stream
from tests.helpers import eventually


def never() -> bool:
    return False


def send_data(turns: Baton, sender: int, signals: list[WorkerSignal]) -> deque[Any]:
    """Worker ``sender`` sends a record to the other worker in its step (staged until the round ends)."""
    box: deque[Any] = deque()
    turns.stage(sender, box, (0, ["record"]), signals[1 - sender], (0, 1))
    return box


def waiter(turns: Baton, local: int, stopped: Any = never) -> threading.Thread:
    """A thread that waits for the baton as worker ``local`` (and returns once it holds it)."""
    thread = threading.Thread(target=turns.take, args=(local, stopped), daemon=True)
    thread.start()
    eventually(lambda: turns.wanting[local] or turns.holder == local, what="the worker to wait for the baton")
    return thread


def test_a_worker_waits_for_a_peers_step_and_gets_the_baton_when_it_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(baton, "BATON_TIMEOUT", 60.0)
    signals = [WorkerSignal(), WorkerSignal()]
    turns = Baton(signals)
    assert not turns.take(0, never)  # free: taken at once
    send_data(turns, 0, signals)
    second = waiter(turns, 1)
    assert second.is_alive() and turns.holder == 0  # waits while worker 0 steps (and sends data)
    turns.release(0)  # the step ends: the turn goes to the worker that waits
    second.join(10)
    assert not second.is_alive() and turns.holder == 1 and turns.passes == 1


def test_the_next_step_of_a_worker_waits_until_the_peer_it_passed_the_baton_to_has_stepped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(baton, "BATON_TIMEOUT", 60.0)
    signals = [WorkerSignal(), WorkerSignal()]
    turns = Baton(signals)
    turns.take(0, never)
    box = send_data(turns, 0, signals)
    second = waiter(turns, 1)
    turns.release(0)
    second.join(10)
    first = waiter(turns, 0)  # worker 0 comes back for another step at once...
    assert first.is_alive() and not box  # ...and waits: worker 1 has its turn in this round first
    turns.release(1)
    first.join(10)
    assert not first.is_alive() and turns.holder == 0


def test_without_data_in_flight_a_worker_steps_at_once() -> None:
    # Only data between the threads needs its rounds: steps that send progress alone (an epoch through a
    # pipeline on each worker) do not wait for each other, so that they cost no hand-over.
    signals = [WorkerSignal(), WorkerSignal()]
    turns = Baton(signals)
    turns.take(0, never)
    assert not turns.take(1, never) and turns.holder == 1
    turns.release(0)  # worker 0's step ends after worker 1 took over: worker 1's release ends the round
    assert turns.holder == 1 and turns.rounds == 0


def test_messages_sent_in_a_round_arrive_together_in_order_when_it_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(baton, "BATON_TIMEOUT", 60.0)
    signals = [WorkerSignal(), WorkerSignal()]
    turns = Baton(signals)
    box: deque[Any] = deque()
    turns.take(0, never)
    second = waiter(turns, 1)
    turns.stage(0, box, (0, ["a"]), signals[1], (0, 1))
    turns.stage(0, box, (0, ["b"]), signals[1], (0, 1))
    turns.release(0)  # worker 1 has not stepped in this round: nothing arrives yet
    second.join(10)
    assert not box and not signals[1].pending
    turns.send(box, (1, ["from main"]), signals[1], (0, 1))  # sent outside a step: after what waits
    assert not box
    turns.release(1)  # every worker has stepped: the round ends
    assert list(box) == [(0, ["a"]), (0, ["b"]), (1, ["from main"])]
    assert list(signals[1].pending) == [(0, 1)] * 3 and turns.rounds == 1


def test_a_worker_in_main_that_was_passed_the_baton_keeps_a_peer_waiting_only_briefly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(baton, "BATON_TIMEOUT", 60.0)
    monkeypatch.setattr(baton, "OUTSIDE_TIMEOUT", 0.05)
    signals = [WorkerSignal(), WorkerSignal()]
    turns = Baton(signals)
    turns.take(0, never)
    send_data(turns, 0, signals)
    turns.release(0)  # worker 1 is in main (not waiting, not parked): it is passed the baton...
    assert turns.holder == 1 and turns.outside
    first = waiter(turns, 0)
    first.join(10)  # ...and worker 0 takes it after OUTSIDE_TIMEOUT, not a minute
    assert not first.is_alive() and turns.holder == 0 and turns.timeouts == 1
    assert turns.absent[1]  # worker 1 is skipped until it steps again
    turns.release(0)
    assert turns.holder is None


def holding(turns: Baton, signals: list[WorkerSignal], then: Any) -> threading.Thread:
    """A thread that takes the baton as worker 0, sends data, runs ``then()`` in its step, and ends it."""

    def step() -> None:
        turns.take(0, never)
        send_data(turns, 0, signals)
        then()
        turns.release(0)

    thread = threading.Thread(target=step, daemon=True)
    thread.start()
    eventually(lambda: turns.holder == 0 and turns.sent[0], what="worker 0 to step")
    return thread


def test_a_step_blocked_in_user_code_keeps_a_peer_waiting_only_briefly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(baton, "BATON_TIMEOUT", 0.01)
    monkeypatch.setattr(baton, "BATON_LIMIT", 60.0)
    signals = [WorkerSignal(), WorkerSignal()]
    turns = Baton(signals)
    blocked = threading.Event()
    first = holding(turns, signals, lambda: blocked.wait(60))  # waits for outside data: uses no CPU
    assert turns.take(1, never)  # waits, sees that the step does not compute, and goes on
    assert turns.holder == 1 and turns.timeouts == 1 and first.is_alive()
    blocked.set()
    first.join(10)


def test_a_step_that_computes_is_waited_for_past_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    # Windows of 0.25 s: the step is seen computing if it gets a tenth of a core in each, which holds even
    # under make test's load (with 0.05 s windows, a loaded scheduler once gave it less in one of them).
    monkeypatch.setattr(baton, "BATON_TIMEOUT", 0.25)
    monkeypatch.setattr(baton, "BATON_LIMIT", 60.0)
    signals = [WorkerSignal(), WorkerSignal()]
    turns = Baton(signals)
    seen: list[bool] = []

    def compute() -> None:  # a long step: 2 timeouts' worth of CPU, then look whether the peer still waits
        start = time.thread_time()
        while time.thread_time() - start < 2 * baton.BATON_TIMEOUT:
            pass
        seen.append(turns.wanting[1] and turns.holder == 0)

    first = holding(turns, signals, compute)
    assert turns.take(1, never)
    first.join(10)
    assert seen == [True] and turns.timeouts == 0


def test_a_stop_ends_a_wait_for_the_baton(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(baton, "BATON_TIMEOUT", 60.0)
    shared = ThreadFabric(2)
    shared.baton.take(0, never)
    send_data(shared.baton, 0, shared.signals)
    second = waiter(shared.baton, 1, lambda: shared.stop_reason is not None)
    shared.stop(Stop("error", "test"))
    second.join(10)
    assert not second.is_alive()


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


def test_a_loop_with_an_exchange_on_threads_gives_the_one_worker_answer() -> None:
    numbers = [[(n, n, 0) for n in range(1, 301)]]
    one, _, _ = assert_agree(collatz_steps, numbers, configurations=[(1, 1), (2, 1), (3, 1)])
    steps = {number: count for number, _, count in one.records()}
    assert len(one.records()) == len(steps) == 300 and steps[27] == 111


def exchanged_messages(workers: int, limit: int) -> Counter[tuple[int, Any]]:
    """Run the Collatz loop over ``1..limit`` on ``workers`` threads: messages received per (worker, iteration)."""
    lock = threading.Lock()
    received: Counter[tuple[int, Any]] = Counter()

    def main(worker: Any) -> None:
        def count(time: Any, batch: list[Any]) -> None:
            with lock:
                received[worker.index, time] += 1

        def build(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()

            def body(inner: ScopeBuilder) -> Stream:
                loop, feedback = inner.loop_variable(1)
                running, finished = stream.enter(inner).concat(feedback).branch(lambda n: n == 1)
                running.map(lambda n: n // 2 if n % 2 == 0 else 3 * n + 1).exchange(lambda n: n).inspect_batch(
                    count
                ).connect_loop(loop)
                return finished.leave()

            return handle, scope.iterative(body).probe()

        handle, probe = worker.dataflow(build)
        handle.send_batch([n for n in range(1, limit + 1) if n % worker.peers == worker.index])
        handle.close()
        worker.step_while(lambda: not probe.done())

    execute(main, workers=workers)
    return received


def test_each_iteration_of_a_loop_reaches_a_thread_in_one_message_from_each_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Steps go in rounds and a round's messages arrive together, so a worker reads all of an
    # iteration's records in one step: one message from each worker.  (Handing over by timing,
    # the workers drifted apart and split each iteration over several messages.)  The rounds
    # promise this while no wait for the baton runs out; on a machine so loaded that one does
    # (the safety net, tested above), the run is repeated, up to 5 times.
    batons: list[Baton] = []
    made = Baton.__init__

    def keep(self: Baton, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        batons.append(self)

    monkeypatch.setattr(Baton, "__init__", keep)
    for _ in range(5):
        batons.clear()
        received = exchanged_messages(2, 2000)
        if batons and sum(turns.timeouts for turns in batons) == 0:
            break
    assert len(batons) == 1 and batons[0].timeouts == 0, "every run had a wait for the baton run out"
    assert received and max(received.values()) <= 2, sorted(received.items(), key=lambda item: -item[1])[:5]
    assert sum(received.values()) <= 2 * len({time for _, time in received}) * 2


def test_a_worker_whose_main_does_not_step_does_not_hold_the_others() -> None:
    released = threading.Event()

    def main(worker: Any) -> int:
        def build(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()
            return handle, stream.exchange(lambda n: n).probe()

        handle, probe = worker.dataflow(build)
        if worker.index == 1:
            assert released.wait(60)  # busy in main: never steps until worker 0 has run its steps
        else:
            for epoch in range(50):
                handle.send(epoch)
                handle.advance_to(epoch + 1)
                worker.step()
            released.set()
        handle.close()
        worker.step_while(lambda: not probe.done())
        return worker.index

    assert execute(main, workers=2) == [0, 1]
