"""Misuse of the dataflow API gets a clear error naming the operator, the port and the times.

Errors raised inside operator logic reach the caller of :func:`runtime.execute` as
:class:`runtime.WorkerFailed`, whose ``__cause__`` is the original error; the tests check
both the original error's type and message and that the ``WorkerFailed`` message carries
the same details.  Errors raised while building (or by input handles) are raised where
the misuse happens.
"""

from __future__ import annotations

import re
import threading
import time

import pytest

from runtime import ConfigurationError, WorkerFailed, execute
from scopes import (
    BuildError,
    CapabilityError,
    CycleError,
    IntegerSummary,
    Pipeline,
    ProductSummary,
    ScopeError,
    TimestampError,
)
from scopes.errors import BatchError, OperatorFailed
from scopes.location import Source, Target
from scopes.operator_builder import OperatorBuilder
from scopes.reachability import TrackerBuilder
from scopes.stream import generic
from scopes.timestamp import INTEGER

# ---------------------------------------------------------------------------- helpers


def has_time(message: str, value: object) -> bool:
    """Whether ``message`` mentions ``time <value>`` as a whole token."""
    return re.search(rf"\btime {re.escape(repr(value))}(?![\w)])", message) is not None


def user_error(failed: BaseException) -> BaseException:
    """The error raised inside the operator, under the OperatorFailed that reports where."""
    cause = failed.__cause__
    assert cause is not None, "WorkerFailed must chain the original error"
    if isinstance(cause, OperatorFailed):
        cause = cause.__cause__
        assert cause is not None, "OperatorFailed must chain the original error"
    return cause


def run_failing(main, workers: int = 1) -> tuple[WorkerFailed, BaseException]:
    """Run ``main`` expecting a WorkerFailed; return it and the error raised inside the operator."""
    with pytest.raises(WorkerFailed) as excinfo:
        execute(main, workers=workers)
    failed = excinfo.value
    return failed, user_error(failed)


def run_with_timeout(main, workers: int, timeout: float = 20.0) -> BaseException | None:
    """Run ``execute`` in a thread; fail the test if it does not return within ``timeout``."""
    outcome: dict[str, BaseException | None] = {"error": None}

    def target() -> None:
        try:
            execute(main, workers=workers)
        except BaseException as error:  # noqa: BLE001 - inspected by the test
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"execute did not return within {timeout}s: some worker hangs"
    return outcome["error"]


def single_message_operator(name: str, on_message, send_time: int = 7):
    """A dataflow with one input sending one record at ``send_time`` into a unary operator.

    ``on_message(ref, output)`` runs for that message.
    """

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()

            def constructor(capability, info):
                capability.drop()

                def logic(input, output):
                    for ref, _batch in input:
                        on_message(ref, output)

                return logic

            stream.unary(Pipeline, name, constructor).probe()
            return handle

        handle = worker.dataflow(build)
        handle.advance_to(send_time)
        handle.send("record")

    return main


# ---------------------------------------------------------------------------- capabilities


def test_send_at_time_earlier_than_held_capability():
    def on_message(ref, output):
        capability = ref.retain()
        output.session(capability, time=3).give("early")

    failed, cause = run_failing(single_message_operator("EarlySender", on_message))
    assert isinstance(cause, CapabilityError)
    message = str(cause)
    assert "'EarlySender'" in message
    assert "output 0" in message
    assert has_time(message, 3) and has_time(message, 7), message
    assert "EarlySender" in str(failed) and has_time(str(failed), 3)


def test_send_at_time_earlier_than_capability_ref():
    def on_message(ref, output):
        output.session(ref, time=2).give("early")

    _, cause = run_failing(single_message_operator("EarlyRef", on_message))
    assert isinstance(cause, CapabilityError)
    message = str(cause)
    assert "'EarlyRef'" in message and "output 0" in message
    assert has_time(message, 2) and has_time(message, 7), message


def test_downgrade_to_earlier_time():
    def on_message(ref, output):
        capability = ref.retain()
        capability.downgrade(4)

    _, cause = run_failing(single_message_operator("Downgrader", on_message))
    assert isinstance(cause, CapabilityError)
    message = str(cause)
    assert "'Downgrader'" in message and "output 0" in message
    assert has_time(message, 7) and has_time(message, 4), message
    assert "downgrade" in message


