"""The flagship pipeline: Spark reads Debian's dependency graph, pytimely finds its cycles, Spark writes Parquet.

Run ``.venv/bin/python examples/pipeline.py`` (``make demo``).  Columnar end to end, in
four stages:

1. **Spark reads the edges** of ``examples/data/debian-bookworm-depends.tsv.gz``
   (``package<TAB>dependency``, 274,855 edges) into ``N`` partitions
   (:func:`read_edges`: a plain file in ``N`` byte ranges, without a shuffle).
2. **Spark interns the names** (:func:`intern_names`): the distinct package
   names get dense ``int`` ids in the names' order (sorted by range in every
   task, each partition's ids offset by the names before it), and the edges
   are joined to them, giving ``(src, dst)`` ids in ``N`` partitions (``N`` =
   the cluster's task slots, or ``--workers``).  While Spark joins,
   :func:`runtime.spark.warm_up` starts the Python workers that the next
   stage's tasks run in.
3. **pytimely computes, across the ``N`` Spark tasks**, with
   :func:`runtime.spark.run_dataflow` (each task one pytimely process of a TCP
   mesh, gang-scheduled in barrier mode, ``columnar=True``): each Arrow batch
   Spark hands over is one message, turned into a NumPy edge array column by
   column (:func:`edge_array`), and every batch after that is a NumPy array:

   * the strongly connected components (the dependency cycles) with
     :func:`scc_columnar.scc_edges`, forward-backward colouring in a loop
     nested in a loop;
   * the weakly connected components with
     :func:`connected_components_columnar.weak_labels`, label propagation over
     the edges in both directions;

   the SCC's members are counted per component (:func:`cycle_members`) and
   joined per node with the WCC labels (:func:`join_components`), which emits
   Arrow batches ``(id, scc, scc_size, wcc)`` built from the NumPy columns.
4. **Spark joins the ids back to names** (:func:`name_components`) **and writes
   Parquet**: one row per package with its SCC (the smallest package of its
   cycle, itself when it is on none), the SCC's size, and its WCC (the
   smallest package of its weakly connected component).  Since the ids follow
   the names' order, the smallest id is the smallest name.

A rich display shows the stage, the SCC rounds and records per second while it
works; the summary, computed by Spark (:func:`summarize_in_spark`, nothing
but a few rows reaches the driver), lists the largest cycles with their sizes
and first members, the largest weakly connected components, and the time of
each stage.
:func:`find_components` does stages 2 to 4 on any DataFrame of edges.

``--master`` takes any Spark master: ``local[*]`` (the default, embedded),
``local-cluster[2,1,1024]`` (two separate executor JVMs), or
``spark://HOST:7077``.  ``--log FILE`` asks every task to write an
instrumentation log (``FILE`` becomes ``STEM.i.SUFFIX`` for task ``i``), from
which ``--svg`` draws the dataflow diagram with its final frontiers; both need
``runtime.instrument`` and ``viz``.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import subprocess
import sys
import threading
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = Path(__file__).resolve().parent
for entry in (ROOT, EXAMPLES):
    if str(entry) not in sys.path:  # run from a checkout without installing pytimely
        sys.path.insert(0, str(entry))

import connected_components_columnar  # noqa: E402
import numpy as np  # noqa: E402
import scc  # noqa: E402
import scc_columnar  # noqa: E402
from connected_components_columnar import EDGE, OFFER, concat_arrays, emit, owner, weak_labels  # noqa: E402
from scc_columnar import REVERSED, scc_edges  # noqa: E402

from runtime.spark import current_task, run_dataflow, spark_session, warm_up  # noqa: E402
from scopes import Notificator, OperatorInput, OperatorOutput, ScopeBuilder, Stream  # noqa: E402
from scopes.channels import ExchangeBatch  # noqa: E402

DEFAULT_INPUT = ROOT / "examples" / "data" / "debian-bookworm-depends.tsv.gz"
EDGE_SCHEMA = "package string, dependency string"
OUTPUT_SCHEMA = "package string, scc string, scc_size int, wcc string"
"""The Parquet's columns: the package, its SCC and WCC named by their smallest package, and the SCC's size."""
ID_OUTPUT_SCHEMA = "id int, scc int, scc_size int, wcc int"
"""What the dataflow returns: :data:`OUTPUT_SCHEMA` with package ids for names."""
MEMBER = np.dtype([("node", np.int32), ("scc", np.int32), ("scc_size", np.int32)])
"""A node of a strongly connected component of 2+ nodes: ``(node, smallest node of the SCC, SCC size)``."""
REPORT_PERIOD = 0.5
"""Seconds between two progress reports of a task."""
ARROW_BATCH_ROWS = 65_536
"""Rows per Arrow batch that Spark hands the dataflow (``spark.sql.execution.arrow.maxRecordsPerBatch``).

