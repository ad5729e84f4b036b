"""Per-worker state: each worker logs the pointstamp changes it originates, and the model attributes them."""

from __future__ import annotations

import threading
from typing import Any

from test_viz_recorded import countdown

from runtime import execute
from runtime.instrument import Event, LocalPointstampsChanged, Mark, PointstampsChanged, Recorder
from scopes.builder import ScopeBuilder
from viz.dot import to_graph
from viz.explain import explain
from viz.model import Model


def record_held_on_worker_one() -> list[Event]:
    """A source that keeps its capability at time 0 on worker 1 only, until both workers marked the moment."""
    marked = threading.Barrier(2, timeout=10)

    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            def constructor(capability: Any, info: Any) -> Any:
                held = [capability] if info.worker_index == 1 else []
                if info.worker_index != 1:
                    capability.drop()

                def logic(output: Any) -> None:
                    if held and released.is_set():
                        held.pop().drop()

                return logic

            numbers = scope.source("OnlyOnWorkerOne", constructor)
            return countdown(scope, numbers, []).probe(name="Watch")

        released = threading.Event()
        probe = worker.dataflow(build, name="held")
        for _ in range(100):
            worker.step()
        assert sorted(probe.frontier()) == [0]
        worker.logger.mark("held")
        marked.wait()
        released.set()
        worker.dataflows[0].root.activate_address([1])
        while worker.step():
            pass

    with Recorder() as recording:
        execute(main, workers=2, stall_timeout=5)
    return recording.events


def before_marks(events: list[Event]) -> list[Event]:
    marks = {e.worker: e.seq for e in events if isinstance(e, Mark)}
    return [e for e in events if e.seq <= marks[e.worker]]


def test_each_worker_logs_its_own_changes_and_the_model_attributes_capabilities() -> None:
    events = record_held_on_worker_one()
    assert any(isinstance(e, LocalPointstampsChanged) for e in events)
    model = Model.from_events(before_marks(events))
    assert model.local_mode
    (source,) = model.find("OnlyOnWorkerOne")
    assert model.capabilities(source.address, model.view(1)) == {0: {0: 1}}
    assert model.capabilities(source.address, model.view(0)) == {}
    assert model.capabilities(source.address, model.view()) == {0: {0: 1}}
    # each worker's tracker knows about worker 1's capability: the global count it tracks is 1 on both
    for worker in (0, 1):
        tracked = model.view(worker).tracked[model.output_loc(source.address, 0)]
        assert tracked == {0: 1}
    # the explainer names worker 1, whichever worker's frontier is stuck
    (watch,) = model.find("Watch")
    loc = model.input_loc(watch.address, 0)
    for worker in (0, 1, None):
        view = model.view(worker)
        assert view.frontier(loc) == [0]
        blockers = explain(model, loc, 0, view)
        assert [(b.kind, b.worker) for b in blockers] == [("capability", 1)]
        assert "'OnlyOnWorkerOne'" in blockers[0].description
        assert "on worker 1" in blockers[0].description
    # the diagrams of each worker show the capability on worker 1 only
    assert "holds out 0: 0×1" in to_graph(model, worker=1).source
    assert "holds out 0" not in to_graph(model, worker=0).source
    stuck = to_graph(model, stuck=(loc, 0)).source
    assert "on worker 1" in stuck
    # at the end everything is released and the sums are zero
    final = Model.from_events(events)
    assert final.capabilities(source.address, final.view()) == {}
    assert explain(final, loc, 0) == []


def test_summing_own_changes_gives_what_the_trackers_count_once_quiet() -> None:
    events = record_held_on_worker_one()
    model = Model.from_events(before_marks(events))
    combined = model.view()
    # every positive count the combined own view has is a count both trackers track (the run is quiet at the mark)
    for worker in (0, 1):
        tracked = model.view(worker).tracked
        for loc, counts in combined.own.items():
            for time, count in counts.items():
                if count > 0:
                    assert tracked.get(loc, {}).get(time) == count, (loc, time, worker)
    # and nothing else: the trackers' positive counts are exactly the sums
    for loc, counts in model.view(0).tracked.items():
        for time, count in counts.items():
            if count > 0 and loc[1] != 0:  # the boundary's reflections of the frontier are the tracker's own
                assert combined.own.get(loc, {}).get(time) == count, (loc, time)


