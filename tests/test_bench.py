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
import cost  # noqa: E402
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


def test_kept_sections_are_numbered_after_the_new_ones() -> None:
    kept = "## 7. Spark (measured separately)\n\ntext\n\n## 9. Profile (measured separately)\n\nmore"
    text = report.render([report.Section("A"), report.Section("B")], [], "run.py", 1, quick=False, trailer=kept)
    assert "## 3. Spark (measured separately)" in text and "## 4. Profile (measured separately)" in text
    assert "## 7." not in text


def test_expected_counts_match_the_loop() -> None:
    for per_epoch in (1, 2, 7, 10):
        assert pipeline.loop(3, per_epoch)[1] == pipeline.expected_counts(3, per_epoch)


def test_quick_run_renders_every_section_without_spark(tmp_path: Path) -> None:
    output = tmp_path / "BENCHMARKS.md"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--repeat", "1", "--output", str(output)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    text = output.read_text()
    assert "> **Quick mode**" in text
    for heading in (
        "## 1. Record pipeline",
        "## 2. Epoch latency",
        "## 3. Start-up of a 2-process `execute`",
        "## 4. A loop with exchange",
        "## 5. COST and scaling",
        "## 6. Growth",
        "## 7. Connected components",
        "## 8. Shape",
        "## 9. Instrumentation overhead",
    ):
        assert heading in text
    assert "skipped in --quick" in text  # PySpark is not run by the smoke test
    assert "handwritten loop (baseline)" in text and "≥ 0.5× the loop" in text
    assert "bytewax with one list per epoch" in text  # bytewax's fastest configuration beside the record-wise one
    assert "pytimely, 2 processes × 1 worker" in text and "pytimely, 2 threads in 1 process" in text
    assert "`execute(idle, workers=1, processes=2)`" in text and "≤ 0.2 s" in text
    assert "2 threads in 1 process" in text and "≤ 1.5× the time of 1 worker" in text
    issue = text.split("### Issue 18")[1].split("### Other goals")[0]
    for goal in ("≥ 1.3× 1 process", "≥ 1.6× 1 process", "≤ 30 µs", "≤ 60 µs", "≤ 0.2 s", "≥ 0.46× the loop"):
        assert goal in issue
    for job in ("wordcount, record-wise", "wordcount, columnar (NumPy arrays of words)", "WCC, columnar"):
        for reading in ("without reading", "reading included"):
            assert f"**COST of {job}, {reading}**: " in issue
    explained = {  # a missed goal says what limits it (benchmarks/latency_limits.py), a met one says nothing
        "pytimely, 1 worker": "- **What limits 1 worker against bytewax**",
        "pytimely, 2 threads in 1 process": "- **What limits 2 threads**",
        "pytimely, 2 processes × 1 worker": "- **What limits 2 processes**",
        "2 threads in 1 process": "- **What limits the loop on 2 threads**",
        "`execute(idle, workers=1, processes=2)`, `runtime` already imported": "- **Where the start-up goes**",
        "pytimely record-wise: no regression (issue 18 measured 0.46–0.52× the loop)": (
            "- **What limits the record-wise pipeline**"
        ),
    }
    for variant, line in explained.items():
        row = next(row for row in issue.splitlines() if f"| {variant} |" in row)
        assert (line in text) == ("**MISS**" in row), variant
    for job in ("wordcount, record-wise", "wordcount, columnar (NumPy arrays of words)", "WCC, columnar"):
        row = next(row for row in issue.splitlines() if f"| {job}, 2 processes × 1 worker |" in row)
        assert (f"- **{job}, CPU against waiting**: " in text) == ("**MISS**" in row), job
    assert "| workload | single thread | 1 process | 2 processes | 4 processes |" in text
    assert "`os.cpu_count()` = " in text and "affinity" in text
    assert "edges: pytimely columnar, 1 worker" in text and "ns per edge" in text
    assert 'scipy `connected_components(connection="strong")`' in text and "igraph" in text
    assert "1-minute load average at the start / end of the run" in text
    assert "CPU used by other programs during the run" in text
    assert "record pipeline (50,000 records): no hooks" in text and "× no hooks (noise band ±" in text
    assert "goals met" in text


@given(st.lists(st.text(alphabet="ab \t", max_size=12), max_size=30), st.integers(min_value=1, max_value=7))
def test_shares_of_a_file_hold_every_line_once_in_order(lines: list[str], peers: int) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "lines.txt"
        path.write_bytes("".join(line + "\n" for line in lines).encode())
        shares = [cost.read_share(str(path), index, peers) for index in range(peers)]
    assert all(share == b"" or share.endswith(b"\n") for share in shares)
    assert b"".join(shares).decode().splitlines() == lines


def test_edges_parse_from_their_text() -> None:
    src, dst = cost.parse_edges(b"1\t2\n30\t4\n")
    assert src.tolist() == [1, 30] and dst.tolist() == [2, 4]
    src, dst = cost.parse_edges(b"")
    assert len(src) == len(dst) == 0


