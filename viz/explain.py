"""Why is this frontier stuck?  The pointstamps that hold a location back, with their paths.

Given a location and a time its frontier has not passed, :func:`explain` walks
the dataflow backwards from the location, across scope boundaries, following
only locations whose recorded frontier still holds a time at or before the
given one.  Every positive pointstamp met on the way at or before that time is
a reason:

* a capability held by an operator (``kind == "capability"``), with the
  places in the user's code that took it when the recording has them
  (``retained at wordcount.py:41``, see :attr:`Blocker.sites`),
* messages in flight on a channel (``kind == "messages"``),
* an input handle not advanced past the time, or never closed (``kind == "input"``),
* progress not yet heard (``kind == "progress"``): a worker's tracker still
  counts a pointstamp that its holder already retired, because the progress
  update saying so is still on its way to that worker.  A frontier is each
  worker's own tracker's view, so during a run it can lag behind the global
  counts; this names that lag instead of finding nothing.

Each :class:`Blocker` carries the path from its location to the stuck one.

When the recording has per-worker pointstamps (local mode, see
:mod:`viz.model`), capabilities and inputs are looked up on every worker and
each blocker names the worker that holds it (:attr:`Blocker.worker`), whatever
worker's frontier is being explained: worker 0's frontier can be held back by
a capability on worker 1.  Messages in flight are counted over all workers
(``worker`` is ``None``).  Without local events, the view's own counts are used.

``loc`` is a :data:`~viz.model.Loc` tuple; get one by operator name with
:meth:`Model.locate <viz.model.Model.locate>` (``model.locate("Count")``,
``model.locate("Count", "out", 0)``, or the command line's text form
``model.locate("0,3:in:0")``).  Anything else raises
:class:`~viz.errors.SelectionError`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, NamedTuple

from scopes.progress.order import Time
from viz.errors import SelectionError
from viz.model import Loc, Model, View
from viz.time_kinds import time_fits, time_less_equal


@dataclass
class Blocker:
    """One reason a frontier cannot pass a time."""

    kind: str
    """``"capability"``, ``"messages"``, ``"input"`` or ``"progress"``."""
    location: Loc
    time: Time
    count: int
    path: list[Loc]
    """Locations from the blocker to the stuck location, both included."""
    description: str
    input_name: str | None = None
    closed: bool = False
    worker: int | None = None
    """The worker holding the capability or input, or the worker that has not heard the progress yet
    (``None``: counted over all workers)."""
    sites: tuple[str, ...] = ()
    """For a capability: how and where the user's code took it, e.g. ``"retained at wordcount.py:41"``."""

    def __str__(self) -> str:
        return self.description


def _predecessors(model: Model, loc: Loc) -> list[Loc]:
    """The locations that feed ``loc`` (worked out once per structure: the walk asks for them again and again)."""
    return model.memo(("predecessors", loc), lambda: _feeders(model, loc))


def _feeders(model: Model, loc: Loc) -> list[Loc]:
    scope, node, port, is_source = loc
    if not is_source:
        info = model.scopes.get(scope)
        if info is None:
            return []
        return [(scope, e.source[0], e.source[1], True) for e in info.edges if e.target == (node, port)]
    if node == 0:  # a scope input seen from inside: continue at the scope's input port outside
        if len(scope) <= 1:
            return []
        return [(scope[:-1], scope[-1], port, False)]
    address = scope + (node,)
    op = model.operators.get(address)
    if op is None:
        return []
    if op.is_scope:  # into the nested scope, at its output seen from inside
        return [(address, 0, port, False)]
    return [(scope, node, i, False) for i, outputs in enumerate(op.reach) if port in outputs]


