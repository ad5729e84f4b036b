"""What limits the missed latency, loop, start-up and pipeline goals: real numbers when missed, nothing when met."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_report as report  # noqa: E402
import bench_stats as stats  # noqa: E402
import latency_limits as limits  # noqa: E402

NUMBER = r"(\d+(?:\.\d+)?)"


def _run_module() -> Any:
    """``benchmarks/run.py`` loaded under a name no other test module uses."""
    spec = importlib.util.spec_from_file_location("bench_run_limits", ROOT / "benchmarks" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_run_limits"] = module
    spec.loader.exec_module(module)
    return module


def _row(variant: str, result: str) -> report.Row:
    return report.Row(variant, "1 s", goal="a goal", result=result, issue=18, sample=stats.Sample.of([1.0]))


def _quiet(message: str) -> None:
    pass


def test_two_threads_are_explained_by_steps_and_cpu_per_step() -> None:
    affinity = os.sched_getaffinity(0)
    measured = limits.threads_latency(200, top=5)
    assert len(measured.workers) == 2
    for worker in measured.workers:
        assert worker["steps"] >= 1  # the probe cannot pass an epoch before the worker steps
        assert 0 < worker["thread_cpu"] <= worker["process_cpu"] * 1.05
    lines = limits.explain_threads(measured, 30e-6)
    text = "\n".join(lines)
    found = re.search(
        rf"each worker takes {NUMBER} and {NUMBER} steps per epoch at {NUMBER} µs and {NUMBER} µs of CPU per step",
        text,
    )
    assert found is not None and all(float(value) > 0 for value in found.groups())
    serial = re.search(rf"= {NUMBER} µs of CPU per epoch", text)
    assert serial is not None
    cpu = sum(worker["thread_cpu"] for worker in measured.workers) * 1e6
    assert abs(float(serial.group(1)) - cpu) < 0.11
    assert "| function | calls per epoch | own µs per epoch |" in text
    assert len([line for line in lines if line.startswith("| `")]) == 5
    assert measured.single is not None and measured.single["steps"] >= 1
    assert re.search(rf"1 worker, run just before: {NUMBER} steps per epoch at {NUMBER} µs of CPU per step", text)
    if measured.pinned is not None:  # more than one CPU to leave
        assert re.search(rf"The same 2 threads with the process on one CPU: {NUMBER} µs per epoch", text)
    assert len(os.sched_getaffinity(0)) == len(affinity)  # the pinned run gave back every CPU


def test_two_processes_split_their_cpu_between_the_worker_and_other_threads() -> None:
    measured = limits.processes_latency(100, top=3)
    assert len(measured.workers) == 2
    for worker in measured.workers:
        assert worker["sends"] > 0  # every epoch's progress goes to the other process
        assert worker["thread_cpu"] > 0
    text = "\n".join(limits.explain_processes(measured, 60e-6, one_worker_cpu=20e-6))
    for index in (0, 1):
        found = re.search(rf"process {index}: {NUMBER} µs \({NUMBER} µs in the worker's thread, {NUMBER} µs", text)
        assert found is not None
        whole, thread, other = map(float, found.groups())
        assert thread > 0 and abs(whole - thread - other) < 0.2
    assert "1 worker's process spends 20.0 µs" in text and "Profile of worker 0 of 2 processes" in text


def test_the_loop_on_two_threads_exchanges_the_same_records_in_more_messages() -> None:
    one = limits.collatz_rounds(100, 1)
    two = limits.collatz_rounds(100, 2)
    assert one.records == two.records > 0  # every number's trajectory is the same, however it is split
    assert one.rounds == two.rounds > 0
    assert two.messages >= one.messages > 0
    text = "\n".join(limits.explain_loop([one], [two], 1.5))
    assert f"{one.rounds} rounds" in text
    assert f"{one.records / one.messages:.1f} records per message" in text
    assert f"{two.records / two.messages:.1f} records per message" in text
    assert f"needs the 2 threads' CPU under {1.5 * one.cpu * 1e3:.1f} ms" in text


def test_the_start_up_is_split_at_the_workers_start() -> None:
    measured = limits.startup_timeline(2, rounds=1)
    assert 0 < measured.first_worker <= measured.until_workers <= measured.whole
    assert measured.after_workers > 0 and measured.bare > 0 and measured.child_cpu > 0
    assert measured.modules > 10 and measured.imports and all(seconds > 0 for _, seconds in measured.imports)
    text = "\n".join(limits.explain_startup(measured, 0.2))
    assert f"`execute` took {measured.whole * 1e3:.1f} ms" in text
    assert f"{measured.first_worker * 1e3:.1f} ms until the first worker ran" in text
    assert f"imports {measured.modules} modules" in text


def test_the_pipeline_line_says_what_the_goal_leaves_the_engine() -> None:
    text = "\n".join(limits.explain_pipeline(1_000_000, 0.1, 0.2, 0.3, 0.5))
    assert "the loop takes 100 ns per record" in text
    assert "builtin `map`/`filter` 200 ns" in text and "pipeline 300 ns" in text
    assert "the engine adds 100 ns per record" in text
    assert "allows 200 ns per record, which the function calls alone exceed by 0 ns" in text  # never "-0"
    text = "\n".join(limits.explain_pipeline(1_000_000, 0.1, 0.25, 0.3, 0.5))
    assert "which the function calls alone exceed by 50 ns: no engine cost would meet it" in text
    text = "\n".join(limits.explain_pipeline(1_000_000, 0.1, 0.15, 0.3, 0.5))
    assert "allows 200 ns per record, which leaves the engine 50 ns per record: it must shed 100 ns (67%" in text


def test_met_goals_print_no_explanation() -> None:
    run = _run_module()
    cfg = run.config(True, 1)
    met = [
        _row("pytimely, 2 threads in 1 process", stats.PASS),
        _row("pytimely, 2 processes × 1 worker", stats.PASS),
    ]
    assert run._latency_limits(cfg, met, {}, _quiet) == []
    assert run._loop_limits(cfg, _row("2 threads in 1 process", stats.PASS), _quiet) == []
    assert run._startup_limits(cfg, _row("execute", stats.PASS), _quiet) == []
    no_regression = _row("pytimely record-wise: no regression (issue 18 measured 0.46–0.52× the loop)", stats.PASS)
    assert run._pipeline_limits(cfg, [no_regression], {}) == []


def test_missed_goals_print_their_explanation() -> None:
    run = _run_module()
    cfg = dataclasses.replace(run.config(True, 1), latency_epochs=200, collatz_limit=100)
    missed = [_row("pytimely, 2 threads in 1 process", stats.MISS), _row("pytimely, 2 processes × 1 worker", "PASS")]
    lines = run._latency_limits(cfg, missed, {}, _quiet)
    assert lines[0] == "### What limits the missed latency goals"
    assert any(line.startswith("- **What limits 2 threads**") for line in lines)
    assert not any("What limits 2 processes" in line for line in lines)
    loop = run._loop_limits(cfg, _row("2 threads in 1 process", stats.MISS), _quiet, runs=1)
    assert loop[0] == "### What limits the loop" and re.search(rf"{NUMBER} records per message", loop[2])
    if len(os.sched_getaffinity(0)) > 1:
        assert any(line.startswith("  The same 2 threads with the process on one CPU") for line in loop)
    samples = {key: stats.Sample.of([value]) for key, value in (("loop", 0.1), ("builtins", 0.2), ("record", 0.3))}
    no_regression = _row("pytimely record-wise: no regression (issue 18 measured 0.46–0.52× the loop)", stats.MISS)
    pipeline = run._pipeline_limits(cfg, [no_regression], samples)
    assert pipeline[0].startswith("- **What limits the record-wise pipeline**")


def test_a_missed_cost_goal_splits_two_processes_time_into_computing_and_waiting() -> None:
    import limits as cost_limits

    line = cost_limits.explain_waiting("WCC, columnar", (2.62, 2.60), (1.81, 1.40), 1.6)
    assert "1 process takes 2.62 s (2.60 s of CPU)" in line
    assert "the busier spends 1.40 s computing (0.54× 1 process's CPU" in line
    assert "410 ms waiting" in line
    assert "2 processes would be 1.87× as fast as 1" in line and "done in 1.64 s" in line
