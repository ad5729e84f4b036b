"""Iterative programs that misuse loops, for tests that run them on 1 worker, 2 threads and 2 processes.

Top-level functions, so that ``execute(main, processes=2)`` can import them in
every process.  Each builds its dataflow, returns the text of the build-time
refusal it expects, and otherwise runs the dataflow to the end (returning ``None``).
"""

from __future__ import annotations

from typing import Any

from scopes import Exchange, IntegerSummary, Pipeline, Product, ProductSummary
from scopes.errors import ScopeBoundaryError, SummaryError


def _pass_through(capability: Any, info: Any) -> Any:
    """A generic operator's constructor: drop the initial capability, pass every batch on at its time."""
    capability.drop()

    def logic(input: Any, output: Any) -> None:
        for ref, batch in input:
            output.session(ref).give_batch(list(batch))

    return logic


def _operator_at_top(scope: Any, numbers: Any) -> Any:
    """A top-level operator (integer times) declaring a summary for product times."""
    summary = ProductSummary(IntegerSummary(1), IntegerSummary(0))
    return numbers.unary(Pipeline, "Shifted", _pass_through, summary=[[[summary]]])


def _operator_in_loop(scope: Any, numbers: Any) -> Any:
    """An operator in a loop (product times) declaring an integer summary."""

    def body(inner: Any) -> Any:
        loop, feedback = inner.loop_variable(1, name="Again")
        state = numbers.enter(inner).concat(feedback)
        shifted = state.unary(Pipeline, "Shifted", _pass_through, summary=[[[IntegerSummary(0)]]])
        shifted.filter(lambda n: n < 3).map(lambda n: n + 1).connect_loop(loop)
        return shifted.leave()

    return scope.iterative(body, name="Rounds")


def _loop_in_loop(scope: Any, numbers: Any) -> Any:
    """A loop variable two scopes deep given the summary of a loop one scope deep."""

    def inner_body(inner: Any) -> Any:
        loop, feedback = inner.loop_variable(ProductSummary(IntegerSummary(0), IntegerSummary(1)), name="Again")
        state = numbers.enter(inner).concat(feedback)
        state.filter(lambda n: n < 3).map(lambda n: n + 1).connect_loop(loop)
        return state.leave()

    return scope.iterative(lambda outer: outer.iterative(inner_body, name="Rounds").leave(), name="Outer")


WRONG_SUMMARIES = {
    "operator at top": _operator_at_top,
    "operator in loop": _operator_in_loop,
    "loop in loop": _loop_in_loop,
}
"""Builders whose summary does not fit their scope's timestamps, by name."""


def wrong_summary(worker: Any, case: str) -> str | None:
    """Build ``WRONG_SUMMARIES[case]``: the refusal's text, or ``None`` after running the dataflow to the end."""

    def build(scope: Any) -> Any:
        handle, numbers = scope.new_input("Numbers")
        return handle, WRONG_SUMMARIES[case](scope, numbers).probe()

    try:
        handle, probe = worker.dataflow(build)
    except SummaryError as error:
        return str(error)
    if worker.index == 0:
        handle.send_batch([0, 1])
    handle.close()
    worker.step_while(lambda: not probe.done())
    return None


def _hold_the_first(capability: Any, info: Any) -> Any:
    """A generic operator's constructor that retains the capability of the first batch it reads and never drops it."""
    capability.drop()
    held: list[Any] = []

    def logic(input: Any, output: Any) -> None:
        for ref, batch in input:
            if not held:
                held.append(ref.retain())
            output.session(ref).give_batch(list(batch))

    return logic


def held_in_nested_loop(worker: Any) -> None:
    """A loop in a loop whose operator 'Holder' keeps a capability for ever: the probe after it never completes.

    Worker 0 sends 0 and 1, exchanged by value, so every worker's 'Holder' holds one; the inputs are
    closed, and ``main`` waits on the probe (fails with ``stall_timeout``).
    """

    def inner_body(inner: Any, numbers: Any) -> Any:
        loop, feedback = inner.loop_variable(1, name="Again")
        held = numbers.enter(inner).concat(feedback).unary(Exchange(lambda n: n), "Holder", _hold_the_first)
        held.filter(lambda n: n < 3).map(lambda n: n + 1).connect_loop(loop)
        return held.leave()

    def outer_body(outer: Any, numbers: Any) -> Any:
        entered = numbers.enter(outer)
        return outer.iterative(lambda inner: inner_body(inner, entered), name="Inner").leave()

    def build(scope: Any) -> Any:
        handle, numbers = scope.new_input("Numbers")
        return handle, scope.iterative(lambda outer: outer_body(outer, numbers), name="Outer").probe()

    handle, probe = worker.dataflow(build)
    if worker.index == 0:
        handle.send_batch([0, 1])
    handle.close()
    worker.step_while(lambda: not probe.done())


def probe_asked_of_another_time(worker: Any, inside: bool) -> None:
    """Wait on a probe with a time of another type than its stream's: an epoch for a probe inside a loop
    (``inside``), else a loop's time for a probe after it."""
    probes: list[Any] = []

    def body(inner: Any, numbers: Any) -> Any:
        loop, feedback = inner.loop_variable(1, name="Again")
        state = numbers.enter(inner).concat(feedback)
        if inside:
            probes.append(state.probe(name="InnerProbe"))
        state.filter(lambda n: n < 3).map(lambda n: n + 1).connect_loop(loop)
        return state.leave()

    def build(scope: Any) -> Any:
        handle, numbers = scope.new_input("Numbers")
        out = scope.iterative(lambda inner: body(inner, numbers), name="Rounds")
        if not inside:
            probes.append(out.probe(name="OuterProbe"))
        return handle

    handle = worker.dataflow(build)
    handle.send_batch([worker.index])
    handle.advance_to(1)
    time = 1 if inside else Product(1, 0)
    worker.step_while(lambda: probes[0].less_than(time))


def entered_from_a_sibling(worker: Any) -> str | None:
    """A stream of one loop, never taken out of it, entered into a second loop beside it: the refusal's text."""
    kept: list[Any] = []

    def first(inner: Any, numbers: Any) -> Any:
        loop, feedback = inner.loop_variable(1, name="Again")
        state = numbers.enter(inner).concat(feedback, name="State")
        state.filter(lambda n: n < 3).map(lambda n: n + 1).connect_loop(loop)
        kept.append(state)
        return state.leave()

    def build(scope: Any) -> Any:
        handle, numbers = scope.new_input("Numbers")
        scope.iterative(lambda inner: first(inner, numbers))
        return handle, scope.iterative(lambda inner: kept[0].enter(inner).leave()).probe()

    try:
        handle, probe = worker.dataflow(build)
    except ScopeBoundaryError as error:
        return str(error)
    handle.close()
    worker.step_while(lambda: not probe.done())
    return None