def test_delay_capability_to_earlier_time():
    def on_message(ref, output):
        capability = ref.retain()
        capability.delayed(5)

    _, cause = run_failing(single_message_operator("Delayer", on_message))
    assert isinstance(cause, CapabilityError)
    message = str(cause)
    assert "'Delayer'" in message and "output 0" in message
    assert has_time(message, 7) and has_time(message, 5), message
    assert "delay" in message


def test_delay_capability_ref_to_earlier_time():
    def on_message(ref, output):
        ref.delayed(1)

    _, cause = run_failing(single_message_operator("RefDelayer", on_message))
    assert isinstance(cause, CapabilityError)
    message = str(cause)
    assert "'RefDelayer'" in message and "output 0" in message
    assert has_time(message, 7) and has_time(message, 1), message


def test_capability_of_another_output():
    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()

            def constructor(capabilities, info):
                held = list(capabilities)

                def logic(inputs, outputs):
                    for _ref, _batch in inputs[0]:
                        pass
                    if held:
                        # capability of output 0 used on output 1
                        outputs[1].session(held[0]).give("wrong output")

                return logic

            out0, out1 = generic(scope, "TwoOutputs", [(stream, Pipeline)], 2, constructor)
            out0.probe()
            out1.probe()
            return handle

        worker.dataflow(build)

    _, cause = run_failing(main)
    assert isinstance(cause, CapabilityError)
    message = str(cause)
    assert "'TwoOutputs'" in message
    assert "output 1" in message and "output 0" in message
    assert has_time(message, 0), message


def test_capability_of_another_operator_is_named_in_the_error():
    """A capability of operator A used on operator B's output: the error must say it is A's.

    Both operators have one output (port 0), so a message that only compares port
    numbers ("belongs to output 0; use a capability of output 0") names neither the
    owner nor the mistake.
    """
    stash: dict[str, object] = {}

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()

            def constructor_a(capability, info):
                stash["a"] = capability

                def logic(input, output):
                    for _ref, _batch in input:
                        pass

                return logic

            def constructor_b(capability, info):
                capability.drop()

                def logic(input, output):
                    for _ref, _batch in input:
                        pass
                    if "a" in stash:
                        output.session(stash["a"]).give("stolen")

                return logic

            stream.unary_frontier(Pipeline, "OwnerA", constructor_a).unary_frontier(
                Pipeline, "ThiefB", constructor_b
            ).probe()
            return handle

        worker.dataflow(build)

    _, cause = run_failing(main)
    assert isinstance(cause, CapabilityError)
    message = str(cause)
    assert "'ThiefB'" in message and "output 0" in message and has_time(message, 0)
    assert "OwnerA" in message, f"the error does not say whose capability it is: {message}"


def test_send_with_dropped_capability():
    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()

            def constructor(capability, info):
                def logic(input, output):
                    for ref, _batch in input:
                        capability_at = ref.retain()
                        capability_at.drop()
                        output.session(capability_at).give("too late")

                capability.drop()
                return logic

            stream.unary(Pipeline, "DropThenSend", constructor).probe()
            return handle

        handle = worker.dataflow(build)
        handle.advance_to(6)
        handle.send(1)

    _, cause = run_failing(main)
    assert isinstance(cause, CapabilityError)
    message = str(cause)
    assert "'DropThenSend'" in message and "output 0" in message
    assert has_time(message, 6) and "dropped" in message


def test_send_with_initial_capability_after_dropping_it():
    def main(worker):
        def build(scope):
            def constructor(capability, info):
                def logic(output):
                    capability.drop()
                    output.give(capability, "after drop")

                return logic

            scope.source("DroppedSource", constructor).probe()

        worker.dataflow(build)

    _, cause = run_failing(main)
    assert isinstance(cause, CapabilityError)
    message = str(cause)
    assert "'DroppedSource'" in message and "output 0" in message
    assert has_time(message, 0) and "dropped" in message


