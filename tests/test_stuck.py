"""A dataflow that can never complete is reported, with what holds it back, instead of hanging."""

from pathlib import Path

import pytest

from runtime import DataflowStuck, WorkerFailed, execute
from scopes import Pipeline

SOURCE = Path(__file__).read_text().splitlines()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_capability_held_forever_is_named(workers):
    def main(worker):
        def build(scope):
            def constructor(capability, info):
                held = [capability]  # never downgraded or dropped

                def logic(output):
                    assert held

                return logic

            return scope.source("Forever", constructor).probe()  # the line the error names

        worker.dataflow(build, name="never-ends")

    with pytest.raises(WorkerFailed) as failure:
        execute(main, workers=workers, stall_timeout=0.5)
    cause = failure.value.__cause__
    assert isinstance(cause, DataflowStuck)
    message = str(cause)
    assert "never-ends" in message
    assert "operator 'Forever'" in message
    assert "capability(ies) for time 0 at output 0" in message
    built = next(number for number, line in enumerate(SOURCE, 1) if "the line the error names" in line)
    assert f"built at test_stuck.py:{built})" in message  # logging off: the site is recorded at every build


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("kind", ["region", "iterative"])
def test_a_capability_held_in_a_nested_scope_is_named_and_the_scope_is_not(workers, kind):
    """The error also listed the nested scope itself as an operator holding a capability ("operator 'Inner' ...
    holds 1 capability(ies) for time 0"): that count is the parent's summary of what the scope holds inside, so
    it named an operator the user cannot fix and the explainer never names (found by the debugging audit)."""

    def main(worker):
        def build(scope):
            _, numbers = scope.new_input("numbers")

            def body(inner):
                def constructor(capability, info):
                    held = [capability]

                    def logic(input, output):
                        input.for_each(lambda cap, data: output.session(cap).give_batch(data))
                        assert held

                    return logic

                return numbers.enter(inner).unary(Pipeline, "InnerHolder", constructor).leave()

            nested = scope.region(body, name="Inner") if kind == "region" else scope.iterative(body, name="Inner")
            return nested.probe()

        worker.dataflow(build, name="nested")

    with pytest.raises(WorkerFailed) as failure:
        execute(main, workers=workers, stall_timeout=0.5)
    message = str(failure.value.__cause__)
    assert "operator 'InnerHolder'" in message
    assert "operator 'Inner'" not in message, message


def test_a_dataflow_that_completes_is_not_reported():
    def main(worker):
        probe = worker.dataflow(lambda scope: scope.to_stream(range(5)).probe())
        return probe

    (probe,) = execute(main, workers=1, stall_timeout=0.5)
    assert probe.done()


def test_tracker_blockers_name_the_pointstamps_that_could_reach_a_time():
    from scopes import INTEGER, Source, Target
    from scopes.reachability import TrackerBuilder

    builder = TrackerBuilder(INTEGER)
    builder.add_node(1, 0, 1, name="input")
    builder.add_node(2, 1, 1, name="map")
    builder.add_node(3, 1, 0, name="probe")
    builder.add_edge(Source(1, 0), Target(2, 0))
    builder.add_edge(Source(2, 0), Target(3, 0))
    tracker = builder.build()
    tracker.update_source(Source(1, 0), 3, 1)
    tracker.update_target(Target(2, 0), 5, 2)
    tracker.propagate_all()
    assert tracker.blockers(Target(3, 0), 6) == [(Source(1, 0), 3, 1), (Target(2, 0), 5, 2)]
    assert tracker.blockers(Target(3, 0), 4) == [(Source(1, 0), 3, 1)]
    assert tracker.blockers(Target(3, 0), 2) == []


