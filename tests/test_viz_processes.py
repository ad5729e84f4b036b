"""Recordings of real 2-process runs (2 processes x 1 worker, ``--log``): the model against what probes saw,
clusters against scopes, and an input never closed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.viz_process_mains import plain
from test_viz_dot import cluster_tree
from test_viz_edges import assert_conserved, crossing
from test_viz_recorded import scope_tree

from runtime.instrument import Event, LocalPointstampsChanged, Mark, read_events
from viz.dot import to_graph
from viz.explain import explain
from viz.model import Model

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


def run_cluster(main: str, log: Path, env: dict[str, str] | None = None) -> list[Event]:
    """Run ``viz_process_mains.<main>`` on 2 processes x 1 worker with ``--log``; return both files' events."""
    script = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(TESTS)!r})\n"
        f"from helpers.viz_process_mains import {main}\n"
        "from runtime import execute_from_args\n"
        f"execute_from_args({main}, ['-n', '2', '-w', '1', '--log', {str(log)!r}], stall_timeout=10)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=dict(os.environ, **(env or {})),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    files = [log.with_name(f"{log.stem}.{p}{log.suffix}") for p in (0, 1)]
    events: list[Event] = []
    for process, path in enumerate(files):
        mine = read_events(path)
        assert {e.worker for e in mine} == {process}  # one worker per process, one file per process
        events.extend(mine)
    return events


def test_two_processes_model_frontiers_equal_what_probes_saw(tmp_path: Path) -> None:
    samples_base = tmp_path / "samples"
    events = run_cluster("countdown_main", tmp_path / "countdown.msgpack", {"VIZ_SAMPLES": str(samples_base)})
    checked = 0
    for worker in (0, 1):
        samples = json.loads(Path(f"{samples_base}.{worker}.json").read_text())
        mine = [e for e in events if e.worker == worker]
        structure = Model.from_events(mine)
        (top,) = structure.find("TopProbe")
        (inner,) = structure.find("InnerProbe")
        assert len(inner.address) == 3
        model = Model()
        position = 0
        for seq, top_frontier, inner_frontier in samples:
            while position < len(mine) and mine[position].seq <= seq:
                model.apply(mine[position])
                position += 1
            view = model.view(worker)
            assert [plain(t) for t in view.frontier(model.input_loc(top.address, 0))] == top_frontier
            assert [plain(t) for t in view.frontier(model.input_loc(inner.address, 0))] == inner_frontier
            checked += 1
    assert checked > 10
    merged = Model.from_events(events)
    assert set(merged.workers) == {0, 1} and merged.local_mode
    final = merged.view()
    assert final.completed == {0}
    assert all(not any(c > 0 for c in counts.values()) for counts in final.frontier_counts.values())
    assert all(not any(counts.values()) for counts in final.own.values())  # every worker's own changes cancel


def test_two_processes_scc_example_clusters_nest_as_the_scopes_and_edges_carry_counts(tmp_path: Path) -> None:
    log = tmp_path / "scc.msgpack"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "scc.py"),
            "-n",
            "2",
            "-w",
            "1",
            "--log",
            str(log),
            "--limit-edges",
            "3000",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert done.returncode == 0, done.stderr
    assert "check against networkx.strongly_connected_components: OK" in done.stdout
    events = [e for p in (0, 1) for e in read_events(tmp_path / f"scc.{p}.msgpack")]
    model = Model.from_events(events)
    assert set(model.workers) == {0, 1}
    names = {address: scope.info.name for address, scope in model.scopes.items()}
    rounds = next(a for a, n in names.items() if n == "Rounds")
    for inner in ("Forward", "Backward"):  # a loop nested in a loop
        address = next(a for a, n in names.items() if n == inner)
        assert address[:-1] == rounds
    source = to_graph(model).source
    assert cluster_tree(source) == scope_tree(model)
    for worker in (0, 1):  # each worker's view draws the same nesting
        assert cluster_tree(to_graph(model, worker=worker).source) == scope_tree(model)
    view = model.view()
    boundary = [e for scope in model.scopes.values() for e in scope.edges if crossing(model, e)]
    assert len(boundary) >= 10
    assert_conserved(model, view)
    (into,) = [e for e in model.scopes[rounds[:-1]].edges if e.target == (rounds[-1], 0)]
    assert model.edge_records(into, view) == 3000  # every edge read enters the outer loop once
    assert all(model.edge_records(into, model.view(w)) > 0 for w in (0, 1))
    assert any(isinstance(e, LocalPointstampsChanged) for e in events)
    assert view.completed == {0}


@pytest.mark.parametrize("moment", ["before close", "after"])
def test_two_processes_an_input_never_closed_is_explained_as_exactly_that(tmp_path: Path, moment: str) -> None:
    events = run_cluster("never_closed_main", tmp_path / "stuck.msgpack")
    marks = {e.worker: e.seq for e in events if isinstance(e, Mark)}
    assert set(marks) == {0, 1}
    if moment == "after":
        final = Model.from_events(events)
        (probe,) = final.find("TopProbe")
        assert explain(final, final.input_loc(probe.address, 0), 0) == []
        return
    model = Model.from_events([e for e in events if e.seq <= marks[e.worker]])
    (probe,) = model.find("TopProbe")
    loc = model.input_loc(probe.address, 0)
    for worker in (0, 1, None):
        view = model.view(worker)
        assert view.frontier(loc) == [0]
        blockers: list[Any] = explain(model, loc, 0, view)
        inputs = [b for b in blockers if b.kind == "input"]
        assert [b.worker for b in inputs] == [0, 1]
        for found in inputs:
            assert found.input_name == "sensor readings"
            assert re.search(  # with the line of the user's code that created the input
                r"input 'sensor readings' \(viz_process_mains\.py:\d+\) "
                r"was never advanced past time 0 and never closed",
                found.description,
            ), found.description
        assert not [b for b in blockers if b.kind == "capability"]


def test_a_recorder_around_execute_on_processes_holds_every_processs_events(tmp_path: Path) -> None:
    """``with Recorder() as r: execute(main, processes=2)`` left ``r.events`` empty, silently: the workers ran in
    processes the recorder cannot reach (found by the debugging audit). Each process now records into a file the
    run reads back into the recorder."""
    script = (
        f"import sys, json; sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(TESTS)!r})\n"
        "from helpers.viz_process_mains import never_closed_main\n"
        "from runtime import Recorder, execute\n"
        "from runtime import execute_from_args\n"
        "with Recorder() as recording:\n"
        "    execute(never_closed_main, workers=1, processes=2)\n"
        "with Recorder() as flagged:\n"
        "    execute_from_args(never_closed_main, ['-n', '2'])\n"
        "assert {e.worker for e in flagged.events} == {0, 1}, flagged.events\n"
        "print(json.dumps([[type(e).__name__, e.worker] for e in recording.events]))\n"
        f"recording.save({str(tmp_path / 'run.msgpack')!r})\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTIMELY_LOG"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    kinds = json.loads(done.stdout.splitlines()[-1])
    assert {worker for _, worker in kinds} == {0, 1}, kinds
    assert sum(kind == "Mark" for kind, _ in kinds) == 2
    model = Model.from_events(e for e in read_events(tmp_path / "run.msgpack") if not isinstance(e, Mark))
    assert {kind for kind, _ in kinds} >= {"OperatorCreated", "LocalPointstampsChanged", "InputChanged"}
    assert model.workers.keys() == {0, 1}
