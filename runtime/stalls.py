"""When a stall is certain: a wait in ``step_while`` that nothing can ever end.

A worker waiting in :meth:`~runtime.worker.Worker.step_while` is stuck for ever
when both hold:

* the wait's condition reads the dataflow's progress: it consulted at least one
  probe while the worker was idle (a :class:`Wait` compares each probe's read
  count with the count when the worker last went idle, when no operator runs, so
  that a probe only an operator's logic reads does not count, and counts only
  the waiting thread's reads, so that one only another thread reads does not either);
* every pointstamp that holds one of those probes back is the capability of an
  open input, or a capability or message that such a capability could still
  cause at that time: for a pointstamp ``(loc, t)`` some input capability at
  ``t0`` reaches ``loc`` along a path summary ``s`` with ``s(t0) <= t``.  Then
  the probe's frontier is fixed by the inputs' capabilities alone (whatever else
  happens downstream of them cannot move it), and only a ``main`` that advances
  or closes an input can move it.  A probe of a dataflow that some workers have
  not built waits for their ``main`` to build it.

With several workers, an input capability counts only if its worker's ``main``
waits in the same way too, which the communicator settles
(:meth:`~runtime.communication.Communicator.all_stuck`).  A condition that never
reads a probe (a deadline, an outside queue) is never judged stuck, nor is a
probe held back by anything else (an operator waiting on a timer, another
worker's ``main`` still running, a probe inside a nested scope).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from threading import get_ident
from typing import Any, Protocol

from scopes.input_handle import InputHandle
from scopes.probes import ProbeHandle
from scopes.progress.antichain import Antichain
from scopes.progress.location import Location, Source, Target
from scopes.progress.order import less_equal
from scopes.progress.reachability import Tracker
from scopes.progress.subgraph import Subgraph
from scopes.progress.timestamp import PathSummary

__all__ = ["Holder", "Holding", "Wait", "describe_input", "holding_inputs", "wait_holders"]


class Hosted(Protocol):
    """What the judgement needs of a hosted dataflow (``runtime.worker.Dataflow``)."""

    root: Subgraph
    unverified: set[int]


class Wait:
    """One call of ``step_while``: which probes its condition has read since the worker last went idle.

    An operator's logic may read a probe too (a flow-control source, a callback that logs a frontier), but
    no operator runs while the worker is idle: a read counted from the start of an idle period
    (:meth:`rebase`) is the condition's.
    """

    def __init__(self, probes: Sequence[ProbeHandle]) -> None:
        """Remember how often each of ``probes`` had been read when the wait began, counting from here on only
        their reads by the calling thread (the one that waits): another thread's read is not the condition's."""
        self._probes = list(probes)
        self.peers: tuple[str, Callable[[], bool]] | None = None
        """For a wait on other workers' ``main`` (see :meth:`runtime.stall_watch.StallWatch.begin_wait`)."""
        waiting = get_ident()
        for probe in self._probes:
            probe.thread_of = get_ident
            probe.reader = waiting
        self._reads = [probe.reads for probe in self._probes]

    def rebase(self) -> None:
        """Count reads from now on only: the worker has just gone idle, so only the condition reads from here."""
        self._reads = [probe.reads for probe in self._probes]

    def snapshot(self) -> list[int]:
        """Each probe's read count now, to :meth:`exclude` the reads that follow."""
        return [probe.reads for probe in self._probes]

    def exclude(self, snapshot: list[int]) -> None:
        """Forget the reads since ``snapshot`` (an operator's, in a run that did not end the idle period), keeping
        those before it (the condition's)."""
        self._reads = [
            before + probe.reads - then for probe, before, then in zip(self._probes, self._reads, snapshot, strict=True)
        ]

    def consulted(self) -> list[ProbeHandle]:
        """The probes read since the wait began or was last rebased."""
        return [probe for probe, before in zip(self._probes, self._reads, strict=True) if probe.reads != before]


@dataclass
class Holding:
    """What alone holds a wait back: open inputs, and dataflows that other workers have not built."""

    inputs: dict[tuple[int, ...], set[Any]] = field(default_factory=dict)
    """The input operators (by address) whose capabilities hold a probe back, with those capabilities' times
    (on any worker)."""
    unbuilt: dict[int, set[int]] = field(default_factory=dict)
    """The dataflows (by index) of probes that some workers have not built, with those workers: the probe waits
    for them to build it (see :class:`runtime.worker.Dataflow`'s ``unverified``)."""


