"""The flagship pipeline: Spark reads Debian's dependency graph, pytimely finds its cycles, Spark writes Parquet.

Run ``python examples/pipeline.py`` (``make demo``).  Three stages, end to end:

1. **Spark reads the edges** of ``examples/data/debian-bookworm-depends.tsv.gz``
   (``package<TAB>dependency``, 274,855 edges) into a DataFrame of ``N``
   partitions (``N`` = the cluster's task slots, or ``--workers``).
2. **pytimely computes, across the ``N`` Spark tasks**, with
   :func:`runtime.spark.run_dataflow` (each task one pytimely process of a TCP
   mesh, gang-scheduled in barrier mode, ``columnar=True``: each Arrow batch
   Spark reads is one message, turned into edge records by one call per batch,
   and the result leaves as Arrow batches that go to Spark as they are):

   * the strongly connected components (the dependency cycles), with the loop
     nested in a loop of ``examples/scc.py``;
   * the weakly connected components: the label propagation of
     ``examples/scc.py`` (the idea of ``examples/connected_components.py``, which
     needs integer nodes) over the edges in both directions, nested in a loop;

   and joins both per package.
3. **Spark writes Parquet**: one row per package with its SCC (the smallest
   package of its cycle, itself when it is on none), the SCC's size, and its
   WCC (the smallest package of its weakly connected component).

A rich display shows the stage, the SCC rounds and records per second while it
works; the summary lists every cycle with its size, the members of the
largest, the largest weakly connected components, and the time of each stage.

``--master`` takes any Spark master: ``local[*]`` (the default, embedded),
``local-cluster[2,1,1024]`` (two separate executor JVMs), or
``spark://HOST:7077``.  ``--log FILE`` asks every task to write an
instrumentation log (``FILE`` becomes ``STEM.i.SUFFIX`` for task ``i``), from
which ``--svg`` draws the dataflow diagram with its final frontiers; both need
``runtime.instrument`` and ``viz``.
"""

from __future__ import annotations

import argparse
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

import scc  # noqa: E402

from runtime.spark import current_task, run_dataflow, spark_session  # noqa: E402
from scopes import Exchange, Notificator, OperatorInput, OperatorOutput, ScopeBuilder, Stream  # noqa: E402

DEFAULT_INPUT = ROOT / "examples" / "data" / "debian-bookworm-depends.tsv.gz"
EDGE_SCHEMA = "package string, dependency string"
OUTPUT_SCHEMA = "package string, scc string, scc_size int, wcc string"
REPORT_PERIOD = 0.5
"""Seconds between two progress reports of a task."""


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


def _columns(batch: Any) -> tuple[list[str], list[str]]:
    """The package and dependency columns of a message: one Arrow batch, or a list of them (the row path)."""
    if batch.__class__ is list:
        packages: list[str] = []
        dependencies: list[str] = []
        for record in batch:
            packages += record.column(0).to_pylist()
            dependencies += record.column(1).to_pylist()
        return packages, dependencies
    return batch.column(0).to_pylist(), batch.column(1).to_pylist()


def edge_records(batch: Any) -> list[tuple[str, str]]:
    """The ``(package, dependency)`` records of a message of Arrow batches (one call per batch)."""
    packages, dependencies = _columns(batch)
    return list(zip(packages, dependencies, strict=True))