def test_notify_at_with_dropped_capability():
    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()

            def logic(input, output, notificator):
                for ref, _batch in input:
                    capability = ref.retain()
                    capability.drop()
                    notificator.notify_at(capability)

            stream.unary_notify(Pipeline, "LateNotify", logic).probe()
            return handle

        handle = worker.dataflow(build)
        handle.advance_to(9)
        handle.send(1)

    _, cause = run_failing(main)
    assert isinstance(cause, CapabilityError)
    message = str(cause)
    assert "'LateNotify'" in message and has_time(message, 9) and "dropped" in message


def test_retaining_capability_ref_after_its_invocation():
    stale: list = []
    errors: list[BaseException] = []

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()

            def constructor(capability, info):
                capability.drop()

                def logic(input, output):
                    fresh = False
                    for ref, _batch in input:
                        stale.append(ref)
                        fresh = True
                    if stale and not fresh:
                        # a later invocation: the ref kept from the earlier one is stale
                        for action in (
                            lambda: stale[0].retain(),
                            lambda: stale[0].delayed(50),
                            lambda: output.session(stale[0]).give("stale"),
                        ):
                            try:
                                action()
                            except CapabilityError as error:
                                errors.append(error)
                        stale.clear()

                return logic

            stream.unary_frontier(Pipeline, "Hoarder", constructor).probe()
            return handle

        handle = worker.dataflow(build)
        handle.advance_to(4)
        handle.send(1)
        worker.step_while(lambda: not stale)
        handle.advance_to(5)  # a frontier change runs the operator again, without data

    execute(main)
    assert len(errors) == 3, errors
    for error in errors:
        message = str(error)
        assert "'Hoarder'" in message, message
        assert "input 0" in message, message
        assert has_time(message, 4), message


def test_capability_ref_for_unconnected_output():
    """An input that the declared summary does not connect to an output gives no capability there."""

    def main(worker):
        def build(scope):
            data_in, data = scope.new_input("Data")
            side_in, side = scope.new_input("Side")

            def constructor(capabilities, info):
                for capability in capabilities:
                    capability.drop()

                def logic(inputs, outputs):
                    for ref, _batch in inputs[1]:
                        outputs[0].session(ref).give("not allowed")
                    for _ref, _batch in inputs[0]:
                        pass

                return logic

            (out,) = generic(
                scope,
                "Disconnected",
                [(data, Pipeline), (side, Pipeline)],
                1,
                constructor,
                summary={(0, 0): [IntegerSummary()]},
            )
            out.probe()
            return side_in

        side_in = worker.dataflow(build)
        side_in.advance_to(3)
        side_in.send(1)

    _, cause = run_failing(main)
    assert isinstance(cause, CapabilityError)
    message = str(cause)
    assert "'Disconnected'" in message and "input 1" in message and "output 0" in message
    assert has_time(message, 3), message


@pytest.mark.parametrize("bad", ["later", 2**70, -1], ids=["str", "above-uint64", "negative"])
def test_send_at_a_value_that_is_not_a_timestamp(bad):
    """Sending at a time that is not a timestamp of the scope's type must be refused clearly."""

    def main(worker):
        def build(scope):
            def constructor(capability, info):
                held = [capability]

                def logic(output):
                    if held:
                        output.session(held[0], time=bad).give("bad time")
                        held.pop().drop()

                return logic

            scope.source("BadTimeSource", constructor).probe()

        worker.dataflow(build)

    with pytest.raises(WorkerFailed, match=None) as excinfo:
        execute(main)
    cause = user_error(excinfo.value)
    assert isinstance(cause, ScopeError), f"sending at {bad!r} raised {type(cause).__name__}: {cause}"
    message = str(cause)
    assert "'BadTimeSource'" in message and "output 0" in message, message
    assert repr(bad) in message, message


# ---------------------------------------------------------------------------- input handles


def test_input_advance_to_backwards():
    def main(worker):
        handle = worker.dataflow(lambda scope: scope.new_input("Numbers")[0])
        handle.advance_to(5)
        try:
            handle.advance_to(2)
        except TimestampError as error:
            assert handle.time == 5
            return error
        return None

    (error,) = execute(main)
    assert isinstance(error, TimestampError)
    message = str(error)
    assert "'Numbers'" in message
    assert has_time(message, 2) and has_time(message, 5), message


