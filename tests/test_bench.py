"""The benchmark suite: its statistics, its verdicts, and a quick run that renders the report."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_report as report  # noqa: E402
import bench_stats as stats  # noqa: E402
import record_pipeline as pipeline  # noqa: E402


def _run_module() -> Any:
    """``benchmarks/run.py`` loaded under a name no other test module uses."""
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "benchmarks" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = module
    spec.loader.exec_module(module)
    return module


positive = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)


def test_median_of_odd_and_even_counts() -> None:
    assert stats.median([5.0, 1.0, 3.0]) == 3.0
    assert stats.median([4.0, 1.0, 3.0, 2.0]) == 2.5


def test_median_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one repetition"):
        stats.median([])
    with pytest.raises(ValueError, match="at least one repetition"):
        stats.Sample.of([])


def test_quartiles_and_spread() -> None:
    sample = stats.Sample.of([1.0, 2.0, 3.0, 4.0, 5.0])
    assert sample.iqr == (2.0, 4.0)
    assert (sample.low, sample.median, sample.high) == (1.0, 3.0, 5.0)
    assert sample.relative_spread == pytest.approx(4.0 / 3.0)
    assert stats.Sample.of([7.0]).iqr == (7.0, 7.0)


@given(st.lists(positive, min_size=1, max_size=20))
def test_median_and_quartiles_lie_within_the_spread(values: list[float]) -> None:
    sample = stats.Sample.of(values)
    q1, q3 = sample.iqr
    assert sample.low <= q1 <= sample.median <= q3 <= sample.high


def test_ratio_and_speedup() -> None:
    assert stats.ratio(6.0, 3.0) == 2.0
    assert math.isnan(stats.ratio(1.0, 0.0))
    assert math.isnan(stats.ratio(math.nan, 1.0))
    fast, slow = stats.Sample.of([1.0, 1.0, 2.0]), stats.Sample.of([4.0, 3.0, 5.0])
    assert fast.speedup_over(slow) == 4.0  # medians 1 and 4
    assert slow.speedup_over(fast) == 0.25


@given(positive, positive)
def test_speedup_and_time_ratio_are_reciprocal(a: float, b: float) -> None:
    one, other = stats.Sample.of([a]), stats.Sample.of([b])
    assert one.speedup_over(other) * stats.ratio(a, b) == pytest.approx(1.0)


def test_verdicts_at_and_around_the_goal() -> None:
    assert stats.verdict(0.5, 0.5, at_least=True) == stats.PASS
    assert stats.verdict(0.49, 0.5, at_least=True) == stats.MISS
    assert stats.verdict(1.0, 1.0, at_least=False) == stats.PASS
    assert stats.verdict(1.01, 1.0, at_least=False) == stats.MISS
    assert stats.verdict(math.nan, 1.0, at_least=True) == stats.NOT_MEASURED


def test_formatting_picks_readable_units() -> None:
    assert stats.format_seconds(2.5) == "2.50 s"
    assert stats.format_seconds(0.0123) == "12.3 ms"
    assert stats.format_seconds(5.5e-5) == "55.0 µs"
    assert stats.format_spread(stats.Sample.of([0.001, 0.002])) == "1.0 ms–2.0 ms"


def test_judged_rows_compare_medians() -> None:
    loop, engine = stats.Sample.of([1.0, 1.1, 0.9]), stats.Sample.of([2.0, 2.2, 1.8])
    row = report.judge_speedup(report.timed_row("engine", engine), engine, loop, "the loop", 0.5)
    assert (row.comparison, row.goal, row.result) == ("0.50× the loop", "≥ 0.5× the loop", stats.PASS)
    row = report.judge_time_ratio(report.timed_row("engine", engine), engine, loop, "the loop", 1.0)
    assert row.comparison == "2.00× the time of the loop"
    assert row.result == stats.MISS


def test_report_summarises_every_goal_and_says_what_was_not_measured() -> None:
    sample = stats.Sample.of([1.0, 2.0, 3.0])
    passed = report.Row("fast", "1 s", goal="≥ 1×", result=stats.PASS, sample=sample)
    missed = report.Row("slow", "9 s", goal="≥ 1×", result=stats.MISS)
    absent = report.missing_row("columnar", "not measured: no map_batch", "≥ 5×")
    reference = report.Row("loop", "1 s")
    section = report.Section("Workload", ["what"], [passed, missed, absent, reference], ["a note"])
    text = report.render([section], [("CPU", "test CPU")], "run.py", 5, quick=False)
    assert report.tally([section]) == {stats.PASS: 1, stats.MISS: 1, stats.NOT_MEASURED: 1}
    assert "1 goals met, 1 missed, 1 not measured." in text
    assert "- **CPU**: test CPU" in text
    assert "median of 5 repetitions" in text
    summary = text.split("## Summary")[1].split("## 1.")[0]
    assert "| Workload | fast |" in summary and "| Workload | columnar |" in summary
    assert "| Workload | loop |" not in summary  # no goal, not in the summary
    assert "not measured: no map_batch" in text and "a note" in text
    assert "Noisy run" in text and "fast (100%)" in text  # (3 - 1) / median 2


def test_a_steady_run_is_not_called_noisy() -> None:
    steady = report.Row("steady", "1 s", sample=stats.Sample.of([1.0, 1.05, 1.1]))
    assert report.noisy_rows([report.Section("W", rows=[steady])]) == []
    shaky = report.Row("shaky", "1 s", sample=stats.Sample.of([1.0, 1.5, 2.0]))
    assert report.noisy_rows([report.Section("W", rows=[shaky])]) == ["shaky (67%)"]


def test_sections_measured_separately_survive_a_rewrite() -> None:
    previous = "# old\n\n## 1. Pipeline\n\nold table\n\n## 7. Spark (measured separately; kept)\n\nkept text\n"
    assert report.kept_sections(previous) == "## 7. Spark (measured separately; kept)\n\nkept text"


def test_expected_counts_match_the_loop() -> None:
    for per_epoch in (1, 2, 7, 10):
        assert pipeline.loop(3, per_epoch)[1] == pipeline.expected_counts(3, per_epoch)


def test_quick_run_renders_every_section_without_spark(tmp_path: Path) -> None:
    output = tmp_path / "BENCHMARKS.md"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--repeat", "1",
         "--sections", "pipeline,latency,graphs,wordcount,shape,instrument", "--output", str(output)],
        capture_output=True, text=True, timeout=240, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    text = output.read_text()
    assert "> **Quick mode**" in text
    for heading in ("## 1. Record pipeline", "## 2. Epoch latency", "## 3. Connected components",
                    "## 4. Wordcount with exchange", "## 5. Shape", "## 6. Instrumentation overhead"):
        assert heading in text
    assert "skipped in --quick" in text  # PySpark is not run by the smoke test
    assert "handwritten loop (baseline)" in text and "≥ 0.5× the loop" in text
    assert "pytimely, 2 processes × 1 worker" in text
    assert "record pipeline (50,000 records): no hooks" in text and "× no hooks (noise band ±" in text
    assert "goals met" in text


def _graph_result(agree: bool = True) -> dict[str, object]:
    names = {"read": 1.0, "networkx build": 2.0, "intern": 0.5}
    for kind, (nx_alone, columnar) in {"wcc": (1.0, 0.5), "scc": (2.0, 3.5)}.items():
        names[f"networkx {kind}"] = nx_alone
        names[f"networkx {kind} + build"] = nx_alone + 2.0
        names[f"columnar {kind}"] = columnar
        names[f"columnar {kind} + intern"] = columnar + 0.5
    rows = {name: {"seconds": [value * 0.9, value, value * 1.1]} for name, value in names.items()}
    return {"rows": rows, "agree": {"columnar wcc": agree, "columnar scc": True}, "graph": {"edges": 3}}


def test_graph_rows_judge_columnar_against_networkx_with_build() -> None:
    run = _run_module()

    rows, with_read = run.graph_rows(_graph_result())
    by_variant = {row.variant: row for row in rows}
    wcc = by_variant["WCC: pytimely columnar, 1 worker, interning included"]
    assert wcc.comparison == "0.33× the time of networkx incl. build"  # 1.0 / 3.0
    assert wcc.result == stats.PASS
    scc = by_variant["SCC: pytimely columnar, 1 worker, interning included"]
    assert scc.comparison == "1.00× the time of networkx incl. build"  # 4.0 / 4.0: at the goal
    assert scc.result == stats.PASS
    assert by_variant["SCC: pytimely columnar, 1 worker, algorithm alone"].comparison == (
        "1.75× the time of networkx alone")
    assert with_read is not None and with_read.median == pytest.approx(2.0)  # read 1.0 + wcc with intern 1.0


def test_graph_rows_refuse_components_that_disagree() -> None:
    run = _run_module()

    with pytest.raises(run.WrongAnswer, match="columnar wcc"):
        run.graph_rows(_graph_result(agree=False))


def test_peak_memory_is_the_childs_own_not_its_parents() -> None:
    ballast = bytearray(200 * 1024 * 1024)  # the parent is at least 200 MB resident when it forks the child
    ballast[::4096] = b"x" * len(ballast[::4096])
    done = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import scaling; "
         "print(scaling.peak_memory_mb())", str(ROOT / "benchmarks")],
        capture_output=True, text=True, timeout=60, check=True,
    )
    del ballast
    assert 5 < float(done.stdout.strip()) < 150
