"""A model of dataflows in the running program, read from their live state (no logging needed).

:func:`snapshot` walks a worker's dataflows (or one dataflow) and describes
them as instrumentation events, which it folds into a :class:`~viz.model.Model`:
the scope tree, operators, ports and edges with their contracts, the frontier
each tracker implies at every location, the pointstamps each tracker counts
(capabilities at outputs, messages waiting at inputs), and the input handles,
with where the user's code built each operator and created each input.
The state is what this worker's trackers know: every worker's capabilities
and messages, as far as this worker has heard of them, in one worker's view.

What only logging records is not available live: records sent and received,
scheduling times, and which worker holds a capability.  Use a
:class:`~runtime.instrument.Recorder` or ``--log`` for those.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from runtime.instrument import (
    ChannelCreated,
    DataflowCompleted,
    Event,
    FrontiersChanged,
    InputChanged,
    LocationsDefined,
    OperatorCreated,
    PointstampsChanged,
)
from runtime.worker import Dataflow, Worker
from scopes.progress.location import Source
from scopes.progress.operate import ConnectivityLike
from scopes.progress.reachability import sparse
from scopes.progress.subgraph import Subgraph
from viz.errors import SelectionError
from viz.model import Model

Live = Worker | Dataflow | Subgraph
"""What :func:`snapshot` reads: a worker (all its running dataflows), a dataflow, or a dataflow's root scope."""


def _reach(summaries: ConnectivityLike) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(o for o, chain in sorted(row.items()) if len(chain)) for row in sparse(summaries))


class _Events:
    """Numbers events for one worker as the instrumentation would."""

    def __init__(self, worker: int) -> None:
        self.worker = worker
        self.seq = 0
        self.t = time.monotonic()
        self.events: list[Event] = []

    def add(self, cls: type[Event], *fields: Any) -> None:
        self.seq += 1
        self.events.append(cls(self.worker, self.seq, self.t, *fields))


def _roots(source: Live) -> tuple[int, list[tuple[Subgraph, str]], list[Any]]:
    """The worker index, the dataflow roots with their names, and the input handles to describe."""
    if isinstance(source, Worker):
        context = getattr(source, "_context", None)
        inputs = list(getattr(context, "inputs", []))
        return source.index, [(d.root, d.name) for d in source.dataflows], inputs
    if isinstance(source, Dataflow):
        return _worker_of(source.root), [(source.root, source.name)], []
    if isinstance(source, Subgraph):
        return _worker_of(source), [(source, source.name)], []
    raise SelectionError(
        f"cannot draw {type(source).__name__}: give a worker, one of worker.dataflows, a Model, a Recorder, "
        "or recorded events"
    )


def _worker_of(root: Subgraph) -> int:
    allocator = getattr(root, "_allocator", None)
    return int(getattr(allocator, "index", 0))


def snapshot(source: Live) -> Model:
    """A model of the dataflows of ``source`` as they are now, seen by its worker.

    A worker gives its running dataflows (completed ones are gone from it: keep
    ``worker.dataflows[i]`` to draw one after it completed), with its input
    handles; a dataflow gives just that one.
    """
    worker, roots, inputs = _roots(source)
    out = _Events(worker)
    for root, name in roots:
        if not root.built:
            raise SelectionError(f"dataflow '{name}' is still being built: draw it once worker.dataflow() returned")
        _describe(out, root, name)
        if not root.tracker.tracking_anything():
            out.add(DataflowCompleted, root.address[0], name)
    for handle in inputs:
        address = _input_address(handle)
        if address is None:
            continue
        out.add(InputChanged, address, handle.name, "created", handle.time, handle.site)
        if handle.time != handle.timestamp_type.minimum():
            out.add(InputChanged, address, handle.name, "advanced", handle.time)
    model = Model()
    for event in out.events:
        model.apply(event)
    model.settle()
    model.worker_view(worker)  # the worker is known even with no running dataflows
    return model


def _input_address(handle: Any) -> tuple[int, ...] | None:
    """The address of an open input handle's operator (closed handles hold nothing to show)."""
    if handle.closed:
        return None
    operator = handle.operator
    address = getattr(operator, "address", None)
    return tuple(address) if address else None


def _describe(out: _Events, scope: Subgraph, name: str, site: str | None = None) -> None:
    tracker = scope.tracker
    out.add(
        OperatorCreated,
        scope.address,
        name,
        scope.inputs,
        scope.outputs,
        _reach(tracker.scope_summary()),
        scope.timestamp_type.name,
        site,
    )
    for index, child in enumerate(scope.children[1:], start=1):
        if isinstance(child, Subgraph):
            _describe(out, child, scope.child_names[index], scope.child_sites.get(index))
        elif child is not None:
            out.add(
                OperatorCreated,
                scope.address + (index,),
                scope.child_names[index],
                child.inputs,
                child.outputs,
                _reach(child.get_internal_summary()[0]),
                None,
                scope.child_sites.get(index),
            )
    for (source, target), contract in zip(scope.edges, scope.edge_contracts, strict=True):
        out.add(
            ChannelCreated,
            scope.address,
            (source.node, source.port),
            (target.node, target.port),
            contract,
            scope.copies(source, target),
        )
    locations = tracker.locations()
    out.add(LocationsDefined, scope.address, tuple((loc.node, loc.port, isinstance(loc, Source)) for loc in locations))
    out.add(PointstampsChanged, scope.address, tuple(_counts(tracker, locations)))
    out.add(
        FrontiersChanged,
        scope.address,
        tuple((index, time_, 1) for index, loc in enumerate(locations) for time_ in tracker.frontier(loc)),
    )


def _counts(tracker: Any, locations: list[Any]) -> Iterator[tuple[int, Any, int]]:
    for index, loc in enumerate(locations):
        for time_, count in tracker.pointstamps(loc).items():
            if count:
                yield index, time_, count