@pytest.mark.parametrize("value", ["3", 1.5, -1, 2**64, True, None])
def test_input_advance_to_non_timestamp(value):
    def main(worker):
        handle = worker.dataflow(lambda scope: scope.new_input("Typed")[0])
        try:
            handle.advance_to(value)
        except TimestampError as error:
            assert handle.time == 0
            return error
        return None

    (error,) = execute(main)
    assert isinstance(error, TimestampError), f"advance_to({value!r}) was accepted"
    message = str(error)
    assert "'Typed'" in message and repr(value) in message, message


def test_send_on_closed_input():
    def main(worker):
        handle = worker.dataflow(lambda scope: scope.new_input("Shut")[0])
        handle.close()
        errors = []
        for action in (lambda: handle.send(1), lambda: handle.send_batch([1, 2]), lambda: handle.advance_to(3)):
            try:
                action()
            except ScopeError as error:
                errors.append(error)
        return errors

    (errors,) = execute(main)
    assert len(errors) == 3
    for error in errors:
        assert "'Shut'" in str(error) and "closed" in str(error)


@pytest.mark.parametrize("workers", [1, 2])
def test_send_batch_of_something_that_is_not_iterable(workers):
    """``send_batch(5)`` failed with a bare ``TypeError: 'int' object is not iterable`` from the input's buffer,
    naming no input; it is now a ``BatchError`` naming the input and the value, and the input still works."""

    def main(worker):
        handle = worker.dataflow(lambda scope: scope.new_input("Counts")[0])
        try:
            handle.send_batch(5)
        except BatchError as error:
            handle.send_batch([1, 2])
            return str(error)
        return None

    for message in execute(main, workers=workers):
        assert message is not None and "'Counts'" in message and "not a value of type int (5)" in message, message
        assert "send(record)" in message, message


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(("text", "unit"), [("abc", "character"), (b"abc", "byte"), (bytearray(b"ab"), "byte")])
def test_send_batch_of_a_string_is_refused(workers, text, unit):
    """``send_batch("abc")`` sent three records, "a", "b" and "c" (a string is iterable): a plausible wrong
    answer.  It is refused, naming the input, the value and the time, and the input still works."""

    def main(worker):
        seen = []

        def build(scope):
            handle, stream = scope.new_input("Lines")
            stream.inspect(seen.append)
            return handle

        handle = worker.dataflow(build)
        with pytest.raises(BatchError) as raised:
            handle.send_batch(text)
        handle.send_batch([text])
        handle.close()
        worker.step_while(lambda: not seen)
        return str(raised.value), seen

    for message, seen in execute(main, workers=workers):
        assert "'Lines'" in message and repr(text)[:20] in message and "time 0" in message, message
        assert f"each {unit}" in message and "send(value)" in message, message
        assert seen == [text]


@pytest.mark.parametrize("text", ["line", b"line"])
def test_give_batch_of_a_string_is_refused(text):
    """An operator's ``give_batch("line")`` would send one record per character; refused, naming the operator's
    output and the time."""

    def on_message(ref, output):
        output.session(ref).give_batch(text)

    failed, error = run_failing(single_message_operator("Emit", on_message))
    assert isinstance(error, BatchError), error
    message = str(error)
    assert "operator 'Emit' output 0: give_batch" in message and "time 7" in message, message
    assert "give(value)" in message, message


def test_send_batch_keeps_the_type_error_of_the_records_own_iteration():
    def records():
        yield 1
        raise TypeError("the user's own generator failed")

    def main(worker):
        handle = worker.dataflow(lambda scope: scope.new_input("Generated")[0])
        with pytest.raises(TypeError, match="the user's own generator failed"):
            handle.send_batch(records())

    execute(main)


# ---------------------------------------------------------------------------- stream operators


def test_delay_moving_records_backwards():
    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()
            stream.delay(lambda record, t: t - 2, name="BackDelay").probe()
            return handle

        handle = worker.dataflow(build)
        handle.advance_to(8)
        handle.send("r")

    failed, cause = run_failing(main)
    assert isinstance(cause, CapabilityError)
    message = str(cause)
    assert "'BackDelay'" in message and "output 0" in message
    assert has_time(message, 8) and has_time(message, 6), message
    assert "BackDelay" in str(failed)


