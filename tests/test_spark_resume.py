"""A retried gang resumes from its last complete checkpoint (``run_dataflow(checkpoint=DIR)``), on ``local[2]``.

Task 1 of the first attempt SIGKILLs its own Python worker once every task has
written a checkpoint; the retried attempt must report ``resumed`` at an epoch
after 0, and the result must equal an uninterrupted run's, row for row.
"""

from __future__ import annotations

import os
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from runtime.spark import current_task, run_dataflow  # noqa: E402
from scopes import ScopeBuilder, Stream  # noqa: E402

ROWS = 4_000
KEYS = 13
BATCH_ROWS = "200"
"""Rows per Arrow batch, so that each task's 2,000 rows are 10 epochs."""
SCHEMA = "key string, count long"


@pytest.fixture(scope="module", autouse=True)
def ship_by_value() -> None:
    """The tasks cannot import this module by name: ship it by value."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture
def small_batches(spark: Any) -> Any:
    """The shared session with :data:`BATCH_ROWS` rows per Arrow batch while the test runs."""
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, BATCH_ROWS)
    yield spark
    spark.conf.set(key, before)


def checkpoints_common_to_both(root: Path) -> bool:
    """Whether both tasks have written a checkpoint file (so some epoch is complete everywhere)."""
    found = [{p.name for p in (root / "state" / "workers-2" / f"worker-{i}").glob("epoch-*.ckpt")} for i in (0, 1)]
    return bool(found[0] & found[1])


def running_counts(root: str, kill: bool) -> Any:
    """``build``: the running count of each key, by epoch (keyed state); task 1 dies once, mid-run, if ``kill``."""

    def build(scope: ScopeBuilder, rows: Stream) -> Stream:
        def maybe_die(row: Any) -> Any:
            task = current_task()
            late = task is not None and task.index == 1 and task.attempt == 0 and row[0] % 2000 >= 1400
            if kill and late and checkpoints_common_to_both(Path(root)):
                os.kill(os.getpid(), signal.SIGKILL)
            return row

        return rows.map(maybe_die).key_by(lambda row: row[1]).fold(int, lambda n, _row: n + 1)

    return build


def keyed_rows(spark: Any) -> Any:
    """``ROWS`` rows ``(n, key)``, in two partitions of consecutive ``n``."""
    import pyarrow as pa

    table = pa.table({"n": list(range(ROWS)), "key": [f"k{n % KEYS}" for n in range(ROWS)]})
    return spark.createDataFrame(table).coalesce(2)


def test_a_killed_gang_resumes_from_its_last_checkpoint_and_the_result_is_exact(
    small_batches: Any, tmp_path: Path
) -> None:
    spark = small_batches
    frame = keyed_rows(spark)
    plain = run_dataflow(
        frame, running_counts(str(tmp_path / "plain"), False), SCHEMA, workers=2, checkpoint=tmp_path / "plain"
    )
    expected = Counter(tuple(row) for row in plain.collect())
    totals = Counter(f"k{n % KEYS}" for n in range(ROWS))
    assert {key: max(n for k, n in expected if k == key) for key in totals} == totals

    events: list[Any] = []
    attempts: list[int] = []
    root = tmp_path / "killed"
    result = run_dataflow(
        frame,
        running_counts(str(root), True),
        SCHEMA,
        workers=2,
        retries=2,
        checkpoint=root,
        on_progress=events.append,
        on_attempt=lambda n, _cause: attempts.append(n),
    )
    found = Counter(tuple(row) for row in result.collect())
    assert attempts == [0, 1]
    resumed = [event for event in events if event["event"] == "resumed"]
    assert {event["task"] for event in resumed} == {0, 1}
    assert all(event["attempt"] == 1 and event["epoch"] > 0 for event in resumed)
    assert found == expected and max(found.values()) == 1
