"""Streams cross scope boundaries only through ``enter()`` and ``leave()``.

A stream of a nested scope used after the scope's body returned (without
``leave()``), or a stream of an enclosing scope used inside a nested scope's body
(without ``enter()``), is refused when the dataflow is built, with an error naming
the stream's operator, its scope path and the scope it was used in.  Before, the
first was accepted: data flowed and the outer probe reported ``Product`` times.
"""

from __future__ import annotations

import pytest

from runtime import execute
from runtime.testing import assert_outputs, run_dataflow
from scopes import Pipeline
from scopes.errors import ScopeBoundaryError


def build_error(build) -> ScopeBoundaryError:
    """Build ``build`` in one worker; return the boundary error it raised."""

    def main(worker):
        try:
            worker.dataflow(build, name="Flow")
        except ScopeBoundaryError as error:
            return error
        return None

    (error,) = execute(main)
    assert isinstance(error, ScopeBoundaryError), "the misuse must be refused when the dataflow is built"
    return error


def forgot_leave(scope):
    """The user's loop body returns an inner stream without leave()."""
    _, numbers = scope.new_input("Numbers")
    return scope.iterative(lambda inner: numbers.enter(inner).map(lambda n: n + 1, name="AddOne"), name="Loop")


def pass_through(_capability, _info):
    def logic(input, output):
        for ref, batch in input:
            output.session(ref).give_batch(batch)

    return logic


def pass_both(_capability, _info):
    def logic(input1, input2, output):
        for port in (input1, input2):
            for ref, batch in port:
                output.session(ref).give_batch(batch)

    return logic


USES_AFTER_THE_BODY = {
    "probe": lambda scope, inner: inner.probe(),
    "map (fused after the body's map)": lambda scope, inner: inner.map(lambda n: n * 2),
    "inspect": lambda scope, inner: inner.inspect(print),
    "exchange": lambda scope, inner: inner.exchange(lambda n: n),
    "count": lambda scope, inner: inner.count(),
    "unary": lambda scope, inner: inner.unary(Pipeline, "Unary", pass_through),
    "concat with itself": lambda scope, inner: inner.concat(inner),
    "binary with itself": lambda scope, inner: inner.binary(inner, Pipeline, Pipeline, "Both", pass_both),
    "concat into an outer stream": lambda scope, inner: scope.new_input("Other")[1].concat(inner),
    "binary from an outer stream": lambda scope, inner: scope.new_input("Other")[1].binary(
        inner, Pipeline, Pipeline, "Both", pass_both
    ),
}


@pytest.mark.parametrize("use", list(USES_AFTER_THE_BODY), ids=list(USES_AFTER_THE_BODY))
def test_inner_stream_used_outside_without_leave_is_refused(use):
    def build(scope):
        inner = forgot_leave(scope)
        USES_AFTER_THE_BODY[use](scope, inner)

    message = str(build_error(build))
    assert "'AddOne'" in message  # the stream's operator
    assert "'Flow' > 'Loop'" in message  # its scope path
    assert "leave()" in message


def test_forgotten_leave_is_refused_in_the_program_as_written():
    """The user's program from the issue: the outer probe used to report Product times."""

    def main(worker):
        def build(scope):
            handle, numbers = scope.new_input()
            result = scope.iterative(lambda inner: numbers.enter(inner).map(lambda n: n + 1))
            return handle, result.probe()

        handle, probe = worker.dataflow(build)
        handle.send(1)
        handle.close()
        while worker.step():
            pass
        return list(probe.frontier())

    with pytest.raises(Exception) as excinfo:
        execute(main, workers=2)
    assert isinstance(excinfo.value.__cause__, ScopeBoundaryError)
    assert "leave()" in str(excinfo.value)


def test_leave_on_the_returned_stream_is_accepted():
    """The fix the error suggests: leave() on the stream the body returned."""

    def build(scope, numbers):
        return scope.iterative(lambda inner: numbers.enter(inner).map(lambda n: n + 1)).leave()

    run = run_dataflow(build, [[1]])
    assert_outputs(run, {0: [2]})
    assert run.frontiers == {"output": []}  # outer times, and the dataflow completes