def test_cost_is_the_fewest_workers_that_beat_the_single_thread() -> None:
    assert cost.cost({1: 3.0, 2: 1.5, 4: 0.9}, 1.0) == 4
    assert cost.cost({1: 0.5, 2: 0.3}, 1.0) == 1
    assert cost.cost({1: 3.0, 2: 2.0, 4: 1.0}, 1.0) is None  # equal is not faster
    assert cost.cost_line({1: 3.0, 2: 1.5, 4: 0.8}, 1.0, "scipy") == "4 workers (1.25× scipy)"
    assert cost.cost_line({1: 3.0, 2: 2.0, 4: 2.5}, 1.0, "scipy") == (
        "never up to 4 workers (best: 2 workers, 0.50× scipy)"
    )


def test_components_with_edges_leave_out_isolated_nodes() -> None:
    import numpy as np

    src, dst = np.array([0, 2], np.int32), np.array([1, 3], np.int32)
    count, _ = cost.scipy_components(src, dst, 6)
    assert count == 4  # {0, 1}, {2, 3}, {4}, {5}
    assert cost.components_with_edges(src, dst, 6, count) == 2


def test_a_missed_goal_says_how_much_speed_it_needs() -> None:
    assert report.miss_margin(1.0, 1.6, at_least=True) == "needs 1.60× the speed"
    assert report.miss_margin(90e-6, 60e-6, at_least=False) == "needs 1.50× the speed"
    assert report.miss_margin(2.0, 1.6, at_least=True) == ""
    slow = stats.Sample.of([2.0])
    row = report.judge_speedup(report.timed_row("2 processes", slow), slow, stats.Sample.of([2.4]), "1 process", 1.6)
    assert row.result == stats.MISS
    assert "**MISS**: needs 1.33× the speed" in "\n".join(report._table([row]))


def test_a_loaded_machine_marks_the_run_noisy() -> None:
    section = report.Section("W", rows=[report.Row("steady", "1 s", sample=stats.Sample.of([1.0, 1.0]))])
    loaded = report.Quiet(load_start=0.2, load_end=2.5, others_cores=1.1)
    quiet = report.Quiet(load_start=0.2, load_end=1.2, others_cores=0.0)
    assert loaded.noisy and not quiet.noisy
    text = report.render([section], [], "run.py", 1, quick=False, quiet=loaded)
    assert "Noisy run" in text and "at the end 2.50" in text
    assert "0.20 / 2.50" in text and "1.10 cores on average" in text
    assert "Noisy run" not in report.render([section], [], "run.py", 1, quick=False, quiet=quiet)


def test_issue_18_goals_are_listed_apart_with_the_cost_lines() -> None:
    sample = stats.Sample.of([1.0])
    mine = report.Row("2 processes", "1 s", goal="≥ 1.6× 1 process", result=stats.MISS, issue=18, sample=sample)
    other = report.Row("shape", "1 s", goal="< 60 s", result=stats.PASS, sample=sample)
    section = report.Section("W", rows=[mine, other], headline=["- **COST of W**: never up to 4 workers"])
    text = report.render([section], [], "run.py", 1, quick=False)
    issue, others = text.split("### Issue 18")[1].split("### Other goals")
    assert "| W | 2 processes |" in issue and "**COST of W**" in issue and "| W | shape |" not in issue
    assert "| W | shape |" in others.split("## 1.")[0]


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
        "1.75× the time of networkx alone"
    )
    assert with_read is not None and with_read.median == pytest.approx(2.0)  # read 1.0 + wcc with intern 1.0


def test_graph_rows_refuse_components_that_disagree() -> None:
    run = _run_module()

    with pytest.raises(run.WrongAnswer, match="columnar wcc"):
        run.graph_rows(_graph_result(agree=False))


def test_peak_memory_is_the_childs_own_not_its_parents() -> None:
    ballast = bytearray(200 * 1024 * 1024)  # the parent is at least 200 MB resident when it forks the child
    ballast[::4096] = b"x" * len(ballast[::4096])
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); import scaling; print(scaling.peak_memory_mb())",
            str(ROOT / "benchmarks"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    del ballast
    assert 5 < float(done.stdout.strip()) < 150


def test_cost_jobs_agree_with_their_single_threaded_programs(tmp_path: Path) -> None:
    """The COST WCC (representatives merged in a loop) and the columnar wordcount (aggregate_batch) on 1 and 2
    processes find what scipy, the ``Counter`` loop and pyarrow's ``value_counts`` find."""
    pytest.importorskip("scipy")
    pytest.importorskip("pyarrow")
    edges = str(tmp_path / "edges.tsv")
    nodes = cost.write_edges(Path(edges), 6_000)
    paths = cost.write_wordcount_text(tmp_path, 2, 300)
    components = cost.scipy_wcc(edges, nodes).check
    words = cost.wordcount_loop(paths).check
    assert cost.wordcount_value_counts(paths).check == words == 2 * 300 * cost.WORDS_PER_LINE
    for processes in (1, 2):
        assert cost.wcc(edges, nodes, processes).check == components
        assert cost.wordcount(paths, "columnar", processes).check == words