def test_recordings_without_local_events_fall_back_to_the_trackers_counts() -> None:
    events = [e for e in record_held_on_worker_one() if not isinstance(e, LocalPointstampsChanged)]
    assert any(isinstance(e, PointstampsChanged) for e in events)
    model = Model.from_events(before_marks(events))
    assert not model.local_mode
    (source,) = model.find("OnlyOnWorkerOne")
    # without attribution, each worker shows what its tracker counts
    assert model.capabilities(source.address, model.view(0)) == {0: {0: 1}}
    (watch,) = model.find("Watch")
    blockers = explain(model, model.input_loc(watch.address, 0), 0)
    assert [(b.kind, b.worker) for b in blockers] == [("capability", None)]


def test_own_changes_of_a_run_with_data_in_nested_loops_cancel_out_at_the_end() -> None:
    from test_viz_recorded import record_countdown

    events, _ = record_countdown()
    model = Model.from_events(events)
    assert model.local_mode
    combined = model.view()
    leftovers = {loc: counts for loc, counts in combined.own.items() if any(counts.values())}
    assert leftovers == {}
    # records did cross the nested scopes' boundaries on both workers, in both directions
    crossed = [
        e
        for e in events
        if isinstance(e, LocalPointstampsChanged)
        and len(e.scope) > 1
        and any(model.scopes[e.scope].locations[loc][0] == 0 for loc, _, _ in e.changes)
    ]
    assert {e.worker for e in crossed} == {0, 1}
    # halfway through, a worker's own counts are not the global ones: the per-worker views differ.  Halfway
    # through the progress both workers make, not through the recording: under load one worker may start late
    # (worker 1 had no event yet at half the recording's time in a fresh-clone run)
    progress = [e for e in events if isinstance(e, LocalPointstampsChanged)]
    both = max(min(e.t for e in progress if e.worker == worker) for worker in (0, 1))
    middle = (both + max(e.t for e in progress)) / 2
    half = Model.from_events(events, until=middle - model.first_t)  # type: ignore[operator]
    assert half.view(0).own != half.view(1).own
    # records in flight belong to channels: a single worker's view has none to show, the combined view sums
    edges = [e for scope in half.scopes.values() for e in scope.edges]
    assert all(half.in_flight(e, half.view(0)) == {} for e in edges)
    assert "in flight" not in to_graph(half, worker=0).source
    combined_half = half.view()
    for edge in edges:
        node, port = edge.target
        total: dict[Any, int] = {}
        for view in half.workers.values():
            for time, count in view.own.get((edge.scope, node, port, False), {}).items():
                total[time] = total.get(time, 0) + count
        assert half.in_flight(edge, combined_half) == {t: c for t, c in total.items() if c > 0}


def test_a_single_worker_logs_no_local_events_its_tracker_counts_are_its_own() -> None:
    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            handle, numbers = scope.new_input("numbers")
            return handle, countdown(scope, numbers, []).probe(name="Watch")

        handle, probe = worker.dataflow(build, name="alone")
        handle.send_batch([3, 6, 9])
        for _ in range(3):
            worker.step()
        worker.logger.mark("mid")

    with Recorder() as recording:
        execute(main, workers=1, stall_timeout=5)
    events = recording.events
    assert not any(isinstance(e, LocalPointstampsChanged) for e in events)
    model = Model.from_events(before_marks(events))
    assert not model.local_mode
    (numbers,) = model.find("numbers")
    assert model.capabilities(numbers.address, model.view(0)) == {0: {0: 1}}
    (watch,) = model.find("Watch")
    blockers = explain(model, model.input_loc(watch.address, 0), 0)
    assert [b.kind for b in blockers if b.kind == "input"] == ["input"]
