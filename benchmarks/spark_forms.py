"""One workload three ways on Spark: plain PySpark, ``run_dataflow`` record-wise, and ``columnar=True``.

The workload is a keyed sum, ``SELECT key, sum(value) AS total GROUP BY key``
over ``rows`` generated rows with ``keys`` different keys, materialized
(``localCheckpoint``) each time, as ``run_dataflow`` materializes its result:

* **plain**: ``groupBy("key").agg(sum("value"))``;
* **rows**: rows enter the dataflow as tuples, ``keyed().reduce(add)``;
* **columnar**: Arrow batches, ``aggregate_batch("key", [("value", "sum")])``.

The input is generated and checkpointed before the clocks start, Python
workers are started first (:func:`runtime.spark.warm_up`), and every answer is
checked against plain PySpark's.  :func:`measure_forms` returns the seconds;
``bench`` is the ``spark_forms`` workload of ``run.py``.
"""

from __future__ import annotations

import operator
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness import Log, Metric, Size, Skip, measured  # noqa: E402

from runtime.spark import run_dataflow, spark_session, warm_up  # noqa: E402
from scopes import ScopeBuilder, Stream  # noqa: E402

SCHEMA = "key long, total long"
FORMS = ("plain", "rows", "columnar")


def by_rows(scope: ScopeBuilder, batches: Stream) -> Stream:
    """The keyed sum record by record: ``(key, value)`` tuples, reduced per key."""
    return batches.keyed().reduce(operator.add, name="SumByKey")


def by_columns(scope: ScopeBuilder, batches: Stream) -> Stream:
    """The keyed sum on Arrow batches: partial sums per batch, exchanged by key, summed once complete."""
    return batches.aggregate_batch("key", [("value", "sum", "total")], name="SumByKey")


def generated(spark: Any, rows: int, keys: int, workers: int) -> Any:
    """``rows`` rows ``(key, value)`` over ``workers`` partitions, computed and checkpointed."""
    from pyspark.sql import functions as F

    frame = spark.range(rows, numPartitions=workers).select(
        (F.col("id") * 7919 % keys).alias("key"), (F.col("id") % 1000).alias("value")
    )
    return frame.localCheckpoint(eager=True)


def run_form(form: str, frame: Any, workers: int) -> tuple[float, Any]:
    """Seconds for ``form`` of the workload on ``frame``, and its (materialized) result."""
    from pyspark.sql import functions as F

    start = time.perf_counter()
    if form == "plain":
        result = frame.groupBy("key").agg(F.sum("value").alias("total")).localCheckpoint(eager=True)
    elif form == "rows":
        result = run_dataflow(frame, by_rows, SCHEMA, workers=workers, name="forms-rows")
    elif form == "columnar":
        result = run_dataflow(frame, by_columns, SCHEMA, workers=workers, name="forms-columnar", columnar=True)
    else:
        raise ValueError(f"unknown form {form!r}; one of {FORMS}")
    return time.perf_counter() - start, result


def checksum(result: Any) -> tuple[int, int]:
    """``(keys, sum of totals)`` of a result, computed by Spark."""
    from pyspark.sql import functions as F

    row = result.agg(F.count("key").alias("keys"), F.sum("total").alias("total")).collect()[0]
    return int(row["keys"]), int(row["total"])


def measure_forms(
    spark: Any | None = None,
    rows: int = 1_000_000,
    keys: int = 50_000,
    workers: int = 2,
    repeat: int = 1,
    master: str = "local[2]",
) -> dict[str, Any]:
    """Seconds (median of ``repeat`` runs) of each form of the keyed sum, checked against plain PySpark.

    Returns ``{"plain": s, "rows": s, "columnar": s, "rows_over_columnar": x,
    "plain_over_rows": x, "plain_over_columnar": x, "rows_count": rows, "keys": keys}``.
    Starts a session on ``master`` unless ``spark`` is given (and stops only
    the one it started).
    """
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    own = spark is None
    if spark is None:
        spark = spark_session(master, "pytimely spark_forms", {"spark.ui.showConsoleProgress": "false"})
        spark.sparkContext.setLogLevel("ERROR")
    try:
        frame = generated(spark, rows, keys, workers)
        warm_up(spark, workers, wait=True)
        seconds: dict[str, list[float]] = {form: [] for form in FORMS}
        expected: tuple[int, int] | None = None
        for _ in range(repeat):
            for form in FORMS:
                took, result = measured(partial(run_form, form, frame, workers))
                seconds[form].append(took)
                found = checksum(result)
                expected = expected or found
                if found != expected:
                    raise AssertionError(f"{form} gave (keys, total) {found}, plain PySpark {expected}")
        medians = {form: statistics.median(values) for form, values in seconds.items()}
    finally:
        if own:
            spark.stop()
    return {
        **medians,
        "rows_over_columnar": medians["rows"] / medians["columnar"],
        "plain_over_rows": medians["plain"] / medians["rows"],
        "plain_over_columnar": medians["plain"] / medians["columnar"],
        "rows_count": rows,
        "keys": keys,
    }


def bench(size: Size, log: Log) -> dict[str, Metric]:
    """The workload for ``run.py``: the keyed sum of 1 M rows, plain PySpark and both forms (not in ``--quick``)."""
    if size.quick:
        raise Skip("left out of --quick (Spark takes minutes)")
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise Skip("pyspark is not installed (`make bench` installs it)") from None
    found = measure_forms(repeat=size.repeat)
    log(f"  spark forms: plain {found['plain']:.2f} s, rows {found['rows']:.2f} s, columnar {found['columnar']:.2f} s")
    what = f"keyed sum of {found['rows_count']:,} rows, {found['keys']:,} keys"
    return {form: Metric(found[form], "s", f"{form}, {what}") for form in FORMS}
