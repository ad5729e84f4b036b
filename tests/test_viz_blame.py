"""Frontier blame down to the line (issue 20, part 2): where the user's code made what holds a frontier."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.tui_helpers import ROOT, wait_until
from textual.widgets import Static

from runtime import execute
from runtime.instrument import CapabilitySite, InputChanged, OperatorCreated, Recorder
from scopes.channels import Exchange, Pipeline
from viz import explain
from viz.model import Model
from viz.tui.app import TimelyApp
from viz.tui.sources import Replay

HERE = Path(__file__).name


def line_of(marker: str) -> int:
    """The line of this file that ends with the comment ``# <marker>``."""
    lines = Path(__file__).read_text().splitlines()
    (number,) = [i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}")]
    return number


def holding_main(worker: Any) -> None:
    """An input closed on worker 0 only, feeding an operator that keeps capabilities forever.

    The operator delays its initial capability to time 5 when built, and
    retains the capability of every message it receives (at time 0).
    """

    def build(scope: Any) -> Any:
        handle, words = scope.new_input("edges")  # input site

        def hold(capability: Any, info: Any) -> Any:
            kept = [capability.delayed(5)]  # delayed site

            def logic(input: Any, output: Any) -> None:
                for ref, _batch in input:
                    kept.append(ref.retain())  # retained site

            return logic

        held = words.unary(Exchange(lambda word: len(word)), "Holder", hold)  # operator site
        return handle, held.probe(name="Seen")

    handle, probe = worker.dataflow(build, name="blame")
    handle.send_batch(["a", "bb"])
    if worker.index == 0:
        handle.close()
    while worker.step():
        pass


@pytest.fixture(scope="module")
def recording() -> Recorder:
    with Recorder() as recorder, pytest.raises(Exception, match="still open"):
        execute(holding_main, workers=2, stall_timeout=1.0)
    return recorder


def site(marker: str) -> str:
    """``test_viz_blame.py:LINE`` of the line marked ``marker``."""
    return f"{HERE}:{line_of(marker + ' site')}"


def test_events_carry_the_users_file_and_line(recording: Recorder) -> None:
    created = [e for e in recording.events if isinstance(e, InputChanged) and e.action == "created"]
    assert {e.site for e in created} == {site("input")}
    holder = {e.site for e in recording.events if isinstance(e, OperatorCreated) and e.name == "Holder"}
    assert holder == {site("operator")}
    taken = {(e.worker, e.action, e.site, e.time) for e in recording.events if isinstance(e, CapabilitySite)}
    for worker in (0, 1):
        assert (worker, "created", site("operator"), 0) in taken  # the constructor's, dropped when it returned
        assert (worker, "delayed", site("delayed"), 5) in taken
        assert (worker, "retained", site("retained"), 0) in taken


def test_an_input_never_closed_on_one_worker_is_named_with_its_line_and_worker(recording: Recorder) -> None:
    model = Model.from_events(recording.events)
    loc = model.locate("Seen")
    blockers = explain(model, loc, model.view().frontier(loc)[0])
    inputs = [b for b in blockers if b.kind == "input"]
    assert [b.worker for b in inputs] == [1]
    assert inputs[0].description.startswith(
        f"input 'edges' ({site('input')}) was never advanced past time 0 and never closed (worker 1, "
    ), inputs[0].description


def test_the_explainer_names_the_line_that_retained_a_capability(recording: Recorder) -> None:
    model = Model.from_events(recording.events)
    loc = model.locate("Seen")
    held = [b for b in explain(model, loc, 0) if b.kind == "capability"]
    assert {b.worker for b in held} == {0, 1}
    for blocker in held:
        assert blocker.sites == (f"retained at {site('retained')}",)
        assert f"built at {site('operator')}" in blocker.description
        assert f"on worker {blocker.worker}, retained at {site('retained')}; path:" in blocker.description
    later = [b for b in explain(model, loc, 5) if b.kind == "capability" and b.time == 5]
    assert {b.worker for b in later} == {0, 1}
    assert all(b.sites == (f"delayed at {site('delayed')}",) for b in later), later


def test_a_recording_without_capability_sites_still_explains(recording: Recorder) -> None:
    older = [e for e in recording.events if not isinstance(e, CapabilitySite)]
    model = Model.from_events(older)
    held = [b for b in explain(model, model.locate("Seen"), 0) if b.kind == "capability"]
    assert held and all(b.sites == () for b in held)
    assert all(b.description.split("; path:")[0].endswith(f"on worker {b.worker}") for b in held)


def test_viz_dot_stuck_prints_the_lines(recording: Recorder, tmp_path: Path) -> None:
    log = tmp_path / "blame.msgpack"
    recording.save(log)
    for time, expected in (
        ("0", [f"input 'edges' ({site('input')})", f"retained at {site('retained')}"]),
        ("5", [f"delayed at {site('delayed')}"]),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "viz", "dot", str(log), "-o", "-", "--stuck", "Seen", "--time", time],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        for text in expected:
            assert text in result.stdout, (text, result.stdout)


def test_the_stuck_pane_prints_the_lines(recording: Recorder) -> None:
    events = sorted(recording.events, key=lambda e: (e.t, e.worker, e.seq))
    replay = Replay(events)
    replay.seek(len(replay))
    app = TimelyApp(replay=replay, clock=lambda: 0.0)

    async def run() -> None:
        async with app.run_test(size=(240, 50)) as pilot:
            await pilot.press("4")
            await wait_until(
                pilot, lambda: "input handle" in str(app.query_one("#stuck-text", Static).render()), 10, "the pane"
            )
            text = str(app.query_one("#stuck-text", Static).render())
            assert f"input 'edges' ({site('input')})" in text, text
            assert f"capability held: operator 'Holder' (built at {site('operator')}" in text, text
            assert f"retained at {site('retained')}" in text, text

    asyncio.run(run())


