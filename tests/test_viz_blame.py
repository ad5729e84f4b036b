"""Frontier blame down to the line (issue 20, part 2): where the user's code made what holds a frontier."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static
from tui_helpers import ROOT, wait_until

from runtime import execute
from runtime.instrument import InputChanged, OperatorCreated, Recorder
from scopes.channels import Exchange
from viz import explain
from viz.model import Model
from viz.tui.app import TimelyApp
from viz.tui.sources import Replay

HERE = Path(__file__).name
SITES: dict[str, int] = {}


def holding_main(worker: Any) -> None:
    """An input never closed, feeding an operator that keeps a capability for time 5 forever."""

    def build(scope: Any) -> Any:
        SITES["input"] = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        handle, words = scope.new_input("edges")

        def hold(capability: Any, info: Any) -> Any:
            kept = [capability.delayed(5)]

            def logic(input: Any, output: Any) -> None:
                for _ref, _batch in input:
                    pass
                assert kept

            return logic

        SITES["operator"] = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        held = words.unary(Exchange(lambda word: len(word)), "Holder", hold)
        return handle, held.probe(name="Seen")

    handle, probe = worker.dataflow(build, name="blame")
    handle.send_batch(["a", "bb"])
    handle.advance_to(1)
    while worker.step():
        pass


@pytest.fixture(scope="module")
def recording() -> Recorder:
    with Recorder() as recorder, pytest.raises(Exception, match="still open"):
        execute(holding_main, workers=2, stall_timeout=1.0)
    return recorder


def test_events_carry_the_users_file_and_line(recording: Recorder) -> None:
    created = [e for e in recording.events if isinstance(e, InputChanged) and e.action == "created"]
    assert {e.site for e in created} == {f"{HERE}:{SITES['input']}"}
    holder = {e.site for e in recording.events if isinstance(e, OperatorCreated) and e.name == "Holder"}
    assert holder == {f"{HERE}:{SITES['operator']}"}


def test_the_explainer_names_the_line_of_the_input_and_of_the_operator(recording: Recorder) -> None:
    model = Model.from_events(recording.events)
    loc = model.locate("Seen")
    blockers = explain(model, loc, model.view().frontier(loc)[0])
    inputs = [b.description for b in blockers if b.kind == "input"]
    assert len(inputs) == 2
    assert all(text.startswith(f"input 'edges' ({HERE}:{SITES['input']})") for text in inputs)
    assert {b.worker for b in blockers if b.kind == "input"} == {0, 1}
    later = explain(model, loc, 5)
    held = [b.description for b in later if b.kind == "capability"]
    assert held and all(f"built at {HERE}:{SITES['operator']}" in text for text in held), held


def test_viz_dot_stuck_prints_the_line(recording: Recorder, tmp_path: Path) -> None:
    log = tmp_path / "blame.msgpack"
    recording.save(log)
    result = subprocess.run(
        [sys.executable, "-m", "viz", "dot", str(log), "-o", "-", "--stuck", "Seen"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert f"input 'edges' ({HERE}:{SITES['input']})" in result.stdout


def test_the_stuck_pane_prints_the_line(recording: Recorder) -> None:
    events = sorted(recording.events, key=lambda e: (e.t, e.worker, e.seq))
    replay = Replay(events)
    replay.seek(len(replay))
    app = TimelyApp(replay=replay, clock=lambda: 0.0)

    async def run() -> None:
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.press("4")
            await wait_until(
                pilot, lambda: "input handle" in str(app.query_one("#stuck-text", Static).render()), 10, "the pane"
            )
            text = str(app.query_one("#stuck-text", Static).render())
            assert f"input 'edges' ({HERE}:{SITES['input']})" in text, text

    asyncio.run(run())


def test_no_site_is_looked_up_when_logging_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTIMELY_AUDIT", "0")  # the audit turns the hooks on, as logging does
    import scopes.builder
    import scopes.subgraph_builder

    calls: list[int] = []

    def counting(skip: int = 1) -> str | None:
        calls.append(skip)
        return None

    monkeypatch.setattr(scopes.builder, "user_site", counting)
    monkeypatch.setattr(scopes.subgraph_builder, "user_site", counting)
    execute(lambda worker: _small(worker), workers=1)
    assert calls == []
    with Recorder():
        execute(lambda worker: _small(worker), workers=1)
    assert calls  # the same program with logging on does


def _small(worker: Any) -> None:
    def build(scope: Any) -> Any:
        handle, numbers = scope.new_input("numbers")
        return handle, numbers.map(lambda n: n + 1).probe()

    handle, _probe = worker.dataflow(build)
    handle.send_batch([1, 2])
    handle.close()
    while worker.step():
        pass
