"""PySpark's own label propagation for the weakly connected components of the Debian graph (a baseline).

Run ``python benchmarks/spark_wcc.py`` to compare with the pytimely stage of
``examples/pipeline.py``; ``python benchmarks/spark_wcc.py --flagship`` runs
:func:`measure_flagship`: the flagship stage by stage at the Debian graph and
at a 5 M-edge graph (:func:`synthetic_graph`), beside this label propagation
and beside the same dataflow without Spark (:func:`dataflow_alone`).  Plain DataFrame operations, no pytimely: every
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

from harness import Log, Metric, Size, Skip  # noqa: E402

from runtime.spark import spark_session  # noqa: E402

DEFAULT_INPUT = ROOT / "examples" / "data" / "debian-bookworm-depends.tsv.gz"
SYNTHETIC_EDGES = 5_000_000
SYNTHETIC_NODES = 1_000_000


def label_propagation(
    spark: Any, path: Path, partitions: int, max_iterations: int | None = None
) -> tuple[float, float, int, dict[str, int]]:
    """Read the edges and propagate labels to a fixed point, or for at most ``max_iterations`` iterations.

    Returns (seconds to read, seconds to propagate, iterations, {component
    label: packages}); the components are empty when ``max_iterations``
    stopped it before the fixed point (labels still went down in its last
    iteration).
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
    converged = False
    while not converged and (max_iterations is None or iterations < max_iterations):
        iterations += 1
        offers = both.join(labels, both.src == labels.node).select(F.col("dst").alias("node"), "label")
        best = offers.union(labels).groupBy("node").agg(F.min("label").alias("label"))
        best = best.localCheckpoint(eager=True)
        changed = best.join(labels.withColumnRenamed("label", "old"), "node").where(F.col("label") < F.col("old"))
        converged = changed.count() == 0
        labels = best
    components: dict[str, int] = {}
    if converged:
        components = {row["label"]: row["count"] for row in labels.groupBy("label").count().collect()}
    return read, time.perf_counter() - start, iterations, components


