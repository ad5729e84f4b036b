"""An operator runs only when it has input, a frontier change it asked for, or was activated."""

from runtime import execute
from scopes import Pipeline


def _run(frontier_aware: bool, epochs_with_data: set[int], epochs: int = 10) -> int:
    def main(worker):
        calls = [0]

        def constructor(capability, info):
            capability.drop()

            def logic(input, output):
                calls[0] += 1
                for ref, batch in input:
                    output.session(ref).give_batch(batch)

            return logic

        def build(scope):
            handle, stream = scope.new_input()
            method = stream.unary_frontier if frontier_aware else stream.unary
            return handle, method(Pipeline, "Counted", constructor).probe()

        handle, probe = worker.dataflow(build)
        for epoch in range(epochs):
            if epoch in epochs_with_data:
                handle.send(epoch)
            handle.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(handle.time))
        handle.close()
        worker.step_while(lambda: not probe.done())
        return calls[0]

    return execute(main)[0]


def test_an_operator_without_frontier_interest_runs_only_for_input():
    # once at start-up, then once per epoch that carries data
    assert _run(frontier_aware=False, epochs_with_data=set()) == 1
    assert _run(frontier_aware=False, epochs_with_data={2, 5}) == 3


def test_a_frontier_aware_operator_also_runs_when_its_frontier_moves():
    quiet = _run(frontier_aware=True, epochs_with_data=set())
    assert quiet >= 10  # every advance of the input moves its frontier


def test_an_activated_source_runs_again_without_input():
    def main(worker):
        runs = [0]

        def build(scope):
            def constructor(capability, info):
                held = [capability]

                def logic(output):
                    runs[0] += 1
                    if runs[0] < 5:
                        info.activate()
                    elif held:
                        held.pop().drop()

                return logic

            return scope.source("Ticker", constructor).probe()

        probe = worker.dataflow(build)
        worker.step_while(lambda: not probe.done())
        return runs[0]

    assert execute(main) == [5]
