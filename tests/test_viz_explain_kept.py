"""What the explainer keeps between calls (:meth:`Model.moment`) lasts only until the model changes.

The walks :func:`viz.explain` makes from every stuck place of a view share
most of their steps, so a model keeps what each step found until the next
event: a model explained at every moment must say what one built afresh for
that moment says.
"""

from __future__ import annotations

from typing import Any

from test_viz_explain_moments import record_windows

from runtime.instrument import Event
from viz import explain
from viz.model import Model, View
from viz.tui.adapter import stuck_places


def said(model: Model) -> list[Any]:
    """Everything the explainer says at every stuck place, for each worker's view and the combined one."""
    result = []
    for worker in [None, *sorted(model.workers)]:
        view = model.view(worker)
        for place in stuck_places(model, view):
            for time in place.frontier:
                for b in explain(model, place.loc, time, view):
                    result.append((worker, place.label, b.kind, b.location, b.time, b.count, b.path, b.description))
                    result.append((b.input_name, b.closed, b.worker, b.sites))
    return result


def test_a_model_explained_at_every_moment_says_what_a_fresh_one_says() -> None:
    ordered: list[Event] = sorted(record_windows(), key=lambda e: (e.t, e.worker, e.seq))
    model = Model()
    blockers = 0
    for index, event in enumerate(ordered):
        model.apply(event)
        fresh = Model()
        for earlier in ordered[: index + 1]:
            fresh.apply(earlier)
        answers = said(fresh)
        assert said(model) == answers, f"after event {index}: {event}"
        assert said(model) == answers  # also from what the first call kept
        blockers += len(answers)
    assert blockers > 1000


def test_a_model_explained_then_settled_says_what_a_fresh_settled_one_says() -> None:
    ordered: list[Event] = sorted(record_windows(), key=lambda e: (e.t, e.worker, e.seq))
    changed = False
    for moment in range(0, len(ordered), 8):
        explained, fresh = Model(), Model()
        for event in ordered[:moment]:
            explained.apply(event)
            fresh.apply(event)
        unsettled = said(explained)
        explained.settle()  # as the viewer does when its workers went quiet
        fresh.settle()
        assert said(explained) == said(fresh), f"settled after {moment} events"
        changed = changed or said(fresh) != unsettled
    assert changed  # settling changed what the explainer says at some moment


def test_a_moment_is_kept_per_view_and_name_until_the_model_changes() -> None:
    events = sorted(record_windows(), key=lambda e: (e.t, e.worker, e.seq))
    model = Model()
    for event in events[:-1]:
        model.apply(event)
    view = model.view(0)
    kept = model.moment(view, "walk")
    kept["step"] = 1
    assert model.moment(view, "walk") is kept
    assert model.moment(view, "other") == {}
    assert model.moment(model.view(1), "walk") == {}
    combined = model.view()
    model.moment(combined, "walk")["step"] = 2
    assert model.moment(combined, "walk") == {"step": 2}
    model.worker_view(7)  # a worker appears: the combined view and every explanation may change
    assert model.moment(view, "walk") == {}
    assert model.moment(combined, "walk") == {}  # no longer the model's current combined view
    model.moment(view, "walk")["step"] = 3
    model.apply(events[-1])
    assert model.moment(view, "walk") == {}
    model.moment(view, "walk")["step"] = 4
    model.settle()
    assert model.moment(view, "walk") == {}
    foreign = View()
    model.moment(foreign, "walk")["step"] = 5
    assert model.moment(foreign, "walk") == {}  # not the model's: nothing kept for it
