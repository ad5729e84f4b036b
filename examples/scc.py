"""Strongly connected components with a loop nested in a loop, as in the Naiad paper.

Run ``python examples/scc.py -w 2`` to find the dependency cycles among Debian
bookworm's packages (``examples/data/debian-bookworm-depends.tsv.gz``, lines
``package<TAB>dependency``), check them against networkx, and print a summary.

The algorithm
-------------
An edge lies inside a strongly connected component (SCC) exactly when its two
ends reach each other.  The outer loop shrinks the edge set until only such
edges are left.  One outer round:

1. *Forward labels* (inner loop).  Every node that has an incoming edge starts
   with its own name as label; each inner round, nodes whose label went down
   offer it to their successors, until nothing changes.  A node's label is then
   the smallest labelled node that reaches it along the remaining edges.  A node
   without incoming edges gets no label: it cannot be on a cycle.
2. Keep the edges whose two ends got the same forward label (and reverse them).
3. *Backward labels*: the same inner loop over the reversed kept edges.
4. Keep the edges whose two ends got the same backward label (reversing them
   back).

An edge inside an SCC is never dropped (its ends are reached by, and reach, the
same nodes), and every round that does not drop anything proves that the edge
set is stable.  When it is, the remaining edges are the edges inside SCCs, and
both labels of a node are the smallest node of its SCC: the SCCs are the nodes
grouped by label.

Timely dataflow without differential dataflow
---------------------------------------------
Naiad runs this algorithm with differential dataflow, which moves only changes
around the loops.  Here every round carries its full state: the edge set goes
round the outer loop (times ``Product(epoch, round)``), and each inner loop
(times ``Product(Product(epoch, round), step)``) carries label offers.

* :func:`propagate` is one operator per worker, holding the edges whose source
  it owns (exchanged by source) and the labels of the nodes it owns (offers
  exchanged by node).  A notification at each inner step closes that step: the
  operator keeps each node's smallest offer and sends lowered labels along the
  node's edges.  When the operator's input frontiers have passed every step of
  an outer round, the labels are final: it emits each edge with its source's
  label, and each node's label, under capabilities it kept on two outputs that
  leave the inner loop.
* :func:`keep_equal` joins those two streams on the edges' targets at each
  outer round, keeping edges whose ends have equal labels; the kept record
  ``(target, source, label)`` is already the reversed edge for the next phase.
* :func:`gate` decides, once an outer round is complete, whether it changed the
  edge set (every worker broadcasts how many edges it had before and after); if
  it did the kept edges go round again, otherwise they leave the loop, which
  ends because nothing is fed back.

Run ``python examples/scc.py --help`` for the options.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from itertools import repeat
from operator import itemgetter, neg
from pathlib import Path
from time import perf_counter
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing pytimely
    sys.path.insert(0, str(ROOT))

from runtime import execute, execute_from_args  # noqa: E402
from runtime.cluster import cluster_arguments  # noqa: E402
from runtime.worker import Worker  # noqa: E402
from scopes import (  # noqa: E402
    Broadcast,
    Capability,
    Exchange,
    Notificator,
    OperatorInfo,
    OperatorInput,
    OperatorOutput,
    Pipeline,
    ScopeBuilder,
    Stream,
    generic,
    less_equal,
)

DEFAULT_INPUT = ROOT / "examples" / "data" / "debian-bookworm-depends.tsv.gz"

Node = Any
"""A node: any hashable value; the nodes of one graph must be mutually comparable."""
Edge = tuple[Any, ...]
"""``(source, target)``, or ``(source, target, label)`` once the edge has been through a round."""

_first = itemgetter(0)
_third = itemgetter(2)


# ---------------------------------------------------------------------- inner loop


class _RoundState:
    """One worker's label propagation for one outer round."""

    __slots__ = ("successors", "labels", "offers", "edges_out", "labels_out")

    def __init__(self, edges_out: Capability, labels_out: Capability) -> None:
        self.successors: defaultdict[Node, list[Node]] = defaultdict(list)
        self.labels: dict[Node, Node] = {}
        self.offers: dict[Any, dict[Node, Node]] = {}
        self.edges_out = edges_out
        self.labels_out = labels_out


