"""The benchmarks' machinery: the goals file, judging a goal, the COST answer, and a tiny run of every workload."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from harness import CostLine, Goal, GoalsError, Metric, cost_cells, judge, load_goals  # noqa: E402

GOOD = """
[[goal]]
name = "two vs one"
workload = "w"
metric = "two"
baseline = "one"
direction = "at_least"
goal = 1.8
cause = ["wait"]

[[cost]]
name = "w"
workload = "w"
metric = "t_p{p}"
baseline = "single"
"""


def test_the_goals_file_loads_and_names_only_registered_workloads() -> None:
    import run

    goals, costs = load_goals()
    assert goals and costs
    assert {goal.workload for goal in goals} | {line.workload for line in costs} <= set(run.WORKLOADS)


def test_a_goal_and_a_cost_line_load_with_their_fields(tmp_path: Path) -> None:
    path = tmp_path / "goals.toml"
    path.write_text(GOOD)
    goals, costs = load_goals(path)
    assert goals == [Goal("two vs one", "w", "two", "one", "at_least", 1.8, ("wait",))]
    assert costs == [CostLine("w", "w", "t_p{p}", "single", (1, 2, 4))]


@pytest.mark.parametrize(
    ("old", "new", "complaint"),
    [
        ('direction = "at_least"', 'direction = "faster"', "direction must be"),
        ('metric = "two"\n', "", "'metric' must be a str"),
        ("goal = 1.8", "goal = 0", "'goal' must be positive"),
        ('baseline = "one"', "baseline = true", "'baseline' must be a metric name or a number"),
        ('cause = ["wait"]', 'cause = "wait"', "'cause' must be a list"),
        ('metric = "t_p{p}"', 'metric = "t_p2"', "must contain {p}"),
        ("[[goal]]", "[[goal]", "goals.toml"),
    ],
)
def test_a_malformed_entry_is_refused_by_name(tmp_path: Path, old: str, new: str, complaint: str) -> None:
    path = tmp_path / "goals.toml"
    path.write_text(GOOD.replace(old, new, 1))
    with pytest.raises(GoalsError, match=re.escape(complaint)):
        load_goals(path)


def test_repeated_goal_names_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "goals.toml"
    path.write_text(GOOD + GOOD.split("[[cost]]")[0])
    with pytest.raises(GoalsError, match="repeat"):
        load_goals(path)


def seconds(value: float) -> Metric:
    return Metric(value, "s", "")


def test_judging_a_speed_up_a_time_ratio_and_a_constant() -> None:
    results = {"w": {"one": seconds(2.0), "two": seconds(1.0), "wait": seconds(0.3)}, "v": {"far": seconds(4.0)}}
    speedup = judge(Goal("g", "w", "two", "one", "at_least", 1.8, ("wait",)), results, {})
    assert (speedup.ratio, speedup.result, speedup.cause) == (2.0, "met", [results["w"]["wait"]])
    slower = judge(Goal("g", "w", "two", "one", "at_most", 0.4), results, {})
    assert (slower.ratio, slower.result) == (0.5, "missed")
    constant = judge(Goal("g", "w", "two", 0.5, "at_most", 1.0), results, {})
    assert (constant.ratio, constant.result) == (2.0, "missed")
    across = judge(Goal("g", "w", "one", "v.far", "at_least", 2.0), results, {})
    assert (across.ratio, across.result) == (2.0, "met")


def test_a_goal_without_its_figures_is_not_measured_and_says_why() -> None:
    results = {"w": {"two": seconds(1.0), "one": Metric(math.nan, "", "no compiled build")}}
    assert judge(Goal("g", "w", "two", "one", "at_most", 1.0), results, {}).why == "no compiled build"
    assert judge(Goal("g", "w", "three", "one", "at_most", 1.0), results, {}).result == "not measured"
    skipped = judge(Goal("g", "w", "two", "v.far", "at_most", 1.0), results, {"v": "not installed"})
    assert (skipped.result, skipped.why) == ("not measured", "v: not installed")


def test_cost_is_the_fewest_processes_that_beat_the_single_thread() -> None:
    line = CostLine("c", "w", "t_p{p}", "single")
    results = {"w": {"single": seconds(1.0), "t_p1": seconds(3.0), "t_p2": seconds(1.0), "t_p4": seconds(0.5)}}
    assert cost_cells(line, results)[2].startswith("4 ")  # equal is not faster
    results["w"]["t_p4"] = seconds(2.0)
    assert cost_cells(line, results)[2].startswith("never up to 4")


@pytest.mark.timeout(900)
def test_a_tiny_run_of_every_workload_reports_a_row_per_goal(tmp_path: Path) -> None:
    """Every workload runs small (Spark is left out of --quick), checks its answers, and the report has a row for
    every goal of goals.toml and the COST lines."""
    report = tmp_path / "BENCHMARKS.md"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--repeat", "1", "--output", str(report)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    text = report.read_text()
    assert re.search(r"- CPU speed \(.*repetitions began and ended", text), text[:2000]
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    goals, costs = load_goals()
    for entry in [*goals, *costs]:
        assert any(row.startswith(f"| {entry.name} |") for row in rows), entry.name


@pytest.mark.timeout(60)
def test_a_ceiling_process_that_dies_is_named_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    import ceilings
    from helpers.ceiling_loaders import dies_in_a_half

    monkeypatch.setattr(ceilings, "WAIT_LIMIT", 3600.0)  # only noticing the death can end the wait in time
    # the first half to die is named at once; the other may not have died yet (None)
    with pytest.raises(ceilings.CeilingError, match=r"exit codes \[(3, 3|3, None|None, 3)\]"):
        ceilings.ceiling(dies_in_a_half, len, 2)


def test_a_ceiling_process_that_stops_answering_ends_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    import ceilings
    from helpers.ceiling_loaders import hangs_in_a_half

    monkeypatch.setattr(ceilings, "WAIT_LIMIT", 1.0)
    with pytest.raises(ceilings.CeilingError, match=r"None: still running"):
        ceilings.ceiling(hangs_in_a_half, len, 2)


def test_a_ceiling_process_that_ended_its_rounds_is_not_taken_for_dead() -> None:
    # The whole input's process ends after its last round while the halves still load: an exit code of 0 from a
    # process that delivered everything is no failure (under load, a run of `make test` once took it for one).
    import ceilings
    from helpers.ceiling_loaders import slow_halves

    found = ceilings.ceiling(slow_halves, len, 1)
    assert found.whole >= 0 and found.together >= 0 and found.apart >= 0


@pytest.mark.parametrize("kernel", ["record", "columnar"])
def test_the_wordcount_ceiling_kernels_count_every_word_of_their_share(tmp_path: Path, kernel: str) -> None:
    import ceilings
    import cost

    paths = cost.write_wordcount_text(tmp_path, 2, 301)
    load, count = (
        (ceilings.record_lines, ceilings.record_kernel)
        if kernel == "record"
        else (ceilings.wordcount_lines, ceilings.wordcount_kernel)
    )
    halves = [count(load(paths, index, 2)) for index in range(2)]
    assert count(load(paths, 0, 1)) == 2 * 301 * cost.WORDS_PER_LINE == sum(halves)
    assert all(halves)


def test_the_thread_cores_comparison_runs_every_setting_on_both_workloads() -> None:
    from functools import partial

    import thread_cores

    found = {
        "collatz": thread_cores.compare("collatz", partial(thread_cores.collatz_main, limit=200), 1),
        "sort": thread_cores.compare("sort", partial(thread_cores.sort_worker, batches=2, size=1_000), 1),
    }
    assert all(set(medians) == set(thread_cores.SETTINGS) for medians in found.values())
    assert all(row["wall"] > 0 and row["cpu"] > 0 for medians in found.values() for row in medians.values())
    lines = thread_cores.table(found).splitlines()
    assert len(lines) == 2 + 2 * len(thread_cores.SETTINGS) and lines[2].startswith("| collatz | auto |")


@pytest.mark.parametrize("exchange", [True, False])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_the_collatz_loop_sends_every_number_once_whatever_the_worker_count(workers: int, exchange: bool) -> None:
    """Each worker sends its share of 1..limit (a range with step ``peers``): every number's whole path is seen,
    exchanged or (the cause line's variant) kept by the worker that read it."""
    import threading
    from functools import partial

    from scaling import collatz_worker

    from runtime.execute import execute

    limit = 60
    lock = threading.Lock()
    seen: list[int] = []

    def count(time: object, batch: list[int]) -> None:
        with lock:
            seen.extend(batch)

    execute(partial(collatz_worker, limit=limit, count=count, exchange=exchange), workers=workers)
    expected: list[int] = []
    for n in range(2, limit + 1):  # 1 is done at once; each other number is exchanged after every step
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            expected.append(n)
    assert sorted(seen) == sorted(expected)


def test_the_key_hashing_tool_checks_its_hashes_and_times_every_way() -> None:
    import key_hashing

    found = key_hashing.measure(10)
    assert set(found) == {"ints", "words"}
    assert all(set(times) == {"list", "general path", "stable_hash per key"} for times in found.values())
    assert all(value > 0 for times in found.values() for value in times.values())


@pytest.mark.parametrize("processes", [1, 2])
def test_the_wordcount_timings_carry_routing_and_kernel_seconds_within_the_cpu(tmp_path: Path, processes: int) -> None:
    """The record-wise wordcount reports the seconds it routed, the columnar one the seconds in its kernels, each
    within the busiest process's CPU, and every word is counted; the columnar one also its exchange (none on 1
    process) beyond the kernels and its merge among them; the wrapped functions are restored afterwards."""
    import cluster
    import cost

    from scopes import columnar_ops, exchange

    pytest.importorskip("pyarrow")
    paths = cost.write_wordcount_text(tmp_path, 3, 2_000)
    words = 3 * 2_000 * cost.WORDS_PER_LINE
    pusher = exchange.ExchangeBatchPusher

    def wrappable() -> tuple[object, ...]:
        return cluster.split_words, columnar_ops._reduce, columnar_ops.combine_partials, pusher.push, pusher.flush

    before = wrappable()
    record = cost.wordcount(paths, "record-wise", processes)
    columnar = cost.wordcount(paths, "columnar", processes)
    assert record.check == columnar.check == words
    assert record.kernels is None and record.routing is not None and 0 < record.routing < record.cpu
    assert record.exchange is None and record.merge is None
    assert columnar.routing is None and columnar.kernels is not None and 0 < columnar.kernels < columnar.cpu
    assert columnar.exchange is not None and columnar.merge is not None and 0 < columnar.merge < columnar.kernels
    if processes == 1:
        assert columnar.exchange == 0  # one worker checks its keys: nothing is split or encoded
    else:
        assert 0 < columnar.exchange < columnar.cpu - columnar.kernels
    assert wrappable() == before
    metrics = cost._kernel_metrics({f"wc_columnar_p{p}": [columnar] for p in (1, 2)})
    assert metrics["wc_columnar_kernels_speedup_p2"].value == pytest.approx(1.0)
    assert metrics["wc_columnar_beyond_p1"].value == pytest.approx(columnar.cpu - columnar.kernels)
    assert metrics["wc_columnar_exchange_p2"].value == columnar.exchange
    assert metrics["wc_columnar_merge_p2"].value == columnar.merge


@pytest.mark.parametrize("processes", [1, 2])
def test_the_wcc_timing_carries_the_seconds_of_each_step_within_the_cpu(tmp_path: Path, processes: int) -> None:
    """The WCC reports the busiest process's seconds in its local components, its grouping at the owners and its
    final labels, together within its CPU, with scipy's count of components; the wrapped functions are restored."""
    import cost

    path = tmp_path / "edges.tsv"
    nodes = cost.write_edges(path, 20_000)
    before = [getattr(cost.cost_wcc, name) for name in ("local_labels", "group", "final_labels")]
    timing = cost.wcc(str(path), nodes, processes)
    assert timing.check == cost.scipy_wcc(str(path), nodes).check
    assert timing.steps is not None and set(timing.steps) == {"local", "grouping", "labelling"}
    assert all(seconds > 0 for seconds in timing.steps.values()) and sum(timing.steps.values()) < timing.cpu
    assert [getattr(cost.cost_wcc, name) for name in ("local_labels", "group", "final_labels")] == before
    metrics = cost._wcc_step_metrics({f"wcc_p{p}": [timing] for p in (1, 2)})
    assert {key: metric.value for key, metric in metrics.items() if key.endswith("_p2")} == {
        f"wcc_{label}_p2": seconds for label, seconds in timing.steps.items()
    }


def test_the_cost_processes_start_without_numpy_huge_pages_and_the_bench_keeps_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Processes started in ``small_pages()`` see ``NUMPY_MADVISE_HUGEPAGE=0``; the variable is put back after."""
    import os

    import cost

    name, value = cost.SMALL_PAGES
    monkeypatch.setenv(name, "1")
    probe = [sys.executable, "-c", f"import os; print(os.environ.get({name!r}))"]
    with cost.small_pages():
        inside = subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip()
    assert inside == value
    assert os.environ[name] == "1"
    monkeypatch.delenv(name)
    with cost.small_pages():
        pass
    assert name not in os.environ


def test_the_loop_split_adds_up_and_leaves_the_classes_as_they_were() -> None:
    """The instrumented Collatz run splits its wall time into operators (routing within them), propagation and the
    rest, on 1 worker and 2 threads, and counts the workers' waits (2 threads take turns on the GIL) and steps;
    the wrapped methods are restored afterwards, also when the body fails."""
    import scaling
    from harness import clocked_calls

    from runtime.communication.fabric import WakeGate
    from scopes.batch_keys import KeyCheckPusher
    from scopes.exchange import ExchangePusher
    from scopes.operator import Operator
    from scopes.progress.subgraph import Subgraph

    before = (Operator.__dict__["pull_internal_progress"], Subgraph.__dict__["_propagate"])
    pushes = (ExchangePusher.__dict__["push"], KeyCheckPusher.__dict__["push"])
    wait = WakeGate.__dict__["wait"]
    for workers in (1, 2):
        found = scaling.collatz_split(200, workers)
        assert found is not None
        assert found["operators"] > 0 and found["propagation"] > 0
        assert 0 < found["routing"] < found["operators"]  # the exchange (1 worker: its key check), within operators
        assert math.isclose(found["operators"] + found["propagation"] + found["rest"], found["seconds"])
        assert found["steps"] > 0 and (workers == 1 or found["waits"] > 0)  # 2 threads take turns on the GIL
    with pytest.raises(RuntimeError, match="in the body"), clocked_calls(scaling.split_calls()) as clock:
        assert clock is not None and Operator.__dict__["pull_internal_progress"] is not before[0]
        raise RuntimeError("in the body")
    assert (Operator.__dict__["pull_internal_progress"], Subgraph.__dict__["_propagate"]) == before
    assert (ExchangePusher.__dict__["push"], KeyCheckPusher.__dict__["push"]) == pushes
    assert WakeGate.__dict__["wait"] is wait


def test_clocked_calls_count_every_thread_reset_and_wrap_nothing_when_one_cannot_be_wrapped() -> None:
    """Spans from several threads all count, a reset forgets them, and an owner that refuses a new attribute (a
    compiled class) leaves every other owner unwrapped too."""
    import threading
    import types

    from harness import clocked_calls

    module = types.ModuleType("timed")
    module.work = lambda n: sum(range(n))  # type: ignore[attr-defined]
    original = module.work  # type: ignore[attr-defined]
    with clocked_calls([(module, "work", "work")]) as clock:
        assert clock is not None
        threads = [threading.Thread(target=lambda: [module.work(100) for _ in range(500)]) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert clock.calls("work") == 2000 and clock.calls("other") == 0
        assert clock.seconds("work") == clock.seconds() > 0
        clock.reset()
        assert clock.seconds() == 0
    assert module.work is original  # type: ignore[attr-defined]
    with clocked_calls([(module, "work", "work"), (int, "bit_length", "int")]) as clock:
        assert clock is None and module.work is original  # type: ignore[attr-defined]
    assert module.work is original  # type: ignore[attr-defined]
