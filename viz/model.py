"""A model of running dataflows, rebuilt from instrumentation events.

Feed it events one at a time (:meth:`Model.apply`, for a live stream) or all at
once (:meth:`Model.from_events`, for a recording, optionally stopping at a
moment).  It keeps

* the structure: scopes (with their timestamp types), operators and their
  ports, and the edges between them, with channel contracts;
* the state, per worker (:class:`View`): pointstamps and the frontier at every
  location, the capabilities each operator holds, the messages in flight on
  each channel, records received and sent, scheduling time, input handles;
* a combined view of all workers (:meth:`Model.view` with ``worker=None``).

Pointstamps come in two kinds of events.  ``LocalPointstampsChanged`` carries
the changes a worker *originated* (its own progress batches): once the model
has seen one, it is in *local mode*, and each worker's :attr:`View.pointstamps`
holds that worker's own counts: the capabilities its operators hold, and for
messages, the records it sent minus those it received (so a worker's count at
a target can be negative; only the sum over the workers, the combined view, is
the number in flight).  Changes at a nested scope's boundary are moved to the
parent, where the parent's tracker counts them.  ``PointstampsChanged`` carries
what each worker's tracker counts (every worker's pointstamps, as far as that
worker has heard): it is kept in :attr:`View.tracked`, and it is what
:attr:`View.pointstamps` shows for recordings without local events (runs of a
single worker, whose tracker counts only its own changes; older recordings;
and live snapshots, see :mod:`viz.live`).

A location is a :data:`Loc`: ``(scope address, node, port, is_source)``, the
tracker's own naming inside ``scope``.  Node 0 is the scope's boundary.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from runtime.instrument import (
    CapabilitySite,
    ChannelCreated,
    DataflowCompleted,
    Event,
    EventsDropped,
    FrontiersChanged,
    InputChanged,
    LocalPointstampsChanged,
    LocationsDefined,
    Messages,
    OperatorCreated,
    PointstampsChanged,
    Scheduled,
    WorkerShutdown,
)
from viz import limits
from viz.errors import SelectionError
from viz.limits import clip, clip_optional
from viz.time_kinds import scope_and_times, time_kind
from viz.view import Address, InputState, Loc, View, add, combine

_NUMBER = re.compile(r"[0-9]{1,18}")  # what a location's text may hold as a number (not '²', not 5,000 digits)


@dataclass
class OperatorInfo:
    """An operator or scope as built: its address, name, ports and internal connectivity."""

    address: Address
    name: str
    inputs: int
    outputs: int
    reach: tuple[tuple[int, ...], ...]
    scope_timestamp: str | None = None
    site: str | None = None
    """Where the user's code built it (``file.py:LINE``), when the recording says."""

    @property
    def is_scope(self) -> bool:
        """Whether this is a scope (a subgraph) rather than a leaf operator."""
        return self.scope_timestamp is not None

    @property
    def parent(self) -> Address:
        """The address of the enclosing scope (``()`` for a dataflow)."""
        return self.address[:-1]


@dataclass
class Edge:
    """An edge inside ``scope`` from ``(node, port)`` to ``(node, port)``, with its contract."""

    scope: Address
    source: tuple[int, int]
    target: tuple[int, int]
    contract: str
    copies: int = 1
    """Records arriving (over all workers) per record sent: the number of workers for a broadcast."""


@dataclass
class ScopeInfo:
    """A scope: its own description, its children by index, its edges and its location numbering."""

    info: OperatorInfo
    children: dict[int, OperatorInfo] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    locations: tuple[tuple[int, int, bool], ...] = ()

    @property
    def address(self) -> Address:
        """The scope's address."""
        return self.info.address


def _project(time: Any, steps: int) -> Any:
    """Drop ``steps`` inner coordinates of a nested product time."""
    for _ in range(steps):
        if isinstance(time, tuple) and len(time) == 2:
            time = time[0]
    return time


