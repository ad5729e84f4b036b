"""End to end: record real runs with a loop nested in a loop on 2 workers, and check the model against them."""

from __future__ import annotations

import re
from typing import Any

import pytest
from test_scc import scc
from test_viz_dot import cluster_tree

from runtime import WorkerFailed, execute
from runtime.instrument import Event, Mark, Recorder
from scopes.builder import ScopeBuilder
from scopes.stream import Stream
from viz.dot import to_graph
from viz.explain import explain
from viz.model import Model


def countdown(scope: ScopeBuilder, numbers: Stream, probes: list[Any]) -> Stream:
    """Each number n circulates: an outer loop halves it, an inner loop counts it down to even."""

    def outer_body(outer: ScopeBuilder) -> Stream:
        handle, fed_back = outer.loop_variable(1, name="OuterFeedback")
        entered = numbers.enter(outer).concat(fed_back)

        def inner_body(inner: ScopeBuilder) -> Stream:
            inner_handle, inner_back = inner.loop_variable(1, name="InnerFeedback")
            both = entered.enter(inner).concat(inner_back)
            both.filter(lambda n: n % 2 == 1, name="Odd").map(lambda n: n - 1, name="Decrement").connect_loop(
                inner_handle
            )
            return both.filter(lambda n: n % 2 == 0, name="Even").leave()

        evens = outer.iterative(inner_body, name="Inner")
        probes.append(evens.probe(name="InnerProbe"))
        halved = evens.filter(lambda n: n > 0, name="Positive").map(lambda n: n // 2, name="Halve")
        halved.exchange(lambda n: n, name="Spread").connect_loop(handle)
        return evens.filter(lambda n: n == 0, name="Zero").leave()

    return scope.iterative(outer_body, name="Outer")


def record_countdown(marks: bool = True) -> tuple[list[Event], dict[int, list[tuple[int, list[Any], list[Any]]]]]:
    """Run countdown on 2 workers; per worker, (seq, top probe frontier, inner probe frontier) after each step."""
    seen: dict[int, list[tuple[int, list[Any], list[Any]]]] = {}

    def main(worker: Any) -> None:
        probes: list[Any] = []

        def build(scope: ScopeBuilder) -> Any:
            handle, numbers = scope.new_input("numbers")
            done = countdown(scope, numbers, probes)
            return handle, done.probe(name="TopProbe")

        handle, top = worker.dataflow(build, name="countdown")
        log = worker.logger
        samples = seen.setdefault(worker.index, [])
        for epoch in range(3):
            handle.send_batch(list(range(worker.index, 40, 2)))
            handle.advance_to(epoch + 1)
            while top.less_than(handle.time):
                worker.step()
                samples.append((log.seq, sorted(top.frontier()), sorted(probes[0].frontier())))
        handle.close()
        while worker.step():
            samples.append((log.seq, sorted(top.frontier()), sorted(probes[0].frontier())))

    with Recorder() as recording:
        execute(main, workers=2, stall_timeout=5)
    return recording.events, seen


def test_model_frontiers_equal_what_probes_saw_at_the_same_moments() -> None:
    events, seen = record_countdown()
    checked = 0
    for worker, samples in seen.items():
        mine = [e for e in events if e.worker == worker]
        structure = Model.from_events(mine)
        (top,) = structure.find("TopProbe")
        (inner,) = structure.find("InnerProbe")
        assert len(inner.address) == 3  # inside the outer loop
        # replay the recording incrementally and compare at each sampled moment
        model = Model()
        position = 0
        for seq, top_frontier, inner_frontier in samples:
            while position < len(mine) and mine[position].seq <= seq:
                model.apply(mine[position])
                position += 1
            view = model.view(worker)
            assert view.frontier(model.input_loc(top.address, 0)) == top_frontier
            assert view.frontier(model.input_loc(inner.address, 0)) == inner_frontier
            checked += 1
    assert checked > 10
    final = Model.from_events(events).view()
    assert final.completed == {0}
    assert all(not any(c > 0 for c in counts.values()) for counts in final.frontier_counts.values())


def scope_tree(model: Model) -> dict[str, str | None]:
    return {
        f"cluster_op_{'_'.join(map(str, address))}": (
            f"cluster_op_{'_'.join(map(str, address[:-1]))}" if len(address) > 1 else None
        )
        for address in model.scopes
    }


def test_scc_recording_clusters_nest_exactly_as_the_scopes() -> None:
    edges = [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 3)]
    with Recorder() as recording:
        found, _ = scc.run_scc(lambda index, peers: edges[index::peers], 2)
    assert sorted(map(sorted, found)) == [[0, 1, 2], [3, 4]]
    model = Model.from_events(recording.events)
    assert set(model.workers) == {0, 1}
    names = {address: scope.info.name for address, scope in model.scopes.items()}
    assert sorted(names.values()) == ["Backward", "Forward", "Rounds", "scc"]
    rounds = next(a for a, n in names.items() if n == "Rounds")
    for inner in ("Forward", "Backward"):  # a loop nested in a loop
        address = next(a for a, n in names.items() if n == inner)
        assert address[:-1] == rounds
        assert model.scopes[address].info.scope_timestamp == "Product[Product[integer, integer], integer]"
    source = to_graph(model).source
    assert cluster_tree(source) == scope_tree(model)
    for address, scope in model.scopes.items():
        label = f"{scope.info.name} : {scope.info.scope_timestamp}"
        assert label in source
        cluster = f"cluster_op_{'_'.join(map(str, address))}"
        # every operator of the scope is drawn inside its cluster (and no deeper)
        body = _cluster_body(source, cluster)
        for index, child in scope.children.items():
            if not child.is_scope:
                assert re.search(rf"^\s*op_{'_'.join(map(str, address + (index,)))} \[", body, re.M)