@pytest.mark.parametrize("workers", [1, 2])
def test_the_explanation_names_what_holds_the_wait_and_which_open_input_does_not(workers):
    """The explanation listed every open input with "advance it with advance_to() or close() it", also one at a
    time after the one the wait is for, which holds nothing back: a user read it as the cause, while a loop's
    operator that kept its capability was the only one (found by driving a stuck program by hand)."""

    def main(worker):
        def build(scope):
            numbers, stream = scope.new_input("numbers")

            def body(inner):
                loop, feedback = inner.loop_variable(1)

                def constructor(capability, info):
                    kept = []

                    def logic(input, output):
                        for ref, batch in input:
                            if not kept:
                                kept.append(ref.retain())  # never dropped
                            output.session(ref).give_batch([n // 2 for n in batch if n > 1])

                    capability.drop()
                    return logic

                halved = stream.enter(inner).concat(feedback).unary(Pipeline, "Halve", constructor)  # the keeper
                halved.connect_loop(loop)
                return halved.leave()

            return numbers, scope.iterative(body).probe()

        numbers, probe = worker.dataflow(build)
        numbers.send_batch([5, 6, 7])
        numbers.advance_to(1)
        worker.step_while(lambda: probe.less_than(1))

    with pytest.raises(WorkerFailed) as failure:
        execute(main, workers=workers, stall_timeout=0.5)
    message = str(failure.value.__cause__)
    built = next(number for number, line in enumerate(SOURCE, 1) if "# the keeper" in line)
    section = message.split("what holds the probe(s) that worker ", 1)[1].split("\n  input ", 1)[0]
    assert "operator 'Halve' (scope 'dataflow 0 / Iterative'" in section, message
    assert f"built at test_stuck.py:{built}) holds a capability for time Product(0, 0) at output 0" in section
    assert "numbers" not in section, message  # the input is at time 1: it holds nothing the wait reads
    assert "input 'numbers' is still open at time 1" in message
    assert "step_while reads at time 0:" in message, message
    assert "input 'numbers' is still open at time 1" in message and "not what holds the wait now" in message


@pytest.mark.parametrize("workers", [1, 2])
def test_the_explanation_names_messages_nobody_reads_as_what_holds_the_wait(workers):
    def main(worker):
        def build(scope):
            numbers, stream = scope.new_input("numbers")

            def constructor(capability, info):
                capability.drop()

                def logic(input, output):
                    pass  # never reads its input: the messages wait there

                return logic

            ignored = stream.unary(Pipeline, "Ignorer", constructor)  # the ignorer
            return numbers, ignored.probe()

        numbers, probe = worker.dataflow(build)
        numbers.send_batch([1, 2, 3])
        numbers.advance_to(1)
        worker.step_while(lambda: probe.less_than(2))  # time 1 is the open input's own

    with pytest.raises(WorkerFailed) as failure:  # the audit calls unread records an over-count first: off here
        execute(main, workers=workers, stall_timeout=0.5, audit=False)
    message = str(failure.value.__cause__)
    built = next(number for number, line in enumerate(SOURCE, 1) if "# the ignorer" in line)
    section = message.split("what holds the probe(s) that worker ", 1)[1].split("\n  input ", 1)[0]
    assert "step_while reads at time 0:" in message and "numbers" not in section, message  # messages hold 0
    assert (
        f"message(s) at time 0 wait at input 0 of operator 'Ignorer' (scope 'dataflow 0', address (0, 2), "
        f"built at test_stuck.py:{built})"
    ) in section, message
    assert "input 'numbers' is still open at time 1" in message and "not what holds the wait now" in message


@pytest.mark.parametrize("workers", [1, 2])
def test_the_explanation_names_the_open_input_that_holds_the_wait(workers):
    def main(worker):
        def build(scope):
            words, stream = scope.new_input("words")  # the open input
            return words, stream.count().probe()

        words, probe = worker.dataflow(build)
        words.send("a")  # never advanced
        worker.step_while(lambda: probe.less_than(1))

    with pytest.raises(WorkerFailed) as failure:
        execute(main, workers=workers)  # certain: only the open input holds the wait
    message = str(failure.value.__cause__)
    created = next(number for number, line in enumerate(SOURCE, 1) if "# the open input" in line)
    assert f"step_while reads at time 0:\n    input 'words' (created at test_stuck.py:{created}) at time 0" in (
        message
    ), message
    assert "input 'words' is still open at time 0" in message and "advance it with advance_to()" in message
