"""Regression tests for capabilities whose lifetime crosses a session, a notificator or ``main``.

* A session holds the capability it was opened with: sending after that capability
  was dropped, or downgraded past the session's time, is refused (issue 6, bug 1).
* ``notify_at`` keeps its own capability: moving the caller's afterwards does not move
  the notification (bug 2).
* A capability dropped or downgraded outside its operator's logic (in ``main``, or by
  the garbage collector) wakes the operator, so the change is reported (bug 3).
* A time requested while the notificator is being iterated, and already complete, is
  delivered in time order with the others (bug 8).
* ``accumulate`` never shares a mutable initial value between times (bug 6).
"""

from __future__ import annotations

import re
import time

import pytest

from runtime import WorkerFailed, execute
from runtime.testing import assert_outputs, run_dataflow
from scopes import CapabilityError, Pipeline
from scopes.errors import OperatorFailed

WORKERS = [1, 3]


def operator_error(failed: BaseException) -> BaseException:
    """The error raised inside the operator, found under WorkerFailed and OperatorFailed."""
    cause = failed.__cause__
    while isinstance(cause, (WorkerFailed, OperatorFailed)):
        cause = cause.__cause__
    assert cause is not None, "the failure must chain the original error"
    return cause


def has_time(message: str, value: object) -> bool:
    """Whether ``message`` mentions ``time <value>`` as a whole token."""
    return re.search(rf"\btime {re.escape(repr(value))}(?![\w)])", message) is not None


def run_unary(name: str, on_message, later=None, send_time: int = 7):
    """Records at ``send_time`` and then ``send_time + 1`` through a unary operator.

    ``on_message(ref, output, state)`` runs for the first message; ``later(output,
    state)`` runs at the start of every later invocation (the second message
    arrives after a few steps, so there is one).  Returns the error the operator
    raised, if any.
    """

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()

            def constructor(capability, info):
                capability.drop()
                state: dict = {}

                def logic(input, output):
                    if state.get("seen") and later is not None:
                        later(output, state)
                    for ref, _batch in input:
                        if not state.get("seen"):
                            state["seen"] = True
                            on_message(ref, output, state)

                return logic

            stream.unary(Pipeline, name, constructor).probe()
            return handle

        handle = worker.dataflow(build)
        handle.advance_to(send_time)
        handle.send("x")
        handle.flush()
        for _ in range(5):
            worker.step()
        handle.advance_to(send_time + 1)
        handle.send("y")

    try:
        execute(main, stall_timeout=5)
    except WorkerFailed as failed:
        return operator_error(failed)
    return None


# ---------------------------------------------------------------------------- bug 1: sessions


def test_give_after_the_session_capability_was_dropped_is_refused():
    def on_message(ref, output, state):
        capability = ref.retain()
        session = output.session(capability)
        session.give("in time")
        capability.drop()
        session.give("after the drop")

    error = run_unary("DropThenGive", on_message)
    assert isinstance(error, CapabilityError), error
    message = str(error)
    assert "'DropThenGive'" in message and "output 0" in message, message
    assert has_time(message, 7) and "dropped" in message, message


def test_give_batch_after_the_session_capability_was_dropped_is_refused():
    def on_message(ref, output, state):
        capability = ref.retain()
        session = output.session(capability)
        capability.drop()
        session.give_batch(["a", "b"])

    error = run_unary("DropThenGiveBatch", on_message)
    assert isinstance(error, CapabilityError), error
    assert "'DropThenGiveBatch'" in str(error) and "dropped" in str(error)


def test_give_after_downgrading_past_the_session_time_is_refused():
    def on_message(ref, output, state):
        capability = ref.retain()
        session = output.session(capability)
        capability.downgrade(9)
        session.give("at 7, but the capability is at 9 now")

    error = run_unary("DowngradeThenGive", on_message)
    assert isinstance(error, CapabilityError), error
    message = str(error)
    assert "'DowngradeThenGive'" in message and "output 0" in message, message
    assert has_time(message, 7) and has_time(message, 9) and "downgraded" in message, message


def test_downgrading_within_the_session_time_keeps_the_session_usable():
    def build(scope, stream):
        def constructor(capability, info):
            capability.drop()

            def logic(input, output):
                for ref, _batch in input:
                    capability = ref.retain()
                    session = output.session(capability, time=9)
                    session.give("before")
                    capability.downgrade(8)  # still at or before 9
                    session.give("after")
                    capability.drop()

            return logic

        return stream.unary(Pipeline, "Within", constructor)

    assert_outputs(run_dataflow(build, {7: ["x"]}, stall_timeout=5), {9: ["before", "after"]})