def propagate(edges: Stream, name: str) -> tuple[Stream, Stream]:
    """Label every node with the smallest labelled node reaching it along ``edges``.

    ``edges`` holds ``(source, target, ...)`` records in a loop scope.  Returns,
    at each time of that scope, ``(target, source, label of source)`` for every
    edge whose source got a label, and ``(node, label)`` for every labelled node.
    """

    def body(inner: ScopeBuilder) -> tuple[Stream, Stream]:
        handle, offers = inner.loop_variable(1, name=f"{name}Offers")
        outputs = generic(
            inner,
            name,
            [(edges.enter(inner), Exchange(_first)), (offers, Exchange(_first))],
            3,
            _propagation_logic(name),
            notify=True,
            frontiers=True,
        )
        outputs[0].connect_loop(handle)
        return outputs[1].leave(), outputs[2].leave()

    return edges.scope.iterative(body, name=name)


def _propagation_logic(name: str) -> Callable[..., Callable[[list[Any], list[Any]], None]]:
    def constructor(
        capabilities: list[Capability], info: OperatorInfo, frontiers: list[Any]
    ) -> Callable[[list[OperatorInput], list[OperatorOutput]], None]:
        for capability in capabilities:
            capability.drop()
        notificator = Notificator(frontiers, name)
        rounds: dict[Any, _RoundState] = {}

        def state_for(ref: Any) -> _RoundState:
            outer = ref.time.outer
            state = rounds.get(outer)
            if state is None:
                state = rounds[outer] = _RoundState(ref.retain(1), ref.retain(2))
            return state

        def finished(outer: Any) -> bool:
            """Whether no time of outer round ``outer`` can reach the inputs any more."""
            for frontier in frontiers:
                for point in frontier.elements:
                    if less_equal(point.outer, outer):
                        return False
            return True

        def logic(inputs: list[OperatorInput], outputs: list[OperatorOutput]) -> None:
            edge_input, offer_input = inputs
            offer_output, edge_output, label_output = outputs
            for ref, batch in edge_input:
                successors = state_for(ref).successors
                for edge in batch:
                    successors[edge[0]].append(edge[1])
                notificator.notify_at(ref.retain())
            for ref, batch in offer_input:
                state = state_for(ref)
                best = state.offers.get(ref.time)
                if best is None:
                    best = state.offers[ref.time] = {}
                    notificator.notify_at(ref.retain())
                get = best.get
                for node, label in batch:
                    current = get(node)
                    if current is None or label < current:
                        best[node] = label
            for capability in notificator:
                time = capability.time
                state = rounds[time.outer]
                successors = state.successors
                sent: list[tuple[Node, Node]] = []
                if time.inner == 0:
                    # Start: every target of an edge offers itself its own name.
                    targets: set[Node] = set()
                    for nodes in successors.values():
                        targets.update(nodes)
                    sent.extend(zip(targets, targets, strict=True))
                else:
                    labels = state.labels
                    for node, label in state.offers.pop(time, {}).items():
                        current = labels.get(node)
                        if current is None or label < current:
                            labels[node] = label
                            following = successors.get(node)
                            if following:
                                sent.extend(zip(following, repeat(label)))
                if sent:
                    offer_output.session(capability).give_batch(sent)
            for outer in [outer for outer in rounds if finished(outer)]:
                state = rounds.pop(outer)
                labels = state.labels
                labelled: list[tuple[Node, Node, Node]] = []
                for source, nodes in state.successors.items():
                    label = labels.get(source)
                    if label is not None:
                        labelled.extend(zip(nodes, repeat(source), repeat(label)))
                if labelled:
                    edge_output.session(state.edges_out).give_batch(labelled)
                if labels:
                    label_output.session(state.labels_out).give_batch(list(labels.items()))
                edge_output.flush()
                label_output.flush()
                state.edges_out.drop()
                state.labels_out.drop()

        return logic

    return constructor


# ---------------------------------------------------------------------- outer loop


def keep_equal(labelled: Stream, labels: Stream, name: str) -> Stream:
    """Keep the ``(target, source, label)`` records whose target has the same label.

    The kept records, read as ``(source, target, label)``, are the reversed edges.
    """
    waiting: dict[Any, list[list[Edge]]] = {}
    known: dict[Any, dict[Node, Node]] = {}

    def logic(edges: OperatorInput, nodes: OperatorInput, output: OperatorOutput, notificator: Notificator) -> None:
        for ref, batch in edges:
            batches = waiting.get(ref.time)
            if batches is None:
                batches = waiting[ref.time] = []
                notificator.notify_at(ref.retain())
            batches.append(batch)
        for ref, batch in nodes:
            table = known.get(ref.time)
            if table is None:
                table = known[ref.time] = {}
                notificator.notify_at(ref.retain())
            table.update(batch)
        for capability in notificator:
            batches = waiting.pop(capability.time, [])
            get = known.pop(capability.time, {}).get
            kept = [edge for batch in batches for edge in batch if get(edge[0]) == edge[2]]
            if kept:
                output.session(capability).give_batch(kept)

    return labelled.binary_notify(labels, Exchange(_first), Exchange(_first), name, logic)


