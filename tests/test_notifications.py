"""Notifications: each requested time is delivered once, in time order, after all its messages.

The checks use state shared by the worker threads of one :func:`runtime.execute` call.
Progress tracking is global: when any worker's notificator delivers time ``t`` at an
input, no message at a time ``<= t`` can still arrive at that input on *any* worker.
So at each notification the tests compare how many records at times ``<= t`` every
worker has received with how many were sent (or are known in advance to exist).
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict

import pytest

from runtime import execute
from scopes import Broadcast, Exchange, Pipeline, Product
from scopes.order import less_equal, less_than

WORKERS = [1, 2, 3]


class Ledger:
    """Counts of records sent and received per time, shared by all workers, plus violations."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: Counter = Counter()
        self.received: Counter = Counter()
        self.problems: list[str] = []

    def send(self, time, count: int) -> None:
        with self.lock:
            self.sent[time] += count

    def receive(self, time, count: int) -> None:
        with self.lock:
            self.received[time] += count

    def check_complete(self, worker: int, time, expected: Counter) -> None:
        """At a notification for ``time``: every record at a time <= ``time`` was received."""
        with self.lock:
            for at, count in expected.items():
                if less_equal(at, time) and self.received[at] != count:
                    self.problems.append(
                        f"worker {worker} notified at {time!r} but only {self.received[at]} of "
                        f"{count} records at {at!r} had been received"
                    )


def check_delivery_order(worker: int, deliveries: list[tuple[int, object]]) -> None:
    """``deliveries`` lists ``(invocation, time)`` in delivery order on one worker.

    Each time is delivered once; a time is never delivered after a time strictly later
    in the partial order; within one invocation, ready times come sorted (the total
    order that extends the partial order).  Incomparable times may become ready in
    different invocations in either order.
    """
    times = [time for _, time in deliveries]
    assert len(times) == len(set(times)), f"worker {worker} delivered a time twice: {times}"
    for i, earlier in enumerate(times):
        for later in times[i + 1 :]:
            assert not less_than(later, earlier), (
                f"worker {worker} delivered {earlier!r} before {later!r}, which is earlier"
            )
    batches: dict[int, list] = defaultdict(list)
    for invocation, time in deliveries:
        batches[invocation].append(time)
    for invocation, batch in batches.items():
        assert batch == sorted(batch), f"worker {worker}, invocation {invocation}: {batch}"


# ---------------------------------------------------------------------------- top-level scope


@pytest.mark.parametrize("workers", WORKERS)
def test_notify_at_exactly_once_in_order_after_all_messages(workers):
    """Requests at ``t + 2`` and then twice at ``t`` (so also at a time requested before).

    Several epochs are sent without stepping, so several notifications become ready
    at once and must be delivered sorted; records are exchanged between workers.
    """
    epochs = 9
    ledger = Ledger()
    requested: dict[int, set] = defaultdict(set)
    delivered: dict[int, list] = defaultdict(list)
    counted: list[tuple[int, int]] = []

    def main(worker):
        me = worker.index

        def build(scope):
            handle, stream = scope.new_input()
            local: Counter = Counter()

            def logic(input, output, notificator):
                for ref, batch in input:
                    ledger.receive(ref.time, len(batch))
                    local[ref.time] += len(batch)
                    notificator.notify_at(ref.delayed(ref.time + 2))
                    notificator.notify_at(ref.retain())
                    notificator.notify_at(ref.retain())  # the same time again
                    requested[me].update({ref.time, ref.time + 2})
                for capability in notificator:
                    delivered[me].append(capability.time)
                    ledger.check_complete(me, capability.time, ledger.sent)
                    output.session(capability).give((capability.time, local.pop(capability.time, 0)))

            counts = stream.unary_notify(Exchange(lambda record: record), "Notifier", logic)
            counts.inspect(lambda record: counted.append(record))
            return handle, counts.probe()

        handle, probe = worker.dataflow(build)
        for epoch in range(epochs):
            records = [epoch * 1000 + me * 100 + k for k in range(epoch % 4 + 1)]
            ledger.send(epoch, len(records))
            handle.send_batch(records)
            handle.advance_to(epoch + 1)
            if epoch % 3 == 2:
                worker.step_while(lambda epoch=epoch: probe.less_than(epoch + 1))
        handle.close()
        worker.step_while(lambda: not probe.done())

    execute(main, workers=workers)
    assert not ledger.problems, ledger.problems[:5]
    assert ledger.received == ledger.sent
    for worker in range(workers):
        times = delivered[worker]
        assert times == sorted(set(times)), f"worker {worker} delivered {times}"
        assert set(times) == requested[worker]
    all_requested = set().union(*requested.values())
    assert all_requested == set(range(epochs + 2))
    totals: Counter = Counter()
    for time, count in counted:
        totals[time] += count
    assert {t: c for t, c in totals.items() if c} == dict(ledger.sent)