def float_after_an_int_delay(scope, numbers):
    return numbers.delay(lambda n, t: t + 1 if n % 2 else float(t + 1), name="FloatDelay")


@pytest.mark.parametrize("workers", [1, 2])
def test_delay_to_a_float_time_is_refused_even_after_an_equal_integer_time(workers):
    """A float time equal to one an earlier record of the message went to (1.0 after 1) was found among the
    groups and taken unchecked: on 1 worker, whose message held both records, the run passed; on 2, it failed."""
    from runtime.testing import run_dataflow

    with pytest.raises(WorkerFailed, match="'FloatDelay'.*to time 1.0; records may only be delayed to a later"):
        run_dataflow(float_after_an_int_delay, [[1, 2]], workers=workers)


@pytest.mark.parametrize("route_value", [2, -1, True, "0"])
def test_partition_route_out_of_range(route_value):
    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()
            for part in stream.partition(2, lambda record: route_value, name="Splitter"):
                part.probe()
            return handle

        handle = worker.dataflow(build)
        handle.advance_to(4)
        handle.send("rec")

    _, cause = run_failing(main)
    assert isinstance(cause, ScopeError)
    message = str(cause)
    assert "'Splitter'" in message and repr(route_value) in message
    assert "'rec'" in message and has_time(message, 4), message


# ---------------------------------------------------------------------------- building


def test_loop_variable_never_connected():
    def main(worker):
        def build(scope):
            def body(loop):
                loop.loop_variable(1, name="Dangling")

            scope.iterative(body, name="Looping")

        try:
            worker.dataflow(build)
        except BuildError as error:
            return error
        return None

    (error,) = execute(main)
    assert isinstance(error, BuildError)
    message = str(error)
    assert "'Dangling'" in message and "'Looping'" in message and "connect" in message


@pytest.mark.parametrize(
    "summary",
    [0, IntegerSummary(0), ProductSummary(IntegerSummary(0), IntegerSummary(0))],
    ids=["int0", "IntegerSummary0", "ProductSummary-identity"],
)
def test_loop_variable_with_non_advancing_summary(summary):
    def main(worker):
        def build(scope):
            def body(loop):
                loop.loop_variable(summary, name="Stuck")

            scope.iterative(body, name="Spinning")

        try:
            worker.dataflow(build)
        except BuildError as error:
            return error
        return None

    (error,) = execute(main)
    assert isinstance(error, BuildError)
    message = str(error)
    assert "'Stuck'" in message and "'Spinning'" in message and "advance" in message


def test_loop_variable_non_advancing_at_top_level():
    def main(worker):
        try:
            worker.dataflow(lambda scope: scope.loop_variable(0, name="Flat"))
        except BuildError as error:
            return error
        return None

    (error,) = execute(main)
    assert isinstance(error, BuildError) and "'Flat'" in str(error)


def test_cycle_without_feedback_via_operator_builder():
    """An operator reading its own output through another operator, with no feedback edge."""

    def main(worker):
        def build(scope):
            head = OperatorBuilder(scope, "Head")
            _port, head_stream = head.new_output()
            body = head_stream.map(lambda x: x, name="Body")
            head.new_input(body)
            head.build(None)
            for capability in head.initial_capabilities():
                capability.drop()

        try:
            worker.dataflow(build)
        except CycleError as error:
            return error
        return None

    (error,) = execute(main)
    assert isinstance(error, CycleError)
    assert sorted(error.operators) == ["Body", "Head"]
    assert "Head" in str(error) and "Body" in str(error)


def test_cycle_without_feedback_in_reachability_builder():
    builder = TrackerBuilder(INTEGER)
    builder.add_node(1, 1, 1, name="Alpha")
    builder.add_node(2, 2, 1, {(0, 0): [IntegerSummary()], (1, 0): [IntegerSummary()]}, name="Beta")
    builder.add_node(3, 1, 1, {(0, 0): [IntegerSummary(0)]}, name="Gamma")
    builder.add_node(4, 0, 1, name="Source")
    builder.add_edge(Source(4, 0), Target(2, 0))
    builder.add_edge(Source(2, 0), Target(1, 0))
    builder.add_edge(Source(1, 0), Target(3, 0))
    builder.add_edge(Source(3, 0), Target(2, 1))
    with pytest.raises(CycleError) as excinfo:
        builder.build()
    assert sorted(excinfo.value.operators) == ["Alpha", "Beta", "Gamma"]
    for name in ("Alpha", "Beta", "Gamma"):
        assert name in str(excinfo.value)
    assert "Source" not in excinfo.value.operators