def explain(model: Model, loc: Loc, time: Time, view: View | None = None) -> list[Blocker]:
    """The pointstamps that keep ``time`` (or earlier) possible at ``loc``, each with its path.

    ``view`` defaults to all workers combined.  The result is empty when the
    frontier at ``loc`` has already passed ``time``.  ``loc`` must be a
    location of ``model`` (see :meth:`Model.locate <viz.model.Model.locate>`);
    anything else raises :class:`~viz.errors.SelectionError`.
    """
    model.check_loc(loc)
    kind = model.scope_time_kind(loc[0])
    if not time_fits(time, kind):
        raise SelectionError(f"{time!r:.80} is not a time of {model.describe(loc)}, whose times are {_kind_text(kind)}")
    if view is None:
        view = model.view()
    holders = _holders(model, view)
    trackers = _trackers(model, view)
    steps = model.moment(view, "explain")  # what each step finds, and where it leads, kept until the next event
    start: _Step = (loc, loc[0], time)
    parents: dict[_Step, _Step | None] = {start: None}
    trails: dict[_Step, tuple[tuple[Loc, ...], str]] = {}
    work = deque([start])
    found: list[Blocker] = []
    order: list[tuple[bool, bool, int, str, int]] = []  # how the blockers are listed: see _rank
    while work:
        entry = work.popleft()
        known = steps.get(entry)
        if known is None:
            known = steps[entry] = _step(model, view, holders, trackers, entry)
        findings, leads = known
        if findings:
            path, route = _trail(model, parents, trails, entry)
            for (what, where, stamp, count, text, name, closed, worker, sites), rank in findings:
                description = f"{text}; path: {route}"
                found.append(Blocker(what, where, stamp, count, list(path), description, name, closed, worker, sites))
                order.append((rank[0], rank[1], len(path), rank[2], rank[3]))
        for key in leads:
            if key not in parents:
                parents[key] = entry
                work.append(key)
    return [found[index] for index in sorted(range(len(found)), key=order.__getitem__)]


_Step = tuple[Loc, Any, Any]
"""A step of the walk: a location, the scope the bound is expressed in, and the bound."""


class _Finding(NamedTuple):
    """A blocker without its path (which depends on where the walk started)."""

    kind: str
    location: Loc
    time: Time
    number: int
    text: str
    """The description up to its path."""
    input_name: str | None = None
    closed: bool = False
    worker: int | None = None
    sites: tuple[str, ...] = ()


def _step(
    model: Model,
    view: View,
    holders: dict[bool, list[tuple[int | None, View]]],
    trackers: list[tuple[int, View]],
    entry: _Step,
) -> tuple[list[tuple[_Finding, tuple[bool, bool, str, int]]], list[_Step]]:
    """What the walk finds at ``entry``, each with its :func:`_rank`, and the steps it goes on to (none where the
    frontier passed the bound)."""
    here, bound_scope, bound = entry
    if not _reachable(model, view, here, bound_scope, bound):
        return [], []
    scope = here[0]
    findings: list[_Finding] = []
    for worker, counts in holders[here[3]]:
        for stamp, count in counts.positive(here).items():
            if count > 0 and time_less_equal(model.project(stamp, scope, bound_scope), bound):
                finding = _blocker(model, counts, here, stamp, count, worker)
                if finding is not None:
                    findings.append(finding)
    for worker, tracker in trackers:
        for stamp, count in tracker.tracked.get(here, {}).items():
            if count <= 0 or not time_less_equal(model.project(stamp, scope, bound_scope), bound):
                continue
            if view.local_mode and not _scope_output(model, here):
                retired = count - max(_global_count(model, holders, here, stamp), 0)
                if retired > 0 and here[1] != 0:
                    findings.append(_unheard(model, here, stamp, retired, worker))
            if here[3] and _across_boundary(model, tracker, here, bound_scope, bound):
                findings.append(_boundary(model, here, stamp, worker))
    leads: list[_Step] = []
    for prev in _predecessors(model, here):
        prev_scope = prev[0]
        if len(prev_scope) < len(bound_scope):  # leaving the scope the bound lives in
            leads.append((prev, prev_scope, model.project(bound, bound_scope, prev_scope)))
        else:
            leads.append((prev, bound_scope, bound))
    return [(finding, _rank(finding)) for finding in findings], leads