@pytest.mark.parametrize("already_requested", [False, True], ids=["fresh", "already-requested"])
def test_same_capability_requested_twice_gives_one_notification(already_requested):
    """Passing one capability to notify_at twice is one request, whatever was requested before.

    When the time is already pending (from another capability), the notificator drops
    the capability passed to it; passing that capability again must not turn the
    duplicate request into an error when it is harmless in the fresh case.
    """
    delivered: list[int] = []
    errors: list[BaseException] = []

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()

            def logic(input, output, notificator):
                for ref, _batch in input:
                    if already_requested:
                        notificator.notify_at(ref.retain())
                    capability = ref.retain()
                    try:
                        notificator.notify_at(capability)
                        notificator.notify_at(capability)
                    except Exception as error:  # noqa: BLE001 - recorded for the assertion
                        errors.append(error)
                for capability in notificator:
                    delivered.append(capability.time)

            out = stream.unary_notify(Pipeline, "Twice", logic)
            return handle, out.probe()

        handle, probe = worker.dataflow(build)
        handle.advance_to(4)
        handle.send("x")
        handle.advance_to(5)
        worker.step_while(lambda: probe.less_than(5))

    execute(main)
    assert errors == []
    assert delivered == [4]


@pytest.mark.parametrize("nested", [False, True], ids=["top-level", "in-iterative"])
@pytest.mark.parametrize("workers", WORKERS)
def test_broadcast_notifications_wait_for_every_copy(workers, nested):
    """With a Broadcast input every worker gets every record: each notification at ``t``
    must find all records sent at times ``<= t`` by all workers received on *this* worker."""
    ledger = Ledger()
    delivered: dict[int, list] = defaultdict(list)

    def main(worker):
        me = worker.index
        received: Counter = Counter()

        def epoch_of(time):
            return time.outer if nested else time

        def logic(input, output, notificator):
            for ref, batch in input:
                received[epoch_of(ref.time)] += len(batch)
                notificator.notify_at(ref.retain())
            for capability in notificator:
                epoch = epoch_of(capability.time)
                delivered[me].append(epoch)
                with ledger.lock:
                    for at, count in ledger.sent.items():
                        if at <= epoch and received[at] != count:
                            ledger.problems.append(
                                f"worker {me} notified at {epoch} with {received[at]} of {count} records at {at}"
                            )

        def build(scope):
            handle, stream = scope.new_input()
            if nested:
                out = scope.iterative(
                    lambda loop: stream.enter(loop).unary_notify(Broadcast, "EveryCopy", logic).leave()
                )
            else:
                out = stream.unary_notify(Broadcast, "EveryCopy", logic)
            return handle, out.probe()

        handle, probe = worker.dataflow(build)
        for epoch in range(6):
            records = list(range(epoch % 3 + 1))
            ledger.send(epoch, len(records))
            handle.send_batch(records)
            handle.advance_to(epoch + 1)
            if epoch % 2:
                worker.step_while(lambda epoch=epoch: probe.less_than(epoch + 1))
        return dict(received)

    results = execute(main, workers=workers)
    assert not ledger.problems, ledger.problems[:5]
    for received in results:
        assert received == dict(ledger.sent)
    for worker in range(workers):
        assert delivered[worker] == list(range(6))


def test_notifications_wait_for_the_frontier_and_come_in_order():
    """Initial requests (5, 2, 9, 2) are delivered as 2, 5, 9, each only once the input passes it."""
    delivered: list[int] = []

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()

            def logic(input, output, notificator):
                for _ref, _batch in input:
                    pass
                for capability in notificator:
                    delivered.append(capability.time)

            out = stream.unary_notify(Pipeline, "Initial", logic, notify_at=[5, 2, 9, 2])
            return handle, out.probe()

        handle, probe = worker.dataflow(build)
        worker.step_while(lambda: probe.less_than(0))
        for _ in range(20):
            worker.step()
        assert delivered == []
        handle.advance_to(3)
        worker.step_while(lambda: probe.less_than(3))
        assert delivered == [2]
        handle.advance_to(5)
        worker.step_while(lambda: probe.less_than(5))
        for _ in range(20):
            worker.step()
        assert delivered == [2], "time 5 was delivered while the input could still send at 5"
        handle.advance_to(9)
        worker.step_while(lambda: probe.less_than(9))
        assert delivered == [2, 5]
        handle.close()
        worker.step_while(lambda: not probe.done())
        assert delivered == [2, 5, 9]

    execute(main)
    assert delivered == [2, 5, 9]


