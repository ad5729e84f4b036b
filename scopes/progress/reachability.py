"""Reachability: compiled path summaries and the pointstamp tracker.

A :class:`TrackerBuilder` takes each operator's shape and internal summaries (which
inputs reach which outputs, and how times change on the way) and the edges from
outputs to inputs.  :meth:`TrackerBuilder.build` checks the graph, rejects cycles that
do not strictly advance timestamps, compiles the minimal path summaries from
every location to the scope's outputs, and returns a :class:`Tracker`.

The :class:`Tracker` accumulates pointstamp changes, capabilities at sources and
messages at targets, and :meth:`Tracker.propagate_all` reports the resulting
changes to the frontier implied at every location, incrementally: only frontier
changes travel, in timestamp order, so updates that cancel never propagate.

Node ``0`` is the scope's boundary, as seen from inside: its outputs
(``Source(0, i)``) are the scope's inputs, and its inputs (``Target(0, o)``) are
the scope's outputs.  A graph that is not nested in anything has a boundary
with no ports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from heapq import heappop
from typing import Any

from scopes.errors import CycleError, GraphError
from scopes.progress.antichain import Antichain, MutableAntichain
from scopes.progress.cycles import find_cycle
from scopes.progress.hooks import ProgressObserver
from scopes.progress.location import Location, Source, Target
from scopes.progress.order import less_equal
from scopes.progress.timestamp import PathSummary, TimestampType, checked, natural_order
from scopes.progress.visit_order import EarliestFirst, InRounds, Topological, taken

SummarySpec = (
    Sequence[Sequence[Antichain[PathSummary] | Iterable[PathSummary]]]
    | Sequence[Mapping[int, Antichain[PathSummary] | Iterable[PathSummary]]]
    | Mapping[tuple[int, int], Antichain[PathSummary] | Iterable[PathSummary]]
    | None
)
"""An operator's internal summaries, ``[input][output]``, ``[input]{output: ...}`` or ``{(input, output): ...}``.