def _cluster_body(source: str, cluster: str) -> str:
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(f"subgraph {cluster} "))
    depth, body = 0, []
    for line in lines[start:]:
        if re.match(r"\s*subgraph \S+ \{", line):
            depth += 1
            continue
        if line.strip() == "}":
            depth -= 1
            if depth == 0:
                break
            continue
        if depth == 1:
            body.append(line)
    return "\n".join(body)


def test_an_input_never_closed_is_explained_as_exactly_that() -> None:
    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            handle, numbers = scope.new_input("sensor readings")
            return handle, countdown(scope, numbers, []).probe(name="TopProbe")

        handle, probe = worker.dataflow(build, name="stuck")
        handle.send_batch([5, 8])
        for _ in range(200):
            worker.step()
        worker.logger.mark("still open")  # main returns next, and the runtime closes the input

    with Recorder() as recording:
        execute(main, workers=2, stall_timeout=5)
    events = recording.events
    marks = {e.worker: e.seq for e in events if isinstance(e, Mark)}
    model = Model.from_events([e for e in events if e.seq <= marks[e.worker]])  # each worker before its close
    (probe,) = model.find("TopProbe")
    loc = model.input_loc(probe.address, 0)
    for worker in (0, 1, None):
        view = model.view(worker)
        assert view.frontier(loc) == [0]
        blockers = explain(model, loc, 0, view)
        inputs = [b for b in blockers if b.kind == "input"]
        # each worker's handle holds the frontier back, whichever worker's frontier is explained
        assert [b.worker for b in inputs] == [0, 1]
        for found, holder in zip(inputs, (0, 1), strict=True):
            assert found.input_name == "sensor readings" and found.count == 1
            assert re.search(  # with the line of the user's code that created the input
                r"input 'sensor readings' \(\w+\.py:\d+\) was never advanced past time 0 and never closed",
                found.description,
            ), found.description
            assert f"(worker {holder}, operator address" in found.description
        assert not [b for b in blockers if b.kind == "capability"]
    # after the run, nothing is stuck any more
    final = Model.from_events(events)
    assert explain(final, loc, 0) == []


def test_a_capability_held_forever_is_named_with_its_operator() -> None:
    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            def constructor(capability: Any, info: Any) -> Any:
                held = [capability]  # never downgraded or dropped

                def logic(output: Any) -> None:
                    assert held

                return logic

            return countdown(scope, scope.source("Forever", constructor), []).probe(name="Watch")

        worker.dataflow(build, name="never-ends")

    with Recorder() as recording, pytest.raises(WorkerFailed, match="cannot complete"):
        execute(main, workers=2, stall_timeout=0.5)
    model = Model.from_events(recording.events)
    (watch,) = model.find("Watch")
    for worker in (0, 1, None):
        blockers = explain(model, model.input_loc(watch.address, 0), 0, model.view(worker))
        assert [(b.kind, b.worker) for b in blockers] == [("capability", 0), ("capability", 1)]
        for found, holder in zip(blockers, (0, 1), strict=True):
            assert "operator 'Forever'" in found.description
            assert f"holds 1 capability(ies) for time 0 at output 0 on worker {holder}" in found.description
            assert found.path[0] == model.output_loc(model.find("Forever")[0].address, 0)
