"""run_dataflow on a real Spark session (``local[2]``, the shared ``spark`` fixture).

Spark is slow to start and this machine is small: every test here shares one
session, and the graph tests use a part of the Debian graph.
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap
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
from runtime.spark.errors import FATAL_MARKER  # noqa: E402
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
    """Rows ``(key, count, task)``: the input rows ``(n, key)`` exchanged by key and counted once complete.

    ``kill`` is ``"never"``, ``"first"`` (task 1 of the first attempt SIGKILLs its
    own process when its first exchanged batch arrives) or ``"always"``.
    """
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

    return batches.unary_notify(Exchange(lambda row: row[1]), "CountByKey", logic)


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

    summary = pipeline.summarize_in_spark(result, 3, cycles_shown=4, members_shown=2)
    sizes = sorted((len(c) for c in expected_cycles), reverse=True)
    assert summary["packages"] == packages and summary["cycles"] == len(expected_cycles)
    assert summary["in_cycles"] == sum(sizes) and [size for _, size, _ in summary["largest_cycles"]] == sizes[:4]
    for label, size, members in summary["largest_cycles"]:
        cycle = next(c for c in expected_cycles if min(c) == label)
        assert len(cycle) == size and members == sorted(cycle)[:2]
    weak = sorted((len(c) for c in nx.weakly_connected_components(graph)), reverse=True)
    assert summary["wccs"] == len(weak) and [size for _, size in summary["largest_wccs"]] == weak[:3]


def test_names_are_interned_by_every_task_to_dense_ids_in_the_names_order(spark: Any) -> None:
    edges = list(scc.read_edges(pipeline.DEFAULT_INPUT, limit=3000))
    frame = spark.createDataFrame(pa.table({"package": [e[0] for e in edges], "dependency": [e[1] for e in edges]}))
    ids, id_edges = pipeline.intern_names(frame.repartition(3), partitions=3)
    names = sorted({name for edge in edges for name in edge})
    assert [(row["name"], row["id"]) for row in ids.orderBy("id").collect()] == [(n, i) for i, n in enumerate(names)]
    assert sorted((row["src"], row["dst"]) for row in id_edges.collect()) == sorted(
        (names.index(a), names.index(b)) for a, b in edges
    )


def test_a_plain_file_is_read_in_byte_ranges_and_a_gzip_file_spread_over_the_partitions(
    spark: Any, tmp_path: Path
) -> None:
    edges = list(scc.read_edges(pipeline.DEFAULT_INPUT, limit=3000))
    plain = tmp_path / "edges.tsv"
    plain.write_text("".join(f"{a}\t{b}\n" for a, b in edges))
    before = spark.conf.get("spark.sql.files.maxPartitionBytes")
    split = pipeline.read_edges(spark, plain, 3)
    parts = split.rdd.glom().collect()
    assert len(parts) == 3 and all(parts)
    assert [tuple(row) for part in parts for row in part] == edges  # byte ranges in file order: no shuffle
    assert spark.conf.get("spark.sql.files.maxPartitionBytes") == before
    spread = pipeline.read_edges(spark, pipeline.DEFAULT_INPUT, 2)
    assert spread.rdd.getNumPartitions() == 2 and spread.count() == 274_855


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


def only_typed_rows(scope: ScopeBuilder, batches: Stream) -> Stream:
    """The input rows as they came, after checking that each one is a tuple ``(int, str)``."""

    def check(row: Any) -> Any:
        if type(row) is not tuple or type(row[0]) is not int or type(row[1]) is not str:
            raise TypeError(f"row mode must hand over rows as tuples (int, str), got {row!r:.80}")
        return row

    return batches.map(check)


def test_row_mode_hands_over_rows_as_tuples_in_column_order(spark: Any) -> None:
    result = run_dataflow(keyed_rows(spark), only_typed_rows, "n long, key string", workers=2)
    assert sorted(tuple(row) for row in result.collect()) == [(n, f"k{n % KEYS}") for n in range(ROWS)]


def test_the_result_behaves_like_any_dataframe(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pyspark.sql import functions as F

    result = run_dataflow(keyed_rows(spark), count_by_key, COUNT_SCHEMA, workers=2)
    expected = {key: count for key, count in EXPECTED.items()}
    result.show(3)
    assert "only showing top 3 rows" in capsys.readouterr().out
    assert len(result.take(3)) == 3 and len(result.head(2)) == 2 and len(result.limit(5).collect()) == 5
    assert result.first()["key"] in expected and result.head()["key"] in expected
    assert result.count() == KEYS and len(result.collect()) == KEYS
    assert dict(zip(*result.toPandas()[["key", "count"]].to_dict("list").values(), strict=True)) == expected
    result.coalesce(1).write.parquet(str(tmp_path / "out.parquet"))
    assert spark.read.parquet(str(tmp_path / "out.parquet")).count() == KEYS
    assert result.union(result).count() == 2 * KEYS
    joined = result.join(result.select("key", F.col("count").alias("again")), "key")
    assert joined.where(F.col("count") == F.col("again")).count() == KEYS
    assert result.filter(F.col("count") > 108).count() == sum(1 for n in expected.values() if n > 108)
    assert sorted(row["tasks"] for row in result.groupBy("task").agg(F.count("*").alias("tasks")).collect()) != []
    cached = result.cache()
    assert cached.count() == KEYS and cached.agg(F.sum("count")).first()[0] == ROWS
    cached.unpersist()


def explode_on_key(row: Any) -> Any:
    """A user function that raises on one key."""
    if row[1] == "k5":
        raise ZeroDivisionError(f"user code cannot divide row {row[0]}")
    return row


def raising(scope: ScopeBuilder, batches: Stream) -> Stream:
    return batches.map(explode_on_key, name="ExplodeOnKey")


def test_a_user_function_raising_is_not_retried_and_its_traceback_reaches_the_driver(spark: Any) -> None:
    attempts: list[int] = []
    with pytest.raises(DataflowFailed) as caught:
        run_dataflow(
            keyed_rows(spark), raising, "n long, key string", workers=2, on_attempt=lambda n, _: attempts.append(n)
        )
    error = caught.value
    assert attempts == [0] and error.attempts == 1 and not error.retryable
    assert error.task_traceback is not None and "Traceback (most recent call last)" in error.task_traceback
    assert "explode_on_key" in error.task_traceback and "ZeroDivisionError: user code cannot divide" in str(error)
    assert error.__cause__ is not None
    assert "reporter.close()" not in error.task_traceback  # the task's own clean-up is not where it failed


def test_a_user_module_the_executors_cannot_import_fails_at_once_naming_the_module(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "driver_only_dataflow.py").write_text(
        textwrap.dedent(
            """
            def build(scope, batches):
                return batches
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import driver_only_dataflow  # type: ignore[import-not-found]

    attempts: list[int] = []
    with pytest.raises(DataflowFailed) as caught:
        run_dataflow(
            keyed_rows(spark),
            driver_only_dataflow.build,
            "n long, key string",
            workers=2,
            on_attempt=lambda n, _: attempts.append(n),
        )
    error = caught.value
    assert attempts == [0] and error.attempts == 1 and not error.retryable
    assert "ModuleNotFoundError" in str(error) and "driver_only_dataflow" in str(error)
    assert error.task_traceback is not None and "driver_only_dataflow" in error.task_traceback


def test_a_schema_mismatch_carries_the_tasks_traceback(spark: Any) -> None:
    with pytest.raises(DataflowFailed) as caught:
        run_dataflow(keyed_rows(spark), count_by_key, "key string, count string, task int", workers=2, retries=2)
    traceback = caught.value.task_traceback
    assert traceback is not None and "SchemaMismatch" in traceback and FATAL_MARKER not in traceback
