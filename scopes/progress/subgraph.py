"""``Subgraph``: a scope made of child scopes joined by edges.

A subgraph tracks the progress of its children with a
:class:`~scopes.progress.reachability.Tracker`.  Its children's progress statements are
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

from collections import Counter
from collections.abc import Sequence
from functools import partial
from heapq import heappop, heappush
from time import perf_counter
from typing import Any

from scopes.channel_protocols import Activator, Allocator
from scopes.errors import BuildError, ProgressError
from scopes.progress.antichain import Antichain, MutableAntichain
from scopes.progress.change_batch import ChangeBatch
from scopes.progress.hooks import ProgressObserver
from scopes.progress.location import Location, Source, Target
from scopes.progress.location_index import INNER, SCOPE_INPUT, LocationIndex
from scopes.progress.operate import ConnectivityLike, Operate, Updates
from scopes.progress.progcaster import Progcaster
from scopes.progress.reachability import Connectivity, Tracker, sparse
from scopes.progress.subgraph_builder import SubgraphBuilder
from scopes.progress.timestamp import PathSummary, Refinement, TimestampType

_UNSEEN: Any = object()  # a child not yet looked at while distributing frontier changes


def _pend(pending: dict[int, dict[Any, int]], loc: int, counts: dict[Any, int], factor: int) -> None:
    """Add ``counts`` (never zero), each times ``factor`` (not zero), to a tracker's pending changes at ``loc``."""
    at = pending.get(loc)
    if at is None:
        at = pending[loc] = {}
        for time, diff in counts.items():
            at[time] = diff * factor
        return
    for time, diff in counts.items():
        value = at.get(time, 0) + diff * factor
        if value:
            at[time] = value
        else:
            del at[time]


