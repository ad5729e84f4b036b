"""Connected components of an undirected graph by min-label propagation in a loop.

Every node starts with its own id as its label.  In each round of a nested
``iterative`` scope, a node whose label went down tells its neighbours the new
label; a node adopts the smallest label it hears if it is below its own.  When
no label changes the loop has nothing left to do and ends by itself, and each
node's label is the smallest node id in its component.

The propagation operator's input is exchanged by node, so each worker keeps the
neighbours and labels of the nodes it owns.  It gathers the proposals of a round
per time and acts on them at the round's notification.  Each label improvement
also leaves the loop; after the loop a second notification-based operator,
exchanged by node, keeps the smallest label reported for each node and emits it
once the whole epoch (every round of the loop) is complete.

Run it with ``python examples/connected_components.py -w 2 --nodes 300 --edges 250``.
"""

from __future__ import annotations

import argparse
import random
import sys
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime import Worker, execute, execute_from_args  # noqa: E402
from runtime.cluster import cluster_arguments  # noqa: E402
from scopes import (  # noqa: E402
    Exchange,
    Notificator,
    OperatorInput,
    OperatorOutput,
    ScopeBuilder,
    Stream,
)

Edge = tuple[int, int]


def random_graph(nodes: int, edges: int, seed: int) -> list[Edge]:
    """``edges`` random undirected edges among nodes ``0 .. nodes - 1`` (repeats allowed)."""
    rng = random.Random(seed)
    return [(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(edges)]


def propagate(graph: Stream) -> Stream:
    """Label improvements ``(node, label)`` from ``("label", v, v)`` and ``("edge", u, v)`` records.

    Edges are directed here; send both directions for an undirected graph.
    """
    neighbours: dict[int, list[int]] = {}
    labels: dict[int, int] = {}
    proposals: dict[Any, dict[int, int]] = {}

    def logic(input: OperatorInput, output: OperatorOutput, notificator: Notificator) -> None:
        for ref, batch in input:
            for record in batch:
                if record[0] == "edge":
                    neighbours.setdefault(record[1], []).append(record[2])
                    continue
                best = proposals.get(ref.time)
                if best is None:
                    best = proposals[ref.time] = {}
                    notificator.notify_at(ref.retain())
                node, label = record[1], record[2]
                if label < best.get(node, label + 1):
                    best[node] = label
        for capability in notificator:
            out: list[tuple[Any, ...]] = []
            for node, label in proposals.pop(capability.time).items():
                current = labels.get(node)
                if current is None or label < current:
                    labels[node] = label
                    out.append(("improved", node, label))
                    out.extend(("label", other, label) for other in neighbours.get(node, ()))
            output.session(capability).give_batch(out)

    def body(inner: ScopeBuilder) -> Stream:
        loop, feedback = inner.loop_variable(1, name="NextRound")
        records = graph.enter(inner).concat(feedback)
        updates = records.unary_notify(Exchange(lambda record: record[1]), "Propagate", logic)
        more, improved = updates.branch(lambda record: record[0] == "improved", name="Improved")
        more.connect_loop(loop)
        return improved.map(lambda record: (record[1], record[2]), name="Label").leave()

    return graph.scope.iterative(body, name="Components")


def smallest_per_node(updates: Stream) -> Stream:
    """For each time, the smallest label of each node, emitted once the time is complete."""
    smallest: dict[Any, dict[int, int]] = {}

    def logic(input: OperatorInput, output: OperatorOutput, notificator: Notificator) -> None:
        for ref, batch in input:
            best = smallest.get(ref.time)
            if best is None:
                best = smallest[ref.time] = {}
                notificator.notify_at(ref.retain())
            for node, label in batch:
                if label < best.get(node, label + 1):
                    best[node] = label
        for capability in notificator:
            output.session(capability).give_batch(list(smallest.pop(capability.time).items()))

    return updates.unary_notify(Exchange(lambda pair: pair[0]), "Smallest", logic)


def worker_main(worker: Worker, nodes: int, edges: list[Edge]) -> list[tuple[int, int]]:
    """Build and drive the dataflow on one worker; return the ``(node, label)`` it produced."""
    produced: list[tuple[int, int]] = []

    def build(scope: ScopeBuilder) -> Any:
        handle, graph = scope.new_input("Graph")
        both_ways = graph.flat_map(lambda r: [r, ("edge", r[2], r[1])] if r[0] == "edge" else [r], name="Undirected")
        components = smallest_per_node(propagate(both_ways))
        probe = components.inspect(produced.append, name="Collect").probe()
        return handle, probe

    handle, probe = worker.dataflow(build, name="connected components")
    peers, index = worker.peers, worker.index
    handle.send_batch(("label", v, v) for v in range(nodes) if v % peers == index)
    handle.send_batch(("edge", u, v) for i, (u, v) in enumerate(edges) if i % peers == index)
    handle.close()
    worker.step_while(lambda: not probe.done())
    return produced


def run(nodes: int, edges: list[Edge], workers: int = 1, processes: int = 1) -> dict[int, int]:
    """The component label (smallest node id in the component) of each node ``0 .. nodes - 1``."""
    return combine(execute(partial(worker_main, nodes=nodes, edges=edges), workers=workers, processes=processes))


def combine(outputs: list[list[tuple[int, int]]]) -> dict[int, int]:
    """The labels every worker produced, as one dict."""
    result: dict[int, int] = {}
    for produced in outputs:
        for node, label in produced:
            if node in result:
                raise AssertionError(f"node {node} reported twice")
            result[node] = label
    return result


def reference(nodes: int, edges: list[Edge]) -> dict[int, int]:
    """What :func:`run` should return, by union-find."""
    parent = list(range(nodes))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for u, v in edges:
        a, b = find(u), find(v)
        if a != b:
            parent[max(a, b)] = min(a, b)
    return {v: find(v) for v in range(nodes)}


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False, parents=[cluster_arguments()])
    parser.add_argument("--help", action="help", help="show this help message and exit")
    parser.add_argument("--nodes", type=int, default=200, help="number of nodes")
    parser.add_argument("--edges", type=int, default=150, help="number of undirected edges")
    parser.add_argument("--seed", type=int, default=1, help="random seed for the graph")
    args = parser.parse_args(argv)

    edges = random_graph(args.nodes, args.edges, args.seed)
    result = combine(execute_from_args(partial(worker_main, nodes=args.nodes, edges=edges), argv))
    sizes: dict[int, int] = {}
    for label in result.values():
        sizes[label] = sizes.get(label, 0) + 1
    largest = sorted(sizes.values(), reverse=True)[:5]
    print(f"{len(sizes)} components among {args.nodes} nodes; largest sizes: {largest}")
    ok = result == reference(args.nodes, edges)
    print(f"{args.workers * args.processes} worker(s); matches reference: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
