"""viz.model and viz.explain on synthetic event sequences."""

from __future__ import annotations

from helpers.viz_synthetic import LOOP, ROOT, finish, running

from scopes.timestamp import Product
from viz.explain import explain
from viz.model import Model


def test_structure_nests_scopes_operators_and_edges() -> None:
    model = Model.from_events(running().events())
    assert [s.address for s in model.dataflows()] == [ROOT]
    assert model.scopes[ROOT].info.scope_timestamp == "integer"
    assert sorted(model.scopes[ROOT].children) == [1, 2, 3]
    assert model.scopes[LOOP].info.name == "Loop"
    assert model.scopes[LOOP].info.scope_timestamp == "Product[integer, integer]"
    assert sorted(model.scopes[LOOP].children) == [1, 2]
    assert [e.contract for e in model.scopes[ROOT].edges] == ["Pipeline", "Exchange"]
    assert len(model.scopes[LOOP].edges) == 4  # each edge once, though two workers logged it


def test_frontiers_per_worker_and_combined() -> None:
    model = Model.from_events(running().events())
    for worker in (0, 1, None):
        view = model.view(worker)
        assert view.frontier(model.input_loc((0, 3), 0)) == [0]
        assert view.frontier((LOOP, 1, 0, True)) == [Product(0, 1)]
        assert view.frontier((LOOP, 0, 0, True)) == [Product(0, 0)]
    assert model.capabilities((0, 1), model.view(0)) == {0: {0: 2}}
    assert model.view().scheduled[(0, 1)][0] == 2  # both workers' schedulings add up
    assert model.view().sent[((0, 2, 2), 0)] == [2, 14]


def test_frontiers_empty_once_finished() -> None:
    script = running()
    finish(script)
    model = Model.from_events(script.events())
    view = model.view()
    assert view.frontier(model.input_loc((0, 3), 0)) == []
    assert view.frontier((LOOP, 1, 0, True)) == []
    assert view.completed == {0}
    assert model.capabilities((0, 1), view) == {}
    assert all(state.closed for state in view.inputs.values())


def test_state_at_a_moment_of_the_recording() -> None:
    script = running()
    middle = script.t - 100.0  # seconds from the first event to the end of "running"
    finish(script)
    events = script.events()
    earlier = Model.from_events(events, until=middle)
    later = Model.from_events(events)
    assert earlier.view().frontier(earlier.input_loc((0, 3), 0)) == [0]
    assert later.view().frontier(later.input_loc((0, 3), 0)) == []


def test_incremental_apply_matches_batch() -> None:
    events = running(in_flight=3).events()
    live = Model()
    for event in events:
        live.apply(event)
    live.settle()  # the last tracker batch waits for its worker's next event; the recording ended
    batch = Model.from_events(events)
    assert live.view(1).pointstamps == batch.view(1).pointstamps
    assert live.view(1).frontier_counts == batch.view(1).frontier_counts


def test_explainer_names_an_input_never_closed() -> None:
    model = Model.from_events(running().events())
    blockers = explain(model, model.input_loc((0, 3), 0), 0)
    assert [b.kind for b in blockers] == ["input"]
    (blocker,) = blockers
    assert blocker.input_name == "numbers"
    assert not blocker.closed
    assert "input 'numbers' was never advanced past time 0 and never closed" in blocker.description
    # the path runs from the input, into the loop, around it and out to the probe
    assert blocker.path[0] == (ROOT, 1, 0, True)
    assert blocker.path[-1] == (ROOT, 3, 0, False)
    assert (LOOP, 0, 0, True) in blocker.path and (LOOP, 0, 0, False) in blocker.path


def test_explainer_names_an_input_not_advanced_past_a_time() -> None:
    script = running()
    from runtime.instrument import K_INPUT

    for w in (0, 1):
        script.emit(w, K_INPUT, (0, 1), "numbers", "advanced", 0)
    model = Model.from_events(script.events())
    (blocker,) = explain(model, model.input_loc((0, 3), 0), 0, model.view(0))
    assert "has not advanced past time 0 and was never closed" in blocker.description


def test_explainer_lists_messages_in_flight_inside_a_loop() -> None:
    model = Model.from_events(running(in_flight=5).events())
    blockers = explain(model, model.input_loc((0, 3), 0), 0)
    kinds = sorted(b.kind for b in blockers)
    assert kinds == ["input", "messages"]
    messages = next(b for b in blockers if b.kind == "messages")
    assert messages.location == (LOOP, 2, 1, False)
    assert messages.time == Product(0, 1)
    assert messages.count == 5
    assert "in flight to input 1 of 'Step'" in messages.description
    assert "'Feedback' output 0" in messages.description


def test_explainer_finds_nothing_once_the_frontier_passed() -> None:
    script = running()
    finish(script)
    model = Model.from_events(script.events())
    assert explain(model, model.input_loc((0, 3), 0), 0) == []


def test_explainer_ignores_pointstamps_later_than_the_time() -> None:
    model = Model.from_events(running().events())
    # the probe cannot see time 0 yet, but nothing holds back time -1 (not a real time: below everything)
    assert explain(model, model.input_loc((0, 3), 0), -1) == []


def test_unknown_worker_is_a_clear_error() -> None:
    model = Model.from_events(running().events())
    try:
        model.view(7)
    except KeyError as error:
        assert "worker 7" in str(error)
    else:
        raise AssertionError("expected KeyError")
