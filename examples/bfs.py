"""Breadth-first search in a loop: the distance of a node is the round it is reached in.

A directed graph and a root go into a nested ``iterative`` scope.  One stateful
operator, whose input is exchanged by node, holds the out-edges of the nodes its
worker owns and the distances found so far.  Requests to visit a node at round
``k`` are buffered per time, and the operator asks for a notification; when
round ``k`` is complete (every visit at that round, and every edge, has arrived)
it marks the newly reached nodes with distance ``k`` and sends visits to their
out-neighbours, which the loop variable delivers at round ``k + 1``.  Processing
rounds only once they are complete makes the search level-synchronous, so every
distance is set once, to its final value.  The loop stops by itself when a round
reaches no new node.

Run it with ``python examples/bfs.py -w 3 --nodes 200 --edges 400``.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import deque
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
    """``edges`` random directed edges among nodes ``0 .. nodes - 1`` (repeats allowed)."""
    rng = random.Random(seed)
    return [(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(edges)]


def bfs(graph: Stream) -> Stream:
    """Distances from the root: ``graph`` holds ``("edge", src, dst)`` and one ``("visit", root)``.

    Returns a stream of ``(node, distance)`` for every node reachable from the root.
    """
    adjacency: dict[int, list[int]] = {}
    distance: dict[int, int] = {}
    visits: dict[Any, set[int]] = {}

    def expand(input: OperatorInput, output: OperatorOutput, notificator: Notificator) -> None:
        for ref, batch in input:
            for record in batch:
                if record[0] == "edge":
                    adjacency.setdefault(record[1], []).append(record[2])
                else:
                    pending = visits.get(ref.time)
                    if pending is None:
                        pending = visits[ref.time] = set()
                        notificator.notify_at(ref.retain())
                    pending.add(record[1])
        for capability in notificator:
            rounds = capability.time.inner
            out: list[tuple[Any, ...]] = []
            for node in visits.pop(capability.time):
                if node not in distance:
                    distance[node] = rounds
                    out.append(("found", node, rounds))
                    out.extend(("visit", neighbour) for neighbour in adjacency.get(node, ()))
            output.session(capability).give_batch(out)

    def body(inner: ScopeBuilder) -> Stream:
        loop, feedback = inner.loop_variable(1, name="NextRound")
        records = graph.enter(inner).concat(feedback)
        expanded = records.unary_notify(Exchange(lambda record: record[1]), "Expand", expand)
        more, found = expanded.branch(lambda record: record[0] == "found", name="Found")
        more.connect_loop(loop)
        return found.map(lambda record: (record[1], record[2]), name="Distance").leave()

    return graph.scope.iterative(body, name="BFS")


def worker_main(worker: Worker, edges: list[Edge], root: int) -> list[tuple[int, int]]:
    """Build and drive the dataflow on one worker; return the distances it found."""
    found: list[tuple[int, int]] = []

    def build(scope: ScopeBuilder) -> Any:
        handle, graph = scope.new_input("Graph")
        probe = bfs(graph).inspect(found.append, name="Collect").probe()
        return handle, probe

    handle, probe = worker.dataflow(build, name="bfs")
    mine = [("edge", s, d) for i, (s, d) in enumerate(edges) if i % worker.peers == worker.index]
    handle.send_batch(mine)
    if worker.index == 0:
        handle.send(("visit", root))
    handle.close()
    worker.step_while(lambda: not probe.done())
    return found


def run(edges: list[Edge], root: int, workers: int = 1, processes: int = 1) -> dict[int, int]:
    """Distances from ``root`` along directed ``edges``, for the reachable nodes."""
    return combine(execute(partial(worker_main, edges=edges, root=root), workers=workers, processes=processes))


def combine(outputs: list[list[tuple[int, int]]]) -> dict[int, int]:
    """The distances every worker found, as one dict."""
    result: dict[int, int] = {}
    for found in outputs:
        for node, dist in found:
            if node in result:
                raise AssertionError(f"node {node} reported twice")
            result[node] = dist
    return result


def reference(edges: list[Edge], root: int) -> dict[int, int]:
    """What :func:`run` should return, by a sequential breadth-first search."""
    adjacency: dict[int, list[int]] = {}
    for src, dst in edges:
        adjacency.setdefault(src, []).append(dst)
    distance = {root: 0}
    queue = deque([root])
    while queue:
        node = queue.popleft()
        for neighbour in adjacency.get(node, ()):
            if neighbour not in distance:
                distance[neighbour] = distance[node] + 1
                queue.append(neighbour)
    return distance


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False, parents=[cluster_arguments()])
    parser.add_argument("--help", action="help", help="show this help message and exit")
    parser.add_argument("--nodes", type=int, default=100, help="number of nodes")
    parser.add_argument("--edges", type=int, default=200, help="number of directed edges")
    parser.add_argument("--seed", type=int, default=1, help="random seed for the graph")
    parser.add_argument("--root", type=int, default=0, help="where the search starts")
    args = parser.parse_args(argv)
    if args.nodes < 1:
        parser.error(f"--nodes must be at least 1, got {args.nodes}")

    edges = random_graph(args.nodes, args.edges, args.seed)
    result = combine(execute_from_args(partial(worker_main, edges=edges, root=args.root), argv))
    levels: dict[int, int] = {}
    for dist in result.values():
        levels[dist] = levels.get(dist, 0) + 1
    print(f"reached {len(result)} of {args.nodes} nodes from node {args.root}")
    print("nodes per distance: " + ", ".join(f"{d}: {levels[d]}" for d in sorted(levels)))
    ok = result == reference(edges, args.root)
    print(f"{args.workers * args.processes} worker(s); matches reference: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