def test_with_logging_off_sites_are_looked_up_once_per_input_and_operator_at_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTIMELY_AUDIT", "0")  # the audit turns the hooks on, as logging does
    import scopes.capability
    import scopes.nesting
    import scopes.sources

    calls: dict[str, int] = {}

    def counting(module: str) -> Any:
        def user_site(skip: int = 1, stop: Any = None) -> str | None:
            calls[module] = calls.get(module, 0) + 1
            return None

        return user_site

    for module in (scopes.sources, scopes.nesting, scopes.capability):
        monkeypatch.setattr(module, "user_site", counting(module.__name__))
    execute(lambda worker: _small(worker), workers=1)
    # at build time only, once per input and per operator (the input, the map, 'Keep' and the probe): a stuck
    # dataflow's error names their lines; no capability's while running
    assert calls == {"scopes.sources": 1, "scopes.nesting": 4}
    calls.clear()
    with Recorder():
        execute(lambda worker: _small(worker), workers=1)
    assert set(calls) == {"scopes.sources", "scopes.nesting", "scopes.capability"}  # with logging on, all do


def _small(worker: Any) -> None:
    """An input, a map, an operator that retains, delays, downgrades and drops capabilities, and a probe."""

    def keep(capability: Any, info: Any) -> Any:
        def logic(input: Any, output: Any) -> None:
            for ref, batch in input:
                kept = ref.retain()
                later = kept.delayed(ref.time + 1)
                kept.downgrade(ref.time + 1)
                output.session(kept).give_batch(batch)
                kept.drop()
                later.drop()

        return logic

    def build(scope: Any) -> Any:
        handle, numbers = scope.new_input("numbers")
        return handle, numbers.map(lambda n: n + 1).unary(Exchange(lambda n: n), "Keep", keep).probe()

    handle, _probe = worker.dataflow(build)
    handle.send_batch([1, 2])
    handle.close()
    while worker.step():
        pass


def test_capabilities_taken_by_pytimelys_own_operators_have_no_site() -> None:
    """``count`` retains a capability per time inside its own logic: the user's code did not, so no site."""

    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            handle, numbers = scope.new_input("numbers")
            return handle, numbers.count().probe()

        handle, _probe = worker.dataflow(build)
        handle.send_batch([1, 2])
        handle.close()
        while worker.step():
            pass

    with Recorder() as recorder:
        execute(main, workers=1)
    actions = [(e.action, e.site) for e in recorder.events if isinstance(e, CapabilitySite)]
    assert actions and all(action == "created" for action, _ in actions), actions  # the constructor's only


def test_a_capability_moved_by_the_users_code_follows_it() -> None:
    """Retained, delayed, downgraded and dropped in one logic: each change is logged, and they sum to nothing."""
    with Recorder() as recorder:
        execute(lambda worker: _small(worker), workers=1)
    events = [e for e in recorder.events if isinstance(e, CapabilitySite) and e.action != "created"]
    assert {e.action for e in events} == {"retained", "delayed", "downgraded"}
    lines = {e.action: int(e.site.rsplit(":", 1)[1]) for e in events if e.diff > 0}
    assert lines["retained"] < lines["delayed"] < lines["downgraded"]
    totals: dict[tuple[Any, ...], int] = {}
    for e in events:
        totals[(e.time, e.action)] = totals.get((e.time, e.action), 0) + e.diff
    assert set(totals.values()) == {0}, totals


def test_the_model_names_held_sites_first_and_else_the_last_let_go() -> None:
    loc = ((0,), 2, 0, True)
    model = Model()
    for diff, action, where in (
        (1, "created", "a.py:1"),
        (-1, "created", "a.py:1"),
        (1, "retained", "a.py:9"),
        (1, "delayed", "a.py:7"),
        (-1, "retained", "a.py:9"),
    ):
        model.apply(CapabilitySite(0, 0, 0.0, (0, 2), 0, 3, diff, action, where))
    view = model.view(0)
    assert view.sites(loc, 3) == [("delayed", "a.py:7")]
    model.apply(CapabilitySite(0, 0, 0.0, (0, 2), 0, 3, -1, "delayed", "a.py:7"))
    assert view.sites(loc, 3) == [("delayed", "a.py:7")]  # all let go: the last one
    assert view.sites(loc, 4) == []


def test_a_notification_request_names_the_line_of_notify_at() -> None:
    """The notificator's own copy of a capability is the user's notify_at call; the explainer says so."""

    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            handle, numbers = scope.new_input("numbers")

            def logic(input: Any, output: Any, notificator: Any) -> None:
                for ref, _batch in input:
                    notificator.notify_at(ref.delayed(ref.time + 1))  # notify site
                for capability in notificator:
                    output.session(capability).give(capability.time)

            return handle, numbers.unary_notify(Pipeline, "Later", logic).probe(name="After")

        handle, _probe = worker.dataflow(build)
        handle.send(1)
        handle.advance_to(1)  # time 1 never completes: the input stays open
        while worker.step():
            pass

    with Recorder() as recorder, pytest.raises(Exception, match="still open"):
        execute(main, workers=1, stall_timeout=1.0)
    kept = {(e.action, e.site, e.time) for e in recorder.events if isinstance(e, CapabilitySite) and e.diff > 0}
    assert ("notify_at", site("notify"), 1) in kept and ("delayed", site("notify"), 1) in kept
    model = Model.from_events(recorder.events)
    held = [b for b in explain(model, model.locate("After"), 1) if b.kind == "capability"]
    assert held and all(f"kept for a notification requested at {site('notify')}" in b.description for b in held)
