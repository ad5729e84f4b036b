"""run_dataflow on a real Spark session (``local[2]``, the shared ``spark`` fixture).

Spark is slow to start and this machine is small: every test here shares one
session, and the graph tests use a part of the Debian graph.
"""

from __future__ import annotations

import os
import signal
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import networkx as nx
import pyarrow as pa
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

import pipeline  # noqa: E402
import scc  # noqa: E402

from runtime.spark import DataflowFailed, SlotsUnavailable, current_task, run_dataflow  # noqa: E402
from scopes import Exchange, Notificator, OperatorInput, OperatorOutput, ScopeBuilder, Stream  # noqa: E402

EDGES = 20_000
ROWS = 4_000
KEYS = 37


@pytest.fixture(scope="module", autouse=True)
def ship_modules_by_value() -> None:
    """Spark's tasks cannot import the tests and examples by name: ship them by value."""
    from pyspark import cloudpickle

    pipeline.ship_by_value(cloudpickle)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def keyed_rows(spark: Any) -> Any:
    """``ROWS`` rows ``(n, key)`` with ``KEYS`` different keys."""
    table = pa.table({"n": list(range(ROWS)), "key": [f"k{n % KEYS}" for n in range(ROWS)]})
    return spark.createDataFrame(table)


def count_by_key(scope: ScopeBuilder, batches: Stream, kill: str = "never") -> Stream:
    """Rows ``(key, count, task)``: records exchanged by key and counted once complete.

    ``kill`` is ``"never"``, ``"first"`` (task 1 of the first attempt SIGKILLs its
    own process when its first exchanged batch arrives) or ``"always"``.
    """
    rows = batches.flat_map(lambda batch: zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True))
    counts: Counter[str] = Counter()

    def logic(input: OperatorInput, output: OperatorOutput, notificator: Notificator) -> None:
        task = current_task()
        for ref, batch in input:
            assert task is not None
            if task.index == 1 and (kill == "always" or (kill == "first" and task.attempt == 0)):
                os.kill(os.getpid(), signal.SIGKILL)
            notificator.notify_at(ref.retain())
            counts.update(key for _, key in batch)
        for capability in notificator:
            assert task is not None
            output.session(capability).give_batch([(key, n, task.index) for key, n in counts.items()])

    return rows.unary_notify(Exchange(lambda row: row[1]), "CountByKey", logic)


def count_killing_first(scope: ScopeBuilder, batches: Stream) -> Stream:
    return count_by_key(scope, batches, "first")


def count_killing_always(scope: ScopeBuilder, batches: Stream) -> Stream:
    return count_by_key(scope, batches, "always")


COUNT_SCHEMA = "key string, count long, task int"
EXPECTED = Counter(f"k{n % KEYS}" for n in range(ROWS))


def test_the_pipeline_interns_in_spark_computes_columnar_and_names_in_spark_like_networkx(spark: Any) -> None:
    edges = list(scc.read_edges(pipeline.DEFAULT_INPUT, limit=EDGES))
    frame = spark.createDataFrame(pa.table({"package": [e[0] for e in edges], "dependency": [e[1] for e in edges]}))
    events: list[dict[str, Any]] = []
    result = pipeline.find_components(frame, workers=2, on_progress=events.append)
    assert result.schema.simpleString() == f"struct<{pipeline.OUTPUT_SCHEMA.replace(' ', ':').replace(',:', ',')}>"
    table = result.toArrow()
    cycles, _, packages = pipeline.summarize(table, 5)

    graph = nx.DiGraph(edges)
    assert packages == graph.number_of_nodes() == len(set(table.column("package").to_pylist()))
    expected_cycles = {frozenset(c) for c in nx.strongly_connected_components(graph) if len(c) > 1}
    assert {frozenset(nodes) for _, nodes in cycles} == expected_cycles and expected_cycles
    expected_wcc = {node: min(c) for c in nx.weakly_connected_components(graph) for node in c}
    assert dict(zip(table.column("package").to_pylist(), table.column("wcc").to_pylist(), strict=True)) == expected_wcc
    expected_scc = {node: (min(c), len(c)) for c in nx.strongly_connected_components(graph) for node in c}
    found_scc = zip(table.column("scc").to_pylist(), table.column("scc_size").to_pylist(), strict=True)
    assert dict(zip(table.column("package").to_pylist(), found_scc, strict=True)) == expected_scc
    kinds = {(event["event"], event["task"]) for event in events}
    assert {("joined", 0), ("joined", 1), ("finished", 0), ("finished", 1)} <= kinds


def test_output_comes_back_as_a_dataframe_of_the_schema_from_every_task(spark: Any) -> None:
    result = run_dataflow(keyed_rows(spark), count_by_key, COUNT_SCHEMA, workers=2)
    rows = result.collect()
    assert Counter({row.key: row["count"] for row in rows}) == EXPECTED and len(rows) == KEYS
    assert {row.task for row in rows} == {0, 1}
    assert result.schema.simpleString() == "struct<key:string,count:bigint,task:int>"


def test_a_killed_task_makes_the_driver_retry_and_no_row_is_lost_or_duplicated(spark: Any) -> None:
    attempts: list[tuple[int, str | None]] = []
    result = run_dataflow(
        keyed_rows(spark),
        count_killing_first,
        COUNT_SCHEMA,
        workers=2,
        retries=2,
        on_attempt=lambda number, failure: attempts.append((number, failure)),
    )
    rows = result.collect()
    assert [number for number, _ in attempts] == [0, 1]
    assert attempts[1][1]
    assert len(rows) == KEYS and Counter({row.key: row["count"] for row in rows}) == EXPECTED


def test_a_task_killed_at_every_attempt_fails_cleanly_within_the_retry_budget(spark: Any) -> None:
    with pytest.raises(DataflowFailed) as caught:
        run_dataflow(keyed_rows(spark), count_killing_always, COUNT_SCHEMA, workers=2, retries=1)
    error = caught.value
    assert error.attempts == 2 and error.retryable and len(error.causes) == 2
    assert "retry budget (retries=1)" in str(error)


def test_a_schema_mismatch_fails_at_once_naming_the_column_and_both_types(spark: Any) -> None:
    with pytest.raises(DataflowFailed) as caught:
        run_dataflow(keyed_rows(spark), count_by_key, "key string, count string, task int", workers=2, retries=2)
    error = caught.value
    assert error.attempts == 1 and not error.retryable
    assert "column 'count'" in str(error) and "type string" in str(error) and "int" in str(error)


def test_more_workers_than_slots_warns_and_says_what_to_change_without_waiting(spark: Any) -> None:
    with warnings.catch_warnings(record=True) as caught, pytest.raises(SlotsUnavailable) as error:
        warnings.simplefilter("always")
        run_dataflow(keyed_rows(spark), count_by_key, COUNT_SCHEMA, workers=3, slot_wait=0.2)
    assert error.value.needed == 3 and error.value.free <= 2
    assert "local[3]" in str(error.value) and "workers<=2" in str(error.value)
    assert any("needs 3 task slots" in str(warning.message) for warning in caught)