def start_spark(master: str) -> Any:
    """A quiet Spark session for the baseline and the flagship (no UI, 4 GB driver).

    With 1 GB, the flagship at 5 M edges once failed with Spark's own
    ``SparkOutOfMemoryError`` in the hash aggregation of the distinct names,
    and with 2 GB the label propagation at 5 M edges did, in its first
    aggregation, while its 10 M checkpointed edge rows held the storage half
    of Spark's memory (``local`` mode does not retry a task).
    """
    spark = spark_session(
        master,
        "pyspark wcc baseline",
        {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "4g"},
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def synthetic_graph(path: Path, edges: int = SYNTHETIC_EDGES, nodes: int = SYNTHETIC_NODES, seed: int = 19) -> Path:
    """Write (once) a random directed graph as ``package<TAB>dependency`` lines: ``edges`` edges on ``nodes`` names.

    With 5 edges per node almost every node is on one giant SCC, as in the
    5 M-edge run of issue 19.  Plain text, so that Spark splits it freely.
    """
    import numpy as np

    if path.exists():
        return path
    random = np.random.default_rng(seed)
    src = random.integers(0, nodes, edges)
    dst = random.integers(0, nodes, edges)
    names = np.char.add("pkg", np.arange(nodes).astype(str))
    lines = np.char.add(np.char.add(names[src], "\t"), names[dst])
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        for start in range(0, edges, 500_000):
            out.write("\n".join(lines[start : start + 500_000].tolist()) + "\n")
    return path


def dataflow_alone(path: Path, workers: int = 1) -> dict[str, float]:
    """The flagship's dataflow (``pipeline.components_dataflow``) on ``path`` without Spark: seconds per stage.

    ``read`` parses the file with pyarrow, ``intern`` gives the names ids in
    their order (pyarrow's ``unique``, ``sort`` and ``index_in``), ``dataflow``
    runs the dataflow on ``workers`` worker threads of this process
    (:func:`runtime.execute`), start and finish included.
    """
    import functools

    import pyarrow as pa
    import pyarrow.compute as pc
    from pyarrow import csv

    sys.path.insert(0, str(ROOT / "examples"))
    import pipeline

    from runtime import execute

    start = time.perf_counter()
    options = csv.ParseOptions(delimiter="\t")
    table = csv.read_csv(
        str(path), read_options=csv.ReadOptions(column_names=["package", "dependency"]), parse_options=options
    )
    read = time.perf_counter() - start
    start = time.perf_counter()
    names = pc.unique(pa.chunked_array(table.column(0).chunks + table.column(1).chunks))
    names = pc.take(names, pc.sort_indices(names))
    src = pc.index_in(table.column(0), value_set=names).cast(pa.int32())
    dst = pc.index_in(table.column(1), value_set=names).cast(pa.int32())
    edges = pa.table({"src": src, "dst": dst}).combine_chunks()
    intern = time.perf_counter() - start
    build = functools.partial(pipeline.components_dataflow, nodes=len(names))

    def main(worker: Any) -> int:
        rows = [0]

        def dataflow(scope: Any) -> Any:
            handle, stream = scope.new_input("Edges")
            output = build(scope, stream).inspect_batch(lambda _t, batch: rows.__setitem__(0, rows[0] + len(batch)))
            return handle, output.probe()

        handle, probe = worker.dataflow(dataflow)
        low, high = (len(edges) * part // worker.peers for part in (worker.index, worker.index + 1))
        share = edges.slice(low, high - low)
        for batch in share.to_batches(max_chunksize=65_536):
            handle.send_batch(batch)
        handle.close()
        worker.step_while(lambda: not probe.done())
        return rows[0]

    start = time.perf_counter()
    rows = sum(execute(main, workers=workers, stall_timeout=600.0))
    dataflow = time.perf_counter() - start
    return {"read": read, "intern": intern, "dataflow": dataflow, "nodes": float(len(names)), "rows": float(rows)}


def flagship_stages(spark: Any, path: Path, workers: int) -> dict[str, float]:
    """The flagship pipeline's stages on ``path`` in ``spark`` (seconds), its pytimely stage split in three.

    ``tasks start`` runs from the job's submission to the last task joining
    the mesh, ``dataflow`` from there to the last task finishing its
    dataflow, ``hand-over`` from there to ``run_dataflow`` returning (Spark
    taking the output, the checkpoint).  ``peak task RSS`` is the largest
    peak resident memory of a task's Python worker, in bytes.
    """
    import functools

    sys.path.insert(0, str(ROOT / "examples"))
    import pipeline
    from pyspark import cloudpickle

    from runtime.spark import run_dataflow, warm_up

    pipeline.ship_by_value(cloudpickle)
    stages: dict[str, float] = {}
    start = time.perf_counter()
    edges = pipeline.read_edges(spark, path, workers)
    edge_count = edges.count()
    stages["read"] = time.perf_counter() - start
    start = time.perf_counter()
    ids, id_edges = pipeline.intern_names(edges)
    warm_up(spark, workers)
    id_edges = id_edges.localCheckpoint(eager=True)
    nodes = ids.count()
    stages["intern"] = time.perf_counter() - start
    events: list[tuple[float, dict[str, Any]]] = []
    start = time.perf_counter()
    rows = run_dataflow(
        id_edges,
        functools.partial(pipeline.components_dataflow, nodes=nodes),
        pipeline.ID_OUTPUT_SCHEMA,
        workers=workers,
        columnar=True,
        on_progress=lambda event: events.append((time.perf_counter(), event)),
    )
    end = time.perf_counter()
    joined = max((at for at, event in events if event["event"] == "joined"), default=start)
    finished = max((at for at, event in events if event["event"] == "finished"), default=end)
    stages["pytimely"] = end - start
    stages["tasks start"] = joined - start
    stages["dataflow"] = finished - joined
    stages["hand-over"] = end - finished
    peaks = [event.get("peak_rss", 0) for _, event in events if event["event"] == "finished"]
    stages["peak task RSS"] = float(max(peaks, default=0))
    stages["workers"] = float(workers)
    start = time.perf_counter()
    result = pipeline.name_components(rows, ids).localCheckpoint(eager=True)
    stages["name"] = time.perf_counter() - start
    start = time.perf_counter()
    pipeline.summarize_in_spark(result, 5)
    stages["summary"] = time.perf_counter() - start
    stages["edges"] = float(edge_count)
    stages["nodes"] = float(nodes)
    return stages


SYNTHETIC_PATH = ROOT / "output" / "synthetic-5m.tsv"
"""Where :func:`measure_flagship` writes the 5 M-edge graph (once)."""


def measure_flagship(
    paths: list[Path] | None = None,
    master: str = "local[2]",
    baseline: bool = True,
    baseline_iterations: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The flagship stage by stage on each graph, beside the dataflow alone and PySpark label propagation.

    ``paths`` defaults to the Debian graph and the 5 M-edge synthetic graph
    (written once under ``output/``).  ``baseline_iterations`` bounds the
    label propagation on the graphs it names (by file name) to that many
    iterations.  Returns ``{graph name: {"flagship": stages, "flagship
    total": seconds, "alone": stages, "ratio": flagship total / dataflow
    alone, "label propagation": {"read", "propagate", "iterations",
    "converged"}}}``; the flagship's total leaves out Spark's start.  Each
    flagship and each label propagation runs in a fresh session
    (:func:`_session`).  For ``benchmarks/run.py`` and BENCHMARKS.md.
    """
    sys.path.insert(0, str(ROOT / "examples"))
    import pipeline

    if paths is None:
        paths = [DEFAULT_INPUT, synthetic_graph(SYNTHETIC_PATH)]
    limits = baseline_iterations or {}
    results: dict[str, Any] = {}
    for path in paths:
        spark, workers = _session(master, pipeline.ARROW_BATCH_ROWS)
        try:
            stages = flagship_stages(spark, path, workers)
        finally:
            spark.stop()
        alone = dataflow_alone(path)
        total = sum(stages[name] for name in FLAGSHIP_TOTAL)
        row: dict[str, Any] = {"flagship": stages, "flagship total": total, "alone": alone}
        row["ratio"] = total / (alone["read"] + alone["intern"] + alone["dataflow"])
        if baseline:
            spark, workers = _session(master, pipeline.ARROW_BATCH_ROWS)
            try:
                read, propagate, iterations, components = label_propagation(spark, path, workers, limits.get(path.name))
            except Exception as error:  # noqa: BLE001 - the baseline failing is reported, not fatal
                row["label propagation"] = {"error": _first_line(error)}
            else:
                row["label propagation"] = {
                    "read": read,
                    "propagate": propagate,
                    "iterations": iterations,
                    "converged": bool(components),
                }
            finally:
                spark.stop()
        results[path.name] = row
    return results


def _first_line(error: BaseException) -> str:
    """What failed, in a line: Spark's own error class when the message names one (e.g. an out-of-memory)."""
    text = str(error)
    for marker in ("SparkOutOfMemoryError", "OutOfMemoryError"):
        at = text.find(marker)
        if at >= 0:
            return text[at:].splitlines()[0][:300]
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"[:300]


def _session(master: str, arrow_rows: int) -> tuple[Any, int]:
    """A fresh session for one measurement, and its parallelism.

    Every measurement gets its own: the checkpoints of one stay in the
    executors' memory until the session stops, and at 5 M edges those of the
    flagship left PySpark's label propagation in the same session unable to
    acquire memory for its aggregation (``SparkOutOfMemoryError``).
    """
    spark = start_spark(master)
    workers = int(spark.sparkContext.defaultParallelism)
    spark.conf.set("spark.sql.shuffle.partitions", str(workers))
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(arrow_rows))
    return spark, workers


FLAGSHIP_TOTAL = ("read", "intern", "pytimely", "name", "summary")
"""The stages whose times make the flagship's total (Spark's start left out)."""
FLAGSHIP_STAGES = ("read", "intern", "pytimely", "tasks start", "dataflow", "hand-over", "name", "summary")
"""Every stage :func:`flagship_stages` times, in order (``tasks start`` to ``hand-over`` split ``pytimely``)."""


def print_flagship(results: dict[str, Any]) -> None:
    """Print :func:`measure_flagship`'s result, one block per graph."""
    for name, row in results.items():
        stages = row["flagship"]
        print(f"{name}: {stages['edges']:,.0f} edges, {stages['nodes']:,.0f} packages")
        for stage in FLAGSHIP_STAGES:
            print(f"  {stages[stage]:7.2f} s  flagship: {stage}")
        print(f"  {row['flagship total']:7.2f} s  flagship total (without Spark's start)")
        rss = stages["peak task RSS"]
        per_edge = rss / (stages["edges"] / stages["workers"])
        print(f"  peak task RSS {rss / 1e6:,.0f} MB, {per_edge:,.0f} bytes per edge of the task's share")
        alone = row["alone"]
        print(
            f"  {alone['read']:7.2f} s + {alone['intern']:.2f} s + {alone['dataflow']:.2f} s  without Spark "
            f"(read, intern, dataflow on 1 worker)"
        )
        print(f"  flagship / without Spark: {row['ratio']:.2f}x")
        if "label propagation" in row:
            lp = row["label propagation"]
            if "error" in lp:
                print(f"  PySpark label propagation failed: {lp['error']}")
                continue
            status = "to the fixed point" if lp["converged"] else "stopped before the fixed point"
            print(
                f"  {lp['read']:7.2f} s + {lp['propagate']:.2f} s  PySpark label propagation (read, propagate: "
                f"{lp['iterations']} iterations, {status})"
            )


BASELINE_ITERATIONS = 3
"""Label propagation's iterations at 5 M edges in ``make bench`` (to the fixed point it took about 200 s)."""


def bench(size: Size, log: Log) -> dict[str, Metric]:
    """The workload for ``run.py``: :func:`measure_flagship` once at the Debian graph and at 5 M edges (left out
    of ``--quick``): the pytimely stage beyond its dataflow, the whole flagship against the dataflow without
    Spark, their stages, and PySpark's label propagation on the Debian graph."""
    if size.quick:
        raise Skip("left out of --quick (Spark takes minutes)")
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise Skip("pyspark is not installed (`make bench` installs it)") from None
    warnings.filterwarnings("ignore", category=FutureWarning)
    log("  the flagship at the Debian graph and at 5 M edges ...")
    big = synthetic_graph(SYNTHETIC_PATH)
    results = measure_flagship([DEFAULT_INPUT, big], "local[2]", True, {big.name: BASELINE_ITERATIONS})
    found: dict[str, Metric] = {}
    for key, name in (("debian", DEFAULT_INPUT.name), ("big", big.name)):
        row = results[name]
        stages, alone = row["flagship"], row["alone"]
        for stage in FLAGSHIP_STAGES:
            found[f"{key}_{stage.replace(' ', '_').replace('-', '_')}"] = Metric(stages[stage], "s", f"{name}: {stage}")
        found[f"{key}_extra"] = Metric(stages["pytimely"] - stages["dataflow"], "s", f"{name}: stage beyond dataflow")
        found[f"{key}_total"] = Metric(row["flagship total"], "s", f"{name}: the whole flagship")
        without = alone["read"] + alone["intern"] + alone["dataflow"]
        found[f"{key}_alone"] = Metric(without, "s", f"{name}: read, intern and dataflow without Spark")
        propagation = row.get("label propagation", {})
        if "read" in propagation and propagation["converged"]:
            seconds = propagation["read"] + propagation["propagate"]
            found[f"{key}_label_propagation"] = Metric(seconds, "s", f"{name}: PySpark label propagation")
    return found


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--master", default="local[*]", help="any Spark master (default local[*])")
    parser.add_argument(
        "--input",
        type=Path,
        default=None,
        help="the graph (default: the Debian graph; with --flagship, it and the 5 M-edge graph)",
    )
    parser.add_argument("--partitions", type=int, default=None, help="default: the cluster's slots")
    parser.add_argument("--flagship", action="store_true", help="the flagship stage by stage (measure_flagship)")
    parser.add_argument("--no-baseline", action="store_true", help="with --flagship: skip label propagation")
    parser.add_argument(
        "--baseline-iterations",
        type=int,
        default=None,
        help="with --flagship: stop label propagation on the 5 M-edge graph after this many iterations",
    )
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)
    if args.flagship:
        paths = None if args.input is None else [args.input]
        limits = {SYNTHETIC_PATH.name: args.baseline_iterations} if args.baseline_iterations else None
        print_flagship(measure_flagship(paths, args.master, not args.no_baseline, limits))
        return 0

    path = args.input or DEFAULT_INPUT
    start = time.perf_counter()
    spark = start_spark(args.master)
    partitions = args.partitions or spark.sparkContext.defaultParallelism
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    started = time.perf_counter() - start

    read, propagate, iterations, components = label_propagation(spark, path, partitions)
    print(f"PySpark label propagation on {path.name}, master {args.master}, {partitions} partitions")
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