def both_ways(edges: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A batch of edges, followed by the same edges reversed (one call per batch)."""
    return edges + [(dependency, package) for package, dependency in edges]


def weak_labels(edges: Stream) -> Stream:
    """``(package, smallest package of its weakly connected component)`` for every package on an edge.

    The label propagation of ``examples/scc.py`` over the edges in both
    directions: every node is reached by its whole weakly connected component,
    so its label is the component's smallest node.  ``scc.propagate`` runs in a
    loop scope (it finishes per outer round), so this is a loop nested in a loop.
    """
    undirected = edges.map_batch(both_ways, name="BothWays")

    def body(loop: ScopeBuilder) -> Stream:
        _, labels = scc.propagate(undirected.enter(loop), "WeakLabels")
        return labels.leave()

    return edges.scope.iterative(body, name="Weak")


def join_components(scc_members: Stream, wcc_labels: Stream) -> Stream:
    """``(package, scc, scc size, wcc)`` for every package, once both results are complete."""
    cycles: dict[Any, dict[str, tuple[str, int]]] = {}
    weak: dict[Any, dict[str, str]] = {}

    def logic(
        members: OperatorInput, labels: OperatorInput, output: OperatorOutput, notificator: Notificator
    ) -> None:
        for ref, batch in members:
            table = cycles.get(ref.time)
            if table is None:
                table = cycles[ref.time] = {}
                notificator.notify_at(ref.retain())
            for node, label, size in batch:
                table[node] = (label, size)
        for ref, batch in labels:
            known = weak.get(ref.time)
            if known is None:
                known = weak[ref.time] = {}
                notificator.notify_at(ref.retain())
            known.update(batch)
        for capability in notificator:
            batch = output_batch(cycles.pop(capability.time, {}), weak.pop(capability.time, {}))
            if batch.num_rows:
                output.session(capability).give_batch(batch)

    return scc_members.binary_notify(wcc_labels, Exchange(_node), Exchange(_node), "JoinComponents", logic)


def output_batch(cycles: dict[str, tuple[str, int]], weak: dict[str, str]) -> Any:
    """One Arrow batch of the output schema: a row per package of ``weak``, built column by column."""
    import pyarrow as pa

    nodes = list(weak)
    get = cycles.get
    found = [get(node, (node, 1)) for node in nodes]
    return pa.RecordBatch.from_arrays(
        [
            pa.array(nodes, pa.string()),
            pa.array([label for label, _ in found], pa.string()),
            pa.array([size for _, size in found], pa.int32()),
            pa.array(list(weak.values()), pa.string()),
        ],
        names=["package", "scc", "scc_size", "wcc"],
    )


def _node(record: tuple[Any, ...]) -> Any:
    return record[0]


def components_dataflow(scope: ScopeBuilder, batches: Stream) -> Stream:
    """The pipeline's dataflow: Arrow batches of edges in, Arrow batches of one row per package out.

    ``batches`` carries one Arrow batch per message (``run_dataflow(columnar=True)``)
    or lists of them (the row path); both work.
    """
    reporter = _Reporter()

    def count_round(time: Any, batch: list[Any]) -> None:
        reporter.round = max(reporter.round, time.inner)
        reporter.add("scc_edges", len(batch))

    edges = batches.map_batch(edge_records, name="ArrowToEdges")
    edges = edges.inspect_batch(lambda _time, batch: reporter.add("edges_read", len(batch)), name="CountEdges")

    cycles = scc.group_components(scc.scc_edges(edges, count_round))
    members = cycles.flat_map(
        lambda component: [(node, component[0], len(component[1])) for node in component[1]], name="Members"
    )

    labels = weak_labels(edges).inspect_batch(
        lambda _time, batch: reporter.add("wcc_labels", len(batch)), name="CountLabels"
    )
    rows = join_components(members, labels)
    return rows.inspect_batch(lambda _time, batch: (reporter.add("rows", len(batch)), reporter.flush()), name="Done")


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
    return f"diagram: {svg} (logs: {', '.join(logs)}; replay with python -m viz tui --replay {' '.join(logs)})"


def ship_by_value(cloudpickle: Any) -> None:
    """Make Spark ship this module and the examples it reuses by value: tasks cannot import them by name."""
    for module in (sys.modules[__name__], scc):
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
                    "spark.driver.memory": "1g",
                },
            )
            spark.sparkContext.setLogLevel("ERROR")
            display.end()

            workers = args.workers or spark.sparkContext.defaultParallelism
            display.begin(f"Spark reads the edges ({workers} partitions)")
            edges = spark.read.csv(str(args.input), sep="\t", schema=EDGE_SCHEMA)
            edges = edges.repartition(workers).localCheckpoint(eager=True)
            edge_count = edges.count()
            display.end()

            display.begin(f"pytimely: SCC + WCC on {workers} Spark task(s)")
            result = run_dataflow(
                edges,
                components_dataflow,
                OUTPUT_SCHEMA,
                workers=workers,
                retries=args.retries,
                on_progress=display.on_progress,
                on_attempt=display.on_attempt,
                name="debian components",
                columnar=True,
                log=str((args.output / args.log).resolve()) if args.log and "://" not in args.log else args.log,
            )
            display.end()

            display.begin("Spark writes Parquet")
            result.write.mode("overwrite").parquet(str(parquet))
            display.end()

            display.begin("summary")
            table = result.toArrow()
            cycles, largest, packages = summarize(table, args.top)
            display.end()
        finally:
            ticker.set()
            thread.join()
            live.update(display.render())
    elapsed = time.perf_counter() - total_start

    console.print(f"\n[bold]{edge_count:,} edges between {packages:,} packages[/bold]; Parquet: {parquet}")
    console.print(f"[bold]{len(cycles)} dependency cycles[/bold] (strongly connected components of 2+ packages):")
    for number, (_label, nodes) in enumerate(cycles, 1):
        shown = ", ".join(nodes) if len(nodes) <= 8 else ", ".join(nodes[:8]) + ", …"
        console.print(f"  {number:2}. size {len(nodes)}: {shown}", highlight=False)
    if cycles:
        console.print(f"  largest cycle ({len(cycles[0][1])} packages): {', '.join(cycles[0][1])}", highlight=False)
    console.print(f"[bold]largest weakly connected components[/bold] (of {len(set(table.column('wcc').to_pylist()))}):")
    for label, size in largest:
        console.print(f"  {size:7,} packages, smallest: {label}", highlight=False)
    console.print("[bold]time per stage[/bold]:")
    for name, seconds in display.stages:
        console.print(f"  {seconds or 0.0:6.1f} s  {name}", highlight=False)
    console.print(f"  {elapsed:6.1f} s  total (Spark's start included)", highlight=False)
    if args.log and args.svg:
        console.print(write_diagram(str(args.output / args.log), args.output / args.svg), highlight=False)
    if args.check:
        console.print(check_with_networkx(args.input, cycles, table), highlight=False)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
