"""An operator runs only when it has input, a frontier change it asked for, or was activated."""

from runtime import execute
from runtime.communication.fabric import ThreadFabric
from runtime.worker import Worker
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


def test_a_child_activated_by_a_later_child_runs_in_the_same_step():
    # The input (child 2) feeds the loop variable (child 1), which feeds the inspection (child 3): once the
    # input has run, the loop variable has not run in this step yet, so it runs in it, and so does what it feeds.
    fabric = ThreadFabric(1)
    worker = Worker(fabric.communicator(0))
    seen = []

    def build(scope):
        loop, fed = scope.loop_variable(1)
        handle, stream = scope.new_input()
        fed.inspect_batch(lambda time, batch: seen.extend((time, record) for record in batch))
        stream.connect_loop(loop)
        return handle

    handle = worker.dataflow(build)
    worker.step()  # the first step runs every child once
    handle.send(7)
    worker.step()
    assert seen == [(1, 7)]  # fed back from epoch 0 to epoch 1 within the one step
    handle.close()
    worker.run_to_completion()


def test_a_child_runs_at_most_once_per_step():
    fabric = ThreadFabric(1)
    worker = Worker(fabric.communicator(0))
    runs = [0]

    def build(scope):
        def constructor(capability, info):
            held = [capability]

            def logic(output):
                runs[0] += 1
                if runs[0] < 5:
                    info.activate()  # asks for the next step, not for this one again
                elif held:
                    held.pop().drop()

            return logic

        return scope.source("Ticker", constructor).probe()

    probe = worker.dataflow(build)
    for step in range(1, 5):
        worker.step()
        assert runs[0] == step
    worker.step_while(lambda: not probe.done())
    assert runs[0] == 5


def bouncing(limit: int, seen: list):
    """A loop whose records move to the other of two workers at every iteration (by parity), until ``limit``."""

    def build(scope):
        handle, stream = scope.new_input()

        def body(inner):
            loop, feedback = inner.loop_variable(1)
            running, done = stream.enter(inner).concat(feedback).branch(lambda n: n >= limit)
            running.map(lambda n: n + 1).exchange(lambda n: n).inspect_batch(
                lambda time, batch: seen.extend(batch)
            ).connect_loop(loop)
            return done.leave()

        return handle, scope.iterative(body).probe()

    return build


def run_bouncing(limit: int) -> tuple[list, int, list[int]]:
    """:func:`bouncing` on two workers stepped in turn, one step each, in one thread: (each worker's loop scope,
    rounds, seen)."""
    fabric = ThreadFabric(2)
    workers = [Worker(communicator) for communicator in fabric.communicators()]
    seen: list[int] = []
    probes = []
    loops = []
    for worker in workers:
        handle, probe = worker.dataflow(bouncing(limit, seen))
        if worker.index == 0:
            handle.send(0)
        handle.close()
        probes.append(probe)
        (root,) = [dataflow.root for dataflow in worker.dataflows]
        loops.append(root.children[2])  # the iterative scope
    rounds = 0
    while not all(probe.done() for probe in probes):
        rounds += 1
        assert rounds < 10 * limit, "the loop did not finish"
        for worker in workers:
            worker.step_or_park(0)
    return loops, rounds, seen


def test_each_worker_takes_one_step_per_iteration_of_a_loop_whose_records_cross_to_the_other_worker():
    # Two workers stepped in turn, one step each, in one thread (no timing involved). The record arrives at a
    # worker's exchange receiver, late in the scope, and must reach the loop's head, early in it, and go on to
    # the other worker within the same step; otherwise each iteration costs that worker two steps.
    limit = 40
    _, rounds, seen = run_bouncing(limit)
    assert seen == list(range(1, limit + 1))
    assert rounds <= limit // 2 + 5  # one round (a step of each worker) per two iterations, and a few to finish
