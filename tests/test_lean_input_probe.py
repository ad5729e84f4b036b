"""The lean epoch path through the input handle and the probe (issue 12, second pass).

The input handle checks integer times inline, and a probe that is its handle's
only one shares its input frontier with the handle; these tests pin that the
checks and the shared frontier still say what they said before.  The savings
themselves (calls per epoch, counted with cProfile) are measured by
``benchmarks/call_counts.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from runtime.execute import execute
from runtime.worker import Worker
from scopes.channels import LocalQueue, Tee
from scopes.errors import ScopeError, TimestampError
from scopes.probes import ProbeHandle, ProbeOperator
from scopes.progress.location import Target
from scopes.timestamp import UINT64_MAX


def test_the_probe_does_not_ask_to_be_notified() -> None:
    def main(worker: Worker) -> bool:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            stream.probe()
            return scope.subgraph

        subgraph = worker.dataflow(build)
        probes = [child for child in subgraph.children if isinstance(child, ProbeOperator)]
        assert len(probes) == 1
        return bool(probes[0].notify)

    assert execute(main, workers=1) == [False]


def test_advance_to_still_rejects_bad_integer_times_with_the_same_errors() -> None:
    def main(worker: Worker) -> list[str]:
        handle, _probe = worker.dataflow(lambda scope: (lambda pair: (pair[0], pair[1].probe()))(scope.new_input("In")))
        handle.advance_to(5)
        messages = []
        for bad in (4, -1, UINT64_MAX + 1, True, 5.5):
            with pytest.raises(TimestampError) as caught:
                handle.advance_to(bad)
            messages.append(str(caught.value))
        handle.advance_to(5)  # the same time: allowed, a no-op
        handle.advance_to(UINT64_MAX)
        assert handle.time == UINT64_MAX
        handle.close()
        with pytest.raises(ScopeError, match="closed"):
            handle.advance_to(UINT64_MAX)
        with pytest.raises(ScopeError, match="closed"):
            handle.send(1)
        return messages

    messages = execute(main, workers=1)[0]
    assert "earlier than the current time 5" in messages[0]
    for message in messages[1:]:
        assert "is not a integer timestamp" in message or "not an integer" in message or "timestamp" in message
        assert "input 'In'" in message


def test_one_handle_shared_by_two_probes_reports_the_lagging_stream_and_each_probe_its_own() -> None:
    def main(worker: Worker) -> None:
        handle = ProbeHandle()

        def build(scope: Any) -> Any:
            first, stream1 = scope.new_input("First")
            second, stream2 = scope.new_input("Second")
            stream1.probe_with(handle, name="P1")
            stream2.probe_with(handle, name="P2")
            return first, second, scope.subgraph

        first, second, subgraph = worker.dataflow(build)
        probes = {child.name: child for child in subgraph.children if isinstance(child, ProbeOperator)}
        first.advance_to(10)
        second.advance_to(3)
        worker.step_while(lambda: probes["P1"].input_ports[0]._frontier.less_than(10))
        worker.step_while(lambda: handle.less_than(3))
        assert handle.frontier().elements == (3,)
        assert probes["P1"].input_ports[0]._frontier.frontier().elements == (10,)
        assert probes["P2"].input_ports[0]._frontier.frontier().elements == (3,)
        second.advance_to(20)
        worker.step_while(lambda: handle.less_than(10))
        assert handle.frontier().elements == (10,)
        first.close()
        second.close()
        worker.step_while(lambda: not handle.done())
        assert handle.done()
        assert probes["P1"].input_ports[0]._frontier.is_empty()

    execute(main, workers=1)


def test_a_handle_reused_by_a_second_dataflow_stops_sharing_and_still_reports_both() -> None:
    def main(worker: Worker) -> None:
        handle = ProbeHandle()

        def build_one(scope: Any) -> Any:
            source, stream = scope.new_input("A")
            stream.probe_with(handle)
            return source

        a = worker.dataflow(build_one)
        a.advance_to(7)
        worker.step_while(lambda: handle.less_than(7))
        assert handle.frontier().elements == (7,)
        b = worker.dataflow(build_one)
        assert handle.frontier().elements == (0,)  # the new dataflow's input starts at 0
        b.advance_to(9)
        a.advance_to(12)
        worker.step_while(lambda: handle.less_than(9))
        assert handle.frontier().elements == (9,)
        b.close()
        worker.step_while(lambda: handle.less_than(12))
        assert handle.frontier().elements == (12,)
        a.close()
        worker.step_while(lambda: not handle.done())

    execute(main, workers=1)


def test_a_sole_probe_lets_its_handle_read_the_tracker_and_is_pushed_no_frontier() -> None:
    def main(worker: Worker) -> list[tuple[int, bool]]:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            return handle, stream.map(lambda x: x + 1).probe(), scope.subgraph

        handle, probe, subgraph = worker.dataflow(build)
        (operator,) = [child for child in subgraph.children if isinstance(child, ProbeOperator)]
        index = subgraph.children.index(operator)
        implied = subgraph.tracker.frontier_index(subgraph.tracker.index_of(Target(index, 0)))
        assert operator.frontier_interest is False and operator.shared
        assert probe._frontier is implied  # the handle reads the tracker's frontier at the probe's input
        seen = []
        for epoch in range(5):
            handle.send(epoch)
            handle.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(handle.time))
            seen.append((epoch, probe.less_equal(epoch)))
        # nothing was pushed to the probe's own port: it still holds the initial frontier
        assert operator.input_ports[0]._frontier.elements == (0,)
        handle.close()
        worker.step_while(lambda: not probe.done())
        assert probe.done()
        return seen

    for seen in execute(main, workers=2, stall_timeout=10):
        assert seen == [(epoch, False) for epoch in range(5)]


def test_a_second_probe_ends_the_sharing_with_the_tracker_and_the_first_reports_again() -> None:
    def main(worker: Worker) -> None:
        handle = ProbeHandle()

        def build_one(scope: Any) -> Any:
            source, stream = scope.new_input("A")
            stream.probe_with(handle)
            return source, scope.subgraph

        a, first = worker.dataflow(build_one)
        (probe_a,) = [child for child in first.children if isinstance(child, ProbeOperator)]
        a.advance_to(4)
        worker.step_while(lambda: handle.less_than(4))
        assert not probe_a.frontier_interest
        b, _second = worker.dataflow(build_one)
        assert probe_a.frontier_interest and not probe_a.shared
        assert probe_a.input_ports[0]._frontier.elements == (4,)  # caught up with the tracker
        assert handle.frontier().elements == (0,)
        b.advance_to(6)
        a.advance_to(8)
        worker.step_while(lambda: handle.less_than(6))
        b.close()
        worker.step_while(lambda: handle.less_than(8))
        assert handle.frontier().elements == (8,)
        a.close()
        worker.step_while(lambda: not handle.done())

    execute(main, workers=1, stall_timeout=10)


def test_a_tee_with_one_receiver_pushes_straight_to_it_and_with_more_copies_to_all_but_the_last() -> None:
    first, second = LocalQueue(), LocalQueue()
    tee = Tee()
    tee.push(0, [1])  # no receivers: dropped, no error
    tee.add(first)
    batch = [1, 2]
    tee.push(1, batch)
    message = first.pull()
    assert message is not None and message[1] is batch
    tee.add(second)  # a second receiver: the tee fans out again
    batch = [3]
    tee.push(2, batch)
    one, two = first.pull(), second.pull()
    assert one == (2, [3]) and two == (2, [3])
    assert one is not None and two is not None
    assert one[1] is not batch and two[1] is batch
    assert first.pull() is None and second.pull() is None


def test_a_single_stage_chain_and_a_fused_chain_give_the_same_records() -> None:
    def main(worker: Worker) -> tuple[list[Any], list[Any]]:
        single: list[Any] = []
        fused: list[Any] = []

        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            stream.map(lambda x: x * 2).inspect(single.append)
            stream.map(lambda x: x * 2).filter(lambda x: x % 3 == 0).map(str).inspect(fused.append)
            stream.map(lambda x: 1 / 0 if x < 0 else x)  # no receivers: still run (a fault shows)
            return handle

        handle = worker.dataflow(build)
        handle.send_batch(range(10))
        handle.close()
        worker.step_while(lambda: len(fused) < 4)
        return single, fused

    single, fused = execute(main, workers=1)[0]
    assert single == [x * 2 for x in range(10)]
    assert fused == [str(x * 2) for x in range(10) if x * 2 % 3 == 0]


def test_a_single_stage_map_without_receivers_still_runs_its_function() -> None:
    def main(worker: Worker) -> None:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            stream.map(lambda x: 1 // x, name="Invert")
            return handle

        handle = worker.dataflow(build)
        handle.send(0)
        handle.close()
        worker.step_while(lambda: True)

    with pytest.raises(Exception, match="Invert"):
        execute(main, workers=1)