class Subgraph(Operate):
    """A :class:`~scopes.progress.operate.Operate` implemented by a graph of child scopes.

    Its :attr:`graph` (a :class:`~scopes.progress.subgraph_builder.SubgraphBuilder`) takes
    the children, edges and scope ports while the dataflow is built; the
    subgraph runs what it built: it schedules the children, exchanges their
    progress with the other workers (a :class:`~scopes.progress.progcaster.Progcaster`)
    and tracks it.
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
        self.observer: ProgressObserver | None = None
        """Instrumentation hooks (``None``: logging off); nested scopes inherit it."""
        self.graph = SubgraphBuilder(name, timestamp_type, refinement, activate_parent)
        """The children, edges and ports, added while the dataflow is built."""
        graph = self.graph
        self.children = graph.children
        """The child scopes by index (index 0, the boundary, is ``None``)."""
        self.child_names = graph.child_names
        """The children's names by index."""
        self.child_sites = graph.child_sites
        """Where the user's code built each child (only recorded while an observer is attached)."""
        self.edges = graph.edges
        """The edges, ``(source, target)``."""
        self.edge_contracts = graph.edge_contracts
        """Each edge's channel contract, by name."""
        self._input_counts = graph.input_counts
        self._num_outputs = 0  # graph.num_outputs, once built (read on every run)
        self._tracker: Tracker | None = None
        self.external_summaries: Connectivity = []
        # run-time state
        self._active: set[int] = set()
        self._heap: list[int] = []
        self._running = False
        """Whether :meth:`pull_internal_progress` runs: it asks the parent for another run at its end if needed."""
        self.moved = False
        """Set whenever a run propagates progress changes (a record sent or received, a capability changed, on any
        worker); the runtime clears it to learn whether a run moved anything (a poll that found nothing did not)."""
        self._progcaster = Progcaster(address)
        self._external: list[list[tuple[Any, int]]] = []
        self._incomplete: list[bool] = []
        self._incomplete_count = 0
        self._output_caps: list[MutableAntichain[Any]] = []
        self._progress_channel = progress_channel
        self._own_outputs: list[Counter[Any]] = []  # what nested scopes sent to the outputs on this worker
        self.own_produced: list[list[tuple[Any, int]]] | None = None
        """This worker's records sent at each output since the parent last took them (while logging)."""

    # ------------------------------------------------------------------ shape

    @property
    def inputs(self) -> int:
        """The number of scope inputs."""
        return self.graph.num_inputs

    @property
    def outputs(self) -> int:
        """The number of scope outputs."""
        return self.graph.num_outputs

    def copies(self, source: Source, target: Target) -> int:
        """How many records arrive at ``target`` for each sent at ``source`` (the workers, for a broadcast)."""
        return self.graph.copies(source, target)

    # ------------------------------------------------------------------ activation

    def activate_child(self, index: int) -> None:
        """Schedule child ``index``: later in the current run if it has not run in it yet, else at the next run."""
        if index not in self._active:
            self._active.add(index)
            heappush(self._heap, index)
            if not self._running:  # else the run ends by asking for another if the child has not run
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
        if self._tracker is not None:
            return
        tracker, initial = self.graph.finish()
        self._tracker = tracker
        self._index_locations(tracker)
        if self.observer is not None:
            self.graph.log_structure(self.observer, self.address, tracker)
        if self.observer is not None and self._peers > 1:
            # each worker's own share of the leaf children's initial capabilities
            self.observer.local_pointstamps(
                self.address,
                [
                    (tracker.index_of(source), time, diff // self._peers)
                    for source, time, diff in initial
                    if self.children[source.node].local  # type: ignore[union-attr]
                ],
            )
        for source, time, diff in initial:
            tracker.update_source(source, time, diff)
        if self._peers > 1:
            self._progcaster.connect(self._allocator, self._progress_channel)
        self._num_outputs = self.graph.num_outputs
        self._own_outputs = [Counter() for _ in range(self._num_outputs)]
        self._output_caps = [MutableAntichain() for _ in range(self._num_outputs)]
        self._external = [[] for _ in range(self.graph.num_inputs)]
        self._incomplete = [False] * len(self.children)

    def _index_locations(self, tracker: Tracker) -> None:
        """Number the locations for the progress path, and give each child its report buffers."""
        graph = self.graph
        index = LocationIndex(
            tracker,
            self.children,
            (graph.num_inputs, graph.num_outputs),
            [(edge, graph.copies(*edge)) for edge in self.edges],
        )
        self._target_loc = index.target_loc
        self._source_loc = index.source_loc
        self._loc_kind = index.kind
        self._loc_port = index.port
        self._loc_child = index.child
        self._loc_target_child = index.target_child
        self._edge_targets = index.edge_targets
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
        if len(frontier) != self.graph.num_inputs:
            raise ProgressError(
                f"scope '{self.name}' has {self.graph.num_inputs} inputs but was given "
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
        progcaster = self._progcaster
        tracker = self._tracker
        assert tracker is not None
        self._running = True
        try:
            if self._external:
                self._accept_frontier()
            if self._input_counts:
                self._harvest_inputs()
            if progcaster.broadcasting:
                progcaster.receive()
            if tracker.reporting and (progcaster.final or tracker.pending or self._num_outputs):
                # Frontier changes that may activate a child in this run. With no child interested in its
                # frontiers (none reported), what arrived waits for the propagation after the run: one fold
                # of the peers' batches with this worker's own, and the parent hears of it as soon.
                self._propagate(internal, consumed, produced)
            if self._heap:
                self._schedule_children()
            if self.observer is not None and self.refinement is not None and progcaster.broadcasting:
                self._observe_own_boundary(progcaster.local)
            if progcaster.local:
                progcaster.send(self.observer)
                progcaster.receive()
            if progcaster.final or tracker.pending:
                self._propagate(internal, consumed, produced)
        finally:  # a caller that catches an error and steps on must still hear of activations
            self._running = False
        # A child activated during the run that has not run yet (or progress still to apply) asks for
        # another run; one activated and run within this run does not, and costs its parent no empty step.
        if self._active or progcaster.final:
            self._activate_parent()
        # Children just told of a frontier change (the last one: empty) have not run
        # yet; the scope is complete only once they have, or they would never see it.
        return self._incomplete_count > 0 or tracker.tracking_anything() or bool(self._active)

    @property
    def reports_own_messages(self) -> bool:
        """Whether this scope logs the records crossing its boundary itself (this worker's share).

        What its parent hears from it is every worker's share (its tracker's
        view), right for progress but not a count of this worker's records, so
        while it exchanges progress with peers it logs its own batch instead.
        """
        return self._progcaster.broadcasting

    def _observe_own_boundary(self, batch: list[tuple[int, Any, int]]) -> None:
        """Log the records this worker's batch, and its nested scopes' own shares, moved across the boundary.

        Records from a local child to a scope output are in ``batch``; those from
        a nested scope are not (its reports are every worker's), so its own
        share is carried over in :meth:`_carry_own_outputs`.  What this scope
        sent is kept in :attr:`own_produced` for its parent to do the same.
        """
        assert self.observer is not None and self.refinement is not None
        if not batch and not any(self._own_outputs):
            return
        kinds = self._loc_kind
        ports = self._loc_port
        to_outer = self.refinement.to_outer
        consumed: list[Counter[Any]] = [Counter() for _ in range(self.graph.num_inputs)]
        produced, self._own_outputs = self._own_outputs, [Counter() for _ in range(self.graph.num_outputs)]
        for loc, time, diff in batch:
            kind = kinds[loc]
            if kind == INNER:
                continue
            if kind == SCOPE_INPUT:
                consumed[ports[loc]][time] -= diff
            else:
                produced[ports[loc]][time] += diff
        if not any(consumed) and not any(produced):
            return
        outer_consumed = [[(to_outer(t), n) for t, n in port.items() if n] for port in consumed]
        outer_produced = [[(to_outer(t), n) for t, n in port.items() if n] for port in produced]
        self.own_produced = outer_produced
        self.observer.messages(self.address, outer_consumed, outer_produced)

    def _carry_own_outputs(self, index: int, produced: list[list[tuple[Any, int]]]) -> None:
        """Count what nested scope ``index`` sent on this worker straight to this scope's outputs."""
        kinds = self._loc_kind
        ports = self._loc_port
        for port, entries in enumerate(produced):
            for loc, copies in self._edge_targets[index][port]:
                if kinds[loc] != INNER:
                    tally = self._own_outputs[ports[loc]]
                    for time, count in entries:
                        tally[time] += count * copies

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
        self.moved = True
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
                if kind == INNER:
                    update(loc, time, diff)
                elif refinement is None:  # pragma: no cover - handled above
                    raise ProgressError(f"top-level scope '{self.name}' received progress at its boundary")
                elif kind == SCOPE_INPUT:
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
        """Run each active child once, lowest index first, and also those activated meanwhile that have not run.

        A child runs at most once per run: one activated again after it ran
        (by a loop's feedback, or by itself) waits for the next run, so a run
        is bounded.  A child activated meanwhile that has not run yet runs in
        this run, even one with a lower index than the last child run: data
        that arrived from another worker part-way through an iteration (an
        exchange's receiver, late in the scope) then reaches the loop's head
        (early in the scope) within the same step, so each worker takes one
        step per iteration of a loop with an exchange, as one worker alone does.
        """
        heap = self._heap
        active = self._active
        children = self.children
        buffers = self._buffers
        ran: set[int] = set()
        deferred: list[int] = []
        while heap:
            index = heappop(heap)
            if index in ran:
                deferred.append(index)
                continue
            active.discard(index)
            ran.add(index)
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
            heappush(heap, index)

    def _extract(
        self,
        index: int,
        local: bool,
        internal: list[ChangeBatch[Any]],
        consumed: list[ChangeBatch[Any]],
        produced: list[ChangeBatch[Any]],
    ) -> None:
        if self.observer is not None:
            self._observe_child(index, local, consumed, produced)
        progcaster = self._progcaster
        if local and progcaster.broadcasting:
            out = progcaster.local
        elif self.refinement is None:
            # Nothing to broadcast, no boundary to translate: the changes go straight into the
            # tracker's pending counts, with no (location, time, diff) tuple or second pass over them.
            tracker = self._tracker
            assert tracker is not None
            pending = tracker.pending
            for port, batch in enumerate(consumed):
                if counts := batch.counts:
                    _pend(pending, self._target_loc[index][port], counts, -1)
                    counts.clear()
            for port, batch in enumerate(internal):
                if counts := batch.counts:
                    _pend(pending, self._source_loc[index][port], counts, 1)
                    counts.clear()
            for port, batch in enumerate(produced):
                if counts := batch.counts:
                    for loc, copies in self._edge_targets[index][port]:
                        _pend(pending, loc, counts, copies)
                    counts.clear()
            return
        else:
            out = progcaster.final
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

    def _observe_child(
        self, index: int, local: bool, consumed: list[ChangeBatch[Any]], produced: list[ChangeBatch[Any]]
    ) -> None:
        """Log the records child ``index`` consumed and produced (its own share, for a nested scope)."""
        assert self.observer is not None
        child = self.children[index]
        if local or not getattr(child, "reports_own_messages", False):
            if any(b.counts for b in (*consumed, *produced)):
                self.observer.messages(
                    self.address + (index,), [b.items() for b in consumed], [b.items() for b in produced]
                )
        elif own := getattr(child, "own_produced", None):
            child.own_produced = None  # type: ignore[union-attr]
            self._carry_own_outputs(index, own)

    # ------------------------------------------------------------------ inspection

    def frontier_at(self, location: Location) -> Antichain[Any]:
        """The frontier this worker currently implies at ``location`` inside this scope."""
        return self.tracker.frontier(location)