def _rank(finding: _Finding) -> tuple[bool, bool, str, int]:
    """Where a blocker is listed, with its path's length between the first two and the rest: inputs first, progress
    not yet heard last, then by path length, time (as its repr) and worker (over all workers first)."""
    worker = -1 if finding.worker is None else finding.worker
    return (finding.kind == "progress", finding.kind != "input", repr(finding.time), worker)


def _trail(
    model: Model,
    parents: dict[_Step, _Step | None],
    trails: dict[_Step, tuple[tuple[Loc, ...], str]],
    entry: _Step,
) -> tuple[tuple[Loc, ...], str]:
    """The path from ``entry`` to where the walk started, and its route as text (kept in ``trails``)."""
    chain = []
    step: _Step | None = entry
    while step is not None and step not in trails:
        chain.append(step)
        step = parents[step]
    path, route = trails[step] if step is not None else ((), "")
    for step in reversed(chain):
        here = step[0]
        name = model.describe(here)
        route = f"{name} -> {route}" if path else name
        path = (here, *path)
        trails[step] = (path, route)
    return path, route


def _kind_text(kind: Any) -> str:
    """A kind of time (see :func:`viz.time_kinds.time_kind`) for a person: ``int``, ``Product(int, int)``."""
    if kind is None:
        return "hashable values"
    if isinstance(kind, tuple):
        return f"Product({_kind_text(kind[1])}, {_kind_text(kind[2])})"
    return "a user's timestamp (as its repr)" if kind is str else getattr(kind, "__name__", str(kind))


def _holders(model: Model, view: View) -> dict[bool, list[tuple[int | None, View]]]:
    """Where to count pointstamps: for sources (capabilities) and targets (messages)."""
    if not view.local_mode:
        return {True: [(None, view)], False: [(None, view)]}
    per_worker: list[tuple[int | None, View]] = [(w, v) for w, v in sorted(model.workers.items())]
    everyone = model.view() if len(model.workers) > 1 else view
    return {True: per_worker, False: [(None, everyone)]}


def _trackers(model: Model, view: View) -> list[tuple[int, View]]:
    """The workers whose trackers make the frontier of ``view``, each with its own view."""
    if view.combined:
        return sorted(model.workers.items()) if view.local_mode else []
    return [(w, v) for w, v in model.workers.items() if v is view]


def _across_boundary(model: Model, tracker: View, loc: Loc, bound_scope: Any, bound: Any) -> bool:
    """Whether ``loc`` is a scope boundary whose other side, on this worker, already passed ``bound``.

    A scope learns its input frontier from its parent, and its parent learns
    the scope's capabilities from it, when the scope is next scheduled: until
    then the two trackers disagree and the walk finds nothing on the far side.
    """
    scope, node, port, _ = loc
    if node == 0:
        if len(scope) <= 1:
            return False
        far: Loc = (scope[:-1], scope[-1], port, False)
    else:
        op = model.operators.get(scope + (node,))
        if op is None or not op.is_scope:
            return False
        far = (scope + (node,), 0, port, False)
    far_scope = far[0] if len(far[0]) < len(bound_scope) else bound_scope
    far_bound = model.project(bound, bound_scope, far_scope) if far_scope != bound_scope else bound
    return not _reachable(model, tracker, far, far_scope, far_bound)


def _scope_output(model: Model, loc: Loc) -> bool:
    """Whether ``loc`` is a nested scope's output seen from its parent.

    Each worker's tracker counts there its own copy of the scope's summary of what holds the scope's
    outputs back, which no worker originates or sends to the others: the count is no progress anyone has
    yet to hear, and the walk goes on inside the scope to what holds it.
    """
    scope, node, _, is_source = loc
    if not is_source or node == 0:
        return False
    op = model.operators.get(scope + (node,))
    return op is not None and op.is_scope