def gate(edges: Stream, tallies: Stream, name: str = "Gate") -> tuple[Stream, Stream]:
    """Route each round's ``edges`` to ``(next round, result)``.

    ``tallies`` carries, per round, numbers that sum to how many edges the round
    removed (broadcast, so every worker sees all of them).  Edges go round again
    if the round removed any, and leave as the result otherwise.
    """

    def constructor(
        capabilities: list[Capability], info: OperatorInfo, frontiers: list[Any]
    ) -> Callable[[list[OperatorInput], list[OperatorOutput]], None]:
        for capability in capabilities:
            capability.drop()
        notificator = Notificator(frontiers, name)
        waiting: dict[Any, list[list[Edge]]] = {}
        removed: dict[Any, int] = {}
        result_capabilities: dict[Any, Capability] = {}

        def track(ref: Any) -> None:
            if ref.time not in result_capabilities:
                result_capabilities[ref.time] = ref.retain(1)
                notificator.notify_at(ref.retain(0))

        def logic(inputs: list[OperatorInput], outputs: list[OperatorOutput]) -> None:
            for ref, batch in inputs[0]:
                track(ref)
                waiting.setdefault(ref.time, []).append(batch)
            for ref, batch in inputs[1]:
                track(ref)
                removed[ref.time] = removed.get(ref.time, 0) + sum(batch)
            for capability in notificator:
                time = capability.time
                result = result_capabilities.pop(time)
                edges = [edge for batch in waiting.pop(time, []) for edge in batch]
                if edges:
                    if removed.pop(time, 0):
                        outputs[0].session(capability).give_batch(edges)
                    else:
                        outputs[1].session(result).give_batch(edges)
                removed.pop(time, None)
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


def scc_edges(edges: Stream, rounds: Callable[[Any, list[Edge]], None] | None = None) -> Stream:
    """The edges of ``edges`` that lie inside strongly connected components.

    Emits ``(source, target, label)`` where ``label`` is the smallest node of the
    edge's component.  ``rounds(time, batch)``, if given, sees each outer round's
    edges.
    """

    def body(loop: ScopeBuilder) -> Stream:
        handle, again = loop.loop_variable(1, name="NextRound")
        current = edges.enter(loop).concat(again)
        if rounds is not None:
            current = current.inspect_batch(rounds, name="RoundSizes")
        forward = keep_equal(*propagate(current, "Forward"), name="KeepForward")
        backward = keep_equal(*propagate(forward, "Backward"), name="KeepBackward")
        tallies = current.count().concat(backward.count().map(neg))
        proceed, result = gate(backward, tallies)
        proceed.connect_loop(handle)
        return result.leave()

    return edges.scope.iterative(body, name="Rounds")


def group_components(edges: Stream) -> Stream:
    """Turn labelled SCC edges into ``(label, sorted members)`` for components of 2+ nodes."""
    members: dict[Any, dict[Node, set[Node]]] = {}

    def logic(input: OperatorInput, output: OperatorOutput, notificator: Notificator) -> None:
        for ref, batch in input:
            groups = members.get(ref.time)
            if groups is None:
                groups = members[ref.time] = defaultdict(set)
                notificator.notify_at(ref.retain())
            for source, target, label in batch:
                group = groups[label]
                group.add(source)
                group.add(target)
        for capability in notificator:
            groups = members.pop(capability.time)
            found = [(label, tuple(sorted(group))) for label, group in groups.items() if len(group) > 1]
            if found:
                output.session(capability).give_batch(found)

    return edges.unary_notify(Exchange(_third), "Components", logic)


# ---------------------------------------------------------------------- running it


