"""Strongly connected components of the Debian dependency graph, columnar: NumPy batches, a loop in a loop.

Run ``python examples/scc_columnar.py --check`` to find the dependency cycles
among Debian bookworm's packages and compare every component with networkx's
(timing networkx's graph build and its algorithm).

The algorithm is the forward-backward colouring with trimming of
``examples/scc.py`` (read its docstring for why it is right), with every batch a
NumPy structured array of interned ``int32`` node ids
(:mod:`examples.connected_components_columnar` reads and interns the graph and
provides the label propagation).  One outer round:

1. *Forward labels*: :func:`~connected_components_columnar.propagate` in an
   inner loop gives every node with an incoming edge the smallest node id that
   reaches it; it emits every edge as ``(dst, src, label of src)``.
2. :func:`keep_equal` keeps the edges whose two ends got the same label; the
   kept rows, read as ``(src, dst, label)``, are the reversed edges.
3. *Backward labels* over the reversed kept edges, and :func:`keep_equal` again,
   which reverses them back.

:func:`gate` sends the kept edges round again while a round removes any edge
(every worker broadcasts how many edges entered and left its share of the
round), and out of the loop otherwise: they are the edges inside strongly
connected components, labelled with the component's smallest node.  A node on
no such edge is a component of its own.

Every operator keeps its state in dense arrays indexed by ``node // peers``:
worker ``w`` owns the nodes ``w, w + peers, ...``.  Only the input edges and the
labelled edges in :func:`keep_equal` cross workers; the kept edges already sit
on the worker that owns their new source, so they stay where they are.

Run ``python examples/scc_columnar.py --help`` for the options;
``-w``, ``-n``, ``-p``, ``-h`` and ``--log`` are the cluster flags of every example.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from time import perf_counter
from typing import Any

import numpy as np

EXAMPLES = Path(__file__).resolve().parent
ROOT = EXAMPLES.parent
for entry in (ROOT, EXAMPLES):
    if str(entry) not in sys.path:  # run from a checkout without installing pytimely
        sys.path.insert(0, str(entry))

from connected_components_columnar import (  # noqa: E402
    LABELLED,
    NO_LABEL,
    OFFER,
    Graph,
    as_ids,
    components_of,
    concat_arrays,
    emit,
    load_graph,
    owner,
    propagate,
    run_on_file,
)

from runtime.worker import Worker  # noqa: E402
from scopes import (  # noqa: E402
    Broadcast,
    Capability,
    Notificator,
    OperatorInfo,
    OperatorInput,
    OperatorOutput,
    Pipeline,
    ScopeBuilder,
    Stream,
    generic,
)
from scopes.channels import ExchangeBatch  # noqa: E402

REVERSED = np.dtype([("src", np.int32), ("dst", np.int32), ("label", np.int32)])
"""A kept :data:`LABELLED` row read as the reversed edge: the same bytes, the first two fields renamed."""


def keep_equal(labelled: Stream, labels: Stream, nodes: int, name: str) -> Stream:
    """Keep the :data:`LABELLED` rows whose target has the same label; emit them as :data:`REVERSED` edges.

    ``labels`` (:data:`OFFER` rows) must already be on the worker that owns
    each node, as :func:`~connected_components_columnar.propagate` leaves them.
    """
    scope = labelled.scope
    peers, index = scope.peers, scope.index
    owned = owner(index, peers, nodes)
    edges_at: dict[Any, list[np.ndarray]] = {}
    labels_at: dict[Any, list[np.ndarray]] = {}

    def logic(
        edges: OperatorInput, node_labels: OperatorInput, output: OperatorOutput, notificator: Notificator
    ) -> None:
        for source, waiting in ((edges, edges_at), (node_labels, labels_at)):
            for ref, batch in source:
                parts = waiting.get(ref.time)
                if parts is None:
                    parts = waiting[ref.time] = []
                    notificator.notify_at(ref.retain())
                parts.append(batch)  # type: ignore[arg-type]
        for capability in notificator:
            rows = concat_arrays(edges_at.pop(capability.time, []), LABELLED)
            known = concat_arrays(labels_at.pop(capability.time, []), OFFER)
            table = np.full(owned, NO_LABEL, np.int32)
            table[known["node"] // peers] = known["label"]
            kept = rows[table[rows["dst"] // peers] == rows["label"]]
            emit(output, capability, kept.view(REVERSED))

    return labelled.binary_notify(labels, ExchangeBatch("dst"), Pipeline, name, logic)


def tally(stream: Stream, sign: int, name: str) -> tuple[Stream, Stream]:
    """Pass ``stream`` on, and emit ``[sign * rows]`` for each of its batches on a second stream."""

    def constructor(
        capabilities: list[Capability], info: OperatorInfo
    ) -> Callable[[list[OperatorInput], list[OperatorOutput]], None]:
        for capability in capabilities:
            capability.drop()

        def logic(inputs: list[OperatorInput], outputs: list[OperatorOutput]) -> None:
            for ref, batch in inputs[0]:
                emit(outputs[0], ref, batch)
                outputs[1].session(ref.retain(1)).give(sign * len(batch))

        return logic

    passed, counts = generic(stream.scope, name, [(stream, Pipeline)], 2, constructor, notify=False)
    return passed, counts


def gate(edges: Stream, tallies: Stream, name: str = "Gate") -> tuple[Stream, Stream]:
    """Route each round's ``edges`` to ``(next round, result)``.

    ``tallies`` carries, per round, numbers that sum to how many edges the round
    removed (broadcast, so that every worker sees all of them).  Edges go round
    again if the round removed any, and leave as the result otherwise.
    """

    def constructor(
        capabilities: list[Capability], info: OperatorInfo, frontiers: list[Any]
    ) -> Callable[[list[OperatorInput], list[OperatorOutput]], None]:
        for capability in capabilities:
            capability.drop()
        notificator = Notificator(frontiers, name)
        waiting: dict[Any, list[np.ndarray]] = {}
        removed: dict[Any, int] = {}
        result_capabilities: dict[Any, Capability] = {}

        def track(ref: Any) -> None:
            if ref.time not in result_capabilities:
                result_capabilities[ref.time] = ref.retain(1)
                notificator.notify_at(ref.retain(0))

        def logic(inputs: list[OperatorInput], outputs: list[OperatorOutput]) -> None:
            for ref, batch in inputs[0]:
                track(ref)
                waiting.setdefault(ref.time, []).append(batch)  # type: ignore[arg-type]
            for ref, batch in inputs[1]:
                track(ref)
                removed[ref.time] = removed.get(ref.time, 0) + sum(batch)
            for capability in notificator:
                time = capability.time
                result = result_capabilities.pop(time)
                kept = concat_arrays(waiting.pop(time, []), REVERSED)
                if removed.pop(time, 0):
                    emit(outputs[0], capability, kept)
                else:
                    emit(outputs[1], result, kept)
                outputs[1].flush()
                result.drop()

        return logic

    again, done = generic(
        edges.scope,
        name,
        [(edges, Pipeline), (tallies, Broadcast)],
        2,
        constructor,
        notify=True,
        frontiers=True,
    )
    return again, done


def scc_edges(edges: Stream, nodes: int, rounds: Callable[[Any, list[int]], None] | None = None) -> Stream:
    """The edges of ``edges`` that lie inside strongly connected components, as :data:`REVERSED` rows.

    ``edges`` carries arrays with ``src`` and ``dst`` columns on the worker that
    owns ``src``; the result's ``label`` is the smallest node of the edge's
    component, and each row is on the worker that owns its ``src``.
    ``rounds(time, [count])``, if given, sees how many edges enter each round on this worker.
    """

    def body(loop: ScopeBuilder) -> Stream:
        handle, again = loop.loop_variable(1, name="NextRound")
        current, entering = tally(edges.enter(loop).concat(again), 1, "Entering")
        if rounds is not None:
            entering = entering.inspect_batch(rounds, name="RoundSizes")
        forward = keep_equal(*propagate(current, nodes, "Forward"), nodes, "KeepForward")
        backward = keep_equal(*propagate(forward, nodes, "Backward"), nodes, "KeepBackward")
        kept, leaving = tally(backward, -1, "Kept")
        proceed, result = gate(kept, entering.concat(leaving))
        proceed.connect_loop(handle)
        return result.leave()

    return edges.scope.iterative(body, name="Rounds")


def scc_worker(worker: Worker, graph: Graph) -> tuple[list[int], list[int], dict[int, int]]:
    """Build and run the SCC dataflow on this worker's share of ``graph``.

    Returns the nodes of components of two nodes or more that this worker
    owns, the smallest node of each one's component, and how many edges
    entered each outer round here.  Every other node is a component of its own.
    """
    found: list[Any] = []
    sizes: dict[int, int] = {}

    def count_round(time: Any, batch: list[int]) -> None:
        sizes[time.inner] = sizes.get(time.inner, 0) + sum(batch)

    def build(scope: ScopeBuilder) -> Any:
        handle, edges = scope.new_input("Edges")
        inside = scc_edges(edges.exchange_batch("src", name="BySource"), graph.nodes, count_round)
        return handle, inside.inspect_batch(lambda time, batch: found.append(batch), name="Collect").probe()

    handle, probe = worker.dataflow(build, name="scc columnar")
    handle.send_batch(graph.share(worker.index, worker.peers))
    handle.close()
    worker.step_while(lambda: not probe.done())
    inside = concat_arrays(found, REVERSED)
    nodes, first = np.unique(inside["src"], return_index=True)  # every node of a cycle leads an edge inside it
    return nodes.tolist(), inside["label"][first].tolist(), sizes


def file_worker(worker: Worker, path: str, limit: int | None) -> tuple[list[int], list[int], dict[int, int]]:
    """:func:`scc_worker` on the graph in ``path`` (read and interned once per process)."""
    return scc_worker(worker, load_graph(path, limit))


def combine(outputs: Iterable[tuple[list[int], list[int], dict[int, int]]], nodes: int) -> tuple[np.ndarray, list[int]]:
    """Every worker's results as one label array indexed by node id, and the round sizes.

    A node no worker reported is a component of its own: its label is its id.
    """
    labels = np.arange(nodes, dtype=np.int64)
    totals: dict[int, int] = {}
    for owned, found, sizes in outputs:
        labels[np.asarray(owned, dtype=np.int64)] = found
        for number, size in sizes.items():
            totals[number] = totals.get(number, 0) + size
    return labels, [totals[number] for number in sorted(totals)]


def networkx_strong(pairs: list[tuple[str, str]]) -> list[set[str]]:
    """networkx's strongly connected components of the graph with edges ``pairs`` (build included)."""
    import importlib

    nx = importlib.import_module("networkx")
    graph = nx.DiGraph()
    graph.add_edges_from(pairs)
    return list(nx.strongly_connected_components(graph))


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    run = run_on_file(__doc__.splitlines()[0], file_worker, argv)
    args, graph, outputs, interned, compute = run.args, run.graph, run.outputs, run.interned, run.compute
    labels, rounds = combine(outputs, graph.nodes)
    found = components_of(labels)
    cycles = sorted((c for c in found if len(c) > 1), key=lambda c: (-len(c), min(c)))
    names = graph.names
    print(f"Strongly connected components of {args.input.name}, columnar")
    print(f"  {len(graph.src):,} edges between {graph.nodes:,} nodes; {args.workers * args.processes} worker(s)")
    print(f"  {len(rounds)} outer round(s); edges entering each: {' -> '.join(f'{n:,}' for n in rounds)}")
    print(
        f"  {len(found):,} components, {len(cycles)} with more than one node; largest sizes: "
        f"{', '.join(str(len(c)) for c in cycles[:10]) or 'none'}"
    )
    for cycle in cycles[:3]:
        print(f"    {len(cycle)}: {', '.join(sorted(names[sorted(cycle)].astype(str).tolist()))}")
    print(f"  read {run.read:.3f} s, intern {interned:.3f} s, compute {compute:.3f} s")
    if not args.check:
        return 0
    pairs = graph.name_pairs()
    start = perf_counter()
    expected = networkx_strong(pairs)
    baseline = perf_counter() - start
    print(f"  networkx build + strongly_connected_components: {baseline:.3f} s")
    print(f"  intern + compute / networkx: {(interned + compute) / baseline:.2f}")
    ok = found == as_ids(expected, graph)
    print(f"  check against networkx.strongly_connected_components: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
