"""Your own DataFrame through a pytimely dataflow on Spark: Collatz stopping times, checked against plain Spark.

The kind of job a data engineer writes, beside the flagship
(``examples/pipeline.py``):

1. **A DataFrame in**: ``spark.range(1, N + 1)`` (a column ``id``), or any
   Parquet file with a ``bigint`` column ``id`` (``--input``).
2. **A dataflow** (:func:`stopping_times`), run by
   :func:`runtime.spark.run_dataflow` in row mode: every task gets its
   partition's rows as tuples ``(id,)``.  Each number enters a loop whose
   round is the step count; every round applies one Collatz step (``n / 2``
   if even, ``3n + 1`` if odd) and **exchanges** the number by its current
   value, so numbers wander between the tasks; a number leaves the **loop**
   when it reaches 1, at the round equal to its stopping time.
3. **A DataFrame out**: ``(id bigint, steps int)``, an ordinary DataFrame
   (``show``, ``groupBy``, ``join``, ``write`` ...).
4. **The check**: plain Spark computes the same stopping times with a Python
   UDF, and the two DataFrames must be equal (``exceptAll`` both ways).

Run ``python examples/spark_user.py --numbers 20000`` (``--master`` takes any
Spark master, e.g. ``spark://127.0.0.1:7077`` of ``python -m
runtime.spark.standalone start``).  Exits with status 1 if the check fails.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing pytimely
    sys.path.insert(0, str(ROOT))

from runtime.spark import run_dataflow, spark_session  # noqa: E402
from scopes import Capability, OperatorInfo, OperatorInput, OperatorOutput, Pipeline, ScopeBuilder, Stream  # noqa: E402

OUTPUT_SCHEMA = "id bigint, steps int"


def collatz_step(n: int) -> int:
    """One step of the Collatz map."""
    return n // 2 if n % 2 == 0 else 3 * n + 1


def stopping_time(n: int) -> int:
    """Steps from ``n`` to 1, by a plain loop (what plain Spark's UDF runs)."""
    steps = 0
    while n != 1:
        n = collatz_step(n)
        steps += 1
    return steps


def _rounds(capability: Capability, info: OperatorInfo) -> Any:
    """Operator logic: ``(start, 1)`` leaving the loop at round ``k`` becomes ``(start, k)``."""
    capability.drop()

    def logic(input: OperatorInput, output: OperatorOutput) -> None:
        for ref, batch in input:
            output.session(ref).give_batch([(start, ref.time.inner) for start, _ in batch])

    return logic


def stopping_times(scope: ScopeBuilder, rows: Stream) -> Stream:
    """The dataflow: rows ``(id,)`` in, rows ``(id, steps)`` out; ids below 1 are dropped."""
    numbers = rows.filter(lambda row: row[0] >= 1, name="Positive")

    def body(inner: ScopeBuilder) -> Stream:
        loop, feedback = inner.loop_variable(1, name="NextRound")
        state = numbers.map(lambda row: (row[0], row[0]), name="Start").enter(inner).concat(feedback)
        running, finished = state.branch(lambda pair: pair[1] == 1, name="ReachedOne")
        running.map(lambda pair: (pair[0], collatz_step(pair[1])), name="Step").exchange(
            lambda pair: pair[1]
        ).connect_loop(loop)
        return finished.unary(Pipeline, "Rounds", _rounds).leave()

    return scope.iterative(body, name="Collatz")


def plain_spark(numbers: Any) -> Any:
    """The same ``(id, steps)`` DataFrame computed by plain Spark (a Python UDF), for the check."""
    from pyspark.sql import functions as F

    steps = F.udf(lambda n: stopping_time(n), "int")  # a lambda: PySpark 4 warns on the plain int hints
    return numbers.where(F.col("id") >= 1).select("id", steps("id").alias("steps"))


def differences(found: Any, expected: Any) -> int:
    """Rows in one DataFrame and not the other (duplicates counted)."""
    return found.exceptAll(expected).count() + expected.exceptAll(found).count()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--master", default="local[2]", help="any Spark master (default local[2])")
    parser.add_argument("--numbers", type=int, default=20_000, help="spark.range(1, N + 1) (default 20000)")
    parser.add_argument("--input", type=Path, default=None, help="a Parquet file with a bigint column id instead")
    parser.add_argument("--workers", type=int, default=None, help="Spark tasks = pytimely workers (default: slots)")
    parser.add_argument("--slot-wait", type=float, default=60.0, help="seconds to wait for free slots (default 60)")
    parser.add_argument("--ports", default=None, help="LOW-HIGH: the ports the tasks' mesh listens on (default: any)")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the executors cannot import this file by name
    settings = {"spark.ui.showConsoleProgress": "false", "spark.ui.enabled": "false"}
    if args.ports:
        settings["spark.pytimely.ports"] = args.ports  # or run_dataflow(..., ports=args.ports)
    spark = spark_session(args.master, "pytimely: your own DataFrame", settings)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        numbers = spark.read.parquet(str(args.input)) if args.input else spark.range(1, args.numbers + 1)
        start = time.perf_counter()
        result = run_dataflow(
            numbers.select("id"), stopping_times, OUTPUT_SCHEMA, workers=args.workers, slot_wait=args.slot_wait
        )
        elapsed = time.perf_counter() - start
        print(f"pytimely: {result.count():,} stopping times in {elapsed:.1f} s; the longest:")
        result.orderBy(result.steps.desc(), "id").show(3)
        wrong = differences(result, plain_spark(numbers))
        print(f"check against plain Spark: {'OK' if wrong == 0 else f'{wrong} rows differ'}")
        return 0 if wrong == 0 else 1
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
