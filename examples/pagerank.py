"""PageRank: a fixed number of power iterations in a loop, with a binary notification operator.

Node ``v`` is owned by worker ``hash(v) % peers``.  The out-edges of each node
enter a nested ``iterative`` scope and are exchanged to the node's owner, who
keeps them.  In round ``k`` the owner knows the rank of its nodes from round
``k - 1``: it sends a share ``rank / out-degree`` to each out-neighbour (exchanged
to the neighbour's owner), and adds up the rank of its dangling nodes (no
out-edges), whose total goes to every worker and is spread evenly over all
nodes, as :func:`networkx.pagerank` does.  The rank operator is a binary
operator with ``Exchange`` on both inputs: shares, routed to the owner of their
node, and dangling totals, one copy addressed to each worker (``hash(w) % peers
== w`` for a worker index ``w``), with a notificator watching both inputs.  When
round ``k`` is complete it computes

    rank(v) = (1 - d) / N + d * (shares received by v + dangling total / N)

and, holding on to a capability for round ``k + 1``, asks to be notified at it:
the operator itself drives the iterations, even for workers that receive no
shares in a round.  After the last round the ranks leave the loop.

Run it with ``python examples/pagerank.py -w 2 --nodes 100 --edges 400``.
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
    Product,
    ScopeBuilder,
    Stream,
)

Edge = tuple[int, int]
KINDS = {"share": 0, "dangling": 1, "rank": 2}


def random_graph(nodes: int, edges: int, seed: int) -> list[Edge]:
    """Up to ``edges`` distinct random directed edges (no self-loops) among ``0 .. nodes - 1``."""
    rng = random.Random(seed)
    chosen: set[Edge] = set()
    for _ in range(edges):
        src, dst = rng.randrange(nodes), rng.randrange(nodes)
        if src != dst:
            chosen.add((src, dst))
    return sorted(chosen)


def pagerank(edges: Stream, nodes: int, iterations: int, damping: float) -> Stream:
    """``(node, rank)`` for nodes ``0 .. nodes - 1`` after ``iterations`` rounds over ``edges``."""
    scope = edges.scope
    mine = [v for v in range(nodes) if hash(v) % scope.peers == scope.index]
    adjacency: dict[int, list[int]] = {}
    shares: dict[Any, dict[int, float]] = {}
    dangling: dict[Any, float] = {}
    base = (1.0 - damping) / nodes

    def logic(
        edges_and_shares: OperatorInput,
        dangling_totals: OperatorInput,
        output: OperatorOutput,
        notificator: Notificator,
    ) -> None:
        for ref, batch in edges_and_shares:
            received = shares.setdefault(ref.time, {})
            for kind, node, value in batch:
                if kind == "edge":
                    adjacency.setdefault(node, []).append(value)
                else:
                    received[node] = received.get(node, 0.0) + value
        for ref, batch in dangling_totals:
            dangling[ref.time] = dangling.get(ref.time, 0.0) + sum(record[2] for record in batch)
        for capability in notificator:
            time = capability.time
            received = shares.pop(time, {})
            spread = dangling.pop(time, 0.0) / nodes
            if time.inner == 0:
                ranks = {v: 1.0 / nodes for v in mine}
            else:
                ranks = {v: base + damping * (received.get(v, 0.0) + spread) for v in mine}
            session = output.session(capability)
            if time.inner == iterations:
                session.give_batch([("rank", v, rank) for v, rank in ranks.items()])
                continue
            out: list[tuple[str, int, float]] = []
            lost = 0.0
            for v, rank in ranks.items():
                targets = adjacency.get(v)
                if targets:
                    share = rank / len(targets)
                    out.extend(("share", target, share) for target in targets)
                else:
                    lost += rank
            # One copy per worker; the exchange on record[1] routes copy ``w`` to worker ``w``.
            out.extend(("dangling", worker, lost) for worker in range(scope.peers))
            session.give_batch(out)
            notificator.notify_at(capability.delayed(Product(time.outer, time.inner + 1)))

    def body(inner: ScopeBuilder) -> Stream:
        share_loop, share_feedback = inner.loop_variable(1, name="Shares")
        dangling_loop, dangling_feedback = inner.loop_variable(1, name="Dangling")
        tagged = edges.map(lambda edge: ("edge", edge[0], edge[1]), name="Tag")
        first = tagged.enter(inner).concat(share_feedback)
        updates = first.binary_notify(
            dangling_feedback,
            Exchange(lambda record: record[1]),
            Exchange(lambda record: record[1]),
            "Rank",
            logic,
            notify_at=[Product(0, 0)],
        )
        share, lost, ranks = updates.partition(3, lambda record: KINDS[record[0]], name="Kind")
        share.connect_loop(share_loop)
        lost.connect_loop(dangling_loop)
        return ranks.map(lambda record: (record[1], record[2]), name="Result").leave()

    return scope.iterative(body, name="PageRank")


def worker_main(
    worker: Worker, nodes: int, edges: list[Edge], iterations: int, damping: float
) -> list[tuple[int, float]]:
    """Build and drive the dataflow on one worker; return the ``(node, rank)`` it produced."""
    produced: list[tuple[int, float]] = []

    def build(scope: ScopeBuilder) -> Any:
        handle, stream = scope.new_input("Edges")
        ranks = pagerank(stream, nodes, iterations, damping)
        probe = ranks.inspect(produced.append, name="Collect").probe()
        return handle, probe

    handle, probe = worker.dataflow(build, name="pagerank")
    handle.send_batch(edge for i, edge in enumerate(edges) if i % worker.peers == worker.index)
    handle.close()
    worker.step_while(lambda: not probe.done())
    return produced


def run(
    nodes: int,
    edges: list[Edge],
    iterations: int = 20,
    damping: float = 0.85,
    workers: int = 1,
    processes: int = 1,
) -> dict[int, float]:
    """PageRank of nodes ``0 .. nodes - 1`` after ``iterations`` rounds, on ``workers`` workers."""
    job = partial(worker_main, nodes=nodes, edges=edges, iterations=iterations, damping=damping)
    return combine(execute(job, workers=workers, processes=processes))


def combine(outputs: list[list[tuple[int, float]]]) -> dict[int, float]:
    """The ranks every worker produced, as one dict."""
    result: dict[int, float] = {}
    for produced in outputs:
        for node, rank in produced:
            if node in result:
                raise AssertionError(f"node {node} reported twice")
            result[node] = rank
    return result


def reference(nodes: int, edges: list[Edge], iterations: int = 20, damping: float = 0.85) -> dict[int, float]:
    """The same power iteration in plain Python."""
    adjacency: dict[int, list[int]] = {v: [] for v in range(nodes)}
    for src, dst in edges:
        adjacency[src].append(dst)
    ranks = [1.0 / nodes] * nodes
    for _ in range(iterations):
        received = [0.0] * nodes
        lost = 0.0
        for v, targets in adjacency.items():
            if targets:
                for target in targets:
                    received[target] += ranks[v] / len(targets)
            else:
                lost += ranks[v]
        ranks = [(1.0 - damping) / nodes + damping * (r + lost / nodes) for r in received]
    return dict(enumerate(ranks))


def networkx_pagerank(nodes: int, edges: list[Edge], damping: float = 0.85) -> dict[int, float]:
    """PageRank by networkx, converged tightly (uses its pure-Python version without numpy)."""
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(range(nodes))
    graph.add_edges_from(edges)
    try:
        return dict(nx.pagerank(graph, alpha=damping, tol=1e-13, max_iter=10_000))
    except ImportError:
        from networkx.algorithms.link_analysis.pagerank_alg import _pagerank_python

        return dict(_pagerank_python(graph, alpha=damping, tol=1e-13, max_iter=10_000))


def max_difference(a: dict[int, float], b: dict[int, float]) -> float:
    """The largest per-node difference; infinite if the node sets differ."""
    if a.keys() != b.keys():
        return float("inf")
    return max((abs(a[v] - b[v]) for v in a), default=0.0)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False, parents=[cluster_arguments()])
    parser.add_argument("--help", action="help", help="show this help message and exit")
    parser.add_argument("--nodes", type=int, default=50, help="number of nodes")
    parser.add_argument("--edges", type=int, default=200, help="number of random edges to draw")
    parser.add_argument("--iterations", type=int, default=20, help="power iterations")
    parser.add_argument("--damping", type=float, default=0.85, help="damping factor")
    parser.add_argument("--seed", type=int, default=1, help="random seed for the graph")
    args = parser.parse_args(argv)
    if args.nodes < 1:
        parser.error(f"--nodes must be at least 1, got {args.nodes}")
    if not 0 <= args.damping <= 1:
        parser.error(f"--damping must be between 0 and 1, got {args.damping}")

    edges = random_graph(args.nodes, args.edges, args.seed)
    job = partial(worker_main, nodes=args.nodes, edges=edges, iterations=args.iterations, damping=args.damping)
    result = combine(execute_from_args(job, argv))
    top = sorted(result.items(), key=lambda item: -item[1])[:5]
    print(f"{args.nodes} nodes, {len(edges)} edges, {args.iterations} iterations")
    print("top ranks: " + ", ".join(f"{v}: {rank:.5f}" for v, rank in top))
    print(f"sum of ranks: {sum(result.values()):.12f}")
    difference = max_difference(result, reference(args.nodes, edges, args.iterations, args.damping))
    ok = difference <= 1e-9
    print(f"{args.workers * args.processes} worker(s); matches reference: {ok} (max difference {difference:.2e})")
    try:
        converged = networkx_pagerank(args.nodes, edges, args.damping)
    except ImportError:
        print("networkx is not installed; skipping the comparison with networkx.pagerank")
    else:
        print(f"max difference from networkx.pagerank: {max_difference(result, converged):.2e}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
