"""The explainer at every moment of real recordings, in any interleaving of the workers' events.

Issue 17, items 4 and 6: a frontier that is not empty always has a cause the
explainer names (even while progress updates are on their way between workers,
or between a scope and its parent), the model does not depend on how the
workers' events were interleaved, and a location the model does not know is an
error, not an empty answer.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_scc import scc

from runtime import execute
from runtime.instrument import Event, Messages, Recorder, Scheduled
from scopes.channels import Exchange
from viz import SelectionError, explain
from viz.model import Model
from viz.tui.adapter import stuck_places

SCC_EDGES = [(0, 1), (1, 0), (1, 2)]


def record_scc() -> list[Event]:
    """The scc example (a loop nested in a loop) on 2 workers."""
    with Recorder() as recording:
        found, _ = scc.run_scc(lambda index, peers: SCC_EDGES[index::peers], 2)
    assert sorted(map(sorted, found)) == [[0, 1]]
    return recording.events


def windowed_count(worker: Any, close: bool = True) -> None:
    """Counts per epoch with a notificator, records exchanged by length, on every worker."""

    def build(scope: Any) -> Any:
        handle, words = scope.new_input("words")
        pending: dict[Any, int] = {}

        def logic(input: Any, output: Any, notificator: Any) -> None:
            for ref, batch in input:
                if ref.time not in pending:
                    pending[ref.time] = 0
                    notificator.notify_at(ref.retain())
                pending[ref.time] += len(batch)
            for capability in notificator:
                output.session(capability).give(pending.pop(capability.time))

        counts = words.unary_notify(Exchange(lambda word: len(word)), "Window", logic)
        return handle, counts.probe()

    handle, probe = worker.dataflow(build, name="windows")
    for epoch in range(4):
        handle.send_batch(["a", "bb", "ccc"] * 3)
        handle.advance_to(epoch + 1)
        worker.step_while(lambda: probe.less_than(handle.time))
    if close:
        handle.close()
        while worker.step():
            pass


def record_windows() -> list[Event]:
    with Recorder() as recording:
        execute(windowed_count, workers=2)
    return recording.events


@pytest.fixture(scope="module")
def recordings() -> dict[str, list[Event]]:
    return {"scc": record_scc(), "windows": record_windows()}


def unexplained(events: list[Event], part: int = 0, parts: int = 1) -> list[tuple[int, int | None, str]]:
    """(event index, worker, place) for every non-empty frontier with no cause, after every event.

    With ``parts``, only after every ``parts``-th event from ``part`` on (every event is applied): the parts
    together check every moment, and each is a test of its own that another process may run at the same time.
    """
    ordered = sorted(events, key=lambda e: (e.t, e.worker, e.seq))
    model = Model()
    missing = []
    for index, event in enumerate(ordered):
        settles = model.unsettled(event.worker)
        model.apply(event)
        if index % parts != part or (isinstance(event, Scheduled | Messages) and not settles):
            continue  # another part's moment, or one that changes nothing the explainer reads
        for worker in [None, *sorted(model.workers)]:
            view = model.view(worker)
            for place in stuck_places(model, view):
                if not explain(model, place.loc, place.frontier[0], view):
                    missing.append((index, worker, place.label))
    return missing


SCC_PARTS = 4
"""The scc recording's moments are checked in this many tests (about 8 s each on a quiet core)."""


@pytest.mark.parametrize(
    ("name", "part", "parts"), [("windows", 0, 1), *(("scc", part, SCC_PARTS) for part in range(SCC_PARTS))]
)
def test_every_nonempty_frontier_has_a_cause_at_every_moment(
    recordings: dict[str, list[Event]], name: str, part: int, parts: int
) -> None:
    missing = unexplained(recordings[name], part, parts)
    assert missing == [], f"{len(missing)} frontier(s) without a cause, first: {missing[:3]}"


def test_progress_not_yet_heard_is_named_with_the_worker_that_lags(recordings: dict[str, list[Event]]) -> None:
    """While a progress update is on its way, the blocker says which worker has not heard it."""
    ordered = sorted(recordings["windows"], key=lambda e: (e.t, e.worker, e.seq))
    model = Model()
    kinds: set[str] = set()
    for event in ordered:
        model.apply(event)
        view = model.view()
        for place in stuck_places(model, view):
            for blocker in explain(model, place.loc, place.frontier[0], view):
                kinds.add(blocker.kind)
                if blocker.kind == "progress":
                    assert blocker.worker in model.workers
                    assert f"worker {blocker.worker}" in blocker.description
    assert "progress" in kinds and "messages" in kinds


def interleave(events: list[Event], seed: int) -> list[Event]:
    """The same events with each worker's own order kept, the workers interleaved at random.

    Times are rewritten to follow the new order (as recordings from hosts with
    unrelated clocks would be), so sorting by time keeps this interleaving.
    """
    rng = random.Random(seed)
    per_worker: dict[int, list[Event]] = {}
    for event in sorted(events, key=lambda e: (e.worker, e.seq)):
        per_worker.setdefault(event.worker, []).append(event)
    queues = {worker: list(reversed(mine)) for worker, mine in per_worker.items()}
    out: list[Event] = []
    base = min(e.t for e in events)
    while queues:
        worker = rng.choice(sorted(queues))
        event = queues[worker].pop()
        if not queues[worker]:
            del queues[worker]
        out.append(dataclasses.replace(event, t=base + len(out) * 1e-6))
    return out


