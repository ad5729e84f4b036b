"""The Spark flagship section of ``benchmarks/run.py``: its two goals judged from one run's figures."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def _run_module() -> Any:
    """``benchmarks/run.py`` under a name of its own."""
    spec = importlib.util.spec_from_file_location("bench_run_spark", ROOT / "benchmarks" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_run_spark"] = module
    spec.loader.exec_module(module)
    return module


def measured(pytimely: float, dataflow: float, total: float, alone: float, converged: bool = True) -> dict[str, Any]:
    """One graph's result as ``spark_wcc.measure_flagship`` returns it."""
    stages = {
        "read": 1.0,
        "intern": 2.0,
        "pytimely": pytimely,
        "tasks start": 0.2,
        "dataflow": dataflow,
        "hand-over": 0.3,
        "name": 0.5,
        "summary": 0.5,
        "peak task RSS": 1e8,
        "workers": 2.0,
        "edges": 1000.0,
        "nodes": 100.0,
    }
    return {
        "flagship": stages,
        "flagship total": total,
        "ratio": total / alone,
        "alone": {"read": alone / 4, "intern": alone / 4, "dataflow": alone / 2},
        "label propagation": {"read": 3.0, "propagate": 12.0, "iterations": 4, "converged": converged},
    }


def test_the_pytimely_stage_goal_is_its_time_beyond_the_dataflow() -> None:
    run = _run_module()
    within = run.flagship_rows("Debian", measured(1.9, 1.0, 10.0, 2.0), True, False)
    beyond = run.flagship_rows("Debian", measured(2.2, 1.0, 10.0, 2.0), True, False)
    assert (within[0].result, beyond[0].result) == ("PASS", "MISS")
    assert within[0].goal == "≤ 1 s" and "stage 1.90 s, dataflow 1.00 s" in within[0].comparison
    assert not within[1].goal  # the whole flagship is judged at 5 M edges only


def test_the_whole_flagship_goal_is_a_ratio_to_the_dataflow_without_spark() -> None:
    run = _run_module()
    met = run.flagship_rows("5 M edges", measured(5.0, 4.0, 29.0, 10.0, False), False, True)
    missed = run.flagship_rows("5 M edges", measured(5.0, 4.0, 31.0, 10.0, False), False, True)
    assert (met[0].result, missed[0].result) == ("PASS", "MISS")
    assert met[0].comparison == "2.90× the time of the dataflow without Spark"
    bounded = [row for row in met if "label propagation" in row.variant]
    assert len(bounded) == 1 and "first 4 iterations (bounded)" in bounded[0].variant
    assert "3.00 s per iteration" in bounded[0].comparison


def test_a_failed_baseline_is_a_row_saying_why_not_a_number() -> None:
    run = _run_module()
    result = measured(5.0, 4.0, 29.0, 10.0)
    result["label propagation"] = {"error": "SparkOutOfMemoryError: [UNABLE_TO_ACQUIRE_MEMORY]"}
    rows = run.flagship_rows("5 M edges", result, False, True)
    failed = [row for row in rows if "label propagation" in row.variant]
    assert len(failed) == 1 and failed[0].median == "not measured"
    assert "failed in Spark: SparkOutOfMemoryError" in failed[0].comparison
    assert rows[0].result == "PASS"  # the flagship's goal does not depend on the baseline