def test_cycle_with_advancing_feedback_is_accepted():
    """The same cycle through an advancing summary builds (so the CycleError above is specific)."""
    builder = TrackerBuilder(INTEGER)
    builder.add_node(1, 1, 1, name="Alpha")
    builder.add_node(2, 1, 1, {(0, 0): [IntegerSummary(1)]}, name="Feedback")
    builder.add_edge(Source(1, 0), Target(2, 0))
    builder.add_edge(Source(2, 0), Target(1, 0))
    tracker = builder.build()
    tracker.update_source(Source(1, 0), 3, 1)
    tracker.propagate_all()
    # around the loop the time advances: 3 reaches Feedback's input, 4 comes back to Alpha
    assert tracker.frontier(Target(2, 0)).elements == (3,)
    assert tracker.frontier(Target(1, 0)).elements == (4,)


def _wrong_scope_error(misuse) -> BuildError:
    """Build a dataflow with an inner scope and run ``misuse(outer_stream, inner_scope)`` in it."""

    def main(worker):
        def build(scope):
            _, outer = scope.new_input("OuterInput")

            def body(inner):
                misuse(outer, inner)

            scope.iterative(body, name="InnerScope")

        try:
            worker.dataflow(build, name="OuterFlow")
        except BuildError as error:
            return error
        return None

    (error,) = execute(main)
    assert isinstance(error, BuildError), "using a stream in the wrong scope was accepted"
    return error


def test_stream_used_in_wrong_scope_by_binary_operator():
    def misuse(outer, inner):
        outer.enter(inner).concat(outer, name="MixedConcat")

    message = str(_wrong_scope_error(misuse))
    assert "'MixedConcat'" in message and "'InnerScope'" in message and "'OuterFlow'" in message
    assert "'OuterInput'" in message


def test_stream_used_in_wrong_scope_by_generic_operator():
    def misuse(outer, inner):
        generic(inner, "MixedGeneric", [(outer, Pipeline)], 1, lambda caps, info: lambda i, o: None)

    message = str(_wrong_scope_error(misuse))
    assert "'MixedGeneric'" in message and "'InnerScope'" in message and "'OuterFlow'" in message


def test_stream_used_in_wrong_scope_by_connect_loop():
    def misuse(outer, inner):
        handle, _ = inner.loop_variable(1, name="InnerLoop")
        outer.connect_loop(handle)

    message = str(_wrong_scope_error(misuse))
    assert "'InnerLoop'" in message and "'InnerScope'" in message and "'OuterFlow'" in message


def test_stream_used_in_another_dataflow():
    def main(worker):
        first = worker.dataflow(lambda scope: scope.new_input("Old")[1], name="first")
        try:
            worker.dataflow(lambda scope: first.map(lambda x: x, name="Reuse"), name="second")
        except BuildError as error:
            return error
        return None

    (error,) = execute(main)
    assert isinstance(error, BuildError)
    assert "'first'" in str(error) and "Reuse" in str(error)


def test_leave_top_level_stream():
    def main(worker):
        def build(scope):
            _, stream = scope.new_input("Top")
            try:
                stream.leave()
            except BuildError as error:
                return error
            return None

        return worker.dataflow(build, name="topflow")

    (error,) = execute(main)
    assert isinstance(error, BuildError)
    assert "'Top'" in str(error) and "'topflow'" in str(error) and "top-level" in str(error)


@pytest.mark.parametrize("workers", [0, -2, 1.0, "2", True, None])
def test_execute_with_bad_worker_count(workers):
    called = []
    with pytest.raises(ConfigurationError) as excinfo:
        execute(lambda worker: called.append(worker), workers=workers)
    assert repr(workers) in str(excinfo.value)
    assert not called


# ---------------------------------------------------------------------------- failures