def holding_inputs(
    probes: Sequence[ProbeHandle], dataflows: Mapping[int, Hosted], inputs: Sequence[InputHandle]
) -> Holding | None:
    """What alone holds ``probes`` back (open inputs, dataflows not built everywhere), or ``None`` if not certain.

    ``None`` when no probe was read, when some pointstamp holding a probe back
    cannot be traced to an input's capability, when a probe sits inside a nested
    scope, or when nothing holds them back.  A probe whose dataflow has completed
    is done for ever and holds nothing.  A probe in a dataflow that other workers
    have not built is held by them: their ``main`` must build it, which it cannot
    once it waits the same way or has returned (the communicator settles that).
    """
    holding = Holding()
    for probe in probes:
        for operator in probe.operators:
            address = operator.address
            hosted = dataflows.get(address[0])
            if hosted is None:
                continue
            if hosted.unverified:
                holding.unbuilt.setdefault(address[0], set()).update(hosted.unverified)
                continue
            if len(address) != 2:
                return None
            nodes = _input_nodes(address[0], inputs)
            held = _held_by(hosted.root.tracker, Target(address[1], 0), nodes)
            if held is None:
                return None
            for node, times in held.items():
                holding.inputs.setdefault((address[0], node), set()).update(times)
    return holding if holding.inputs or holding.unbuilt else None


def describe_input(handle: InputHandle, holding: set[Any] | None = None) -> str:
    """``'Name' (created at file.py:LINE) at time T`` for messages.

    With ``holding`` (the times at which this input's capabilities hold a wait back, on any worker), a handle
    whose own time is not among them is described as another worker's input at those times: every worker
    builds the same input, so its line is the same, but this worker's copy is not the one that holds.
    """
    site = f" (created at {handle.site})" if handle.site else ""
    if holding is None or handle.time in holding:
        return f"'{handle.name}'{site} at time {handle.time!r}"
    times = ", ".join(sorted(map(repr, holding)))
    return f"'{handle.name}'{site} of another worker, at time {times} (this worker's is at time {handle.time!r})"


def _input_nodes(dataflow: int, inputs: Sequence[InputHandle]) -> set[int]:
    """The top-level nodes of ``dataflow`` that are inputs (every worker builds the same ones)."""
    nodes: set[int] = set()
    for handle in inputs:
        operator = handle.operator
        if operator is not None and len(operator.address) == 2 and operator.address[0] == dataflow:
            nodes.add(operator.address[1])
    return nodes


def _held_by(tracker: Tracker, goal: Target, inputs: set[int]) -> dict[int, set[Any]] | None:
    """The input nodes holding ``goal`` back, if every pointstamp holding it back comes from them.

    Each node comes with the times of its capabilities that hold ``goal``'s frontier: those whose earliest
    result at ``goal`` no other pointstamp's result precedes (a capability at a later time, of another worker
    say, holds nothing while an earlier one does).
    """
    positive = [
        (location, time_)
        for location in tracker.locations()
        for time_, count in tracker.pointstamps(location).items()
        if count > 0
    ]
    origins = [(loc, t) for loc, t in positive if isinstance(loc, Source) and loc.node in inputs]
    closures: dict[Location, dict[Location, Antichain[PathSummary]]] = {}
    candidates: list[tuple[int, Any, list[Any]]] = []
    results: list[Any] = []
    for location, time_ in positive:
        found = _results_at(tracker, closures, location, time_, goal)
        if not found:
            continue
        results.extend(found)
        if isinstance(location, Source) and location.node in inputs:
            candidates.append((location.node, time_, found))
        elif not any(_reaches(tracker, closures, loc, t0, location, time_) for loc, t0 in origins):
            return None
    held: dict[int, set[Any]] = {}
    for node, time_, found in candidates:
        times = held.setdefault(node, set())
        if any(not any(_precedes(other, result) for other in results) for result in found):
            times.add(time_)
    return held


def _precedes(earlier: Any, later: Any) -> bool:
    """Whether ``earlier`` comes strictly before ``later`` in the timestamps' partial order."""
    return earlier != later and less_equal(earlier, later)


def _results_at(
    tracker: Tracker,
    closures: dict[Location, dict[Location, Antichain[PathSummary]]],
    start: Location,
    time_: Any,
    goal: Location,
) -> list[Any]:
    """The times at ``goal`` that ``time_`` at ``start`` can result in (one per path summary)."""
    closure = closures.get(start)
    if closure is None:
        closure = closures[start] = tracker.summaries_from(start)
    paths = closure.get(goal)
    if paths is None:
        return []
    return [result for summary in paths.elements if (result := summary.results_in(time_)) is not None]