def read_edges(path: Path, index: int = 0, peers: int = 1, limit: int | None = None) -> Iterator[tuple[str, str]]:
    """The edges on lines ``i`` of ``path`` (gzip TSV) with ``i % peers == index``, ``i < limit``."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for number, line in enumerate(lines):
            if limit is not None and number >= limit:
                break
            if number % peers != index:
                continue
            fields = line.rstrip("\n").split("\t")
            if len(fields) >= 2:
                yield fields[0], fields[1]


class Outcome:
    """What one worker found: components, and the edges it saw in each outer round."""

    def __init__(self) -> None:
        self.components: list[tuple[Node, tuple[Node, ...]]] = []
        self.rounds: dict[int, int] = {}


def scc_worker(
    worker: Worker, edges_for: Callable[[int, int], Iterable[Edge]]
) -> tuple[list[tuple[Node, tuple[Node, ...]]], dict[int, int]]:
    """Build and run the dataflow on one worker, which reads ``edges_for(index, peers)``.

    Returns the components this worker reported and the edges it saw in each outer round.
    """
    outcome = Outcome()

    def count_round(time: Any, batch: list[Edge]) -> None:
        outcome.rounds[time.inner] = outcome.rounds.get(time.inner, 0) + len(batch)

    def build(scope: ScopeBuilder) -> None:
        edges = scope.to_stream(edges_for(worker.index, worker.peers), name="ReadEdges")
        components = group_components(scc_edges(edges, count_round))
        components.inspect_batch(lambda time, batch: outcome.components.extend(batch))

    worker.dataflow(build, name="scc")
    return outcome.components, outcome.rounds


def file_worker(
    worker: Worker, path: str, limit: int | None
) -> tuple[list[tuple[Node, tuple[Node, ...]]], dict[int, int]]:
    """:func:`scc_worker` on this worker's share of the lines of ``path`` (importable by other processes)."""
    return scc_worker(worker, partial(read_edges, Path(path), limit=limit))


def summarize(
    outcomes: list[tuple[list[tuple[Node, tuple[Node, ...]]], dict[int, int]]],
) -> tuple[list[frozenset[Node]], list[int]]:
    """The components with more than one node (largest first), and the edges entering each outer round."""
    components = [frozenset(members) for found, _ in outcomes for _, members in found]
    components.sort(key=lambda c: (-len(c), sorted(map(str, c))))
    totals: dict[int, int] = defaultdict(int)
    for _, rounds in outcomes:
        for number, size in rounds.items():
            totals[number] += size
    return components, [totals[number] for number in sorted(totals)]


def run_scc(
    edges_for: Callable[[int, int], Iterable[Edge]], workers: int = 1
) -> tuple[list[frozenset[Node]], list[int]]:
    """Compute SCCs with ``workers`` workers; worker ``i`` of ``n`` reads ``edges_for(i, n)``.

    Returns the components with more than one node (largest first) and the
    number of edges at the start of each outer round.
    """
    return summarize(execute(partial(scc_worker, edges_for=edges_for), workers=workers))


def networkx_components(edges: Iterable[tuple[Any, Any]]) -> list[frozenset[Node]] | None:
    """The SCCs with more than one node, by networkx; ``None`` if networkx is not installed."""
    try:
        nx = importlib.import_module("networkx")
    except ImportError:
        return None
    graph = nx.DiGraph()
    graph.add_edges_from(edges)
    return [frozenset(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], add_help=False, parents=[cluster_arguments()]
    )
    parser.add_argument("--help", action="help", help="show this help message and exit")
    parser.add_argument("--input", type=Path, default=DEFAULT_INPUT, help="gzip TSV of 'package<TAB>dependency'")
    parser.add_argument("--limit-edges", type=int, default=None, help="read only the first K lines")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    if args.limit_edges is not None and args.limit_edges < 0:
        parser.error("--limit-edges must not be negative")

    path: Path = args.input
    limit: int | None = args.limit_edges
    everything = list(read_edges(path, limit=limit))
    nodes = {node for edge in everything for node in edge}
    print(f"Strongly connected components of {path.name}")
    print(f"  {len(everything):,} edges between {len(nodes):,} nodes; {args.workers * args.processes} worker(s)")

    start = perf_counter()
    found, rounds = summarize(execute_from_args(partial(file_worker, path=str(path), limit=limit), argv))
    elapsed = perf_counter() - start

    sizes = [len(component) for component in found]
    print(f"  {len(rounds)} outer round(s); edges entering each: {' -> '.join(f'{n:,}' for n in rounds) or 'none'}")
    print(
        f"  {len(found)} components with more than one node; largest sizes: {', '.join(map(str, sizes[:10])) or 'none'}"
    )
    for component in found[:3]:
        print(f"    {len(component)}: {', '.join(sorted(map(str, component)))}")
    print(f"  timely dataflow: {elapsed:.1f} s (each worker reading its share of the file, then SCC)")

    start = perf_counter()
    expected = networkx_components(everything)
    if expected is None:
        print("  check against networkx: skipped (networkx is not installed)")
        return 0
    print(f"  networkx:        {perf_counter() - start:.1f} s")
    if set(found) == set(expected) and len(found) == len(expected):
        print("  check against networkx.strongly_connected_components: OK")
        return 0
    missing = set(expected) - set(found)
    extra = set(found) - set(expected)
    print(
        f"  check against networkx.strongly_connected_components: MISMATCH "
        f"({len(missing)} missing, {len(extra)} unexpected)"
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