def test_exception_in_one_worker_stops_all_workers():
    """Worker 1's map raises; workers 0 and 2 wait in step loops for progress that never comes."""
    stopped: dict[int, str] = {}

    def main(worker):
        def explode(record):
            if worker.index == 1:
                raise ValueError(f"boom on record {record!r}")
            return record

        def build(scope):
            handle, stream = scope.new_input()
            probe = stream.map(explode, name="Exploder").probe()
            return handle, probe

        handle, probe = worker.dataflow(build)
        handle.send(worker.index)
        handle.advance_to(1)
        try:
            if worker.index == 2:
                while True:  # a raw step loop
                    worker.step()
            else:
                worker.step_while(lambda: probe.less_than(100))
        except BaseException as error:
            stopped[worker.index] = type(error).__name__
            raise

    started = time.monotonic()
    error = run_with_timeout(main, workers=3)
    assert isinstance(error, WorkerFailed), error
    assert error.worker == 1
    assert "worker 1 of 3" in str(error)
    assert isinstance(user_error(error), ValueError)
    assert "boom on record 1" in str(error)
    assert stopped.get(0) == "WorkerAborted" and stopped.get(2) == "WorkerAborted", stopped
    assert time.monotonic() - started < 20


def test_exception_in_main_stops_workers_waiting_for_progress():
    """Worker 2 fails before feeding its input; the others wait for it forever otherwise."""

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()
            return handle, stream.exchange(lambda x: x).probe()

        handle, probe = worker.dataflow(build)
        if worker.index == 2:
            raise RuntimeError("worker two gives up")
        handle.advance_to(1)
        worker.step_while(lambda: probe.less_than(1))

    error = run_with_timeout(main, workers=3)
    assert isinstance(error, WorkerFailed), error
    assert error.worker == 2 and "worker 2 of 3" in str(error)
    assert isinstance(error.__cause__, RuntimeError) and "worker two gives up" in str(error)


def test_exception_in_one_worker_while_others_run_to_completion():
    """The other workers have returned from main and are completing their dataflows."""

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()

            def constructor(capability, info):
                capability.drop()

                def logic(input, output):
                    for ref, batch in input:
                        if info.worker_index == 0 and ref.time >= 2:
                            raise KeyError("late failure")
                        output.session(ref).give_batch(batch)

                return logic

            stream.unary(Pipeline, "Late", constructor).probe()
            return handle

        handle = worker.dataflow(build)
        for epoch in range(3):
            handle.send(epoch)
            handle.advance_to(epoch + 1)

    error = run_with_timeout(main, workers=2)
    assert isinstance(error, WorkerFailed), error
    assert error.worker == 0 and isinstance(user_error(error), KeyError)


def test_single_worker_exception_is_wrapped():
    def main(worker):
        def build(scope):
            scope.to_stream([1, 2, 3]).map(lambda x: 1 // (x - 2), name="Divide").probe()

        worker.dataflow(build)

    failed, cause = run_failing(main)
    assert failed.worker == 0 and isinstance(cause, ZeroDivisionError)
    assert "worker 0 of 1" in str(failed)


def test_a_loop_variable_fed_from_a_sibling_scope_of_the_same_name_is_told_apart():
    """Found by the misuse audit: the error said the variable belongs to scope 'Iterative' but the stream is in scope
    'Iterative', the two sibling scopes having one name; it now gives each scope's path and address."""

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()
            loops = []

            def first(inner):
                loop, feedback = inner.loop_variable(1)
                loops.append(loop)
                return stream.enter(inner).concat(feedback).filter(lambda x: x < 3).leave()

            def second(inner):
                entered = stream.enter(inner).map(lambda x: x + 1)
                loops[0].connect(entered)
                return entered.leave()

            scope.iterative(first)
            scope.iterative(second)
            return handle

        worker.dataflow(build)

    with pytest.raises(WorkerFailed) as failure:
        execute(main)
    message = str(failure.value)
    assert re.search(
        r"belongs to scope 'dataflow 0' > 'Iterative' \(address \(0, (\d+)\)\) but stream 'Map' is in scope "
        r"'dataflow 0' > 'Iterative' \(address \(0, (?!\1\))\d+\)\)",
        message,
    ), message