Each entry is an antichain (or iterable) of path summaries; an empty entry, or a
missing key in the mapping form, means the input cannot reach the output.
``None`` means every input reaches every output unchanged.
"""


Connectivity = list[dict[int, Antichain[PathSummary]]]
"""Sparse summaries of an operator or scope: ``connectivity[input]`` maps each output that
``input`` reaches to the (non-empty) antichain of path summaries from it.  An output that is
absent cannot be reached.  One input feeding one output costs one entry, so a shape with
N inputs and N outputs connected one to one costs O(N), not O(N * N).
"""


@dataclass
class _Node:
    name: str
    inputs: int
    outputs: int
    connectivity: Connectivity = field(default_factory=list)


def sparse(table: Sequence[Mapping[int, Any] | Sequence[Any]]) -> Connectivity:
    """Turn summaries given per row, as a dense list (one cell per column) or a mapping, into :data:`Connectivity`.

    Empty cells are dropped; each kept cell becomes an :class:`Antichain`.
    """
    result: Connectivity = []
    for row in table:
        items = row.items() if isinstance(row, Mapping) else enumerate(row)
        out: dict[int, Antichain[PathSummary]] = {}
        for column, cell in items:
            chain = cell if isinstance(cell, Antichain) else Antichain(cell)
            if len(chain):
                out[column] = chain
        result.append(out)
    return result


def connectivity_from(spec: SummarySpec, inputs: int, outputs: int, identity: PathSummary, where: str) -> Connectivity:
    """Normalize a :data:`SummarySpec` into sparse :data:`Connectivity`, validating its shape."""
    table: Connectivity = [{} for _ in range(inputs)]
    if spec is None:
        for row in table:
            for o in range(outputs):
                row[o] = Antichain([identity])
        return table

    def add(i: int, o: int, summaries: Iterable[PathSummary]) -> None:
        for s in summaries:
            chain = table[i].get(o)
            if chain is None:
                chain = table[i][o] = Antichain()
            chain.insert(checked(s, f"{where} input {i} -> output {o}", identity))

    if isinstance(spec, Mapping):
        items: Any = spec.items()  # Any: the compiled build must not check the key's type before we do
        for key, summaries in items:
            if not (isinstance(key, tuple) and len(key) == 2):
                raise GraphError(f"{where}: summary keys must be (input, output) pairs, got {key!r}")
            i, o = key
            if not (0 <= i < inputs and 0 <= o < outputs):
                raise GraphError(
                    f"{where}: summary for input {i} -> output {o}, but the operator has "
                    f"{inputs} inputs and {outputs} outputs"
                )
            add(i, o, summaries)
        return table
    rows = list(spec)
    if len(rows) != inputs:
        raise GraphError(f"{where}: summary has {len(rows)} rows but the operator has {inputs} inputs")
    for i, spec_row in enumerate(rows):
        if isinstance(spec_row, Mapping):  # already sparse: {output: summaries}
            for o, summaries in spec_row.items():
                if not (o.__class__ is int and 0 <= o < outputs):
                    raise GraphError(
                        f"{where}: summary for input {i} -> output {o!r}, but the operator has {outputs} outputs"
                    )
                add(i, o, summaries)
            continue
        cells: list[Any] = list(spec_row)
        if len(cells) != outputs:
            raise GraphError(
                f"{where}: summary row for input {i} has {len(cells)} entries but the operator has {outputs} outputs"
            )
        for o, summaries in enumerate(cells):
            add(i, o, summaries)
    return table


class TrackerBuilder:
    """Collects a scope's operators and edges, then compiles them into a :class:`Tracker`."""

    def __init__(self, timestamp_type: TimestampType, inputs: int = 0, outputs: int = 0) -> None:
        """Start a graph whose boundary (node 0) has ``inputs`` scope inputs and ``outputs`` scope outputs."""
        self.timestamp_type = timestamp_type
        self._nodes: dict[int, _Node] = {0: _Node("scope boundary", outputs, inputs, [{} for _ in range(outputs)])}
        self._edges: list[tuple[Source, Target]] = []

    @property
    def scope_inputs(self) -> int:
        """The number of scope inputs (outputs of node 0)."""
        return self._nodes[0].outputs

    @property
    def scope_outputs(self) -> int:
        """The number of scope outputs (inputs of node 0)."""
        return self._nodes[0].inputs

    def add_node(
        self,
        index: int,
        inputs: int,
        outputs: int,
        summary: SummarySpec = None,
        name: str | None = None,
    ) -> None:
        """Add operator ``index`` with its port counts and internal summaries."""
        if index.__class__ is not int or index <= 0:
            raise GraphError(f"operator index must be an int > 0 (0 is the scope boundary), got {index!r}")
        if index in self._nodes:
            raise GraphError(f"operator {index} ({self._nodes[index].name}) was already added")
        if inputs < 0 or outputs < 0:
            raise GraphError(f"operator {index}: port counts must be >= 0, got {inputs} and {outputs}")
        label = name or f"operator {index}"
        table = connectivity_from(
            summary, inputs, outputs, self.timestamp_type.identity(), f"operator {index} ({label})"
        )
        self._nodes[index] = _Node(label, inputs, outputs, table)

    def add_edge(self, source: Source, target: Target) -> None:
        """Connect output ``source`` to input ``target``; an output may feed many inputs."""
        if not isinstance(source, Source) or not isinstance(target, Target):
            raise GraphError(f"an edge goes from a Source to a Target, got {source!r} -> {target!r}")
        self._edges.append((source, target))

    def node_name(self, index: int) -> str:
        """The name given to operator ``index``."""
        return self._nodes[index].name

    def _check(self) -> None:
        for source, target in self._edges:
            node = self._nodes.get(source.node)
            if node is None:
                raise GraphError(f"edge {source!r} -> {target!r}: no operator {source.node}")
            if not 0 <= source.port < node.outputs:
                raise GraphError(
                    f"edge {source!r} -> {target!r}: operator {source.node} ({node.name}) has {node.outputs} outputs"
                )
            node = self._nodes.get(target.node)
            if node is None:
                raise GraphError(f"edge {source!r} -> {target!r}: no operator {target.node}")
            if not 0 <= target.port < node.inputs:
                raise GraphError(
                    f"edge {source!r} -> {target!r}: operator {target.node} ({node.name}) has {node.inputs} inputs"
                )

    def _index(self) -> _Indexed:
        return _Indexed(self._nodes, self._edges)

    def _check_cycles(self, graph: _Indexed) -> None:
        """Reject cycles along which some time may travel without strictly advancing."""
        successors: list[list[int]] = [[] for _ in graph.locations]
        for loc, targets in enumerate(graph.source_edges):
            successors[loc].extend(targets)
        for loc, paths in enumerate(graph.target_paths):
            if graph.locations[loc].node == 0:
                continue
            for src, summaries in paths:
                if any(not s.advances() for s in summaries):
                    successors[loc].append(src)
        cycle = find_cycle(successors)
        if cycle is not None:
            names: list[str] = []
            for loc in cycle:
                name = self._nodes[graph.locations[loc].node].name
                if not names or names[-1] != name:
                    names.append(name)
            if len(names) > 1 and names[0] == names[-1]:
                names.pop()
            raise CycleError(
                "the dataflow has a cycle along which timestamps do not strictly advance: "
                + " -> ".join(names + names[:1])
                + "; every cycle must pass through a feedback edge (loop_variable) "
                "whose summary advances the time",
                names,
            )

    def summaries_from(self, location: Location) -> dict[Location, Antichain[PathSummary]]:
        """The minimal path summaries from ``location`` to every location it can reach."""
        self._check()
        graph = self._index()
        found = _closure(graph, graph.index_of(location), self.timestamp_type.identity())
        return {graph.locations[loc]: chain for loc, chain in found.items()}

    def build(self) -> Tracker:
        """Validate the graph, compile its summaries, and return a fresh :class:`Tracker`."""
        self._check()
        graph = self._index()
        self._check_cycles(graph)
        return Tracker(self.timestamp_type, graph, self._nodes)