class Model:
    """Dataflow structure and per-worker state, rebuilt from events (live or recorded)."""

    def __init__(self) -> None:
        """An empty model; feed it with :meth:`apply`."""
        self.operators: dict[Address, OperatorInfo] = {}
        self.scopes: dict[Address, ScopeInfo] = {}
        self.workers: dict[int, View] = {}
        self.first_t: float | None = None
        self.last_t: float | None = None
        self.dropped = 0
        self.events = 0
        self.over_limit = 0
        """Events not applied because they would have grown the model past a limit of :mod:`viz.limits`."""
        self.mistimed = 0
        """Events not applied because a time in them is not of its scope's kind (see :func:`time_kind`)."""
        self._time_kinds: dict[Address, Hashable] = {}
        """Per scope: the kind of the first time seen there, which every later one must share."""
        self.local_mode = False
        """Whether the events include ``LocalPointstampsChanged`` (per-worker attribution is possible)."""
        self._edge_keys: set[tuple[Address, tuple[int, int], tuple[int, int]]] = set()
        self._unsettled: dict[int, list[PointstampsChanged]] = {}
        self._version = 0
        self._names: dict[Loc, str] = {}
        """:meth:`describe`'s answers, until the structure changes."""
        self._memo: dict[Hashable, Any] = {}
        """:meth:`memo`'s and :meth:`depth_between`'s answers, until the structure changes."""
        self._combined: tuple[tuple[int, int], View] | None = None
        """Per worker: tracker batches whose frontier changes (the worker's next event) are not applied yet."""
        self._moment: dict[tuple[View, str], dict[Hashable, Any]] = {}
        """:meth:`moment`'s dicts, until the next event is applied (or the structure changes)."""

    # ------------------------------------------------------------------ building

    @classmethod
    def from_events(cls, events: Iterable[Event], until: float | None = None) -> Model:
        """A model of ``events`` (sorted by time), stopping after ``until`` (>= 0) seconds from the first event."""
        if until is not None and not (isinstance(until, int | float) and 0 <= until < float("inf")):
            raise SelectionError(f"{until!r:.40}: a moment is a number of seconds from the first event, at least 0")
        ordered = sorted(events, key=lambda e: (e.t, e.worker, e.seq))
        model = cls()
        if not ordered:
            return model
        limit = None if until is None else ordered[0].t + until
        for event in ordered:
            if limit is not None and event.t > limit:
                break
            model.apply(event)
        if limit is None or ordered[-1].t <= limit:
            model.settle()
        return model

    def unsettled(self, worker: int) -> bool:
        """Whether a tracker batch of ``worker`` waits for that worker's next event (see :meth:`apply`)."""
        return worker in self._unsettled

    def settle(self) -> None:
        """Fold in the tracker batches still waiting for their worker's next event (the recording ended)."""
        for worker, batches in self._unsettled.items():
            view = self.worker_view(worker)
            for batch in batches:
                self._changes(view.tracked, batch.scope, batch.changes)
        self._unsettled.clear()
        self._version += 1
        self._moment.clear()

    def _scope(self, address: Address) -> ScopeInfo:
        scope = self.scopes.get(address)
        if scope is None:
            self._structure_changed()
            name = f"dataflow {address[0]} (being built)" if len(address) == 1 else f"scope {address}"
            placeholder = OperatorInfo(address, name, 0, 0, (), "?")
            scope = self.scopes[address] = ScopeInfo(placeholder)
        return scope

    def worker_view(self, worker: int) -> View:
        """Worker ``worker``'s view, created empty the first time it is asked for."""
        view = self.workers.get(worker)
        if view is None:
            view = self.workers[worker] = View()
            self._moment.clear()
            view.local_mode = self.local_mode
        return view

    def apply(self, event: Event) -> None:
        """Fold one event into the model."""
        self._version += 1
        self._moment.clear()
        self.events += 1
        if self.first_t is None or event.t < self.first_t:
            self.first_t = event.t
        if self.last_t is None or event.t > self.last_t:
            self.last_t = event.t
        if isinstance(event, EventsDropped):
            self.dropped += event.count
            return
        if self._beyond_limits(event):
            self.over_limit += 1
            return
        if not self._times_fit(event):
            self.mistimed += 1
            return
        view = self.worker_view(event.worker)
        view.events += 1
        view.last_t = event.t
        if isinstance(event, PointstampsChanged):
            # A tracker logs the pointstamps it folds in, then the frontier changes they cause: hold the
            # batch until this worker's next event, so counts and frontiers never disagree in between.
            self._unsettled.setdefault(event.worker, []).append(event)
            return
        unsettled = self._unsettled.pop(event.worker, None)
        if unsettled is not None:
            for batch in unsettled:
                self._changes(view.tracked, batch.scope, batch.changes)
        if isinstance(event, FrontiersChanged):
            view.started.add(event.scope)
            self._changes(view.frontier_counts, event.scope, event.changes)
        elif isinstance(event, LocalPointstampsChanged):
            if not self.local_mode:
                self.local_mode = True
                for each in self.workers.values():
                    each.local_mode = True
            self._own_changes(view, event.scope, event.changes)
        elif isinstance(event, Messages):
            self._messages(view, event)
        elif isinstance(event, Scheduled):
            entry = view.scheduled.setdefault(event.address, [0, 0.0])
            entry[0] += 1
            entry[1] += event.duration
        elif isinstance(event, InputChanged):
            state = view.inputs.get(event.address)
            if state is None:
                state = view.inputs[event.address] = InputState(event.address, clip(event.name), event.time)
            state.time = event.time
            if event.site is not None:
                state.site = clip_optional(event.site)
            if event.action == "advanced":
                state.advanced = True
            elif event.action == "closed":
                state.closed = True
        elif isinstance(event, CapabilitySite):
            loc = (event.address[:-1], event.address[-1], event.output, True)
            sites = view.capability_sites.setdefault(loc, {}).setdefault(event.time, {})
            where = (clip(event.action), clip(event.site))
            sites[where] = sites.pop(where, 0) + event.diff  # the last changed last: see View.sites
        elif isinstance(event, OperatorCreated):
            self._operator(event)
        elif isinstance(event, ChannelCreated):
            key = (event.scope, event.source, event.target)
            if key not in self._edge_keys:
                self._edge_keys.add(key)
                self._structure_changed()
                self._scope(event.scope).edges.append(
                    Edge(event.scope, event.source, event.target, event.contract, event.copies)
                )
        elif isinstance(event, LocationsDefined):
            self._scope(event.scope).locations = event.table
            self._structure_changed()
        elif isinstance(event, DataflowCompleted):
            view.completed.add(event.index)
        elif isinstance(event, WorkerShutdown):
            view.shut_down = True

    def _beyond_limits(self, event: Event) -> bool:
        """Whether applying ``event`` would add a worker, scope, operator, channel, input or port past its limit,
        or is at an address nested deeper than :data:`viz.limits.MAX_DEPTH`."""
        if event.worker not in self.workers and len(self.workers) >= limits.MAX_WORKERS:
            return True
        where = getattr(event, "address", None) or getattr(event, "scope", None)
        if where is not None and len(where) > limits.MAX_DEPTH:
            return True
        scopes: tuple[Address, ...] = ()
        if isinstance(event, OperatorCreated):
            if event.address not in self.operators and len(self.operators) >= limits.MAX_OPERATORS:
                return True
            if not 0 <= event.inputs <= limits.MAX_PORTS or not 0 <= event.outputs <= limits.MAX_PORTS:
                return True
            scopes = (event.address[:-1], event.address) if event.scope_timestamp is not None else (event.address[:-1],)
        elif isinstance(event, ChannelCreated):
            if len(self._edge_keys) >= limits.MAX_EDGES:
                return True
            scopes = (event.scope,)
        elif isinstance(event, (PointstampsChanged, LocalPointstampsChanged, FrontiersChanged, LocationsDefined)):
            scopes = (event.scope,)
        elif isinstance(event, InputChanged):
            view = self.workers.get(event.worker)
            if view is not None and event.address not in view.inputs and len(view.inputs) >= limits.MAX_INPUTS:
                return True
        new = sum(1 for scope in scopes if scope and scope not in self.scopes)
        return len(self.scopes) + new > limits.MAX_SCOPES

    def _times_fit(self, event: Event) -> bool:
        """Whether every time in ``event`` is of the kind of its scope's times (the first one seen sets it): a
        recording that mixes them (its checksums prove nothing) would make sorting frontiers fail."""
        found = scope_and_times(event)
        if found is None:
            return True
        scope, times = found
        for time in times:
            kind = time_kind(time)
            if kind is None or self._time_kinds.setdefault(scope, kind) != kind:
                return False
        return True

    def scope_time_kind(self, scope: Address) -> Hashable | None:
        """The kind (see :func:`time_kind`) of the times applied in ``scope``, or ``None`` before any was."""
        return self._time_kinds.get(scope)

    def _structure_changed(self) -> None:
        """Forget what was worked out from the structure (names, nesting depths, :meth:`memo`)."""
        self._names.clear()
        self._memo.clear()
        self._moment.clear()

    def _operator(self, event: OperatorCreated) -> None:
        self._structure_changed()
        if event.address in self.operators and self.operators[event.address].scope_timestamp != "?":
            return
        info = OperatorInfo(
            event.address,
            clip(event.name),
            event.inputs,
            event.outputs,
            event.reach,
            clip_optional(event.scope_timestamp),
            clip_optional(event.site),
        )
        self.operators[event.address] = info
        if info.is_scope:
            self._scope(event.address).info = info
        if len(event.address) > 1:
            self._scope(event.address[:-1]).children[event.address[-1]] = info

    def _changes(
        self, table: dict[Loc, dict[Any, int]], scope: Address, changes: Iterable[tuple[int, Any, int]]
    ) -> None:
        locations = self._scope(scope).locations
        for loc, time, diff in changes:
            if 0 <= loc < len(locations):
                node, port, is_source = locations[loc]
                key = (scope, node, port, bool(is_source))
            else:  # numbering not seen (a truncated recording) or no index of it: keep the raw index
                key = (scope, -1, loc, False)
            counts = table.get(key)
            if counts is None:
                counts = table[key] = {}
            add(counts, time, diff)

    def _own_changes(self, view: View, scope: Address, changes: Iterable[tuple[int, Any, int]]) -> None:
        locations = self._scope(scope).locations
        for loc, time, diff in changes:
            if 0 <= loc < len(locations):
                node, port, is_source = locations[loc]
                self._own_change(view, scope, node, port, bool(is_source), time, diff, 0)
            else:  # numbering not seen (a truncated recording) or no index of it: keep the raw index
                add(view.own.setdefault((scope, -1, loc, False), {}), time, diff)

    def _own_change(
        self, view: View, scope: Address, node: int, port: int, is_source: bool, time: Any, diff: int, hops: int
    ) -> None:
        """Count one originated change where the trackers count it: boundary changes move to the parent."""
        if node != 0 or len(scope) <= 1 or hops > 64:
            add(view.own.setdefault((scope, node, port, is_source), {}), time, diff)
            return
        parent = scope[:-1]
        outer = self.project(time, scope, parent)
        if is_source:  # records this worker consumed at the scope's input
            add(view.own.setdefault((parent, scope[-1], port, False), {}), outer, diff)
            return
        # records this worker produced at the scope's output: they wait at its targets in the parent
        for edge in self._scope(parent).edges:
            if edge.source == (scope[-1], port):
                node_t, port_t = edge.target
                self._own_change(view, parent, node_t, port_t, False, outer, diff * edge.copies, hops + 1)

    @staticmethod
    def _messages(view: View, event: Messages) -> None:
        for port, entries in enumerate(event.consumed):
            if entries:
                entry = view.received.setdefault((event.address, port), [0, 0])
                for _time, count in entries:
                    entry[0] += 1
                    entry[1] += count
        for port, entries in enumerate(event.produced):
            if entries:
                entry = view.sent.setdefault((event.address, port), [0, 0])
                for _time, count in entries:
                    entry[0] += 1
                    entry[1] += count

    def size(self) -> int:
        """Roughly how many entries the model holds (what a copy of it copies): structure, counts, pending batches."""
        size = len(self.operators) + len(self._edge_keys) + sum(len(batches) for batches in self._unsettled.values())
        for view in self.workers.values():
            for table in (view.tracked, view.own, view.frontier_counts):
                size += len(table) + sum(map(len, table.values()))
            for per_time in view.capability_sites.values():
                size += 1 + sum(map(len, per_time.values()))
            size += len(view.received) + len(view.sent) + len(view.scheduled) + len(view.inputs)
        return size

    # ------------------------------------------------------------------ views

    def view(self, worker: int | None = None) -> View:
        """The state seen by ``worker``, or by all workers combined (``None``).

        In local mode the combined pointstamps are the sum of what each worker
        originated: the global counts.  Each worker's tracker counts every
        worker's pointstamps, so for :attr:`View.tracked` the combined view
        keeps, per location and time, the largest count any worker still holds.
        The frontier is the meet of the workers' frontiers (the earliest times
        any worker may still see).  Message and scheduling counts add up; an
        input is closed once every worker closed its handle.
        """
        if worker is not None:
            view = self.workers.get(worker)
            if view is None:
                raise KeyError(f"no events from worker {worker} (workers seen: {sorted(self.workers)})")
            return view
        views = list(self.workers.values())
        if len(views) == 1:
            return views[0]
        key = (self._version, self.events)
        if self._combined is not None and self._combined[0] == key:
            return self._combined[1]
        combined = combine(views, self.local_mode)
        self._combined = (key, combined)
        return combined

    # ------------------------------------------------------------------ structure queries

    def dataflows(self) -> list[ScopeInfo]:
        """The top-level scopes, by index (also those whose nested scopes are all that was built so far)."""
        for address in list(self.scopes):
            self._scope(address[:1])
        return [scope for address, scope in sorted(self.scopes.items()) if len(address) == 1]

    def input_loc(self, address: Address, port: int) -> Loc:
        """The location of input ``port`` of the operator at ``address``, as its scope's tracker names it."""
        return (address[:-1], address[-1], port, False)

    def output_loc(self, address: Address, port: int) -> Loc:
        """The location of output ``port`` of the operator at ``address``."""
        return (address[:-1], address[-1], port, True)

    def capabilities(self, address: Address, view: View) -> dict[int, dict[Any, int]]:
        """Capabilities the operator at ``address`` holds, per output (as ``view`` counts them)."""
        info = self.operators.get(address)
        if info is None:
            return {}
        held = {}
        for port in range(info.outputs):
            counts = view.positive(self.output_loc(address, port))
            if counts:
                held[port] = counts
        return held

    def in_flight(self, edge: Edge, view: View) -> dict[Any, int]:
        """Messages in flight towards the edge's target, per time (records).

        Records in flight belong to the channel, not to one worker: in local
        mode, one worker's view of a multi-worker run has none to show (its
        own counts are the records it sent there minus those it received); ask
        the combined view (``view(None)``).
        """
        if view.local_mode and not view.combined and len(self.workers) > 1:
            return {}
        node, port = edge.target
        return view.positive((edge.scope, node, port, False))

    def edge_records(self, edge: Edge, view: View) -> int:
        """Records that crossed ``edge`` (as ``view`` counts them), also for edges at scope boundaries.

        An edge into a leaf operator counts the records its input received; an
        edge from a leaf operator into a scope (its input, or the enclosing
        scope's output) counts the records the leaf sent on that output, times
        the edge's copies; an edge between two scope boundaries (from a scope's
        input, or from a nested scope's output) counts what crossed the edges
        feeding that boundary, on the other side of it.
        """
        return self._edge_records(edge, view, 0)

    def _leaf(self, scope: Address, node: int) -> bool:
        if node == 0:
            return False
        info = self.operators.get(scope + (node,))
        return info is not None and not info.is_scope

    def _edge_records(self, edge: Edge, view: View, hops: int) -> int:
        scope = edge.scope
        (s_node, s_port), (t_node, t_port) = edge.source, edge.target
        if self._leaf(scope, t_node):
            entry = view.received.get((scope + (t_node,), t_port))
            return entry[1] if entry else 0
        if self._leaf(scope, s_node):
            entry = view.sent.get((scope + (s_node,), s_port))
            return entry[1] * edge.copies if entry else 0
        if hops > 64:
            return 0
        if s_node == 0:  # from this scope's input: what arrived at that input outside
            if len(scope) <= 1 or scope[:-1] not in self.scopes:
                return 0
            feeding = [e for e in self.scopes[scope[:-1]].edges if e.target == (scope[-1], s_port)]
        else:  # from a nested scope's output: what reached that output inside
            inner = scope + (s_node,)
            if inner not in self.scopes:
                return 0
            feeding = [e for e in self.scopes[inner].edges if e.target == (0, s_port)]
        return sum(self._edge_records(e, view, hops + 1) for e in feeding) * edge.copies

    def locate(self, operator: str | Address, kind: str = "in", port: int = 0) -> Loc:
        """The location of an operator's input (``kind="in"``) or output (``"out"``) port, for :func:`viz.explain`.

        ``operator`` is the operator's name (it must name exactly one
        operator; several with one name are told apart by address), its
        address (``(0, 3)``), or the text form the command line's ``--stuck``
        takes: ``"Count"``, ``"0,3"``, ``"0,3:in:0"``, ``"Count:out:1"``.
        Raises :class:`~viz.errors.SelectionError` when there is no such operator or port.
        """
        where = repr(operator)
        if isinstance(operator, str):
            head, _, rest = operator.partition(":")
            if rest:
                kind, _, port_text = rest.partition(":")
                if kind not in ("in", "out") or (port_text and not _NUMBER.fullmatch(port_text)):
                    raise SelectionError(f"location {where}: expected NAME or ADDRESS[:in|out:PORT], e.g. 0,3:in:0")
                port = int(port_text or 0)
            parts = head.replace("(", "").replace(")", "").split(",")
            if head.strip() and all(_NUMBER.fullmatch(part.strip()) for part in parts if part.strip()):
                address: Address = tuple(int(part) for part in parts if part.strip())
            else:
                matches = self.find(head)
                if len(matches) != 1:
                    known = ", ".join(sorted({info.name for info in self.operators.values()})[:12])
                    raise SelectionError(
                        f"location {where}: {'no' if not matches else len(matches)} operator(s) named {head!r}"
                        + (
                            f" (at {', '.join(str(m.address) for m in matches)}); give the address"
                            if matches
                            else f"; operators: {known}"
                        )
                    )
                address = matches[0].address
        else:
            address = tuple(operator)
        info = self.operators.get(address)
        if info is None or len(address) < 2:
            raise SelectionError(f"location {where}: no operator at address {address}")
        if kind not in ("in", "out"):
            raise SelectionError(f"location {where}: kind must be 'in' or 'out', not {kind!r}")
        ports = info.inputs if kind == "in" else info.outputs
        if not 0 <= port < ports:
            raise SelectionError(
                f"location {where}: operator '{info.name}' has no {kind}put {port} ({ports} {kind}puts)"
            )
        return self.input_loc(address, port) if kind == "in" else self.output_loc(address, port)

    def check_loc(self, loc: Any) -> None:
        """Raise :class:`~viz.errors.SelectionError` unless ``loc`` is a :data:`Loc` of this model."""
        hint = "; get one with model.locate('NAME'), model.locate('0,3:in:0') or model.input_loc(address, port)"
        if not (
            isinstance(loc, tuple)
            and len(loc) == 4
            and isinstance(loc[0], tuple)
            and all(isinstance(part, int) for part in loc[0])
            and isinstance(loc[1], int)
            and isinstance(loc[2], int)
            and isinstance(loc[3], bool)
        ):
            raise SelectionError(f"not a location: {loc!r}; a location is (scope address, node, port, is_source){hint}")
        scope, node, port, is_source = loc
        info = self.scopes.get(scope)
        if info is None:
            raise SelectionError(f"location {loc!r}: the recording has no scope at address {scope}{hint}")
        ports = self.memo(("ports", scope), lambda: {(n, p, bool(s)) for n, p, s in info.locations})
        if info.locations and (node, port, is_source) not in ports:
            raise SelectionError(f"location {loc!r}: scope {scope} has no such port{hint}")

    def find(self, name: str) -> list[OperatorInfo]:
        """Operators (and scopes) whose name is ``name``, by address."""
        return [info for address, info in sorted(self.operators.items()) if info.name == name]

    def describe(self, loc: Loc) -> str:
        """A location for a person: operator name, address and port."""
        name = self._names.get(loc)
        if name is None:
            name = self._names[loc] = self._describe(loc)
        return name

    def _describe(self, loc: Loc) -> str:
        scope, node, port, is_source = loc
        if node == 0:
            info = self.scopes[scope].info if scope in self.scopes else None
            name = info.name if info else str(scope)
            return f"scope '{name}' {'input' if is_source else 'output'} {port} (inside, address {scope})"
        address = scope + (node,)
        info = self.operators.get(address)
        name = info.name if info else "?"
        return f"'{name}' {'output' if is_source else 'input'} {port} (address {address})"

    def memo(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """``compute()``, kept under ``key`` until the structure (operators, scopes, channels, locations) changes."""
        memo = self._memo
        if key in memo:
            return memo[key]
        value = memo[key] = compute()
        return value

    def moment(self, view: View, name: str) -> dict[Hashable, Any]:
        """A dict, under ``name``, for what is worked out from ``view`` as the model stands now.

        It is kept (the same dict) until the next event is applied or the
        structure changes.  For a view that is not this model's (one of its
        workers' or its current combined view), a new empty dict each time.
        """
        kept = self._moment.get((view, name))
        if kept is None:
            kept = {}
            combined = self._combined
            current = combined is not None and combined[0] == (self._version, self.events) and combined[1] is view
            if current or any(view is mine for mine in self.workers.values()):
                self._moment[(view, name)] = kept
        return kept

    def depth_between(self, inner: Address, outer: Address) -> int:
        """How many product coordinates times lose going from scope ``inner`` out to scope ``outer``."""
        key = ("depth", inner, outer)
        depth = self._memo.get(key)
        if depth is None:
            depth = self._memo[key] = self._depth_between(inner, outer)
        return depth

    def _depth_between(self, inner: Address, outer: Address) -> int:
        steps = 0
        scope = inner
        while len(scope) > len(outer):
            parent = scope[:-1]
            if len(parent) >= 1:
                mine = self.scopes[scope].info.scope_timestamp if scope in self.scopes else None
                theirs = self.scopes[parent].info.scope_timestamp if parent in self.scopes else None
                if mine != theirs:
                    steps += 1
            scope = parent
        return steps

    def project(self, time: Any, inner: Address, outer: Address) -> Any:
        """``time`` of scope ``inner`` as seen in the enclosing scope ``outer``."""
        return _project(time, self.depth_between(inner, outer))
