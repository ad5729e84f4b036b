"""Weakly connected components of the Debian dependency graph, columnar: NumPy batches through a loop.

Run ``python examples/connected_components_columnar.py --check`` to label every
package of ``examples/data/debian-bookworm-depends.tsv.gz`` (``package<TAB>dependency``)
with the smallest package id of its weakly connected component, and compare the
components with networkx's (timing networkx's graph build and its algorithm).

The data
--------
Package names are interned once per process (:func:`load_graph`): the file is
split into one flat array of names, and Arrow's hash table (or, without
pyarrow, ``np.unique(..., return_inverse=True)``) turns them into ``int32`` ids
in the names' byte order, so that the dataflow moves only integer columns.
Every batch is a NumPy structured array: edges ``(src, dst)``, label offers
``(node, label)``, labelled edges ``(dst, src, label)``.  Each worker reads its
own contiguous share of the edges.

Who owns a node
---------------
Batches are exchanged by a node column, and an exchange sends an integer key
``k`` to worker ``k % peers`` (:func:`scopes.hashing.stable_hash`), so worker
``w`` owns the nodes ``w, w + peers, ...``; it keeps their labels in a dense
array indexed by ``node // peers``, and the edges leaving them in CSR form
(sorted by source, with row offsets).

The algorithm
-------------
:func:`propagate` is min-label propagation in a loop scope, one operator per
worker, the columnar twin of ``examples/scc.py``'s: at the first step every
target of an edge offers itself its own id; at each later step the owner keeps
each node's smallest offer (``np.minimum.at``), and the nodes whose label went
down offer it to their successors (one gather over the CSR rows of the changed
nodes).  A notification per step closes it.  Once the input frontiers have
passed the whole outer time, the labels are final and leave the loop.  For the
weakly connected components the edges go both ways, so every node is reached
by its whole component and its label is the component's smallest id.
:mod:`examples.scc_columnar` reuses the same operator for the strongly
connected components.

Run ``python examples/connected_components_columnar.py --help`` for the options;
``-w``, ``-n``, ``-p``, ``-h`` and ``--log`` are the cluster flags of every example.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import importlib.util
import sys
import threading
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import repeat
from pathlib import Path
from time import perf_counter
from typing import Any

import numpy as np

ARROW = importlib.util.find_spec("pyarrow") is not None
"""Whether names are interned with Arrow's hash table (else with ``np.unique``)."""
if ARROW:  # imported with the example, not by the first file read
    import pyarrow as pa
    import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing pytimely
    sys.path.insert(0, str(ROOT))