def test_loop_connected_after_the_body_is_refused():
    def build(scope):
        holder = {}

        def body(inner):
            handle, stream = inner.loop_variable(1, name="Again")
            holder["handle"] = handle
            return stream.map(lambda n: n, name="Step")

        inner_stream = scope.iterative(body, name="Loop")
        inner_stream.connect_loop(holder["handle"])

    message = str(build_error(build))
    assert "'Step'" in message and "'Flow' > 'Loop'" in message


def test_outer_operators_built_inside_a_body_stay_outside_and_must_enter():
    """An operator on an outer stream, built inside a body, is an outer operator: entering it works."""

    def build(scope, numbers):
        def body(inner):
            doubled = numbers.map(lambda n: n * 2, name="Double")  # in the outer scope
            return doubled.enter(inner).leave()

        return scope.iterative(body, name="Loop")

    assert_outputs(run_dataflow(build, [[4]]), {0: [8]})


def test_stream_of_a_middle_scope_used_in_an_innermost_body_is_refused():
    """Two levels: the middle scope's stream used inside the innermost body, then left."""

    def build(scope):
        _, numbers = scope.new_input("Numbers")

        def middle(mid):
            entered = numbers.enter(mid)
            return mid.iterative(lambda inn: entered.map(lambda n: n * 2, name="Double").leave(), name="Inner")

        scope.iterative(middle, name="Middle")

    message = str(build_error(build))
    assert "'Double'" in message and "scope 'Flow' > 'Middle')" in message
    assert "'Flow' > 'Middle' > 'Inner'" in message and "enter(" in message


@pytest.mark.parametrize("second", ["binary", "concat", "connect_loop", "binary_notify"])
def test_outer_stream_as_the_second_input_inside_a_body_is_refused(second):
    def notify_logic(input1, input2, output, notificator):
        for port in (input1, input2):
            for _ref, _batch in port:
                pass

    def build(scope):
        _, numbers = scope.new_input("Numbers")

        def body(inner):
            handle, fed_back = inner.loop_variable(1, name="Again")
            entered = numbers.enter(inner)
            if second == "binary":
                entered.binary(numbers, Pipeline, Pipeline, "Both", pass_both)
            elif second == "concat":
                entered.concat(numbers)
            elif second == "binary_notify":
                entered.binary_notify(numbers, Pipeline, Pipeline, "Both", notify_logic)
            numbers.connect_loop(handle) if second == "connect_loop" else fed_back.connect_loop(handle)
            return entered.leave()

        scope.iterative(body, name="Loop")

    message = str(build_error(build))
    assert "'Numbers'" in message and "enter(" in message


def test_operators_built_after_the_dataflow_are_refused():
    def main(worker):
        _, numbers = worker.dataflow(lambda scope: scope.new_input("Numbers"), name="Flow")
        try:
            numbers.map(lambda n: n, name="Late")
        except ScopeBoundaryError as error:
            return str(error)
        return None

    (message,) = execute(main)
    assert message is not None and "'Late'" in message and "'Numbers'" in message


@pytest.mark.parametrize("nested", [False, True], ids=["top level", "nested scope"])
def test_a_stream_of_another_dataflow_is_refused_without_advice_to_leave(nested):
    """A stream of one dataflow read in another cannot leave() its way there: the error says so."""

    def main(worker):
        _, numbers = worker.dataflow(lambda scope: scope.new_input("Numbers"), name="First")

        def build(scope):
            if nested:
                return scope.iterative(lambda inner: numbers.map(lambda n: n, name="Elsewhere"), name="Loop")
            return numbers.map(lambda n: n, name="Elsewhere")

        try:
            worker.dataflow(build, name="Second")
        except ScopeBoundaryError as error:
            return str(error)
        return None

    (message,) = execute(main)
    assert message is not None and "'Numbers'" in message and "'Elsewhere'" in message
    assert "another dataflow" in message and "'First'" in message
    assert "leave()" not in message
