"""PySpark's own label propagation for the weakly connected components of the Debian graph (a baseline).

Run ``python benchmarks/spark_wcc.py`` to compare with the pytimely stage of
``examples/pipeline.py``.  Plain DataFrame operations, no pytimely: every
package starts labelled with its own name; each iteration joins the labels
with the edges in both directions, keeps each package's smallest label, and
counts the packages whose label went down; it stops when none did.  Each
iteration's labels are materialized (``localCheckpoint``) so that the plan
does not grow with the iterations.  Prints the time of each stage.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runtime.spark import spark_session  # noqa: E402

DEFAULT_INPUT = ROOT / "examples" / "data" / "debian-bookworm-depends.tsv.gz"


def label_propagation(spark: Any, path: Path, partitions: int) -> tuple[float, float, int, dict[str, int]]:
    """Read the edges and propagate labels to a fixed point.

    Returns (seconds to read, seconds to propagate, iterations, {component label: packages}).
    """
    from pyspark.sql import functions as F

    start = time.perf_counter()
    edges = spark.read.csv(str(path), sep="\t", schema="src string, dst string")
    both = edges.union(edges.select(F.col("dst").alias("src"), F.col("src").alias("dst")))
    both = both.repartition(partitions, "src").localCheckpoint(eager=True)
    labels = both.select(F.col("src").alias("node")).distinct()
    labels = labels.select("node", F.col("node").alias("label")).localCheckpoint(eager=True)
    read = time.perf_counter() - start

    start = time.perf_counter()
    iterations = 0
    while True:
        iterations += 1
        offers = both.join(labels, both.src == labels.node).select(F.col("dst").alias("node"), "label")
        best = offers.union(labels).groupBy("node").agg(F.min("label").alias("label"))
        best = best.localCheckpoint(eager=True)
        changed = best.join(labels.withColumnRenamed("label", "old"), "node").where(F.col("label") < F.col("old"))
        if changed.count() == 0:
            labels = best
            break
        labels = best
    components = {row["label"]: row["count"] for row in labels.groupBy("label").count().collect()}
    return read, time.perf_counter() - start, iterations, components


def start_spark(master: str) -> Any:
    """A quiet Spark session for the baseline (no UI, 1 GB driver)."""
    spark = spark_session(
        master,
        "pyspark wcc baseline",
        {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "1g"},
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--master", default="local[*]", help="any Spark master (default local[*])")
    parser.add_argument("--input", type=Path, default=DEFAULT_INPUT)
    parser.add_argument("--partitions", type=int, default=None, help="default: the cluster's slots")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)

    start = time.perf_counter()
    spark = start_spark(args.master)
    partitions = args.partitions or spark.sparkContext.defaultParallelism
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    started = time.perf_counter() - start

    read, propagate, iterations, components = label_propagation(spark, args.input, partitions)
    print(f"PySpark label propagation on {args.input.name}, master {args.master}, {partitions} partitions")
    print(f"  {len(components)} weakly connected components; largest {max(components.values()):,} packages")
    print(f"  {iterations} iterations")
    print(f"  {started:6.1f} s  Spark starts")
    print(f"  {read:6.1f} s  Spark reads the edges")
    print(f"  {propagate:6.1f} s  label propagation ({propagate / iterations:.1f} s per iteration)")
    print(f"  {started + read + propagate:6.1f} s  total")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
