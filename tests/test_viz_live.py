"""``viz.render`` on a running program: a worker inside ``main``, or a dataflow handle, mid-run and at the end."""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest
from test_viz_dot import cluster_tree
from test_viz_recorded import countdown, scope_tree

import viz
from runtime import WorkerFailed, execute
from scopes import Pipeline
from scopes.builder import ScopeBuilder
from scopes.timestamp import Product
from viz.errors import SelectionError
from viz.explain import explain
from viz.live import snapshot


def run_and_draw(workers: int) -> dict[int, dict[str, Any]]:
    """Run countdown; each worker draws itself mid-run (frontiers not empty) and its dataflow at the end."""
    drawn: dict[int, dict[str, Any]] = {}

    def main(worker: Any) -> None:
        probes: list[Any] = []

        def build(scope: ScopeBuilder) -> Any:
            handle, numbers = scope.new_input("numbers")
            return handle, countdown(scope, numbers, probes).probe(name="TopProbe")

        handle, top = worker.dataflow(build, name="countdown")
        (dataflow,) = worker.dataflows
        handle.send_batch(list(range(worker.index, 40, workers)))
        handle.advance_to(1)
        for _ in range(3):
            worker.step()
        mine = drawn.setdefault(worker.index, {})
        mine["model"] = snapshot(worker)
        mine["mid"] = viz.render(worker)
        mine["mid_svg"] = mine["mid"].svg()
        mine["top"] = sorted(top.frontier())
        mine["inner"] = sorted(probes[0].frontier())
        handle.close()
        while worker.step():
            pass
        mine["end"] = viz.render(dataflow)
        mine["end_model"] = snapshot(dataflow)
        mine["end_svg"] = dataflow._repr_svg_()
        mine["gone"] = viz.render(worker).source

    execute(main, workers=workers, stall_timeout=5)
    return drawn


@pytest.mark.parametrize("workers", [1, 2])
def test_render_draws_the_running_dataflow_with_its_live_frontiers(workers: int) -> None:
    for index, mine in run_and_draw(workers).items():
        model = mine["model"]
        assert set(model.workers) == {index}
        view = model.view()
        (top,) = model.find("TopProbe")
        (inner,) = model.find("InnerProbe")
        # the frontiers in the diagram are what the probes saw at that moment, and not yet empty
        assert view.frontier(model.input_loc(top.address, 0)) == mine["top"] == [0]
        assert view.frontier(model.input_loc(inner.address, 0)) == mine["inner"]
        assert mine["inner"] and isinstance(mine["inner"][0], Product)
        source = mine["mid"].source
        assert cluster_tree(source) == scope_tree(model)
        assert "countdown : integer" in source and "(completed)" not in source
        assert re.search(r"in 0 \{0\}", source)
        assert mine["mid_svg"].lstrip().startswith(("<?xml", "<svg", "<!--"))
        # what holds the top probe back: the input handle, advanced to 1 but still open, and records in the loops
        blockers = explain(model, model.input_loc(top.address, 0), 0)
        assert blockers and blockers[0].kind in ("input", "messages", "capability")
        # at the end: the dataflow handle still draws, completed, with every frontier empty
        end_model = mine["end_model"]
        assert all(not end_model.view().frontier(loc) for loc in end_model.view().frontier_counts)
        end = mine["end"].source
        assert "countdown : integer  (completed)" in end
        assert not re.search(r"(in|out) \d+ \{[^}]", end)
        assert "in 0 {}" in end
        assert "<svg" in mine["end_svg"]
        # the worker has no running dataflow left: an empty diagram, not an error
        assert "cluster" not in mine["gone"]


def explain_seen(worker: Any, handle: Any) -> tuple[Any, list[Any]]:
    """Send one record, step a little, and explain what holds the input of the probe named 'Seen', live."""
    handle.send(1)
    for _ in range(5):
        worker.step()
    model = snapshot(worker)
    (seen,) = model.find("Seen")
    return model, list(explain(model, model.input_loc(seen.address, 0), 0))


def test_a_live_input_not_closed_is_named_by_the_explainer() -> None:
    found: list[Any] = []

    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            handle, numbers = scope.new_input("sensor readings")
            return handle, numbers.map(lambda n: n, name="Same").probe(name="Seen")

        handle, probe = worker.dataflow(build, name="waiting")
        found.extend(explain_seen(worker, handle)[1])

    execute(main, workers=1, stall_timeout=5)
    assert [b.kind for b in found] == ["input"]
    assert "input 'sensor readings' (test_viz_live.py:" in found[0].description
    assert ") was never advanced past time 0 and never closed" in found[0].description


def test_a_live_snapshot_names_where_the_code_made_the_input_and_the_holding_operator() -> None:
    """``viz.snapshot`` left out the sites every input and operator keeps (logging or not), so the explainer on a
    running program named neither the line that created the input nor the one that built the holder, where docs/
    viewers.md says it prints them (found by the debugging audit, running that page's example)."""
    found: list[Any] = []
    lines: dict[str, int] = {}
    sites: list[str | None] = []

    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            handle, numbers = scope.new_input("readings")
            lines["input"] = _line()

            def inner(region: ScopeBuilder) -> Any:
                def constructor(capability: Any, info: Any) -> Any:
                    held = [capability]

                    def logic(input: Any, output: Any) -> None:
                        input.for_each(lambda cap, data: output.session(cap).give_batch(data))
                        assert held

                    return logic

                lines["holder"] = _line() + 1
                return numbers.enter(region).unary(Pipeline, "Holder", constructor).leave()

            lines["region"] = _line() + 1
            return handle, scope.region(inner, name="Inner").probe(name="Seen")

        handle, probe = worker.dataflow(build, name="held")
        model, why = explain_seen(worker, handle)
        found.extend(why)
        (region,) = model.find("Inner")
        sites.append(region.site)
        handle.close()
        raise _Done

    with pytest.raises(WorkerFailed):
        execute(main, workers=1)
    here = "test_viz_live.py"
    assert [b.kind for b in found] == ["input", "capability"], found
    assert f"input 'readings' ({here}:{lines['input'] - 1}) was never advanced" in found[0].description
    assert f"operator 'Holder' (built at {here}:{lines['holder']}, " in found[1].description
    assert sites == [f"{here}:{lines['region']}"]


class _Done(Exception):
    """Ends a run whose dataflow can never complete."""


def _line() -> int:
    """The line of the caller."""
    return sys._getframe(1).f_lineno


def test_render_refuses_what_it_cannot_draw() -> None:
    with pytest.raises(SelectionError, match="cannot draw int"):
        snapshot(42)  # type: ignore[arg-type]

    def main(worker: Any) -> None:
        worker.dataflow(lambda scope: scope.new_input("x")[0], name="d")
        with pytest.raises(SelectionError, match="'at' picks a moment of a recording"):
            viz.render(worker, at=1.0)

    execute(main, workers=1, stall_timeout=5)


def test_runtime_draws_nothing_until_viz_is_imported_and_never_imports_it() -> None:
    """viz sits above runtime: a dataflow shows its text repr until viz registers its drawing."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys\n"
        "from runtime import execute\n"
        "def main(worker):\n"
        "    worker.dataflow(lambda scope: scope.new_input()[1].probe())\n"
        "    before = worker.dataflows[0]._repr_svg_()\n"
        "    import viz\n"
        "    after = worker.dataflows[0]._repr_svg_()\n"
        "    return before is None, after.lstrip().startswith('<')\n"
        "assert 'viz' not in sys.modules\n"
        "print(execute(main)[0])\n"
    )
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(True, True)"