from runtime import execute_from_args  # noqa: E402
from runtime.cluster import cluster_arguments  # noqa: E402
from runtime.worker import Worker  # noqa: E402
from scopes import (  # noqa: E402
    Capability,
    CapabilityRef,
    ChannelContract,
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
from scopes.channels import ExchangeBatch  # noqa: E402

DEFAULT_INPUT = ROOT / "examples" / "data" / "debian-bookworm-depends.tsv.gz"

EDGE = np.dtype([("src", np.int32), ("dst", np.int32)])
"""An edge batch: ``(src, dst)`` node ids."""
OFFER = np.dtype([("node", np.int32), ("label", np.int32)])
"""A label batch: ``(node, label)``."""
LABELLED = np.dtype([("dst", np.int32), ("src", np.int32), ("label", np.int32)])
"""An edge with its source's label, keyed by its target: ``(dst, src, label)``."""
NO_LABEL = np.iinfo(np.int32).max
"""The label of a node that has none (yet)."""


# ---------------------------------------------------------------------- reading and interning


@dataclass(frozen=True)
class Graph:
    """A directed graph with interned node names: edge ``i`` goes from ``src[i]`` to ``dst[i]``."""

    names: np.ndarray
    """Node id -> name (``bytes``, sorted, so ids follow the names' byte order)."""
    src: np.ndarray
    dst: np.ndarray

    @property
    def nodes(self) -> int:
        """The number of nodes."""
        return len(self.names)

    def share(self, index: int, peers: int) -> np.ndarray:
        """Worker ``index`` of ``peers``'s contiguous share of the edges, as an :data:`EDGE` array."""
        count = len(self.src)
        low, high = count * index // peers, count * (index + 1) // peers
        edges = np.empty(high - low, EDGE)
        edges["src"] = self.src[low:high]
        edges["dst"] = self.dst[low:high]
        return edges

    def name_pairs(self) -> list[tuple[str, str]]:
        """The edges as ``(source name, target name)`` strings (what networkx is given)."""
        text = self.names.astype(object)
        return [(a.decode(), b.decode()) for a, b in zip(text[self.src], text[self.dst], strict=True)]


def read_names(path: Path, limit: int | None = None) -> Any:
    """The names on the first ``limit`` lines of ``path`` (gzip TSV), flat: source, target, source, ...

    Lines without a tab are skipped; fields after the second are ignored.  The
    names are a pyarrow binary array when pyarrow is installed (built in C from
    the split, for :func:`intern`'s hash table), else a NumPy ``bytes_`` array.
    """
    opener: Callable[..., Any] = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as file:
        data: bytes = file.read()
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    if limit is not None:
        lines = lines[:limit]
    tabs = data.count(b"\t") if limit is None else -1
    if tabs == len(lines) and all(map(bytes.__contains__, lines, repeat(b"\t"))):
        flat = data.replace(b"\t", b"\n").split(b"\n")  # one tab per line: split once
        if flat and not flat[-1]:
            flat.pop()
    else:
        flat = [field for line in lines if line.count(b"\t") >= 1 for field in line.split(b"\t")[:2]]
    if ARROW:
        return pa.array(flat, pa.binary())
    return np.array(flat, dtype=np.bytes_)  # fixed width: np.unique sorts these fastest


def intern(flat: Any) -> Graph:
    """Intern names (:func:`read_names`'s array) to ``int32`` ids in the names' byte order.

    With pyarrow, Arrow's hash table finds the distinct names (its dictionary
    encoding) and only those are sorted: about ten times faster than
    ``np.unique(..., return_inverse=True)``, which sorts every name and is the
    way without it.  Both give the same ids.
    """
    if not ARROW:
        names, inverse = np.unique(flat, return_inverse=True)
        ids = inverse.astype(np.int32).reshape(-1, 2)
        return Graph(names, np.ascontiguousarray(ids[:, 0]), np.ascontiguousarray(ids[:, 1]))
    if not isinstance(flat, pa.Array):  # a NumPy bytes_ array: its values as NumPy gives them (not cut at a NUL)
        flat = pa.array(np.asarray(flat).tolist(), pa.binary())
    encoded = pc.dictionary_encode(flat)
    order = pc.sort_indices(encoded.dictionary).to_numpy()
    rank = np.empty(len(order), np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    ids = rank[encoded.indices.to_numpy(zero_copy_only=False)].reshape(-1, 2)
    names = np.array(encoded.dictionary.take(order).to_pylist(), dtype=np.bytes_)
    return Graph(names, np.ascontiguousarray(ids[:, 0]), np.ascontiguousarray(ids[:, 1]))


_loaded: dict[tuple[str, int | None], Graph] = {}
_loading = threading.Lock()


def load_graph(path: Path | str, limit: int | None = None) -> Graph:
    """Read and intern ``path`` once per process (the workers of one process share it)."""
    key = (str(path), limit)
    with _loading:
        graph = _loaded.get(key)
        if graph is None:
            graph = _loaded[key] = intern(read_names(Path(path), limit))
        return graph


def loaded(path: Path | str, limit: int | None, graph: Graph) -> None:
    """Remember ``graph`` as what :func:`load_graph` returns for ``path`` in this process."""
    with _loading:
        _loaded[(str(path), limit)] = graph


def graph_from_edges(edges: Sequence[tuple[int, int]], nodes: int) -> Graph:
    """A :class:`Graph` of integer nodes ``0 .. nodes - 1`` named by their decimal ids (for tests)."""
    pairs = np.array(edges, dtype=np.int32).reshape(-1, 2)
    names = np.array([str(v).encode() for v in range(nodes)], dtype=np.bytes_)
    return Graph(names, np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1]))