class _Indexed:
    """Dense integer numbering of locations, with adjacency in both directions."""

    def __init__(self, nodes: dict[int, _Node], edges: list[tuple[Source, Target]]) -> None:
        self.locations: list[Location] = []
        self.source_index: dict[tuple[int, int], int] = {}
        self.target_index: dict[tuple[int, int], int] = {}
        for index in sorted(nodes):
            node = nodes[index]
            for port in range(node.inputs):
                self.target_index[(index, port)] = len(self.locations)
                self.locations.append(Target(index, port))
            for port in range(node.outputs):
                self.source_index[(index, port)] = len(self.locations)
                self.locations.append(Source(index, port))
        count = len(self.locations)
        # For a source: the targets its edges reach.  For a target: (source, summaries) across its operator.
        self.source_edges: list[list[int]] = [[] for _ in range(count)]
        self.target_paths: list[list[tuple[int, tuple[PathSummary, ...]]]] = [[] for _ in range(count)]
        for source, target in edges:
            s = self.source_index[(source.node, source.port)]
            t = self.target_index[(target.node, target.port)]
            if t not in self.source_edges[s]:
                self.source_edges[s].append(t)
        for index, node in nodes.items():
            for i, row in enumerate(node.connectivity):
                t = self.target_index[(index, i)]
                for o, chain in row.items():
                    if len(chain):
                        s = self.source_index[(index, o)]
                        self.target_paths[t].append((s, chain.elements))

    def index_of(self, location: Location) -> int:
        key = (location.node, location.port)
        table = self.source_index if isinstance(location, Source) else self.target_index
        if key not in table:
            raise GraphError(f"no location {location!r} in this graph")
        return table[key]

    def successors(self, loc: int) -> Iterable[tuple[int, PathSummary]]:
        """(successor, summary) pairs; edges carry no summary and are reported as ``None``."""
        location = self.locations[loc]
        if isinstance(location, Source):
            for t in self.source_edges[loc]:
                yield t, _EDGE
        else:
            for s, summaries in self.target_paths[loc]:
                for summary in summaries:
                    yield s, summary