Spark's default, 10,000, makes 250 messages per task at 5 M edges, each one
NumPy conversion and one pass of the loops' operators; 65,536 makes 39."""


# ---------------------------------------------------------------------- Spark: names to ids and back


def read_edges(spark: Any, path: Path, partitions: int) -> Any:
    """Spark reads the TSV of edges at ``path`` into ``partitions`` partitions, computed (checkpointed).

    A plain file is split into ``partitions`` byte ranges as it is read
    (``spark.sql.files.maxPartitionBytes``), so every task parses its share
    and no shuffle follows; a gzip file, which Spark cannot split, is read by
    one task and then spread over ``partitions``.
    """
    setting = "spark.sql.files.maxPartitionBytes"
    before = spark.conf.get(setting)
    spark.conf.set(setting, str(max(1, -(-path.stat().st_size // partitions))))
    try:
        edges = spark.read.csv(str(path), sep="\t", schema=EDGE_SCHEMA)
        if edges.rdd.getNumPartitions() != partitions:
            edges = edges.repartition(partitions)
        return edges.localCheckpoint(eager=True)  # the joins of intern_names keep these partitions
    finally:
        spark.conf.set(setting, before)


def intern_names(edges: Any, partitions: int | None = None) -> tuple[Any, Any]:
    """Spark interns the package names: ``(ids, id_edges)``; ``ids`` is computed, ``id_edges`` lazy.

    ``ids`` has a row ``(name, id)`` per package, the ids dense (``0 .. n - 1``)
    and in the names' order, so that the smallest id of a component is its
    smallest package.  Every task does its share: the distinct names are range
    partitioned and sorted within each partition (``partitions`` of them, by
    default the edges' partitions), each row's position in its partition
    comes from ``monotonically_increasing_id``, and a partition's offset is
    the number of names in the partitions before it (one small count per
    partition).  Spark compares strings by their UTF-8 bytes, which is
    Python's order of code points.  ``id_edges`` are the edges as ``(src,
    dst)`` ints, joined to a broadcast of ``ids``; edges with a missing end
    are dropped.
    """
    from pyspark.sql import functions as F

    edges = edges.where(F.col("package").isNotNull() & F.col("dependency").isNotNull())
    names = edges.select(F.col("package").alias("name")).union(edges.select(F.col("dependency").alias("name")))
    parts = partitions or edges.rdd.getNumPartitions()
    ranked = (
        names.distinct()
        .repartitionByRange(parts, "name")
        .sortWithinPartitions("name")
        .select("name", F.spark_partition_id().alias("part"), F.monotonically_increasing_id().alias("position"))
        .localCheckpoint(eager=True)
    )
    counts = dict(ranked.groupBy("part").count().collect())
    offsets, total = [], 0
    for part in range(max(counts, default=-1) + 1):
        offsets.append(total)
        total += counts.get(part, 0)
    offset = F.element_at(F.array(*[F.lit(value) for value in offsets or [0]]), F.col("part") + 1)
    local = F.col("position") - F.shiftleft(F.col("part").cast("long"), 33)  # the row's index in its partition
    ids = ranked.select("name", (offset + local).cast("int").alias("id")).localCheckpoint(eager=True)
    sources = F.broadcast(ids.select(F.col("name").alias("package"), F.col("id").alias("src")))
    targets = F.broadcast(ids.select(F.col("name").alias("dependency"), F.col("id").alias("dst")))
    return ids, edges.join(sources, "package").join(targets, "dependency").select("src", "dst")


def name_components(rows: Any, ids: Any) -> Any:
    """Spark joins the ids of the dataflow's rows (:data:`ID_OUTPUT_SCHEMA`) back to names (:data:`OUTPUT_SCHEMA`)."""
    from pyspark.sql import functions as F

    def named(id_column: str, name_column: str) -> Any:
        return F.broadcast(ids.select(F.col("id").alias(id_column), F.col("name").alias(name_column)))

    return (
        rows.join(named("id", "package"), "id")
        .join(named("scc", "scc_name"), "scc")
        .join(named("wcc", "wcc_name"), "wcc")
        .select("package", F.col("scc_name").alias("scc"), "scc_size", F.col("wcc_name").alias("wcc"))
    )


# ---------------------------------------------------------------------- the dataflow (runs in every task)


class _Reporter:
    """Counts what flows through the dataflow of one task and reports it to the driver now and then."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = defaultdict(int)
        self.round = 0
        self.last = 0.0

    def add(self, what: str, records: int) -> None:
        self.counts[what] += records
        now = time.monotonic()
        if now - self.last >= REPORT_PERIOD:
            self.flush(now)

    def flush(self, now: float | None = None) -> None:
        self.last = time.monotonic() if now is None else now
        task = current_task()
        if task is not None:
            task.report("counts", round=self.round, **self.counts)


def edge_array(batch: Any) -> np.ndarray:
    """An :data:`~connected_components_columnar.EDGE` array of an Arrow batch ``(src, dst)`` of ints.

    ``batch`` is one Arrow batch (``columnar=True``), its columns go to NumPy
    without a Python call per row; or a list of ``(src, dst)`` rows (row mode).
    """
    if batch.__class__ is list:
        return np.array(batch, dtype=EDGE) if batch else np.empty(0, EDGE)
    edges = np.empty(batch.num_rows, EDGE)
    edges["src"] = batch.column(0).to_numpy()
    edges["dst"] = batch.column(1).to_numpy()
    return edges


def _by_time(waiting: dict[Any, list[np.ndarray]], source: OperatorInput, notificator: Notificator) -> None:
    """File ``source``'s batches by time, asking for one notification per new time."""
    for ref, batch in source:
        parts = waiting.get(ref.time)
        if parts is None:
            parts = waiting[ref.time] = []
            notificator.notify_at(ref.retain())
        parts.append(batch)  # type: ignore[arg-type]


def cycle_members(inside: Stream) -> Stream:
    """:data:`MEMBER` rows ``(node, scc, scc_size)`` for every node of a strongly connected component of 2+ nodes.

    ``inside`` carries the :data:`~scc_columnar.REVERSED` edges inside the
    components, labelled with the component's smallest node.  They are
    exchanged by label, so each component's edges meet on one worker, which
    counts its nodes (every node of a cycle leads an edge inside it).
    """
    waiting: dict[Any, list[np.ndarray]] = {}

    def logic(input: OperatorInput, output: OperatorOutput, notificator: Notificator) -> None:
        _by_time(waiting, input, notificator)
        for capability in notificator:
            edges = concat_arrays(waiting.pop(capability.time, []), REVERSED)
            nodes, first = np.unique(edges["src"], return_index=True)
            labels = edges["label"][first]
            _, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
            members = np.empty(len(nodes), MEMBER)
            members["node"] = nodes
            members["scc"] = labels
            members["scc_size"] = counts[inverse]
            emit(output, capability, members)

    return inside.unary_notify(ExchangeBatch("label"), "CycleMembers", logic)


def join_components(members: Stream, weak: Stream, nodes: int) -> Stream:
    """Arrow batches ``(id, scc, scc_size, wcc)``: a row per node with a WCC label, once both inputs are complete.

    A node that is in no :data:`MEMBER` row is a component of its own
    (``scc`` is itself, ``scc_size`` 1).  Both inputs are exchanged by node;
    the rows leave built from NumPy columns.
    """
    import pyarrow as pa

    scope = members.scope
    peers, index = scope.peers, scope.index
    owned = owner(index, peers, nodes)
    cycles: dict[Any, list[np.ndarray]] = {}
    labels: dict[Any, list[np.ndarray]] = {}

    def logic(
        cycle_input: OperatorInput, label_input: OperatorInput, output: OperatorOutput, notificator: Notificator
    ) -> None:
        _by_time(cycles, cycle_input, notificator)
        _by_time(labels, label_input, notificator)
        for capability in notificator:
            found = concat_arrays(cycles.pop(capability.time, []), MEMBER)
            weak_rows = concat_arrays(labels.pop(capability.time, []), OFFER)
            scc_of = np.arange(owned, dtype=np.int32) * peers + index
            size_of = np.ones(owned, np.int32)
            scc_of[found["node"] // peers] = found["scc"]
            size_of[found["node"] // peers] = found["scc_size"]
            local = weak_rows["node"] // peers
            batch = pa.RecordBatch.from_arrays(
                [
                    pa.array(weak_rows["node"]),
                    pa.array(scc_of[local]),
                    pa.array(size_of[local]),
                    pa.array(weak_rows["label"]),
                ],
                names=["id", "scc", "scc_size", "wcc"],
            )
            if batch.num_rows:
                output.session(capability).give_batch(batch)

    return members.binary_notify(weak, ExchangeBatch("node"), ExchangeBatch("node"), "JoinComponents", logic)


def components_dataflow(scope: ScopeBuilder, batches: Stream, nodes: int) -> Stream:
    """The pipeline's dataflow: Arrow batches of ``(src, dst)`` ids in, Arrow batches of a row per node out.

    ``nodes`` bounds the ids (``0 .. nodes - 1``); pass it with
    ``functools.partial`` to :func:`runtime.spark.run_dataflow`.  ``batches``
    carries one Arrow batch per message (``columnar=True``) or lists of
    ``(src, dst)`` rows (row mode); both work.  Every batch inside is a NumPy array: the SCC of
    :func:`scc_columnar.scc_edges` and the WCC of
    :func:`connected_components_columnar.weak_labels`, joined per node.
    """
    reporter = _Reporter()

    def count_round(time: Any, batch: list[int]) -> None:
        reporter.round = max(reporter.round, time.inner)
        reporter.add("scc_edges", sum(batch))

    edges = batches.map_batch(edge_array, name="ArrowToEdges")
    edges = edges.inspect_batch(lambda _time, batch: reporter.add("edges_read", len(batch)), name="CountEdges")
    inside = scc_edges(edges.exchange_batch("src", name="BySource"), nodes, count_round)
    weak = weak_labels(edges, nodes).inspect_batch(
        lambda _time, batch: reporter.add("wcc_labels", len(batch)), name="CountLabels"
    )
    rows = join_components(cycle_members(inside), weak, nodes)
    return rows.inspect_batch(lambda _time, batch: (reporter.add("rows", len(batch)), reporter.flush()), name="Done")


def find_components(edges: Any, workers: int | None = None, **options: Any) -> Any:
    """The whole computation on a DataFrame of ``(package, dependency)`` edges: a DataFrame of :data:`OUTPUT_SCHEMA`.

    Spark interns the names, pytimely runs :func:`components_dataflow` on
    ``workers`` tasks (``options`` go to :func:`runtime.spark.run_dataflow`),
    and Spark names the result.
    """
    ids, id_edges = intern_names(edges)
    build = functools.partial(components_dataflow, nodes=ids.count())
    rows = run_dataflow(id_edges, build, ID_OUTPUT_SCHEMA, workers=workers, columnar=True, **options)
    return name_components(rows, ids)


# ---------------------------------------------------------------------- the driver: display


class Display:
    """What the rich display shows: stages with their times, and the dataflow's live counts."""

    def __init__(self) -> None:
        self.stages: list[tuple[str, float | None]] = []
        self.started: float | None = None
        self.counts: dict[int, dict[str, int]] = {}
        self.rounds: dict[int, int] = {}
        self.attempt = 0
        self.dataflow_started: float | None = None
        self.lock = threading.Lock()

    def begin(self, stage: str) -> None:
        with self.lock:
            self.stages.append((stage, None))
            self.started = time.perf_counter()

    def end(self) -> float:
        with self.lock:
            name, _ = self.stages[-1]
            elapsed = time.perf_counter() - (self.started or 0.0)
            self.stages[-1] = (name, elapsed)
            return elapsed

    def on_progress(self, event: dict[str, Any]) -> None:
        with self.lock:
            if event.get("attempt", 0) != self.attempt:
                return
            if event["event"] == "joined" and self.dataflow_started is None:
                self.dataflow_started = time.perf_counter()
            if event["event"] == "counts":
                task = int(event["task"])
                self.rounds[task] = int(event.get("round", 0))
                self.counts[task] = {
                    key: int(value) for key, value in event.items() if key not in ("event", "task", "attempt", "at")
                }

    def on_attempt(self, attempt: int, failure: str | None) -> None:
        with self.lock:
            self.attempt = attempt
            self.counts.clear()
            self.rounds.clear()
            self.dataflow_started = None

    def render(self) -> Any:
        from rich.table import Table

        with self.lock:
            table = Table(title="Debian dependency graph: Spark + pytimely", expand=False)
            table.add_column("stage")
            table.add_column("time", justify="right")
            table.add_column("progress")
            for name, elapsed in self.stages:
                running = elapsed is None
                shown = time.perf_counter() - (self.started or 0.0) if running else elapsed
                detail = ""
                if running and name.startswith("pytimely"):
                    detail = self._dataflow_detail()
                marker = "[yellow]…[/yellow] " if running else "[green]✓[/green] "
                table.add_row(marker + name, f"{shown:5.1f} s", detail)
            return table

    def _dataflow_detail(self) -> str:
        totals: dict[str, int] = defaultdict(int)
        for counts in self.counts.values():
            for key, value in counts.items():
                totals[key] += value
        if not self.counts:
            return f"attempt {self.attempt + 1}: starting {len(self.counts) or ''} task(s)…"
        elapsed = time.perf_counter() - (self.dataflow_started or time.perf_counter())
        records = sum(totals.values())
        rate = records / elapsed if elapsed > 0 else 0.0
        outer = max(self.rounds.values(), default=0)
        return (
            f"tasks {len(self.counts)} · SCC outer round {outer} · edges read {totals['edges_read']:,} · "
            f"SCC edges {totals['scc_edges']:,} · WCC labels {totals['wcc_labels']:,} · "
            f"rows {totals['rows']:,} · {rate:,.0f} records/s"
        )


# ---------------------------------------------------------------------- the driver: stages


def summarize(table: Any, top: int) -> tuple[list[tuple[str, list[str]]], list[tuple[str, int]], int]:
    """Cycles (label, sorted members) largest first, the ``top`` largest WCCs, and the package count."""
    members: dict[str, list[str]] = defaultdict(list)
    weak: dict[str, int] = defaultdict(int)
    packages = table.column("package").to_pylist()
    for package, label, size, wcc in zip(
        packages,
        table.column("scc").to_pylist(),
        table.column("scc_size").to_pylist(),
        table.column("wcc").to_pylist(),
        strict=True,
    ):
        if size > 1:
            members[label].append(package)
        weak[wcc] += 1
    cycles = sorted(((label, sorted(nodes)) for label, nodes in members.items()), key=lambda c: (-len(c[1]), c[0]))
    largest = sorted(weak.items(), key=lambda item: (-item[1], item[0]))[:top]
    return cycles, largest, len(packages)


SHOWN_MEMBERS = 8
"""Members of a cycle that the summary names (the smallest ones)."""
SHOWN_CYCLES = 20
"""Cycles that the summary lists (the largest ones)."""


def summarize_in_spark(
    result: Any, top: int, cycles_shown: int = SHOWN_CYCLES, members_shown: int = SHOWN_MEMBERS
) -> dict[str, Any]:
    """The summary of :data:`OUTPUT_SCHEMA` rows, computed by Spark: only the listed rows reach the driver.

    Returns ``packages``, ``cycles`` (the number of SCCs of 2+ packages),
    ``in_cycles`` (packages on one), ``largest_cycles`` (``(label, size,
    smallest members)``, largest first, at most ``cycles_shown``), ``wccs``
    and ``largest_wccs`` (``(label, size)``, the ``top`` largest).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    sizes = result.where(F.col("scc_size") > 1).groupBy("scc").agg(F.count("*").alias("size"))
    totals = sizes.agg(F.count("*").alias("cycles"), F.sum("size").alias("in_cycles")).first()
    listed = sizes.orderBy(F.desc("size"), "scc").limit(cycles_shown).collect()
    labels = [row["scc"] for row in listed]
    first = (
        result.where(F.col("scc").isin(labels))
        .withColumn("rank", F.row_number().over(Window.partitionBy("scc").orderBy("package")))
        .where(F.col("rank") <= members_shown)
        .select("scc", "package", "rank")
        .collect()
    )
    members: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for row in first:
        members[row["scc"]].append((row["rank"], row["package"]))
    weak = result.groupBy("wcc").agg(F.count("*").alias("size"))
    largest_weak = weak.orderBy(F.desc("size"), "wcc").limit(top).collect()
    return {
        "packages": result.count(),
        "cycles": int(totals["cycles"] or 0),
        "in_cycles": int(totals["in_cycles"] or 0),
        "largest_cycles": [
            (row["scc"], int(row["size"]), [name for _, name in sorted(members[row["scc"]])]) for row in listed
        ],
        "wccs": weak.count(),
        "largest_wccs": [(row["wcc"], int(row["size"])) for row in largest_weak],
    }


def check_with_networkx(path: Path, cycles: list[tuple[str, list[str]]], table: Any) -> str:
    """Compare the cycles and the weakly connected components with networkx's."""
    try:
        import networkx as nx
    except ImportError:
        return "check against networkx: skipped (pip install networkx)"
    graph = nx.DiGraph()
    graph.add_edges_from(scc.read_edges(path))
    expected_scc = {frozenset(c) for c in nx.strongly_connected_components(graph) if len(c) > 1}
    expected_wcc = {min(c): len(c) for c in nx.weakly_connected_components(graph)}
    found_wcc: dict[str, int] = defaultdict(int)
    for label in table.column("wcc").to_pylist():
        found_wcc[label] += 1
    ok_scc = expected_scc == {frozenset(nodes) for _, nodes in cycles}
    ok_wcc = expected_wcc == dict(found_wcc)
    return (
        f"check against networkx: strongly connected components {'OK' if ok_scc else 'MISMATCH'}, "
        f"weakly connected components {'OK' if ok_wcc else 'MISMATCH'}"
    )


def write_diagram(log: str, svg: Path) -> str:
    """Draw the dataflow diagram from the tasks' logs with ``python -m viz dot``, when viz can."""
    if importlib.util.find_spec("runtime.instrument") is None:
        return "diagram: skipped (runtime.instrument is not in this build of pytimely)"
    stem, suffix = Path(log).stem, Path(log).suffix
    logs = sorted(str(path) for path in Path(log).parent.glob(f"{stem}.*{suffix}")) or [log]
    command = [sys.executable, "-m", "viz", "dot", *logs, "-o", str(svg)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0:
        return f"diagram: {' '.join(command[1:])} failed: {result.stderr.strip()[-300:]}"
    replay = f"{python_command()} -m viz tui --replay {' '.join(logs)}"
    return f"diagram: {svg} (logs: {', '.join(logs)}; replay with {replay})"


def python_command() -> str:
    """How to run this Python from the project's directory: ``.venv/bin/python`` under ``make demo``."""
    interpreter = Path(sys.executable)
    try:
        return str(interpreter.relative_to(ROOT))
    except ValueError:
        return str(interpreter)


def ship_by_value(cloudpickle: Any) -> None:
    """Make Spark ship this module and the examples it reuses by value: tasks cannot import them by name."""
    for module in (sys.modules[__name__], scc, connected_components_columnar, scc_columnar):
        if module.__name__ != "__main__":
            cloudpickle.register_pickle_by_value(module)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--master", default="local[*]", help="any Spark master (default local[*])")
    parser.add_argument("--workers", type=int, default=None, help="Spark tasks = pytimely workers (default: slots)")
    parser.add_argument("--input", type=Path, default=DEFAULT_INPUT, help="gzip TSV of package<TAB>dependency")
    parser.add_argument("--output", type=Path, default=Path("output"), help="directory for Parquet, log and SVG")
    parser.add_argument("--retries", type=int, default=2, help="attempts after a failed one (default 2)")
    parser.add_argument("--log", default=None, help="instrumentation log for every task (FILE or tcp://HOST:PORT)")
    parser.add_argument("--svg", type=Path, default=None, help="dataflow diagram from the log (needs --log)")
    parser.add_argument("--top", type=int, default=5, help="how many weakly connected components to list")
    parser.add_argument("--check", action="store_true", help="compare with networkx (which must be installed)")
    args = parser.parse_args(argv)
    if not args.input.exists():
        parser.error(f"{args.input} does not exist (rebuild it with examples/data/rebuild_graph.py)")

    from pyspark import cloudpickle
    from rich.console import Console
    from rich.live import Live

    warnings.filterwarnings("ignore", category=FutureWarning)
    # The tasks cannot import the example modules by name: ship them by value.
    ship_by_value(cloudpickle)

    console = Console()
    display = Display()
    args.output.mkdir(parents=True, exist_ok=True)
    parquet = args.output / "components.parquet"
    total_start = time.perf_counter()
    with Live(display.render(), console=console, refresh_per_second=4, transient=False) as live:
        ticker = threading.Event()

        def refresh() -> None:
            while not ticker.wait(0.25):
                live.update(display.render())

        thread = threading.Thread(target=refresh, daemon=True)
        thread.start()
        try:
            display.begin(f"Spark starts ({args.master})")
            spark = spark_session(
                args.master,
                "pytimely pipeline",
                {
                    "spark.ui.showConsoleProgress": "false",
                    "spark.ui.enabled": "false",
                    "spark.sql.shuffle.partitions": "4",
                    "spark.driver.memory": "2g",  # 1g can fail the 5 M-edge graph's distinct names
                    "spark.sql.execution.arrow.maxRecordsPerBatch": str(ARROW_BATCH_ROWS),
                },
            )
            spark.sparkContext.setLogLevel("ERROR")
            display.end()

            workers = args.workers or spark.sparkContext.defaultParallelism
            display.begin(f"Spark reads the edges ({workers} partitions)")
            edges = read_edges(spark, args.input, workers)
            edge_count = edges.count()
            display.end()

            display.begin("Spark interns the names to int ids")
            ids, id_edges = intern_names(edges)
            warm_up(spark, workers)  # the dataflow's Python workers start while Spark joins
            id_edges = id_edges.localCheckpoint(eager=True)
            nodes = ids.count()
            display.end()

            display.begin(f"pytimely: SCC + WCC on {workers} Spark task(s)")
            rows = run_dataflow(
                id_edges,
                functools.partial(components_dataflow, nodes=nodes),
                ID_OUTPUT_SCHEMA,
                workers=workers,
                retries=args.retries,
                on_progress=display.on_progress,
                on_attempt=display.on_attempt,
                name="debian components",
                columnar=True,
                log=str((args.output / args.log).resolve()) if args.log and "://" not in args.log else args.log,
            )
            display.end()

            display.begin("Spark joins the ids to names, writes Parquet")
            result = name_components(rows, ids).localCheckpoint(eager=True)
            result.write.mode("overwrite").parquet(str(parquet))
            display.end()

            display.begin("summary (Spark)")
            summary = summarize_in_spark(result, args.top)
            display.end()
            check = None
            if args.check:
                display.begin("check against networkx (collects the result)")
                table = result.toArrow()
                check = check_with_networkx(args.input, summarize(table, args.top)[0], table)
                display.end()
        finally:
            ticker.set()
            thread.join()
            live.update(display.render())
    elapsed = time.perf_counter() - total_start

    console.print(f"\n[bold]{edge_count:,} edges between {summary['packages']:,} packages[/bold]; Parquet: {parquet}")
    console.print(
        f"[bold]{summary['cycles']:,} dependency cycles[/bold] (strongly connected components of 2+ packages, "
        f"{summary['in_cycles']:,} packages in all); the largest:"
    )
    for number, (_label, size, nodes) in enumerate(summary["largest_cycles"], 1):
        more = f", … ({size - len(nodes):,} more)" if size > len(nodes) else ""
        console.print(f"  {number:2}. size {size:,}: {', '.join(nodes)}{more}", highlight=False)
    console.print(f"[bold]largest weakly connected components[/bold] (of {summary['wccs']:,}):")
    for label, size in summary["largest_wccs"]:
        console.print(f"  {size:9,} packages, smallest: {label}", highlight=False)
    console.print("[bold]time per stage[/bold]:")
    for name, seconds in display.stages:
        console.print(f"  {seconds or 0.0:6.1f} s  {name}", highlight=False)
    console.print(f"  {elapsed:6.1f} s  total (Spark's start included)", highlight=False)
    if args.log and args.svg:
        console.print(write_diagram(str(args.output / args.log), args.output / args.svg), highlight=False)
    if check is not None:
        console.print(check, highlight=False)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
