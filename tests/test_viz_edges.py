"""Record counts on edges that cross scope boundaries: into, out of, and between nested scopes."""

from __future__ import annotations

import re
from typing import Any

from test_scc import scc

from runtime import execute
from runtime.instrument import Recorder
from scopes.builder import ScopeBuilder
from viz.dot import to_graph
from viz.model import Edge, Model


def scc_model() -> Model:
    edges = [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 3)]
    with Recorder() as recording:
        found, _ = scc.run_scc(lambda index, peers: edges[index::peers], 2)
    assert sorted(map(sorted, found)) == [[0, 1, 2], [3, 4]]
    return Model.from_events(recording.events)


def crossing(model: Model, edge: Edge) -> bool:
    """Whether the edge starts or ends at a scope boundary or a nested scope."""
    ends = [edge.source[0], edge.target[0]]
    return any(node == 0 or model.operators[edge.scope + (node,)].is_scope for node in ends)


def edge_labels(source: str) -> dict[tuple[str, str], str]:
    found = {}
    for line in source.splitlines():
        match = re.match(r'\s*(\S+) -> (\S+)(?: \[label="([^"]*)")?', line)
        if match:
            found[(match[1].split(":")[0], match[2].split(":")[0])] = match[3] or ""
    return found


def test_scc_edges_into_out_of_and_around_nested_scopes_carry_record_counts() -> None:
    model = scc_model()
    view = model.view()
    boundary = [e for scope in model.scopes.values() for e in scope.edges if crossing(model, e)]
    assert len(boundary) >= 10
    for edge in boundary:
        assert model.edge_records(edge, view) > 0, edge
    labels = edge_labels(to_graph(model).source)
    assert len(labels) == sum(len(s.edges) for s in model.scopes.values())
    assert all(re.search(r"\b\d+ rec\b", label) for label in labels.values()), labels
    assert_conserved(model, view)
    # the records entering the outer scope are the edges the workers read, once each (not once per worker)
    (rounds,) = model.find("Rounds")
    (into,) = [e for e in model.scopes[rounds.address[:-1]].edges if e.target == (rounds.address[-1], 0)]
    assert model.edge_records(into, view) == 6
    assert model.edge_records(into, model.view(0)) + model.edge_records(into, model.view(1)) == 6


def assert_conserved(model: Model, view: Any) -> None:
    """At every nested scope's boundary, what enters (leaves) a port outside is what leaves (enters) it inside."""
    for address, scope in model.scopes.items():
        if len(address) == 1:
            continue
        parent = model.scopes[address[:-1]]
        for port in range(scope.info.inputs):
            outside = [model.edge_records(e, view) for e in parent.edges if e.target == (address[-1], port)]
            inside = [model.edge_records(e, view) for e in scope.edges if e.source == (0, port)]
            assert outside and inside and set(inside) == {sum(outside)}, (scope.info.name, port)
        for port in range(scope.info.outputs):
            inside = [model.edge_records(e, view) for e in scope.edges if e.target == (0, port)]
            outside = [model.edge_records(e, view) for e in parent.edges if e.source == (address[-1], port)]
            assert outside and inside and set(outside) == {sum(inside)}, (scope.info.name, port)


def test_edges_from_a_scope_input_straight_into_a_nested_scope_and_straight_out() -> None:
    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            handle, numbers = scope.new_input("numbers")

            def outer_body(outer: ScopeBuilder) -> Any:
                entered = numbers.enter(outer)

                def inner_body(inner: ScopeBuilder) -> Any:
                    return entered.enter(inner).map(lambda n: n * 10, name="Times10").leave()

                return outer.iterative(inner_body, name="Inner").leave()

            return handle, scope.iterative(outer_body, name="Outer").probe(name="Seen")

        handle, probe = worker.dataflow(build, name="straight")
        if worker.index == 0:
            handle.send_batch([1, 2, 3])
        handle.close()

    with Recorder() as recording:
        execute(main, workers=2, stall_timeout=5)
    model = Model.from_events(recording.events)
    (outer,) = model.find("Outer")
    (inner,) = model.find("Inner")
    edges = model.scopes[outer.address].edges
    (straight_in,) = [e for e in edges if e.source == (0, 0)]
    (straight_out,) = [e for e in edges if e.target == (0, 0)]
    assert straight_in.target == (inner.address[-1], 0) and straight_out.source == (inner.address[-1], 0)
    for view, expected in ((model.view(), 3), (model.view(0), 3), (model.view(1), 0)):
        assert model.edge_records(straight_in, view) == expected
        assert model.edge_records(straight_out, view) == expected
    labels = edge_labels(to_graph(model).source)
    outer_in = f"op_{'_'.join(map(str, outer.address))}_in0"
    inner_in = f"op_{'_'.join(map(str, inner.address))}_in0"
    assert labels[(outer_in, inner_in)] == "3 rec"