def test_session_over_a_capability_ref_is_refused_after_its_invocation():
    def on_message(ref, output, state):
        state["session"] = output.session(ref)

    def later(output, state):
        if "session" in state:
            state.pop("session").give("too late")

    error = run_unary("StaleSession", on_message, later)
    assert isinstance(error, CapabilityError), error
    message = str(error)
    assert "'StaleSession'" in message and has_time(message, 7) and "retain" in message, message


# ---------------------------------------------------------------------------- bug 2: notify_at copies


@pytest.mark.parametrize("workers", WORKERS)
def test_notify_at_is_not_moved_by_downgrading_the_callers_capability(workers):
    delivered: dict[int, list] = {}

    def main(worker):
        mine: list = []
        log: list = delivered.setdefault(worker.index, [])

        def build(scope):
            handle, stream = scope.new_input()

            def logic(input, output, notificator):
                for ref, _batch in input:
                    capability = ref.retain()
                    notificator.notify_at(capability)
                    capability.downgrade(5)  # the caller moves its own capability on
                    mine.append(capability)
                for capability in notificator:
                    log.append((capability.time, input.frontier.less_equal(capability.time)))
                    while mine:
                        mine.pop().drop()

            out = stream.unary_notify(Pipeline, "Aliased", logic)
            return handle, out.probe()

        handle, probe = worker.dataflow(build)
        handle.advance_to(1)
        handle.send("x")
        handle.flush()
        for _ in range(20):
            worker.step()
        early = list(log)
        handle.advance_to(2)
        deadline = time.monotonic() + 10
        while probe.less_than(2):
            assert time.monotonic() < deadline, "the probe never passed time 2"
            worker.step()
        return early

    results = execute(main, workers=workers, stall_timeout=5)
    assert all(early == [] for early in results), f"notified while the input frontier was [1]: {results}"
    for index in range(workers):
        assert delivered[index] == [(1, False)], delivered


def test_notify_at_does_not_drop_the_callers_capability():
    """The caller's capability stays the caller's: the notificator delivers and drops its own."""
    states: list = []

    def main(worker):
        mine: list = []

        def build(scope):
            handle, stream = scope.new_input()

            def logic(input, output, notificator):
                for ref, _batch in input:
                    capability = ref.retain()
                    notificator.notify_at(capability)
                    mine.append(capability)
                delivered = False
                for _capability in notificator:
                    delivered = True
                if delivered:
                    states.append(mine[0].valid)  # after the notificator dropped its own
                    output.session(mine[0]).give("sent under the caller's capability")
                    mine.pop().drop()

            out = stream.unary_notify(Pipeline, "Keeps", logic)
            return handle, out.probe()

        handle, probe = worker.dataflow(build)
        handle.advance_to(3)
        handle.send("x")
        handle.advance_to(4)
        worker.step_while(lambda: probe.less_than(4))

    execute(main, stall_timeout=5)
    assert states == [True]


# ---------------------------------------------------------------------------- bug 3: changes outside the logic


def handoff_dataflow(worker, held: list):
    """A source that hands its capability to ``main`` and never runs anything itself."""

    def build(scope):
        def constructor(capability, info):
            held.append(capability)
            return lambda output: None

        return scope.source("Handoff", constructor).probe()

    return worker.dataflow(build)