def _boundary(model: Model, loc: Loc, stamp: Any, worker: int) -> _Finding:
    scope, node, port, _ = loc
    if node == 0:
        name = model.scopes[scope].info.name if scope in model.scopes else str(scope)
        what = (
            f"scope '{name}' (address {scope}) has not yet heard that the frontier at its input {port} "
            f"passed time {stamp!r}"
        )
    else:
        name = model.operators[scope + (node,)].name
        what = (
            f"scope '{name}' (address {scope + (node,)}) has not yet told its parent that its output {port} "
            f"passed time {stamp!r}"
        )
    text = f"on worker {worker}, {what}; it will when it is next scheduled"
    return _Finding("progress", loc, stamp, 1, text, worker=worker)


def _global_count(model: Model, holders: dict[bool, list[tuple[int | None, View]]], loc: Loc, stamp: Any) -> int:
    """The pointstamp's count over all workers (the sum of what each originated)."""
    return sum(counts.pointstamps.get(loc, {}).get(stamp, 0) for _, counts in holders[loc[3]])


def _unheard(model: Model, loc: Loc, stamp: Any, count: int, worker: int) -> _Finding:
    what = "capability(ies)" if loc[3] else "record(s) in flight"
    return _Finding(
        "progress",
        loc,
        stamp,
        count,
        f"worker {worker} has not yet heard that {count} {what} for time {stamp!r} at "
        f"{model.describe(loc)} were retired: the progress update is on its way to it",
        worker=worker,
    )


def _reachable(model: Model, view: View, loc: Loc, bound_scope: Any, bound: Any) -> bool:
    """Whether the frontier at ``loc`` still holds a time at or before ``bound``."""
    counts = view.frontier_counts.get(loc)
    if counts:
        for element, count in counts.items():
            if count > 0 and time_less_equal(model.project(element, loc[0], bound_scope), bound):
                return True
    return False


def _blocker(model: Model, view: View, loc: Loc, stamp: Any, count: int, worker: int | None) -> _Finding | None:
    scope, node, port, is_source = loc
    if node == 0:
        return None  # reflections of the parent's frontier; the walk continues outside
    address = scope + (node,)
    op = model.operators.get(address)
    name = op.name if op else "?"
    if is_source:
        if op is not None and op.is_scope:
            return None  # the scope's summary of inner pointstamps; the walk finds those
        state = view.inputs.get(address)
        where = f"worker {worker}, " if worker is not None else ""
        if state is not None:
            site = f" ({state.site})" if state.site else ""
            if state.closed:
                what = f"input '{state.name}'{site} was closed, but its capability for time {stamp!r} is still counted"
            elif not state.advanced:
                what = f"input '{state.name}'{site} was never advanced past time {state.time!r} and never closed"
            else:
                what = f"input '{state.name}'{site} has not advanced past time {stamp!r} and was never closed"
            text = f"{what} ({where}operator address {address})"
            return _Finding("input", loc, stamp, count, text, state.name, state.closed, worker)
        holder = f" on worker {worker}" if worker is not None else ""
        built = f"built at {op.site}, " if op is not None and op.site else ""
        sites = tuple(f"{_ACTIONS.get(action, action)} at {site}" for action, site in view.sites(loc, stamp))
        taken = f", {' and '.join(sites)}" if sites else ""
        return _Finding(
            "capability",
            loc,
            stamp,
            count,
            f"operator '{name}' ({built}address {address}) holds {count} capability(ies) for time {stamp!r} "
            f"at output {port}{holder}{taken}",
            worker=worker,
            sites=sites,
        )
    channels = [e for e in model.scopes[scope].edges if e.target == (node, port)] if scope in model.scopes else []
    via = ", ".join(f"{model.describe((scope, e.source[0], e.source[1], True))} [{e.contract}]" for e in channels)
    return _Finding(
        "messages",
        loc,
        stamp,
        count,
        f"{count} record(s) at time {stamp!r} in flight to input {port} of '{name}' (address {address})"
        f"{' from ' + via if via else ''}",
    )


_ACTIONS = {"notify_at": "kept for a notification requested"}
"""How a capability's action reads in a sentence, where its name alone does not."""


def describe(blockers: list[Blocker]) -> str:
    """The blockers as lines of text."""
    if not blockers:
        return "nothing holds this location back at that time"
    return "\n".join(str(b) for b in blockers)