# ---------------------------------------------------------------------- columnar plumbing


def owner(index: int, peers: int, nodes: int) -> int:
    """How many of the nodes ``0 .. nodes - 1`` worker ``index`` of ``peers`` owns (``index, index + peers, ...``).

    An exchange by an integer column sends key ``k`` to worker ``k % peers``
    (:func:`scopes.hashing.stable_hash_array`), so these are the nodes whose
    rows this worker receives; it stores them at ``node // peers``.
    """
    return (nodes - index + peers - 1) // peers


def emit(output: OperatorOutput, capability: Capability | CapabilityRef, batch: Any) -> None:
    """Send ``batch`` (an array: one message; nothing if empty) at ``capability``'s time."""
    output.session(capability).give_batch(batch)


def concat_arrays(parts: list[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """One array of everything in ``parts`` (an empty ``dtype`` array if there is nothing)."""
    if not parts:
        return np.empty(0, dtype)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def sort_order(keys: np.ndarray, bound: int) -> np.ndarray:
    """Indices that sort ``keys`` (integers in ``0 .. bound - 1``) stably, by radix sorts of 16-bit digits.

    NumPy radix-sorts 16-bit keys (``kind="stable"``); keys below ``2**32`` take
    two such passes, low digit first, which is about twice as fast as a
    comparison sort of 8 million keys.
    """
    if bound <= 1 << 16:
        return np.argsort(keys.astype(np.uint16), kind="stable")
    if bound <= 1 << 32:
        order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
        high = (keys[order] >> 16).astype(np.uint16)
        return order[np.argsort(high, kind="stable")]
    return np.argsort(keys, kind="stable")


def rows(starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """The indices ``starts[i] .. stops[i] - 1`` of every row ``i``, concatenated (a CSR gather)."""
    lengths = stops - starts
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, np.int64)
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(starts - offsets, lengths) + np.arange(total)


# ---------------------------------------------------------------------- label propagation


class _Round:
    """One worker's propagation state for one outer time."""

    __slots__ = ("parts", "offers", "labels", "indptr", "targets", "edges_out", "labels_out")

    def __init__(self, edges_out: Capability, labels_out: Capability) -> None:
        self.parts: list[np.ndarray] = []
        self.offers: dict[Any, list[np.ndarray]] = {}
        self.labels: np.ndarray | None = None
        self.indptr = np.zeros(1, np.int64)
        self.targets = np.empty(0, np.int32)
        self.edges_out = edges_out
        self.labels_out = labels_out


def propagate(
    edges: Stream,
    nodes: int,
    name: str,
    edges_contract: ChannelContract | None = None,
    labelled_edges: bool = True,
) -> tuple[Stream, Stream]:
    """Label every node with the smallest node id that reaches it along ``edges``.

    ``edges`` carries arrays with ``src`` and ``dst`` columns, on the worker
    that owns ``src`` already (or routed by ``edges_contract``, default: they are).
    ``nodes`` bounds the ids.  Returns, at each time of ``edges``'s scope,
    :data:`LABELLED` arrays ``(dst, src, label of src)`` for every edge whose
    source got a label (only if ``labelled_edges``), and :data:`OFFER` arrays
    ``(node, label)`` for every labelled node, on the worker that owns it.  A
    node without incoming edges gets no label.
    """
    contract = Pipeline if edges_contract is None else edges_contract

    def body(inner: ScopeBuilder) -> tuple[Stream, Stream]:
        handle, offers = inner.loop_variable(1, name=f"{name}Offers")
        outputs = generic(
            inner,
            name,
            [(edges.enter(inner), contract), (offers, ExchangeBatch("node"))],
            3,
            _propagation(name, nodes, inner.index, inner.peers, labelled_edges),
            notify=True,
            frontiers=True,
        )
        outputs[0].connect_loop(handle)
        return outputs[1].leave(), outputs[2].leave()

    return edges.scope.iterative(body, name=name)


def _propagation(
    name: str, nodes: int, index: int, peers: int, labelled_edges: bool
) -> Callable[..., Callable[[list[OperatorInput], list[OperatorOutput]], None]]:
    owned = owner(index, peers, nodes)

    def constructor(
        capabilities: list[Capability], info: OperatorInfo, frontiers: list[Any]
    ) -> Callable[[list[OperatorInput], list[OperatorOutput]], None]:
        for capability in capabilities:
            capability.drop()
        notificator = Notificator(frontiers, name)
        rounds: dict[Any, _Round] = {}

        def state_for(ref: Any) -> _Round:
            outer = ref.time.outer
            state = rounds.get(outer)
            if state is None:
                state = rounds[outer] = _Round(ref.retain(1), ref.retain(2))
            return state

        def finished(outer: Any) -> bool:
            """Whether no time of outer round ``outer`` can reach the inputs any more."""
            for frontier in frontiers:
                for point in frontier.elements:
                    if less_equal(point.outer, outer):
                        return False
            return True

        def start(state: _Round) -> np.ndarray:
            """Sort the round's edges by source into CSR rows; return the targets' self-offers."""
            src = concat_arrays([part["src"] for part in state.parts], np.dtype(np.int32))
            dst = concat_arrays([part["dst"] for part in state.parts], np.dtype(np.int32))
            state.parts = []
            local = src // peers
            order = sort_order(local, owned)
            state.targets = dst[order]
            state.indptr = np.zeros(owned + 1, np.int64)
            np.cumsum(np.bincount(local, minlength=owned), out=state.indptr[1:])
            state.labels = np.full(owned, NO_LABEL, np.int32)
            seen = np.zeros(nodes, np.bool_)  # the distinct targets, without sorting them
            seen[dst] = True
            unique = np.flatnonzero(seen).astype(np.int32)
            offers = np.empty(len(unique), OFFER)
            offers["node"] = unique
            offers["label"] = unique
            return offers

        def step(state: _Round, batches: list[np.ndarray]) -> np.ndarray:
            """Keep each node's smallest offer; the lowered nodes offer their label to their successors."""
            labels = state.labels
            assert labels is not None
            best = np.full(owned, NO_LABEL, np.int32)
            for offers in batches:  # each batch as it came: joining them first would copy every offer
                np.minimum.at(best, offers["node"] // peers, offers["label"])
            changed = np.flatnonzero(best < labels)
            labels[changed] = best[changed]
            indptr = state.indptr
            starts, stops = indptr[changed], indptr[changed + 1]
            sent = np.empty(int((stops - starts).sum()), OFFER)
            sent["node"] = state.targets[rows(starts, stops)]
            sent["label"] = np.repeat(labels[changed], stops - starts)
            return sent

        def finish(state: _Round, edge_output: OperatorOutput, label_output: OperatorOutput) -> None:
            labels = state.labels
            if labels is not None:
                if labelled_edges:
                    source_local = np.repeat(np.arange(owned, dtype=np.int32), np.diff(state.indptr))
                    source_labels = labels[source_local]
                    keep = source_labels != NO_LABEL
                    labelled = np.empty(int(keep.sum()), LABELLED)
                    labelled["dst"] = state.targets[keep]
                    labelled["src"] = source_local[keep] * peers + index
                    labelled["label"] = source_labels[keep]
                    emit(edge_output, state.edges_out, labelled)
                have = np.flatnonzero(labels != NO_LABEL)
                result = np.empty(len(have), OFFER)
                result["node"] = have * peers + index
                result["label"] = labels[have]
                emit(label_output, state.labels_out, result)
            edge_output.flush()
            label_output.flush()
            state.edges_out.drop()
            state.labels_out.drop()

        def logic(inputs: list[OperatorInput], outputs: list[OperatorOutput]) -> None:
            edge_input, offer_input = inputs
            offer_output, edge_output, label_output = outputs
            for ref, batch in edge_input:
                state_for(ref).parts.append(batch)  # type: ignore[arg-type]
                notificator.notify_at(ref.retain())
            for ref, batch in offer_input:
                state = state_for(ref)
                waiting = state.offers.get(ref.time)
                if waiting is None:
                    waiting = state.offers[ref.time] = []
                    notificator.notify_at(ref.retain())
                waiting.append(batch)  # type: ignore[arg-type]
            for capability in notificator:
                time = capability.time
                state = rounds[time.outer]
                sent = start(state) if state.labels is None else None
                if time in state.offers:
                    offered = step(state, state.offers.pop(time))
                    sent = offered if sent is None else np.concatenate([sent, offered])
                if sent is not None:
                    emit(offer_output, capability, sent)
            for outer in [outer for outer in rounds if finished(outer)]:
                finish(rounds.pop(outer), edge_output, label_output)

        return logic

    return constructor


# ---------------------------------------------------------------------- weakly connected components


def both_ways(edges: np.ndarray) -> np.ndarray:
    """Every edge and its reverse."""
    result = np.empty(2 * len(edges), EDGE)
    result["src"][: len(edges)] = edges["src"]
    result["dst"][: len(edges)] = edges["dst"]
    result["src"][len(edges) :] = edges["dst"]
    result["dst"][len(edges) :] = edges["src"]
    return result


def weak_labels(edges: Stream, nodes: int) -> Stream:
    """``(node, smallest id of its weakly connected component)`` for every node on an edge.

    ``edges`` carries :data:`EDGE` arrays anywhere; the result is on each node's owner.
    """
    undirected = edges.map_batch(both_ways, name="BothWays")
    _, labels = propagate(undirected, nodes, "WeakLabels", ExchangeBatch("src"), False)
    return labels


def wcc_worker(worker: Worker, graph: Graph) -> tuple[list[int], list[int]]:
    """Build and run the WCC dataflow on this worker's share of ``graph``; return its ``(nodes, labels)``."""
    found: list[Any] = []

    def build(scope: ScopeBuilder) -> Any:
        handle, edges = scope.new_input("Edges")
        labels = weak_labels(edges, graph.nodes)
        return handle, labels.inspect_batch(lambda time, batch: found.append(batch), name="Collect").probe()

    handle, probe = worker.dataflow(build, name="wcc columnar")
    handle.send_batch(graph.share(worker.index, worker.peers))
    handle.close()
    worker.step_while(lambda: not probe.done())
    return columns(found)


def columns(found: list[Any]) -> tuple[list[int], list[int]]:
    """The ``(node, label)`` arrays in ``found`` as two lists (which travel between processes)."""
    result = concat_arrays(found, OFFER)
    return result["node"].tolist(), result["label"].tolist()


def file_worker(worker: Worker, path: str, limit: int | None) -> tuple[list[int], list[int]]:
    """:func:`wcc_worker` on the graph in ``path`` (read and interned once per process)."""
    return wcc_worker(worker, load_graph(path, limit))


def combine(outputs: Iterable[tuple[list[int], list[int]]], nodes: int) -> np.ndarray:
    """Every worker's ``(nodes, labels)`` as one label array indexed by node id (-1: unreported)."""
    labels = np.full(nodes, -1, np.int64)
    for found_nodes, found_labels in outputs:
        labels[np.asarray(found_nodes, dtype=np.int64)] = found_labels
    return labels


# ---------------------------------------------------------------------- checking and the command line


def components_of(labels: np.ndarray) -> set[frozenset[int]]:
    """The partition of node ids that ``labels`` (one per node) describes."""
    if not len(labels):
        return set()
    order = np.argsort(labels, kind="stable")
    ordered = labels[order]
    cuts = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    return {frozenset(part.tolist()) for part in np.split(order, cuts)}


def networkx_weak(pairs: list[tuple[str, str]]) -> list[set[str]]:
    """networkx's weakly connected components of the directed graph with edges ``pairs`` (build included)."""
    nx = importlib.import_module("networkx")
    graph = nx.DiGraph()
    graph.add_edges_from(pairs)
    return list(nx.weakly_connected_components(graph))


def as_ids(components: Iterable[Iterable[str]], graph: Graph) -> set[frozenset[int]]:
    """Components of names as components of ids of ``graph``."""
    ids = {name.decode(): number for number, name in enumerate(graph.names.tolist())}
    return {frozenset(ids[name] for name in component) for component in components}


@dataclass
class GraphRun:
    """A columnar graph example's run over the file: its options, graph, worker outputs and stage times."""

    args: argparse.Namespace
    graph: Graph
    outputs: list[Any]
    read: float
    interned: float
    compute: float


def run_on_file(description: str, worker: Callable[..., Any], argv: list[str] | None) -> GraphRun:
    """Parse the options of a columnar graph example, read and intern its file, and run ``worker`` on it.

    The options are the cluster flags, ``--input``, ``--limit-edges`` and
    ``--check``; ``worker(worker, path=..., limit=...)`` runs on every worker
    and reuses the graph this process interned.
    """
    parser = argparse.ArgumentParser(description=description, add_help=False, parents=[cluster_arguments()])
    parser.add_argument("--help", action="help", help="show this help message and exit")
    parser.add_argument("--input", type=Path, default=DEFAULT_INPUT, help="gzip TSV of 'package<TAB>dependency'")
    parser.add_argument("--limit-edges", type=int, default=None, help="read only the first K lines")
    parser.add_argument("--check", action="store_true", help="compare with networkx and time it")
    args = parser.parse_args(argv)
    if args.limit_edges is not None and args.limit_edges < 0:
        parser.error("--limit-edges must not be negative")
    if not args.input.is_file():
        parser.error(f"--input {args.input}: {'not a file' if args.input.exists() else 'no such file'}")

    start = perf_counter()
    try:
        flat = read_names(args.input, args.limit_edges)
    except (OSError, EOFError, zlib.error) as error:  # unreadable, or a damaged gzip: the traceback adds nothing
        parser.exit(1, f"{parser.prog}: cannot read --input {args.input}: {error}\n")
    read = perf_counter() - start
    start = perf_counter()
    graph = intern(flat)
    interned = perf_counter() - start
    loaded(args.input, args.limit_edges, graph)  # the workers of this process reuse it

    start = perf_counter()
    outputs = execute_from_args(partial(worker, path=str(args.input), limit=args.limit_edges), argv)
    compute = perf_counter() - start
    return GraphRun(args, graph, outputs, read, interned, compute)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    run = run_on_file(__doc__.splitlines()[0], file_worker, argv)
    args, graph, outputs, read, interned, compute = (
        run.args,
        run.graph,
        run.outputs,
        run.read,
        run.interned,
        run.compute,
    )
    labels = combine(outputs, graph.nodes)
    found = components_of(labels)
    sizes = sorted((len(c) for c in found), reverse=True)
    print(f"Weakly connected components of {args.input.name}, columnar")
    print(f"  {len(graph.src):,} edges between {graph.nodes:,} nodes; {args.workers * args.processes} worker(s)")
    print(f"  {len(found)} components; largest sizes: {', '.join(map(str, sizes[:5]))}")
    print(f"  read {read:.3f} s, intern {interned:.3f} s, compute {compute:.3f} s")
    if not args.check:
        return 0
    pairs = graph.name_pairs()
    start = perf_counter()
    expected = networkx_weak(pairs)
    baseline = perf_counter() - start
    print(f"  networkx build + weakly_connected_components: {baseline:.3f} s")
    print(f"  intern + compute / networkx: {(interned + compute) / baseline:.2f}")
    ok = found == as_ids(expected, graph) and bool((labels >= 0).all())
    print(f"  check against networkx.weakly_connected_components: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