@pytest.mark.parametrize("workers", [1, 2])
def test_binary_notify_waits_for_both_inputs(workers):
    """A notification at 3 needs both inputs past 3; the lagging input holds it back."""
    ledger = Ledger()
    delivered: list[tuple[int, int]] = []
    lock = threading.Lock()

    def main(worker):
        def build(scope):
            fast_handle, fast = scope.new_input("Fast")
            slow_handle, slow = scope.new_input("Slow")

            def logic(left, right, output, notificator):
                for ref, batch in left:
                    ledger.receive(("fast", ref.time), len(batch))
                    notificator.notify_at(ref.retain())
                for ref, batch in right:
                    ledger.receive(("slow", ref.time), len(batch))
                for capability in notificator:
                    with lock:
                        delivered.append((worker.index, capability.time))
                    with ledger.lock:
                        if ledger.received[("slow", 3)] != ledger.sent[("slow", 3)]:
                            ledger.problems.append("notified at 3 before the slow input's records")

            out = fast.binary_notify(slow, Exchange(lambda x: x), Exchange(lambda x: x), "Both", logic)
            return fast_handle, slow_handle, out.probe()

        fast_handle, slow_handle, probe = worker.dataflow(build)
        fast_handle.advance_to(3)
        fast_handle.send(worker.index)
        ledger.send(("fast", 3), 1)
        fast_handle.advance_to(10)
        slow_handle.advance_to(3)
        for _ in range(50):
            worker.step()
        with lock:
            early = list(delivered)
        slow_handle.send_batch([10 + worker.index, 20 + worker.index])
        ledger.send(("slow", 3), 2)
        slow_handle.advance_to(4)
        worker.step_while(lambda: probe.less_than(4))
        return early

    results = execute(main, workers=workers)
    assert all(early == [] for early in results), results
    assert not ledger.problems
    # each worker that received a fast record at 3 is notified exactly once at 3
    receivers = {(w, 3) for w in range(workers)} & set(delivered)
    assert sorted(delivered) == sorted(receivers) and delivered


# ---------------------------------------------------------------------------- loops


def rounds(value: int) -> int:
    """How many loop iterations a record makes (1 to 4)."""
    return value % 4 + 1


@pytest.mark.parametrize("workers", WORKERS)
def test_notifications_in_an_iterative_scope(workers):
    """A notifying operator on the loop path counts records per (epoch, iteration).

    It forwards records, so its own pending notifications hold back the loop; each
    notification must see the complete count, known in advance from the inputs.
    """
    epochs = 3
    per_worker = 12
    expected: Counter = Counter()
    for epoch in range(epochs):
        for worker in range(workers):
            for k in range(per_worker):
                value = epoch * 1000 + worker * 100 + k
                for iteration in range(rounds(value)):
                    expected[Product(epoch, iteration)] += 1
    ledger = Ledger()
    delivered: dict[int, list] = defaultdict(list)
    outputs: list[int] = []

    def main(worker):
        me = worker.index

        def build(scope):
            handle, stream = scope.new_input()

            def body(loop):
                feedback_handle, feedback = loop.loop_variable(1)
                current = stream.enter(loop).concat(feedback)

                invocations = [0]

                def logic(input, output, notificator):
                    invocations[0] += 1
                    for ref, batch in input:
                        ledger.receive(ref.time, len(batch))
                        for value, iteration in batch:
                            if iteration != ref.time.inner:
                                ledger.problems.append(f"{value} at {ref.time!r} says {iteration}")
                        notificator.notify_at(ref.retain())
                        output.session(ref).give_batch(batch)
                    for capability in notificator:
                        delivered[me].append((invocations[0], capability.time))
                        ledger.check_complete(me, capability.time, expected)

                counted = current.unary_notify(Exchange(lambda r: r[0]), "LoopCounter", logic)
                stepped = counted.map(lambda r: (r[0], r[1] + 1))
                again, done = stepped.branch(lambda r: r[1] >= rounds(r[0]))
                again.connect_loop(feedback_handle)
                return done.leave()

            done = scope.iterative(body)
            done.inspect(lambda r: outputs.append(r[0]))
            return handle, done.probe()

        handle, probe = worker.dataflow(build)
        for epoch in range(epochs):
            handle.send_batch([(epoch * 1000 + me * 100 + k, 0) for k in range(per_worker)])
            handle.advance_to(epoch + 1)
            worker.step_while(lambda epoch=epoch: probe.less_than(epoch + 1))

    execute(main, workers=workers)
    assert not ledger.problems, ledger.problems[:5]
    assert ledger.received == expected
    notified = {t for deliveries in delivered.values() for _, t in deliveries}
    assert notified == set(expected)
    for worker, deliveries in delivered.items():
        check_delivery_order(worker, deliveries)
    assert sorted(outputs) == sorted(
        e * 1000 + w * 100 + k for e in range(epochs) for w in range(workers) for k in range(per_worker)
    )