def wait_for(worker, condition, what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {seconds}s"
        worker.step()


@pytest.mark.parametrize("workers", WORKERS)
def test_capability_dropped_by_main_between_steps_completes_the_probe(workers):
    def main(worker):
        held: list = []
        probe = handoff_dataflow(worker, held)
        for _ in range(5):
            worker.step()
        assert probe.less_equal(0), "the source still holds time 0"
        held.pop().drop()
        wait_for(worker, probe.done, "the probe seeing the dropped capability")
        return True

    assert execute(main, workers=workers, stall_timeout=2) == [True] * workers


@pytest.mark.parametrize("workers", WORKERS)
def test_capability_downgraded_by_main_between_steps_moves_the_probe(workers):
    def main(worker):
        held: list = []
        probe = handoff_dataflow(worker, held)
        for _ in range(5):
            worker.step()
        held[0].downgrade(3)
        wait_for(worker, lambda: probe.less_than(3) is False, "the probe reaching time 3")
        assert probe.frontier().elements == (3,)
        held.pop().drop()
        wait_for(worker, probe.done, "the probe completing")
        return True

    assert execute(main, workers=workers, stall_timeout=2) == [True] * workers


def test_capability_released_by_garbage_collection_completes_the_probe():
    def main(worker):
        held: list = []
        probe = handoff_dataflow(worker, held)
        for _ in range(5):
            worker.step()
        held.clear()  # the last reference goes: __del__ drops the capability
        wait_for(worker, probe.done, "the probe seeing the collected capability")
        return True

    assert execute(main, stall_timeout=2) == [True]


def test_capability_of_one_operator_dropped_in_another_wakes_its_owner():
    """A unary operator hands its capability to a second, which drops it when it sees data."""
    shared: list = []

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()

            def keeper(capability, info):
                shared.append(capability)

                def logic(input, output):
                    for _ref, _batch in input:
                        pass

                return logic

            kept = stream.unary(Pipeline, "Keeper", keeper)

            def dropper(capability, info):
                capability.drop()

                def logic(input, output):
                    for _ref, _batch in input:
                        while shared:
                            shared.pop().drop()

                return logic

            stream.unary(Pipeline, "Dropper", dropper).probe()
            return handle, kept.probe()

        handle, kept_probe = worker.dataflow(build)
        handle.send("go")
        handle.flush()
        wait_for(worker, lambda: not shared, "the dropper running")
        handle.close()
        wait_for(worker, kept_probe.done, "the keeper's output completing")
        return True

    assert execute(main, stall_timeout=2) == [True]


# ---------------------------------------------------------------------------- bug 8: notification order


@pytest.mark.parametrize("workers", WORKERS)
def test_time_requested_during_delivery_comes_in_time_order(workers):
    orders: dict[int, list] = {}

    def main(worker):
        order: list = orders.setdefault(worker.index, [])

        def build(scope):
            handle, stream = scope.new_input()

            def logic(input, output, notificator):
                for _ref, _batch in input:
                    pass
                for capability in notificator:
                    order.append(capability.time)
                    if capability.time == 3:
                        notificator.notify_at(capability.delayed(4))  # complete already

            out = stream.unary_notify(Pipeline, "Ordered", logic, notify_at=[3, 5])
            return handle, out.probe()

        handle, probe = worker.dataflow(build)
        handle.advance_to(10)
        worker.step_while(lambda: probe.less_than(10))

    execute(main, workers=workers, stall_timeout=5)
    assert all(order == [3, 4, 5] for order in orders.values()), orders


def test_notificator_iteration_delivers_requests_made_for_the_last_ready_time():
    orders: list = []

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()

            def logic(input, output, notificator):
                for _ref, _batch in input:
                    pass
                round_: list = []
                for capability in notificator:
                    round_.append(capability.time)
                    if capability.time == 5:
                        notificator.notify_at(capability.delayed(6))
                if round_:
                    orders.append(round_)

            out = stream.unary_notify(Pipeline, "Chained", logic, notify_at=[3, 5])
            return handle, out.probe()

        handle, probe = worker.dataflow(build)
        handle.advance_to(10)
        worker.step_while(lambda: probe.less_than(10))

    execute(main, stall_timeout=5)
    assert orders == [[3, 5, 6]]


# ---------------------------------------------------------------------------- bug 6: accumulate


@pytest.mark.parametrize("workers", [1, 2])
def test_accumulate_does_not_share_a_mutable_initial_value_between_times(workers):
    results: list = []

    def fold(state, word):
        counts = state["counts"]
        counts[word] = counts.get(word, 0) + 1
        return state

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()
            totals = stream.exchange(lambda w: 0).accumulate({"counts": {}}, fold)
            totals.inspect_batch(lambda t, batch: results.extend((t, b) for b in batch))
            return handle

        handle = worker.dataflow(build)
        if worker.index == 0:
            handle.send_batch(["a", "b", "a"])
            handle.advance_to(1)
            handle.send_batch(["c"])
            handle.advance_to(2)

    execute(main, workers=workers, stall_timeout=5)
    # one worker (worker 0, where exchange sends everything) emits a value per time;
    # the others emit nothing, since no records of theirs reach them.
    by_time = {t: value for t, value in results if value["counts"]}
    assert by_time == {0: {"counts": {"a": 2, "b": 1}}, 1: {"counts": {"c": 1}}}