def answers(model: Model) -> dict[str, Any]:
    """Everything a person reads off a finished model: frontiers, counts, and the explanations."""
    result: dict[str, Any] = {"workers": sorted(model.workers), "operators": sorted(model.operators)}
    for worker in [None, *sorted(model.workers)]:
        view = model.view(worker)
        result[f"frontiers {worker}"] = {loc: sorted(map(repr, c)) for loc, c in view.frontier_counts.items() if c}
        result[f"pointstamps {worker}"] = {loc: c for loc, c in view.pointstamps.items() if c}
        result[f"inputs {worker}"] = {a: (s.time, s.advanced, s.closed) for a, s in view.inputs.items()}
        result[f"explain {worker}"] = [
            (place.label, [b.description for b in explain(model, place.loc, place.frontier[0], view)])
            for place in stuck_places(model, view)
        ]
    return result


@pytest.fixture(scope="module")
def stuck_windows() -> list[Event]:
    """A windowed count whose input is never closed, stopped by the stall timeout."""
    with Recorder() as recording, pytest.raises(Exception, match="still open"):
        execute(
            lambda worker: windowed_count(worker, close=False) or _step_forever(worker), workers=2, stall_timeout=1.0
        )
    return recording.events


def _step_forever(worker: Any) -> None:
    while worker.step():
        pass


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_any_interleaving_of_the_workers_gives_the_same_answers(
    recordings: dict[str, list[Event]], stuck_windows: list[Event], seed: int
) -> None:
    for events in (*recordings.values(), stuck_windows):
        expected = answers(Model.from_events(events))
        assert answers(Model.from_events(interleave(events, seed))) == expected


def test_the_stuck_input_is_named_on_both_workers_from_the_recorder(stuck_windows: list[Event]) -> None:
    model = Model.from_events(stuck_windows)
    loc = model.locate("Window")
    (time,) = model.view().frontier(loc)
    blockers = explain(model, loc, time)
    assert {(b.kind, b.input_name, b.worker) for b in blockers if b.kind == "input"} == {
        ("input", "words", 0),
        ("input", "words", 1),
    }


def test_locate_finds_ports_by_name_address_or_text(recordings: dict[str, list[Event]]) -> None:
    model = Model.from_events(recordings["windows"])
    (window,) = model.find("Window")
    assert model.locate("Window") == model.input_loc(window.address, 0)
    assert model.locate("Window", "out") == model.output_loc(window.address, 0)
    assert model.locate(window.address) == model.input_loc(window.address, 0)
    text = ",".join(map(str, window.address))
    assert model.locate(f"{text}:out:0") == model.output_loc(window.address, 0)
    assert model.locate("Window:in:0") == model.input_loc(window.address, 0)


@pytest.mark.parametrize(
    ("operator", "kind", "port", "message"),
    [
        ("Nope", "in", 0, "no operator(s) named 'Nope'"),
        ("Window", "in", 1, "has no input 1"),
        ("Window", "sideways", 0, "kind must be 'in' or 'out'"),
        ("0,9", "in", 0, "no operator at address (0, 9)"),
        ("Window:up:0", "in", 0, "expected NAME or ADDRESS"),
    ],
)
def test_locate_refuses_what_is_not_there(
    recordings: dict[str, list[Event]], operator: str, kind: str, port: int, message: str
) -> None:
    model = Model.from_events(recordings["windows"])
    with pytest.raises(SelectionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        model.locate(operator, kind, port)


@pytest.mark.parametrize(
    "loc",
    [
        "0,5:in:0",  # the command line's text form, given where a location tuple goes
        "0,2:in:0",
        ((0,), 9, 0, False),  # no such node in the scope
        ((7,), 1, 0, True),  # no such scope
        ((0,), 2, 0),  # too short
        ((0,), 2, 0, 1),  # is_source not a bool
    ],
)
def test_explain_refuses_a_location_the_model_does_not_have(recordings: dict[str, list[Event]], loc: Any) -> None:
    model = Model.from_events(recordings["windows"])
    with pytest.raises(SelectionError, match="locate"):
        explain(model, loc, 0)


def test_what_the_walk_learns_of_the_structure_is_forgotten_when_the_structure_grows() -> None:
    from runtime.instrument import ChannelCreated, LocationsDefined, OperatorCreated
    from viz.explain import _predecessors

    model = Model()
    scope = (0,)
    for seq, (address, name) in enumerate([((0, 1), "A"), ((0, 2), "B"), ((0, 3), "C")]):
        model.apply(OperatorCreated(0, seq, 0.0, address, name, 1, 1, ((0,),), None))
    model.apply(ChannelCreated(0, 3, 0.0, scope, (1, 0), (3, 0), "Pipeline"))
    target = (scope, 3, 0, False)
    assert _predecessors(model, target) == [(scope, 1, 0, True)]
    assert model.depth_between((0,), (0,)) == 0
    model.apply(ChannelCreated(0, 4, 0.0, scope, (2, 0), (3, 0), "Pipeline"))  # a second channel into C
    assert _predecessors(model, target) == [(scope, 1, 0, True), (scope, 2, 0, True)]
    model.apply(LocationsDefined(0, 5, 0.0, scope, ((3, 0, False),)))
    assert model.memo("answer", lambda: 1) == 1
    assert model.memo("answer", lambda: 2) == 1  # kept while nothing changes
    model.apply(OperatorCreated(0, 6, 0.0, (0, 4), "D", 1, 1, ((0,),), None))
    assert model.memo("answer", lambda: 3) == 3  # forgotten once an operator appeared