def outer_rounds(value: int) -> int:
    return value % 3 + 1


def inner_rounds(value: int) -> int:
    return value % 4 + 1


@pytest.mark.parametrize("workers", WORKERS)
def test_notifications_in_a_loop_nested_in_a_loop(workers):
    """An operator in the inner loop counts records per ``Product(Product(epoch, i), j)``.

    Record ``v`` makes ``outer_rounds(v)`` outer iterations, each with
    ``inner_rounds(v)`` inner iterations; records carry ``(v, i, j)`` so the operator
    also checks that their times match.
    """
    epochs = 2
    per_worker = 10
    expected: Counter = Counter()
    values = []
    for epoch in range(epochs):
        for worker in range(workers):
            for k in range(per_worker):
                value = epoch * 1000 + worker * 100 + k
                values.append(value)
                for i in range(outer_rounds(value)):
                    for j in range(inner_rounds(value)):
                        expected[Product(Product(epoch, i), j)] += 1
    ledger = Ledger()
    delivered: dict[int, list] = defaultdict(list)
    reported: Counter = Counter()
    finished: list[int] = []
    lock = threading.Lock()

    def main(worker):
        me = worker.index

        def build(scope):
            handle, stream = scope.new_input()

            def outer_body(outer):
                outer_handle, outer_back = outer.loop_variable(1, name="OuterFeedback")
                outer_current = stream.enter(outer).concat(outer_back)

                def inner_body(inner):
                    inner_handle, inner_back = inner.loop_variable(1, name="InnerFeedback")
                    current = outer_current.enter(inner).concat(inner_back)
                    local: Counter = Counter()
                    invocations = [0]

                    def logic(input, output, notificator):
                        invocations[0] += 1
                        for ref, batch in input:
                            time = ref.time
                            ledger.receive(time, len(batch))
                            local[time] += len(batch)
                            for value, i, j in batch:
                                if (i, j) != (time.outer.inner, time.inner):
                                    ledger.problems.append(f"{(value, i, j)} arrived at {time!r}")
                            notificator.notify_at(ref.retain())
                        for capability in notificator:
                            delivered[me].append((invocations[0], capability.time))
                            ledger.check_complete(me, capability.time, expected)
                            output.session(capability).give((capability.time, local.pop(capability.time)))

                    counts = current.unary_notify(Exchange(lambda r: r[0]), "InnerCounter", logic)
                    stepped = current.map(lambda r: (r[0], r[1], r[2] + 1))
                    again, leaving = stepped.branch(lambda r: r[2] >= inner_rounds(r[0]))
                    again.connect_loop(inner_handle)
                    return leaving.leave(), counts.leave()

                leaving, counts = outer.iterative(inner_body, name="Inner")
                stepped = leaving.map(lambda r: (r[0], r[1] + 1, 0))
                again, done = stepped.branch(lambda r: r[1] >= outer_rounds(r[0]))
                again.connect_loop(outer_handle)
                return done.leave(), counts.leave()

            done, counts = scope.iterative(outer_body, name="Outer")

            def record_count(record):
                with lock:
                    reported[record[0]] += record[1]

            counts.inspect(record_count)
            done.inspect(lambda r: finished.append(r[0]))
            return handle, done.probe(), counts.probe()

        handle, probe, counts_probe = worker.dataflow(build)
        for epoch in range(epochs):
            handle.send_batch([(epoch * 1000 + me * 100 + k, 0, 0) for k in range(per_worker)])
            handle.advance_to(epoch + 1)
            worker.step_while(lambda epoch=epoch: probe.less_than(epoch + 1) or counts_probe.less_than(epoch + 1))

    execute(main, workers=workers)
    assert not ledger.problems, ledger.problems[:5]
    assert ledger.received == expected
    assert reported == expected
    notified = {t for deliveries in delivered.values() for _, t in deliveries}
    assert notified == set(expected)
    for worker, deliveries in delivered.items():
        check_delivery_order(worker, deliveries)
    assert sorted(finished) == sorted(values)