def _reaches(
    tracker: Tracker,
    closures: dict[Location, dict[Location, Antichain[PathSummary]]],
    start: Location,
    time_: Any,
    goal: Location,
    at_most: Any,
) -> bool:
    """Whether ``time_`` at ``start`` can result in a time at ``goal`` (one ``<= at_most``, if given)."""
    closure = closures.get(start)
    if closure is None:
        closure = closures[start] = tracker.summaries_from(start)
    paths = closure.get(goal)
    if paths is None:
        return False
    for summary in paths.elements:
        result = summary.results_in(time_)
        if result is not None and (at_most is None or less_equal(result, at_most)):
            return True
    return False


@dataclass(frozen=True)
class Holder:
    """A capability or waiting message that holds back what a wait reads: at ``location`` of ``scope`` (whose
    names from the dataflow's down are ``path``), for ``time``."""

    scope: Subgraph
    path: tuple[str, ...]
    location: Location
    time: Any


def wait_holders(probes: Sequence[ProbeHandle], dataflows: Mapping[int, Described]) -> tuple[list[Holder], list[Any]]:
    """The capabilities and messages that hold back the frontier of each of ``probes`` in its dataflow's top scope.

    A pointstamp holds a probe back when it could still result in an element of the probe's frontier (the
    tracker's :meth:`~scopes.progress.reachability.Tracker.blockers`).  A nested scope's pointstamp stands for
    what the scope holds inside: it is replaced by those of its operators' capabilities and messages that could
    reach that output at that time (:func:`_inside`), so the holders are always operators or inputs the user
    built, never a scope's summary.  Probes inside nested scopes, and dataflows not built everywhere, are left
    out (they add nothing here).  Ordered as found, without repeats; with the frontiers' elements they hold.
    """
    found: list[Holder] = []
    times: list[Any] = []
    for probe in probes:
        for operator in probe.operators:
            address = operator.address
            hosted = dataflows.get(address[0])
            if hosted is None or hosted.unverified or len(address) != 2:
                continue
            root = hosted.root
            goal = Target(address[1], 0)
            for element in root.tracker.frontier(goal).elements:
                if element not in times:
                    times.append(element)
                for location, time_, _ in root.tracker.blockers(goal, element):
                    for holder in _expanded(root, (hosted.name,), location, time_):
                        if holder not in found:
                            found.append(holder)
    return found, times


class Described(Hosted, Protocol):
    """A hosted dataflow with its name (for the scope paths of :class:`Holder`)."""

    name: str


def _expanded(scope: Subgraph, path: tuple[str, ...], location: Location, time_: Any) -> list[Holder]:
    """``location`` at ``time_`` as holders: itself, or, at the output of a nested scope, what holds it inside."""
    child = scope.children[location.node] if location.node else None
    if isinstance(location, Source) and isinstance(child, Subgraph):
        return _inside(child, path + (child.name,), location.port, time_)
    return [Holder(scope, path, location, time_)]


def _inside(scope: Subgraph, path: tuple[str, ...], output: int, outer_time: Any) -> list[Holder]:
    """The pointstamps in ``scope`` (nested ones expanded) that could result in a time at its ``output`` whose
    outer time is at or before ``outer_time``: what holds that output's capability at ``outer_time``."""
    tracker = scope.tracker
    refinement = scope.refinement
    goal = Target(0, output)
    found: list[Holder] = []
    for location in tracker.locations():
        if location.node == 0:
            continue  # the scope's inputs: held outside it, where the outer scope's pointstamps say
        stamps = [time_ for time_, count in tracker.pointstamps(location).items() if count > 0]
        paths = tracker.summaries_from(location).get(goal) if stamps else None
        if paths is None:
            continue
        for time_ in stamps:
            if any(_reaches_outer(summary.results_in(time_), refinement, outer_time) for summary in paths.elements):
                found.extend(_expanded(scope, path, location, time_))
    return found


def _reaches_outer(result: Any, refinement: Any, outer_time: Any) -> bool:
    """Whether ``result`` (a time at a scope's output, or ``None``: no result) is, outside, at or before
    ``outer_time``."""
    if result is None:
        return False
    return less_equal(result if refinement is None else refinement.to_outer(result), outer_time)
