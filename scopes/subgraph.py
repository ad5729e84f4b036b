"""``Subgraph``: a scope made of child scopes joined by edges.

A subgraph tracks the progress of its children with a
:class:`~scopes.reachability.Tracker`.  Its children's progress statements are
broadcast to the same subgraph on every worker, in batches that are never split,
so each worker's tracker accumulates prefixes of every worker's batches.  To its
parent, a subgraph reports only what is visible at its own boundary: messages
consumed at its inputs, messages produced at its outputs, and the capabilities
its inner work implies at its outputs.  Progress made elsewhere reaches it as
frontier changes at its inputs, which it projects onto its children.

Because every worker's subgraph already sees the progress of all workers inside
it, a subgraph is a *non-local* child: its parent applies its reports directly,
without broadcasting them again.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from functools import partial
from time import perf_counter
from typing import Any

from scopes.antichain import Antichain, MutableAntichain
from scopes.callsite import user_site
from scopes.change_batch import ChangeBatch
from scopes.channels import Activator, Allocator, Pusher, Tee
from scopes.errors import BuildError, ProgressError
from scopes.hooks import ProgressObserver
from scopes.location import Location, Source, Target
from scopes.operate import ConnectivityLike, Operate, Updates
from scopes.progcaster import Progcaster
from scopes.reachability import Connectivity, Tracker, TrackerBuilder, sparse
from scopes.timestamp import PathSummary, Refinement, TimestampType

_UNSEEN: Any = object()  # a child not yet looked at while distributing frontier changes
_INNER = 0  # a location of a child operator
_SCOPE_INPUT = 1  # Source(0, i): messages entering the scope
_SCOPE_OUTPUT = 2  # Target(0, o): messages leaving the scope


class _ScopeEntrance:
    """Receives parent-level messages at a scope input and forwards them inside."""

    __slots__ = ("_tee", "_counts", "_to_inner", "_activate")

    def __init__(
        self, tee: Tee, counts: dict[Any, int], to_inner: Callable[[Any], Any], activate: Activator
    ) -> None:
        self._tee = tee
        self._counts = counts
        self._to_inner = to_inner
        self._activate = activate

    def push(self, time: Any, batch: list[Any]) -> None:
        inner = self._to_inner(time)
        counts = self._counts
        counts[inner] = counts.get(inner, 0) + len(batch)
        self._tee.push(inner, batch)
        self._activate()

    def flush(self) -> None:
        """Flush buffering pushers inside the scope (called by the sending operator's tee)."""
        self._tee.flush()


class _ScopeExit:
    """Receives inner messages at a scope output and forwards them to the parent's receivers."""

    __slots__ = ("_tee", "_to_outer")

    def __init__(self, tee: Tee, to_outer: Callable[[Any], Any]) -> None:
        self._tee = tee
        self._to_outer = to_outer

    def push(self, time: Any, batch: list[Any]) -> None:
        self._tee.push(self._to_outer(time), batch)

    def flush(self) -> None:
        """Flush buffering pushers in the parent (called by the sending operator's tee)."""
        self._tee.flush()


def _reach(summaries: ConnectivityLike) -> list[list[int]]:
    """For each input, the outputs it reaches (for the observer), from sparse or dense summaries."""
    return [[output for output, chain in sorted(row.items()) if len(chain)] for row in sparse(summaries)]


class Subgraph(Operate):
    """A :class:`~scopes.operate.Operate` implemented by a graph of child scopes.

    Children are added with :meth:`add_child` (indices start at 1; index 0 is the
    subgraph's own boundary) and joined with :meth:`connect`.  Scope inputs and
    outputs are created with :meth:`new_input` and :meth:`new_output`.
    """

    local = False
    notify = True

    def __init__(
        self,
        name: str,
        address: tuple[int, ...],
        timestamp_type: TimestampType,
        refinement: Refinement | None,
        allocator: Allocator,
        progress_channel: int,
        activate_parent: Activator,
    ) -> None:
        """Create an empty subgraph.

        ``address`` names it among all scopes of the worker; ``refinement`` relates
        its timestamps to its parent's (``None`` for a top-level dataflow);
        ``progress_channel`` identifies the channel its progress batches travel on;
        ``activate_parent`` asks the parent to schedule it.
        """
        self.name = name
        self.address = address
        self.timestamp_type = timestamp_type
        self.refinement = refinement
        self._allocator = allocator
        self._peers = allocator.peers
        self._activate_parent = activate_parent
        self.children: list[Operate | None] = [None]
        self.child_names: list[str] = ["scope boundary"]
        self.child_sites: dict[int, str | None] = {}
        """Where the user's code built each child (only recorded while an observer is attached)."""
        self.edges: list[tuple[Source, Target]] = []
        self._copies: dict[tuple[Source, Target], int] = {}
        self._num_inputs = 0
        self._num_outputs = 0
        self._input_tees: list[Tee] = []
        self._input_counts: list[dict[Any, int]] = []
        self._output_tees: list[Tee] = []
        self._finalized = False
        self._tracker: Tracker | None = None
        self.external_summaries: Connectivity = []
        # run-time state
        self._active: set[int] = set()
        self._heap: list[int] = []
        self._progcaster = Progcaster(address)
        self._external: list[list[tuple[Any, int]]] = []
        self._incomplete: list[bool] = [False]
        self._incomplete_count = 0
        self._output_caps: list[MutableAntichain[Any]] = []
        self._progress_channel = progress_channel
        self.observer: ProgressObserver | None = None
        """Instrumentation hooks (``None``: logging off); nested scopes inherit it."""
        self.edge_contracts: list[str] = []

    # ------------------------------------------------------------------ building

    @property
    def inputs(self) -> int:
        """The number of scope inputs."""
        return self._num_inputs

    @property
    def outputs(self) -> int:
        """The number of scope outputs."""
        return self._num_outputs

    def _check_open(self, what: str) -> None:
        if self._finalized:
            raise BuildError(
                f"cannot {what} in scope '{self.name}': its dataflow has already been built; "
                "construct everything inside the function passed to worker.dataflow()"
            )

    def reserve_child(self, name: str) -> int:
        """Reserve the next child index, to be filled by :meth:`set_child`."""
        self._check_open(f"add operator '{name}'")
        self.children.append(None)
        self.child_names.append(name)
        self._incomplete.append(False)
        if self.observer is not None:
            self.child_sites[len(self.children) - 1] = user_site(2)
        return len(self.children) - 1

    def set_child(self, index: int, child: Operate) -> None:
        """Install ``child`` at a reserved index."""
        if self.children[index] is not None:
            raise BuildError(f"scope '{self.name}': child {index} is already set")
        self.children[index] = child

    def add_child(self, child: Operate, name: str | None = None) -> int:
        """Add a child scope and return its index (1, 2, ...)."""
        index = self.reserve_child(name or str(getattr(child, "name", "operator")))
        self.set_child(index, child)
        return index

    def connect(self, source: Source, target: Target, copies: int = 1, contract: str = "Pipeline") -> None:
        """Add an edge from ``source`` to ``target`` (index 0 is this scope's boundary).

        ``copies`` is how many records arrive at ``target`` (over all workers) for
        each record sent at ``source``: the number of workers for a broadcast.
        """
        self._check_open(f"connect {source!r} to {target!r}")
        self.edges.append((source, target))
        self.edge_contracts.append(contract)
        if copies != 1:
            self._copies[(source, target)] = copies

    def new_input(self) -> tuple[int, Pusher, Tee]:
        """Create a scope input.

        Returns its index, the pusher the parent's upstream output should push
        into, and the inner fan-out that inner operators attach to (``Source(0, i)``).
        """
        self._check_open("add an input")
        if self.refinement is None:
            raise BuildError(f"scope '{self.name}' is a top-level dataflow and has no parent to take input from")
        index = self._num_inputs
        self._num_inputs += 1
        tee = Tee()
        counts: dict[Any, int] = {}
        self._input_tees.append(tee)
        self._input_counts.append(counts)
        entrance = _ScopeEntrance(tee, counts, self.refinement.to_inner, self._activate_parent)
        return index, entrance, tee

    def new_output(self) -> tuple[int, Pusher, Tee]:
        """Create a scope output.

        Returns its index, the pusher inner operators push into (``Target(0, o)``),
        and the parent-level fan-out that the parent's operators attach to.
        """
        self._check_open("add an output")
        if self.refinement is None:
            raise BuildError(f"scope '{self.name}' is a top-level dataflow and has no parent to send output to")
        index = self._num_outputs
        self._num_outputs += 1
        tee = Tee()
        self._output_tees.append(tee)
        return index, _ScopeExit(tee, self.refinement.to_outer), tee

    # ------------------------------------------------------------------ activation

    def activate_child(self, index: int) -> None:
        """Schedule child ``index`` at this subgraph's next run."""
        if index not in self._active:
            self._active.add(index)
            heapq.heappush(self._heap, index)
            self._activate_parent()

    def activate_address(self, path: Sequence[int]) -> None:
        """Activate the operator at ``path`` relative to this subgraph (ignored if not built yet)."""
        scope: Subgraph = self
        for depth, index in enumerate(path):
            if index >= len(scope.children) or scope.children[index] is None:
                return
            if depth == len(path) - 1:
                scope.activate_child(index)
                return
            child = scope.children[index]
            if not isinstance(child, Subgraph):
                return
            scope = child

    # ------------------------------------------------------------------ Operate: set-up

    def _finalize(self) -> None:
        if self._finalized:
            return
        for index, child in enumerate(self.children[1:], start=1):
            if child is None:
                raise BuildError(
                    f"scope '{self.name}': operator '{self.child_names[index]}' (child {index}) was "
                    "started but never finished; its construction probably raised an error earlier"
                )
        builder = TrackerBuilder(self.timestamp_type, self._num_inputs, self._num_outputs)
        initial: list[tuple[Source, Any, int]] = []
        for index, child in enumerate(self.children[1:], start=1):
            assert child is not None
            summaries, capabilities = child.get_internal_summary()
            builder.add_node(index, child.inputs, child.outputs, summaries, name=self.child_names[index])
            for port, updates in enumerate(capabilities):
                for time, diff in updates:
                    initial.append((Source(index, port), time, diff))
        for source, target in self.edges:
            builder.add_edge(source, target)
        tracker = builder.build()
        self._tracker = tracker
        self._finalized = True
        self._index_locations(tracker)
        if self.observer is not None:
            self._log_structure(tracker)
        if self.observer is not None and self._peers > 1:
            # each worker's own share of the leaf children's initial capabilities
            self.observer.local_pointstamps(self.address, [
                (tracker.index_of(source), time, diff // self._peers)
                for source, time, diff in initial if self.children[source.node].local  # type: ignore[union-attr]
            ])
        for source, time, diff in initial:
            tracker.update_source(source, time, diff)
        if self._peers > 1:
            self._progcaster.connect(self._allocator, self._progress_channel)
        self._output_caps = [MutableAntichain() for _ in range(self._num_outputs)]
        self._external = [[] for _ in range(self._num_inputs)]

    def _log_structure(self, tracker: Tracker) -> None:
        """Report this scope, its leaf children, its edges and its location numbering to the observer."""
        observer = self.observer
        assert observer is not None
        tracker.observer, tracker.observer_scope = observer, self.address
        reach = _reach(tracker.scope_summary())
        observer.operator_created(
            self.address, self.name, self._num_inputs, self._num_outputs, reach, self.timestamp_type.name
        )
        for index, child in enumerate(self.children[1:], start=1):
            if child is not None and not isinstance(child, Subgraph):
                summaries = child.get_internal_summary()[0]
                observer.operator_created(
                    self.address + (index,), self.child_names[index], child.inputs, child.outputs,
                    _reach(summaries), None, self.child_sites.get(index),
                )
        for (source, target), contract in zip(self.edges, self.edge_contracts, strict=True):
            observer.channel_created(
                self.address, (source.node, source.port), (target.node, target.port), contract,
                self._copies.get((source, target), 1),
            )
        observer.locations(
            self.address, [(loc.node, loc.port, isinstance(loc, Source)) for loc in tracker.locations()]
        )

    def _index_locations(self, tracker: Tracker) -> None:
        count = len(self.children)
        self._target_loc: list[list[int]] = [[] for _ in range(count)]
        self._source_loc: list[list[int]] = [[] for _ in range(count)]
        locations = tracker.locations()
        self._loc_kind: list[int] = [_INNER] * len(locations)
        self._loc_port: list[int] = [0] * len(locations)
        self._loc_child: list[int] = [0] * len(locations)
        # for each location: the child whose input it is, or -1 (outputs, and the boundary)
        self._loc_target_child: list[int] = [-1] * len(locations)
        for loc, location in enumerate(locations):
            self._loc_child[loc] = location.node
            self._loc_port[loc] = location.port
            if location.node == 0:
                self._loc_kind[loc] = _SCOPE_OUTPUT if isinstance(location, Target) else _SCOPE_INPUT
            elif isinstance(location, Target):
                self._loc_target_child[loc] = location.node
        for index, child in enumerate(self.children):
            if index == 0:
                self._source_loc[0] = [tracker.index_of(Source(0, i)) for i in range(self._num_inputs)]
                self._target_loc[0] = [tracker.index_of(Target(0, o)) for o in range(self._num_outputs)]
                continue
            assert child is not None
            self._target_loc[index] = [tracker.index_of(Target(index, p)) for p in range(child.inputs)]
            self._source_loc[index] = [tracker.index_of(Source(index, p)) for p in range(child.outputs)]
        # for each output: (target location, copies) of every edge leaving it
        self._edge_targets: list[list[list[tuple[int, int]]]] = [
            [[] for _ in self._source_loc[index]] for index in range(count)
        ]
        for source, target in self.edges:
            loc = self._target_loc[target.node][target.port]
            fanout = self._edge_targets[source.node][source.port]
            entry = (loc, self._copies.get((source, target), 1))
            if entry not in fanout:
                fanout.append(entry)
        self._buffers: list[tuple[list[ChangeBatch[Any]], list[ChangeBatch[Any]], list[ChangeBatch[Any]]]] = [
            ([], [], [])
        ]
        for child in self.children[1:]:
            assert child is not None
            self._buffers.append(
                (
                    [ChangeBatch() for _ in range(child.outputs)],
                    [ChangeBatch() for _ in range(child.inputs)],
                    [ChangeBatch() for _ in range(child.outputs)],
                )
            )

    @property
    def built(self) -> bool:
        """Whether the dataflow around this scope has been built (its tracker exists)."""
        return self._tracker is not None

    def copies(self, source: Source, target: Target) -> int:
        """How many records arrive at ``target`` for each sent at ``source`` (the workers, for a broadcast)."""
        return self._copies.get((source, target), 1)

    @property
    def tracker(self) -> Tracker:
        """This subgraph's progress tracker (available once the dataflow is built)."""
        if self._tracker is None:
            raise BuildError(f"scope '{self.name}' has not been built yet")
        return self._tracker

    def get_internal_summary(self) -> tuple[Connectivity, list[Updates]]:
        """Build the tracker; summarize inner paths (sparse) and initial output capabilities for the parent."""
        self._finalize()
        tracker = self.tracker
        refinement = self.refinement
        summaries: Connectivity = []
        for row in tracker.scope_summary():
            out_row: dict[int, Antichain[PathSummary]] = {}
            for output, chain in row.items():
                outer: Antichain[PathSummary] = Antichain()
                for summary in chain:
                    outer.insert(refinement.summarize(summary) if refinement else summary)
                out_row[output] = outer
            summaries.append(out_row)
        tracker.propagate_all()
        capabilities = self._output_capability_changes()
        return summaries, capabilities

    def _output_capability_changes(self) -> list[Updates]:
        result: list[Updates] = []
        to_outer = self.refinement.to_outer if self.refinement else (lambda t: t)
        for output, changes in enumerate(self.tracker.drain_output_changes()):
            if changes:
                outer = [(to_outer(time), diff) for time, diff in changes]
                result.append(self._output_caps[output].update_iter(outer))
            else:
                result.append([])
        return result

    def set_external_summary(self, summaries: ConnectivityLike, frontier: Sequence[Updates]) -> None:
        """Record the outside world, install the initial input frontier, and set up every child."""
        self._finalize()
        tracker = self.tracker
        if len(frontier) != self._num_inputs:
            raise ProgressError(
                f"scope '{self.name}' has {self._num_inputs} inputs but was given "
                f"{len(frontier)} initial frontiers"
            )
        self.external_summaries = sparse(summaries)
        to_inner = self.refinement.to_inner if self.refinement else (lambda t: t)
        for port, updates in enumerate(frontier):
            loc = self._source_loc[0][port]
            for time, diff in updates:
                tracker.update_index(loc, to_inner(time), diff)
        tracker.propagate_all()
        initial: list[list[list[tuple[Any, int]]]] = [
            [[] for _ in range(child.inputs)] if child is not None else [] for child in self.children
        ]
        target_child = self._loc_target_child
        pushed = tracker.drain_pushed_indexed()
        if self.observer is not None:
            self.observer.frontiers(self.address, pushed)
        for loc, time, diff in pushed:
            if target_child[loc] > 0:
                initial[self._loc_child[loc]][self._loc_port[loc]].append((time, diff))
        for index, child in enumerate(self.children[1:], start=1):
            assert child is not None
            child_summaries = self._child_external_summaries(index) if not child.local else []
            child.set_external_summary(child_summaries, initial[index])
            if not child.frontier_interest:
                child.defer_frontiers(
                    [tracker.frontier_index(loc) for loc in self._target_loc[index]],
                    partial(self._report_child, index),
                )
            self.activate_child(index)
        if self.observer is None:
            # Only frontier changes pushed to children are drained (the observer wants them all).
            tracker.report_only(
                loc
                for index, child in enumerate(self.children[1:], start=1)
                if child is not None and child.frontier_interest
                for loc in self._target_loc[index]
            )

    def _report_child(self, index: int) -> None:
        """Child ``index`` took a frontier interest: drain the changes at its inputs from now on."""
        tracker = self.tracker
        for loc in self._target_loc[index]:
            tracker.report_location(loc)

    def _child_external_summaries(self, index: int) -> Connectivity:
        """Summaries from each output of child ``index`` back to the inputs it reaches, inside this scope (sparse)."""
        child = self.children[index]
        assert child is not None
        table: Connectivity = []
        for output in range(child.outputs):
            reach = self.tracker.summaries_from(Source(index, output))
            table.append(
                {loc.port: chain for loc, chain in reach.items() if loc.node == index and isinstance(loc, Target)}
            )
        return table

    # ------------------------------------------------------------------ Operate: run time

    def push_external_progress(self, external: Sequence[Updates]) -> None:
        """Buffer frontier changes at the scope inputs; they are applied at the next pull."""
        pending = self._external
        for port, updates in enumerate(external):
            if updates:
                pending[port].extend(updates)

    def pull_internal_progress(
        self,
        internal: Sequence[ChangeBatch[Any]],
        consumed: Sequence[ChangeBatch[Any]],
        produced: Sequence[ChangeBatch[Any]],
    ) -> bool:
        """Run the children that need it and report progress visible at this scope's boundary."""
        if self._external:
            self._accept_frontier()
        if self._input_counts:
            self._harvest_inputs()
        progcaster = self._progcaster
        if progcaster.broadcasting:
            progcaster.receive()
        tracker = self._tracker
        assert tracker is not None
        if progcaster.final or tracker.pending or self._num_outputs:
            self._propagate(internal, consumed, produced)
        if self._heap:
            self._schedule_children()
        if progcaster.local:
            progcaster.send(self.observer)
            progcaster.receive()
        if progcaster.final:
            self._propagate(internal, consumed, produced)
        if self._active or progcaster.final:
            self._activate_parent()
        # Children just told of a frontier change (the last one: empty) have not run
        # yet; the scope is complete only once they have, or they would never see it.
        return self._incomplete_count > 0 or tracker.tracking_anything() or bool(self._active)

    def _accept_frontier(self) -> None:
        pending = self._external
        if not pending or not any(pending):
            return
        tracker = self._tracker
        assert tracker is not None
        to_inner = self.refinement.to_inner if self.refinement else (lambda t: t)
        for port, updates in enumerate(pending):
            if updates:
                loc = self._source_loc[0][port]
                for time, diff in updates:
                    tracker.update_index(loc, to_inner(time), diff)
                updates.clear()

    def _harvest_inputs(self) -> None:
        if not self._input_counts:
            return
        local = self._progcaster.local
        for port, counts in enumerate(self._input_counts):
            if counts:
                source = self._source_loc[0][port]
                fanout = self._edge_targets[0][port]
                for time, count in counts.items():
                    for target, copies in fanout:
                        local.append((target, time, count * copies))
                    local.append((source, time, -count))
                counts.clear()

    def _propagate(
        self,
        internal: Sequence[ChangeBatch[Any]],
        consumed: Sequence[ChangeBatch[Any]],
        produced: Sequence[ChangeBatch[Any]],
    ) -> None:
        tracker = self._tracker
        assert tracker is not None
        progcaster = self._progcaster
        if progcaster.final and self.refinement is None:
            final, progcaster.final = progcaster.final, []
            tracker.update_batch(final)
        elif progcaster.final:
            final, progcaster.final = progcaster.final, []
            kinds = self._loc_kind
            ports = self._loc_port
            refinement = self.refinement
            update = tracker.update_index
            for loc, time, diff in final:
                kind = kinds[loc]
                if kind == _INNER:
                    update(loc, time, diff)
                elif refinement is None:  # pragma: no cover - handled above
                    raise ProgressError(f"top-level scope '{self.name}' received progress at its boundary")
                elif kind == _SCOPE_INPUT:
                    consumed[ports[loc]].update(refinement.to_outer(time), -diff)
                else:
                    produced[ports[loc]].update(refinement.to_outer(time), diff)
        tracker.propagate_all()
        pushed = tracker.drain_pushed_indexed()
        if pushed:
            if self.observer is not None:
                self.observer.frontiers(self.address, pushed)
            target_child = self._loc_target_child
            ports = self._loc_port
            children = self.children
            # None: the child has no frontier interest (it reads its frontiers on demand)
            per_child: dict[int, list[list[tuple[Any, int]]] | None] = {}
            for loc, time, diff in pushed:
                child_index = target_child[loc]
                if child_index <= 0:
                    continue
                lists = per_child.get(child_index, _UNSEEN)
                if lists is _UNSEEN:
                    child = children[child_index]
                    assert child is not None
                    lists = per_child[child_index] = (
                        [[] for _ in range(child.inputs)] if child.frontier_interest else None
                    )
                if lists is not None:
                    lists[ports[loc]].append((time, diff))
            for child_index, lists in per_child.items():
                if lists is None:
                    continue
                child = children[child_index]
                assert child is not None
                child.push_external_progress(lists)
                if child.notify:
                    self.activate_child(child_index)
        if self._num_outputs:
            for output, changes in enumerate(self._output_capability_changes()):
                if changes:
                    internal[output].extend(changes)

    def _schedule_children(self) -> None:
        heap = self._heap
        active = self._active
        children = self.children
        buffers = self._buffers
        previous = 0
        deferred: list[int] = []
        while heap:
            index = heapq.heappop(heap)
            if index <= previous:
                deferred.append(index)
                continue
            active.discard(index)
            previous = index
            child = children[index]
            assert child is not None
            internal, consumed, produced = buffers[index]
            if self.observer is not None:
                start = perf_counter()
                incomplete = child.pull_internal_progress(internal, consumed, produced)
                self.observer.scheduled(self.address + (index,), start, perf_counter() - start)
            else:
                incomplete = child.pull_internal_progress(internal, consumed, produced)
            if incomplete != self._incomplete[index]:
                self._incomplete[index] = incomplete
                self._incomplete_count += 1 if incomplete else -1
            self._extract(index, child.local, internal, consumed, produced)
        for index in deferred:
            heapq.heappush(heap, index)

    def _extract(
        self,
        index: int,
        local: bool,
        internal: list[ChangeBatch[Any]],
        consumed: list[ChangeBatch[Any]],
        produced: list[ChangeBatch[Any]],
    ) -> None:
        progcaster = self._progcaster
        out = progcaster.local if local and progcaster.broadcasting else progcaster.final
        if self.observer is not None and any(b.counts for b in (*consumed, *produced)):
            self.observer.messages(
                self.address + (index,), [b.items() for b in consumed], [b.items() for b in produced]
            )
        for port, batch in enumerate(consumed):
            if counts := batch.counts:
                loc = self._target_loc[index][port]
                for time, diff in counts.items():
                    out.append((loc, time, -diff))
                counts.clear()
        for port, batch in enumerate(internal):
            if counts := batch.counts:
                loc = self._source_loc[index][port]
                for time, diff in counts.items():
                    out.append((loc, time, diff))
                counts.clear()
        for port, batch in enumerate(produced):
            if counts := batch.counts:
                fanout = self._edge_targets[index][port]
                for time, diff in counts.items():
                    for loc, copies in fanout:
                        out.append((loc, time, diff * copies))
                counts.clear()

    # ------------------------------------------------------------------ inspection

    def frontier_at(self, location: Location) -> Antichain[Any]:
        """The frontier this worker currently implies at ``location`` inside this scope."""
        return self.tracker.frontier(location)