class _EdgeSummary(PathSummary):
    """The summary of a graph edge: composing with it changes nothing."""

    def results_in(self, time: Any) -> Any:
        return time

    def followed_by(self, other: PathSummary) -> PathSummary:
        return other

    def less_equal(self, other: PathSummary) -> bool:  # pragma: no cover - never compared
        return True

    def advances(self) -> bool:  # pragma: no cover - never asked
        return False


_EDGE = _EdgeSummary()


def _compose(path: PathSummary, step: PathSummary) -> PathSummary | None:
    if step is _EDGE:
        return path
    return path.followed_by(step)


def _closure(graph: _Indexed, start: int, identity: PathSummary) -> dict[int, Antichain[PathSummary]]:
    """The minimal summaries of paths from location ``start`` to each location it reaches."""
    found: dict[int, Antichain[PathSummary]] = {start: Antichain([identity])}
    work = [start]
    while work:
        loc = work.pop()
        for succ, step in graph.successors(loc):
            for path in found[loc].elements:
                composed = _compose(path, step)
                if composed is None:
                    continue
                chain = found.setdefault(succ, Antichain())
                if chain.insert(composed):
                    work.append(succ)
    return found


def _summarized(summaries: tuple[PathSummary, ...], changes: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    """The frontier ``changes`` carried along an operator's path ``summaries`` (times summed; none dropped to zero)."""
    results: dict[Any, int] = {}
    for summary in summaries:
        for changed, change in changes:
            result = summary.results_in(changed)
            if result is not None:
                results[result] = results.get(result, 0) + change
    return [(time, diff) for time, diff in results.items() if diff]


def _identity_chain(chain: tuple[PathSummary, ...]) -> bool:
    """Whether an antichain of summaries is just the identity (times pass unchanged)."""
    return len(chain) == 1 and bool(getattr(chain[0], "_identity", False))


def _topological_order(graph: _Indexed) -> tuple[list[int] | None, list[int]]:
    """Rank every location so that each edge and operator path goes to a higher rank.

    Returns ``(rank per location, location per rank)``, or ``(None, [])`` when
    the graph has a cycle (a loop), which needs the earliest-first order.
    """
    count = len(graph.locations)
    successors: list[list[int]] = [list(targets) for targets in graph.source_edges]
    for loc, paths in enumerate(graph.target_paths):
        successors[loc].extend(src for src, _ in paths)
    indegree = [0] * count
    for targets in successors:
        for succ in targets:
            indegree[succ] += 1
    ready = [loc for loc in range(count) if not indegree[loc]]
    order: list[int] = []
    while ready:
        loc = ready.pop()
        order.append(loc)
        for succ in successors[loc]:
            indegree[succ] -= 1
            if not indegree[succ]:
                ready.append(succ)
    if len(order) != count:
        return None, []
    rank = [0] * count
    for position, loc in enumerate(order):
        rank[loc] = position
    return rank, order


class Tracker:
    """Accumulates pointstamp changes and propagates their implications through the graph.

    ``update_source`` records capabilities at outputs, ``update_target`` records
    messages at inputs.  :meth:`propagate_all` folds them in and computes the
    changes to the frontier at every location (:meth:`drain_pushed`) and to the
    capabilities the scope must report at its outputs (:meth:`drain_output_changes`).
    """

    observer: ProgressObserver | None = None
    """Instrumentation hooks (``None``: logging off), set by the owning scope."""
    observer_scope: tuple[int, ...] = ()
    """The address of the scope this tracker belongs to, for the observer."""

    def __init__(self, timestamp_type: TimestampType, graph: _Indexed, nodes: dict[int, _Node]) -> None:
        """Use :meth:`TrackerBuilder.build` rather than calling this directly."""
        self.timestamp_type = timestamp_type
        self._graph = graph
        self._names = {index: node.name for index, node in nodes.items()}
        count = len(graph.locations)
        self._locations = graph.locations
        self._is_target = [isinstance(loc, Target) for loc in graph.locations]
        self._source_edges = graph.source_edges
        self._pointstamps: list[MutableAntichain[Any]] = [MutableAntichain() for _ in range(count)]
        self._implications: list[MutableAntichain[Any]] = [MutableAntichain() for _ in range(count)]
        self.pending: dict[int, dict[Any, int]] = {}
        """Pointstamp changes not yet propagated, by location index and time (read it; update it through methods,
        or keep zeros out of it as they do: a subgraph adds its children's reports straight into it)."""
        self._pushed: dict[tuple[int, Any], int] = {}
        # Whether frontier changes at each location are recorded for drain_pushed (see report_only).
        self._report: list[bool] = [True] * count
        self.reporting = True
        """Whether frontier changes are recorded at any location (see :meth:`report_only`)."""
        self._tracked = 0  # number of (location, time) pairs in pointstamp frontiers
        outputs = nodes[0].inputs
        self._outputs = outputs
        self._inputs = nodes[0].outputs
        self._output_caps: list[MutableAntichain[Any]] = [MutableAntichain() for _ in range(outputs)]
        self._output_changes: list[dict[Any, int]] = [{} for _ in range(outputs)]
        self._to_outputs = self._compile_output_summaries(graph, outputs)
        self._sort_key = timestamp_type.sort_key()
        # Per target: (source, summaries), with None for the identity (no call needed).
        self._target_steps: list[list[tuple[int, tuple[PathSummary, ...] | None]]] = [
            [(src, None if _identity_chain(chain) else chain) for src, chain in paths] for paths in graph.target_paths
        ]
        self._rank, self._by_rank = _topological_order(graph)
        # The order propagation visits work in (see scopes.progress.visit_order), kept for reuse.
        self._order: Topological | EarliestFirst | InRounds
        if self._rank is not None:
            self._order = Topological(self._rank, self._by_rank)
        elif self._sort_key is natural_order:
            self._order = EarliestFirst()
        else:
            self._order = InRounds(self._sort_key)

    # ------------------------------------------------------------------ compilation

    def _compile_output_summaries(
        self, graph: _Indexed, outputs: int
    ) -> list[list[tuple[int, tuple[PathSummary, ...]]]]:
        """For each location, the minimal summaries to each scope output, along paths inside the scope."""
        count = len(graph.locations)
        predecessors: list[list[tuple[int, PathSummary]]] = [[] for _ in range(count)]
        for src, targets in enumerate(graph.source_edges):
            for t in targets:
                predecessors[t].append((src, _EDGE))
        for t, paths in enumerate(graph.target_paths):
            if graph.locations[t].node == 0:
                continue  # paths through the outside world are the parent's business
            for s, summaries in paths:
                for summary in summaries:
                    predecessors[s].append((t, summary))
        identity = self.timestamp_type.identity()
        result: list[list[tuple[int, tuple[PathSummary, ...]]]] = [[] for _ in range(count)]
        for output in range(outputs):
            start = graph.target_index[(0, output)]
            found: dict[int, Antichain[PathSummary]] = {start: Antichain([identity])}
            work = [start]
            while work:
                loc = work.pop()
                for pred, step in predecessors[loc]:
                    for path in found[loc].elements:
                        composed = path if step is _EDGE else step.followed_by(path)
                        if composed is None:
                            continue
                        chain = found.setdefault(pred, Antichain())
                        if chain.insert(composed):
                            work.append(pred)
            for loc, chain in found.items():
                if graph.locations[loc].node != 0 and len(chain):
                    result[loc].append((output, chain.elements))
        return result

    def scope_summary(self) -> Connectivity:
        """Minimal summaries from each scope input to the scope outputs it reaches, along inner paths (sparse)."""
        inputs = self._inputs
        table: Connectivity = [{} for _ in range(inputs)]
        # Scope inputs are node-0 sources; their successors are inside the scope.
        identity = self.timestamp_type.identity()
        for i in range(inputs):
            row = table[i]
            start = self._graph.source_index[(0, i)]
            for t in self._source_edges[start]:
                location = self._locations[t]
                if location.node == 0:  # an edge straight from the scope input to a scope output
                    row.setdefault(location.port, Antichain()).insert(identity)
                    continue
                for output, chain in self._to_outputs[t]:
                    cell = row.setdefault(output, Antichain())
                    for summary in chain:
                        cell.insert(summary)
        return table

    # ------------------------------------------------------------------ updates

    def _loc(self, location: Location) -> int:
        return self._graph.index_of(location)

    def update_source(self, source: Source, time: Any, diff: int) -> None:
        """Record ``diff`` capabilities for ``time`` at output ``source``."""
        self._update(self._graph.source_index[(source.node, source.port)], time, diff)

    def update_target(self, target: Target, time: Any, diff: int) -> None:
        """Record ``diff`` messages bearing ``time`` at input ``target``."""
        self._update(self._graph.target_index[(target.node, target.port)], time, diff)

    def update(self, location: Location, time: Any, diff: int) -> None:
        """Record a pointstamp change at either kind of location."""
        self._update(self._loc(location), time, diff)

    def update_index(self, loc: int, time: Any, diff: int) -> None:
        """Record a pointstamp change at a location given by its dense index (see :meth:`index_of`)."""
        self._update(loc, time, diff)

    def update_batch(self, updates: Iterable[tuple[int, Any, int]]) -> None:
        """Record many ``(location index, time, diff)`` changes at once."""
        all_pending = self.pending
        for loc, time, diff in updates:
            pending = all_pending.get(loc)
            if pending is None:
                if diff:
                    all_pending[loc] = {time: diff}
            else:
                value = pending.get(time, 0) + diff
                if value:
                    pending[time] = value
                else:
                    pending.pop(time, None)

    def index_of(self, location: Location) -> int:
        """The dense index of ``location``, for :meth:`update_index`."""
        return self._loc(location)

    def _update(self, loc: int, time: Any, diff: int) -> None:
        if diff:
            pending = self.pending.get(loc)
            if pending is None:
                self.pending[loc] = {time: diff}
            else:
                value = pending.get(time, 0) + diff
                if value:
                    pending[time] = value
                else:
                    del pending[time]

    # ------------------------------------------------------------------ propagation

    def propagate_all(self) -> None:
        """Fold in pending updates and propagate the frontier changes they cause.

        Changes are handled earliest time first, using the times' own ``<`` (or
        the timestamp type's :meth:`~scopes.progress.timestamp.TimestampType.sort_key`), so
        that changes at equal times meet and cancel before they travel; a graph
        without cycles is visited in topological order instead, one visit per
        location (see :mod:`scopes.progress.visit_order`).  The result does not depend on
        the order, only the amount of work does.
        """
        if not self.pending:
            return
        if not self._fold_pending():
            return
        order = self._order
        if isinstance(order, Topological):
            self._propagate_topological(order)
        else:
            self._propagate(order)

    def _propagate_topological(self, order: Topological) -> None:
        """:meth:`_propagate` for a graph without cycles, visiting each location once (no iterator, no tuples).

        What it does with a location's changes repeats :meth:`_propagate`'s loop
        body on purpose: a shared method would cost a call and six attribute
        reads per visit, which is what this walk exists to save.
        """
        implications = self._implications
        is_target = self._is_target
        source_edges = self._source_edges
        target_steps = self._target_steps
        pushed = self._pushed
        report = self._report
        ranks = order.ranks
        by_rank = order.by_rank
        incoming = order.incoming
        while ranks:  # as order.next_location() and order.take(loc), without two calls per visit
            loc = by_rank[heappop(ranks)]
            batch = incoming[loc]
            del incoming[loc]
            changes = implications[loc].update_iter(batch if batch.__class__ is not dict else taken(batch))
            if not changes:
                continue
            if report[loc]:
                for changed, change in changes:
                    key = (loc, changed)
                    value = pushed.get(key, 0) + change
                    if value:
                        pushed[key] = value
                    else:
                        del pushed[key]
            if is_target[loc]:
                for src, summaries in target_steps[loc]:
                    if summaries is None:
                        order.offer(src, changes)
                        continue
                    summarized = _summarized(summaries, changes)
                    if summarized:
                        order.offer(src, summarized)
            else:
                for target in source_edges[loc]:
                    order.offer(target, changes)

    def _propagate(self, order: EarliestFirst | InRounds) -> None:
        """Visit the work in ``order``: apply the changes at each location and offer their effects onward."""
        implications = self._implications
        is_target = self._is_target
        source_edges = self._source_edges
        target_steps = self._target_steps
        pushed = self._pushed
        report = self._report
        for loc, time, diff, updates in order:
            if updates is None:
                changes = implications[loc].update(time, diff)
            else:
                changes = implications[loc].update_iter(updates)
            if not changes:
                continue
            if report[loc]:
                for changed, change in changes:
                    key = (loc, changed)
                    value = pushed.get(key, 0) + change
                    if value:
                        pushed[key] = value
                    else:
                        del pushed[key]
            if is_target[loc]:
                for src, summaries in target_steps[loc]:
                    if summaries is None:
                        order.offer(src, changes)
                        continue
                    summarized = _summarized(summaries, changes)
                    if summarized:
                        order.offer(src, summarized)
            else:
                for target in source_edges[loc]:
                    order.offer(target, changes)

    def _fold_pending(self) -> bool:
        """Apply pending pointstamp changes and offer the frontier changes they cause to the visit order.

        Returns whether any frontier changed (so that there is work to propagate).
        """
        order = self._order
        moved_any = False
        pointstamps = self._pointstamps
        to_outputs = self._to_outputs
        output_changes = self._output_changes
        pending, self.pending = self.pending, {}
        if self.observer is not None:
            self.observer.pointstamps(
                self.observer_scope, [(loc, t, d) for loc, updates in pending.items() for t, d in updates.items()]
            )
        for loc, updates in pending.items():
            if not updates:
                continue
            moved = pointstamps[loc].update_iter(updates.items())
            if not moved:
                continue
            order.offer(loc, moved)  # not a bound method kept in a local: compiled, this call is native
            moved_any = True
            for time, diff in moved:
                self._tracked += diff
                for output, summaries in to_outputs[loc]:
                    changes = output_changes[output]
                    for summary in summaries:
                        result = summary.results_in(time)
                        if result is not None:
                            value = changes.get(result, 0) + diff
                            if value:
                                changes[result] = value
                            else:
                                del changes[result]
        return moved_any

    def report_only(self, locations: Iterable[int] | None) -> None:
        """Record frontier changes for :meth:`drain_pushed` only at these location indices (``None``: everywhere).

        The frontiers themselves (:meth:`frontier`, :meth:`frontier_index`) stay
        exact everywhere; a location not reported saves the bookkeeping of its
        changes, for an owner that reads it on demand or not at all.  Changes
        already recorded are kept.
        """
        if locations is None:
            self._report = [True] * len(self._locations)
            self.reporting = True
            return
        report = [False] * len(self._locations)
        for loc in locations:
            report[loc] = True
        self._report = report
        self.reporting = any(report)

    def report_location(self, loc: int) -> None:
        """Start recording frontier changes at location index ``loc`` (see :meth:`report_only`)."""
        self._report[loc] = True
        self.reporting = True

    def drain_pushed(self) -> list[tuple[Location, Any, int]]:
        """Frontier changes at every location since the last drain: ``(location, time, diff)``."""
        if not self._pushed:
            return []
        locations = self._locations
        out = [(locations[loc], time, diff) for (loc, time), diff in self._pushed.items()]
        self._pushed.clear()
        return out

    def drain_pushed_indexed(self) -> list[tuple[int, Any, int]]:
        """Like :meth:`drain_pushed`, with dense location indices."""
        if not self._pushed:
            return []
        out = [(loc, time, diff) for (loc, time), diff in self._pushed.items()]
        self._pushed.clear()
        return out

    def drain_output_changes(self) -> list[list[tuple[Any, int]]]:
        """Changes to the capabilities implied at each scope output by pointstamps inside the scope."""
        result: list[list[tuple[Any, int]]] = []
        for output, changes in enumerate(self._output_changes):
            if changes:
                result.append(self._output_caps[output].update_iter(list(changes.items())))
                changes.clear()
            else:
                result.append([])
        return result

    # ------------------------------------------------------------------ inspection

    def frontier(self, location: Location) -> Antichain[Any]:
        """The frontier implied at ``location``: times that may still arrive there."""
        return self._implications[self._loc(location)].frontier()

    def frontier_index(self, loc: int) -> MutableAntichain[Any]:
        """The implied frontier at a dense location index (shared; do not modify)."""
        return self._implications[loc]

    def pointstamps(self, location: Location) -> dict[Any, int]:
        """The accumulated pointstamp counts at ``location``."""
        return self._pointstamps[self._loc(location)].counts()

    def output_capabilities(self, output: int) -> Antichain[Any]:
        """The capabilities the scope currently reports at ``output``."""
        return self._output_caps[output].frontier()

    def tracking_anything(self) -> bool:
        """Whether any location holds a positive pointstamp (or updates are pending)."""
        return self._tracked > 0 or bool(self.pending)

    def locations(self) -> list[Location]:
        """Every location, in dense-index order."""
        return list(self._locations)

    def node_name(self, node: int) -> str:
        """The name of operator ``node``."""
        return self._names[node]

    def blockers(self, location: Location, time: Any) -> list[tuple[Location, Any, int]]:
        """The positive pointstamps that could result in ``time`` at ``location``.

        This explains a stuck frontier: each returned ``(location, time, count)`` is
        a capability or message that must be retired before ``time`` completes.
        """
        target = self._loc(location)
        result = []
        for loc, mutable in enumerate(self._pointstamps):
            positive = [(t, c) for t, c in mutable.counts().items() if c > 0]
            if not positive:
                continue
            paths = self._paths_between(loc, target)
            for t, c in positive:
                if any((r := p.results_in(t)) is not None and less_equal(r, time) for p in paths):
                    result.append((self._locations[loc], t, c))
        return result

    def summaries_from(self, location: Location) -> dict[Location, Antichain[PathSummary]]:
        """The minimal path summaries from ``location`` to every location it reaches."""
        found = self._closure(self._loc(location))
        return {self._locations[loc]: chain for loc, chain in found.items()}

    def _paths_between(self, start: int, goal: int) -> list[PathSummary]:
        return list(self._closure(start).get(goal, Antichain()).elements)

    def _closure(self, start: int) -> dict[int, Antichain[PathSummary]]:
        return _closure(self._graph, start, self.timestamp_type.identity())
