"""COST (McSherry, Isard and Murray): how many workers pytimely needs to beat one good thread.

Two parallel jobs, each read from text files that :func:`write_wordcount_text`
and :func:`write_edges` write once per run (fixed seeds):

* **wordcount**: ``epochs`` files of ``lines`` lines of 8 words drawn from 5,000;
  count each epoch's words.  pytimely runs ``benchmarks/cluster.py``'s dataflow
  (record-wise, with a local combiner, or columnar) on P processes of 1 worker;
  the single-threaded program is :func:`wordcount_loop` (one ``Counter`` over
  each epoch's words, the fastest plain-Python form we measured), or
  :func:`wordcount_value_counts` (pyarrow's split and ``value_counts`` in C).
* **WCC**: random directed edges ``src<TAB>dst`` over ``edges // 2`` nodes; the
  weakly connected components.  pytimely runs ``examples/connected_components_cost.py``'s
  dataflow (local components in C, representatives merged in a loop) on P
  processes; the single-threaded program is scipy's
  ``connected_components(..., connection="weak")`` on a CSR matrix (:func:`scipy_wcc`).

Every pytimely worker reads only its own byte range of each file
(:func:`read_share`), so reading splits across processes as the work does.
Every process count runs in new processes, 1 included (``execute_processes``):
a run in the benchmark's own long-lived process would differ from the others
in its heap, its imports and its warm buffers, not in its parallelism.
Each measurement gives two times: **with reading** (the caller's wall time
of the whole job: for pytimely ``execute`` with process start-up, reading,
the dataflow and shutdown) and **without reading** (pytimely: from the end of
an empty warm-up epoch, when every process has read its share and connected,
to the last worker's end; the baselines: the count or the CSR build and the
algorithm on data already in memory).  ``goals.toml``'s COST lines turn the times
into the COST answer.
"""

from __future__ import annotations

import importlib.util
import resource
import sys
import time
from collections import Counter
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _path in (str(ROOT), str(HERE), str(ROOT / "examples")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import ceilings  # noqa: E402
import cluster  # noqa: E402
import connected_components_cost as cost_wcc  # type: ignore[import-not-found]  # noqa: E402
import harness  # noqa: E402
from harness import CallClock, Log, Metric, Size, WrongAnswer, clocked_calls, measured, median  # noqa: E402

from runtime import Worker  # noqa: E402
from runtime.launcher import execute_processes  # noqa: E402
from scopes import ScopeBuilder  # noqa: E402

WORDS_PER_LINE = 8
VOCABULARY = 5_000
SEED = 18
"""The seed of every generated input (issue 18)."""


@dataclass(frozen=True)
class Timing:
    """One run of a job: seconds with reading (wall), without reading, and a check value."""

    with_reading: float
    without_reading: float
    check: int
    """Words counted (wordcount) or components found (WCC): must equal the baseline's."""
    cpu: float = 0.0
    """CPU seconds of the busiest process in the part timed without reading (its threads included)."""
    routing: float | None = None
    """Seconds the busiest process spent routing records among workers (record-wise wordcount only)."""
    kernels: float | None = None
    """Seconds the busiest process spent in the split and count kernels (columnar wordcount only)."""
    exchange: float | None = None
    """Seconds the busiest process spent exchanging partial counts: hashing, splitting and encoding them (columnar
    wordcount only)."""
    merge: float | None = None
    """Of :attr:`kernels`, the seconds spent adding up the partial counts that reach each key's owner (columnar
    wordcount only)."""
    steps: dict[str, float] | None = None
    """Of :attr:`cpu`, the seconds in each step of :data:`WCC_STEPS`, by its label (WCC only)."""
    system: float | None = None
    """Of :attr:`cpu`, the seconds in the kernel (WCC and wordcount): mostly the first touch of fresh memory (see
    :data:`SMALL_PAGES`)."""


SMALL_PAGES = ("NUMPY_MADVISE_HUGEPAGE", "0")
"""The environment variable every pytimely process of this workload (and of its ceilings) starts with: NumPy asks
for no huge pages.  With them, a fresh process's first touch of its large arrays made the kernel compact memory
for a time that varied with the machine's fragmentation, not with the work: on 1 process the WCC took 0.47 to
0.92 s, 0.13 to 0.50 s of it in the kernel, in four runs in a row; with this setting, 0.41 to 0.44 s with
0.06 to 0.07 s in the kernel.  That lottery decided the WCC's and the columnar wordcount's 2-process goals from
one run to the next.  The single-threaded baselines run in the benchmark's own process, its memory warm after
the first repetition, as NumPy sets it by default.  docs/performance.md tells users the trade."""


def small_pages() -> AbstractContextManager[None]:
    """Processes started in the body have :data:`SMALL_PAGES` in their environment (restored afterwards)."""
    return harness.environment(*SMALL_PAGES)


# ---------------------------------------------------------------------------- inputs


def write_wordcount_text(directory: Path, epochs: int, lines: int, seed: int = SEED) -> list[str]:
    """Write ``epochs`` files of ``lines`` lines of :data:`WORDS_PER_LINE` words; return their paths."""
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"word{number}" for number in range(VOCABULARY)], dtype=object)
    paths = []
    for epoch in range(epochs):
        picks = vocabulary[rng.integers(0, VOCABULARY, (lines, WORDS_PER_LINE))].tolist()
        path = directory / f"words{epoch:03d}.txt"
        path.write_text("".join(" ".join(row) + "\n" for row in picks))
        paths.append(str(path))
    return paths


def random_edges(edges: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray, int]:
    """``edges`` random directed edges over ``edges // 2`` nodes (at least 2): ``(src, dst, nodes)``, ``int32``."""
    nodes = max(2, edges // 2)
    rng = np.random.default_rng(seed)
    src = rng.integers(0, nodes, edges, dtype=np.int32)
    dst = rng.integers(0, nodes, edges, dtype=np.int32)
    return src, dst, nodes


def write_edges(path: Path, edges: int, seed: int = SEED) -> int:
    """Write :func:`random_edges` to ``path`` as ``src<TAB>dst`` lines; return the number of nodes."""
    src, dst, nodes = random_edges(edges, seed)
    path.write_text("".join(f"{a}\t{b}\n" for a, b in zip(src.tolist(), dst.tolist(), strict=True)))
    return nodes


def read_share(path: str, index: int, peers: int) -> bytes:
    """The whole lines of ``path`` that start in byte range ``index`` of ``peers`` equal ranges (the example's)."""
    return bytes(cost_wcc.read_share(path, index, peers))


def share_lines(path: str, index: int, peers: int) -> list[str]:
    """The lines of :func:`read_share` as text (what every wordcount form and its ceilings read)."""
    return read_share(path, index, peers).decode().splitlines()


def parse_edges(chunk: bytes) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` ``int32`` columns of ``src<TAB>dst`` lines."""
    if not chunk.strip():
        return np.empty(0, np.int32), np.empty(0, np.int32)
    pairs = np.array(chunk.split(), dtype=np.bytes_).astype(np.int32).reshape(-1, 2)
    return np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1])


# ---------------------------------------------------------------------------- wordcount

WORDCOUNT_VARIANTS = ("record-wise", "combiner", "columnar")


ROUTING_CALLS = (
    ("scopes.exchange", "ExchangePusher", "push"),
    ("scopes.batch_keys", "KeyCheckPusher", "push"),
    ("runtime.communication.process_channels", "", "decode_batch"),
)
"""What routes records among workers: the record-wise exchange (keys, destinations, and the encoding of what leaves
the process), its one-worker form (the key check), and the decoding of what arrives from another process."""


KERNEL_CALLS = (
    ("cluster", "", "split_words"),
    ("scopes.columnar_ops", "", "_reduce"),
)
"""The columnar wordcount's kernels: the split of each batch of lines into words (its ``map_batch`` function), and
Arrow's hash aggregation, which counts each batch where it is and, on several processes, adds up the partial
counts that arrive from the others (``aggregate_batch``).  Everything else the busiest process spends is the
dataflow's: exchanging the partial counts, progress, scheduling."""


EXCHANGE_CALLS = (
    ("scopes.exchange", "ExchangeBatchPusher", "push"),
    ("scopes.exchange", "ExchangeBatchPusher", "flush"),
)
"""The columnar wordcount's exchange of partial counts: each batch's keys hashed and its rows split by destination
(``push``), and each destination's part handed on, encoded for another process (``flush``).  One worker only checks
its keys, elsewhere: this is the work that a second process adds."""

MERGE_CALLS = (("scopes.columnar_ops", "", "combine_partials"),)
"""Where each key's owner adds up the partial counts of one time (a hash aggregation over them, among the kernels);
with one partial, as on 1 process, it returns it as it is."""


CLOCK_LABELS = {"record-wise": ("routing",), "columnar": ("kernels", "exchange", "merge")}
"""The labels each wordcount variant's clock (:func:`routing_clock`, :func:`kernel_clock`) counts under, by variant."""


def routing_clock() -> AbstractContextManager[CallClock | None]:
    """The CPU seconds (``time.thread_time``: a process preempted in a call is not routing) the worker thread spends
    in :data:`ROUTING_CALLS` while the block runs; ``None`` where they cannot be wrapped (a compiled build).  The
    wrappers cost one call per batch, not per record."""
    return calls_clock(("routing", ROUTING_CALLS))


def kernel_clock() -> AbstractContextManager[CallClock | None]:
    """Like :func:`routing_clock`, for :data:`KERNEL_CALLS` (one call per batch), with :data:`EXCHANGE_CALLS` and
    :data:`MERGE_CALLS` under labels of their own."""
    return calls_clock(("kernels", KERNEL_CALLS), ("exchange", EXCHANGE_CALLS), ("merge", MERGE_CALLS))


def calls_clock(*groups: tuple[str, tuple[tuple[str, str, str], ...]]) -> AbstractContextManager[CallClock | None]:
    """The thread CPU seconds spent in each group's calls (``(module, class or "", function)``), under its label."""
    found = []
    for label, calls in groups:
        for module_name, owner, name in calls:
            module = importlib.import_module(module_name)
            found.append((getattr(module, owner) if owner else module, name, label))
    return clocked_calls(found, time.thread_time)


def wordcount_worker(
    worker: Worker, paths: list[str], variant: str
) -> tuple[float, float, int, float, dict[str, float] | None, float]:
    """Read this worker's share of every epoch file, count them; return (start, end, words counted here, CPU s,
    seconds in the clocked calls by label: routing records (record-wise), the kernels, the exchange and the merge
    (columnar), else ``None``; and of the CPU, the seconds in the kernel)."""
    clock = routing_clock() if variant == "record-wise" else kernel_clock() if variant == "columnar" else nullcontext()
    with clock as clocked:
        return _wordcount_worker(worker, paths, variant, clocked)


def _wordcount_worker(
    worker: Worker, paths: list[str], variant: str, clocked: CallClock | None
) -> tuple[float, float, int, float, dict[str, float] | None, float]:
    epochs: list[Any] = []
    for path in paths:
        lines = share_lines(path, worker.index, worker.peers)
        epochs.append(np.array(lines, dtype=str) if variant == "columnar" else lines)
    handle, probe, counted = cluster.wordcount_dataflow(worker, variant == "combiner", variant == "columnar")
    handle.advance_to(1)  # an empty warm-up epoch: every process has read its share and connected
    worker.step_while(lambda: probe.less_than(1))
    start, cpu, system = time.perf_counter(), time.process_time(), _system_seconds()
    for epoch, batch in enumerate(epochs, 1):
        if len(batch):
            handle.send_batch(batch)
        handle.advance_to(epoch + 1)
    if clocked is not None:
        clocked.reset()  # what the warm-up epoch routed is not timed either
    worker.step_while(lambda: probe.less_than(len(epochs) + 1))
    return (
        start,
        time.perf_counter(),
        counted[0],
        time.process_time() - cpu,
        None if clocked is None else {label: clocked.seconds(label) for label in CLOCK_LABELS[variant]},
        _system_seconds() - system,
    )


def wordcount(paths: list[str], variant: str, processes: int) -> Timing:
    """pytimely's wordcount on ``processes`` processes of 1 worker."""
    began = time.perf_counter()
    results = execute_processes(partial(wordcount_worker, paths=paths, variant=variant), processes)
    wall = time.perf_counter() - began
    # perf_counter is CLOCK_MONOTONIC on Linux: comparable across processes of one machine
    start, end = min(r[0] for r in results), max(r[1] for r in results)
    busiest = max(results, key=lambda r: r[3])
    return Timing(wall, end - start, sum(r[2] for r in results), busiest[3], system=busiest[5], **(busiest[4] or {}))


def wordcount_loop(paths: list[str]) -> Timing:
    """The single-threaded program: each epoch's text split on whitespace, counted by one ``Counter``.

    With reading: read each file, then count.  Without: the texts already in
    memory, counted the same way.  Faster than a Python loop over the words
    (about 2×) or one ``Counter.update`` per line (about 1.4×), measured on the
    bench machine.
    """
    began = time.perf_counter()
    words = 0
    for path in paths:
        words += sum(Counter(Path(path).read_text().split()).values())
    with_reading = time.perf_counter() - began
    texts = [Path(path).read_text() for path in paths]
    began = time.perf_counter()
    for text in texts:
        Counter(text.split())
    return Timing(with_reading, time.perf_counter() - began, words)


def wordcount_value_counts(paths: list[str]) -> Timing:
    """The other single-threaded program: pyarrow splits each epoch's text and ``value_counts`` counts it, in C.

    With reading: read each file, then split and count.  Without: the texts
    already in memory (as one Arrow string each), split and counted.
    """
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    def count(text: str) -> int:
        words = pc.utf8_split_whitespace(pa.array([text])).flatten()
        counts = pc.value_counts(words.filter(pc.not_equal(words, "")))
        return int(pc.sum(counts.field("counts")).as_py() or 0)

    began = time.perf_counter()
    words = sum(count(Path(path).read_text()) for path in paths)
    with_reading = time.perf_counter() - began
    texts = [Path(path).read_text() for path in paths]
    began = time.perf_counter()
    for text in texts:
        count(text)
    return Timing(with_reading, time.perf_counter() - began, words)


# ---------------------------------------------------------------------------- weakly connected components


WCC_STEPS = (
    ("local", (("connected_components_cost", "", "local_labels"),)),
    ("grouping", (("connected_components_cost", "", "group"),)),
    ("labelling", (("connected_components_cost", "", "final_labels"),)),
)
"""The WCC's steps, clocked by :func:`wcc_worker`: the local components of a worker's edges (and of each round's
contracted edges in the loop), the grouping of the labels that reach each node's owner (representatives,
contracted edges, pointers), and the final labels (the broadcast pointers' components, every label mapped
through them).  None calls another."""

WCC_STEP_TEXT = {
    "local": "the local components (its edges, then each round's contracted edges)",
    "grouping": "grouping the labels at each node's owner (the first time and each round)",
    "labelling": "the final labels (the pointers' components, every label mapped through them)",
}


def wcc_worker(
    worker: Worker, path: str, nodes: int
) -> tuple[float, float, int, float, float, dict[str, float] | None]:
    """Read this worker's share of the edges, label the weak components; return :func:`wcc_arrays_worker`'s figures,
    with the seconds of each of :data:`WCC_STEPS`."""
    src, dst = parse_edges(read_share(path, worker.index, worker.peers))
    with calls_clock(*WCC_STEPS) as clocked:
        return wcc_arrays_worker(worker, src, dst, nodes, clocked)


def wcc_arrays_worker(
    worker: Worker, src: np.ndarray, dst: np.ndarray, nodes: int, clocked: CallClock | None = None
) -> tuple[float, float, int, float, float, dict[str, float] | None]:
    """Label the weak components of this worker's edges ``src -> dst``; return (start, end, roots here, CPU s, of
    that CPU the seconds in the kernel, and the seconds ``clocked`` counted by label, if given).

    The time runs from the end of an empty warm-up epoch to the last label; a
    root is a node whose label is its own id, so the roots of all workers are
    the components that have an edge.
    """
    edges = np.empty(len(src), cost_wcc.EDGES)
    edges["src"], edges["dst"] = src, dst
    found: list[Any] = []

    def build(scope: ScopeBuilder) -> Any:
        handle, stream = scope.new_input("Edges")
        labels = cost_wcc.weak_components(stream, cost_wcc.default_method())
        return handle, labels.inspect_batch(lambda time, batch: found.append(batch), name="Collect").probe()

    handle, probe = worker.dataflow(build, name="wcc cost")
    handle.advance_to(1)  # an empty warm-up epoch: every process has read its share and connected
    worker.step_while(lambda: probe.less_than(1))
    start, cpu, system = time.perf_counter(), time.process_time(), _system_seconds()
    if clocked is not None:
        clocked.reset()  # nothing of the warm-up epoch
    if len(edges):
        handle.send_batch(edges)
    handle.close()
    worker.step_while(lambda: not probe.done())
    end, cpu, system = time.perf_counter(), time.process_time() - cpu, _system_seconds() - system
    labels = cost_wcc.concat(found, cost_wcc.PAIRS)
    roots = int(np.count_nonzero(labels["node"] == labels["label"]))
    steps = None if clocked is None else {label: clocked.seconds(label) for label, _ in WCC_STEPS}
    return start, end, roots, cpu, system, steps


def _system_seconds() -> float:
    """The CPU seconds this process has spent in the kernel (``getrusage``: finer than ``os.times``' ticks)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


def wcc(path: str, nodes: int, processes: int) -> Timing:
    """pytimely's COST-style WCC on ``processes`` processes of 1 worker; the check is the components with an edge."""
    began = time.perf_counter()
    results = execute_processes(partial(wcc_worker, path=path, nodes=nodes), processes)
    wall = time.perf_counter() - began
    start, end = min(r[0] for r in results), max(r[1] for r in results)
    busiest = max(results, key=lambda r: r[3])
    return Timing(wall, end - start, sum(r[2] for r in results), busiest[3], system=busiest[4], steps=busiest[5])


def busiest_node_share(path: str, nodes: int, peers: int) -> float:
    """Nodes on the edges of the busiest of ``peers`` shares of ``path`` ÷ nodes on all its edges (``1/peers``: even).

    Each worker finds the components of every node its edges touch, and sends one
    pair per such node: on random graphs most nodes touch an edge of every
    share, so this part of the work shrinks less than the edges do.
    """
    seen = np.zeros(nodes, np.int32)
    busiest = 0
    for index in range(peers):
        src, dst = parse_edges(read_share(path, index, peers))
        touched = np.zeros(nodes, np.bool_)
        touched[src] = True
        touched[dst] = True
        seen += touched
        busiest = max(busiest, int(np.count_nonzero(touched)))
    return busiest / max(1, int(np.count_nonzero(seen)))


def scipy_components(src: np.ndarray, dst: np.ndarray, nodes: int, connection: str = "weak") -> tuple[int, Any]:
    """scipy's components of the directed graph (CSR build included): ``(count, labels)``."""
    from scipy.sparse import csr_matrix  # type: ignore[import-untyped]
    from scipy.sparse.csgraph import connected_components  # type: ignore[import-untyped]

    matrix = csr_matrix((np.ones(len(src), np.int8), (src, dst)), shape=(nodes, nodes))
    count, labels = connected_components(matrix, directed=True, connection=connection)
    return int(count), labels


def components_with_edges(src: np.ndarray, dst: np.ndarray, nodes: int, count: int) -> int:
    """``count`` (all weak components, isolated nodes included) less the nodes on no edge."""
    touched = np.zeros(nodes, np.bool_)
    touched[src] = True
    touched[dst] = True
    return count - int(nodes - np.count_nonzero(touched))


def scipy_wcc(path: str, nodes: int) -> Timing:
    """The single-threaded program: read, build a CSR matrix, ``connected_components`` (weak)."""
    scipy_components(np.zeros(1, np.int32), np.zeros(1, np.int32), 1)  # import scipy before the timer
    began = time.perf_counter()
    src, dst = parse_edges(Path(path).read_bytes())
    count, _ = scipy_components(src, dst, nodes)
    with_reading = time.perf_counter() - began
    began = time.perf_counter()
    scipy_components(src, dst, nodes)
    without_reading = time.perf_counter() - began
    return Timing(with_reading, without_reading, components_with_edges(src, dst, nodes, count))


# ---------------------------------------------------------------------------- the workload

PROCESSES = (1, 2, 4)


def _timings(runs: list[Timing], key: str, label: str, edges_or_words: int) -> dict[str, Metric]:
    """Medians of ``runs`` (one process count) as metrics ``key``, ``key_read``, ``key_cpu`` and ``key_wait``."""
    plain = median([t.without_reading for t in runs])
    cpu = median([t.cpu for t in runs])
    return {
        key: Metric(plain, "s", label),
        f"{key}_read": Metric(median([t.with_reading for t in runs]), "s", f"{label}, reading included"),
        f"{key}_cpu": Metric(cpu, "s", f"CPU of the busiest process, {label}"),
        f"{key}_wait": Metric(plain - cpu, "s", f"wall − CPU of the busiest process (waiting), {label}"),
        f"{key}_ns": Metric(plain / edges_or_words * 1e9, "ns", f"per item, {label}"),
    } | _system_metric(runs, key, label)


def _system_metric(runs: list[Timing], key: str, label: str) -> dict[str, Metric]:
    """``key_sys``: the median kernel CPU of the busiest process, where the runs measured it (WCC, wordcount)."""
    system = [t.system for t in runs if t.system is not None]
    if not system:
        return {}
    what = f"of that CPU, in the kernel (first touch of fresh memory), {label}"
    return {f"{key}_sys": Metric(median(system), "s", what)}


CEILING_KERNELS = {
    "wc_columnar": "columnar wordcount's split and count",
    "wc_record": "record-wise wordcount's Python split and count",
    "wcc": "WCC's local step",
}
"""What each 2-process ceiling (:mod:`ceilings`) runs, by the workload it bounds."""


def bench(size: Size, log: Log) -> dict[str, Metric]:
    """The workload for ``run.py``: wordcount (3 forms) and WCC on 1, 2 and 4 processes against the best single
    thread, interleaved, every answer checked; the metrics the goals and COST lines of ``goals.toml`` name."""
    import tempfile

    epochs, lines, edges = (2, 1_000, 20_000) if size.quick else (10, 50_000, 4_000_000)
    words = epochs * lines * WORDS_PER_LINE
    with tempfile.TemporaryDirectory(prefix="pytimely-bench-") as directory, small_pages():
        log(f"  writing {words:,} words and {edges:,} edges ...")
        paths = write_wordcount_text(Path(directory), epochs, lines)
        edges_path = str(Path(directory) / "edges.tsv")
        nodes = write_edges(Path(edges_path), edges)
        nodes_share = busiest_node_share(edges_path, nodes, 2)
        singles = {"counter": lambda: wordcount_loop(paths), "scipy": lambda: scipy_wcc(edges_path, nodes)}
        if importlib.util.find_spec("pyarrow") is not None:
            singles["value_counts"] = lambda: wordcount_value_counts(paths)
        jobs = {f"wc_{v}": partial(wordcount, paths, variant) for v, variant in WORDCOUNT_KEYS.items()}
        jobs["wcc"] = partial(wcc, edges_path, nodes)
        single_runs: dict[str, list[Timing]] = {key: [] for key in singles}
        runs: dict[str, list[Timing]] = {f"{job}_p{p}": [] for job in jobs for p in PROCESSES}
        for rep in range(size.repeat):
            for key, single in singles.items():
                single_runs[key].append(measured(single))
            for job, run in jobs.items():
                expected = single_runs["scipy" if job == "wcc" else "counter"][-1].check
                for p in PROCESSES:
                    timing = measured(partial(run, p))
                    if timing.check != expected:
                        raise WrongAnswer(
                            f"{job} on {p} process(es) found {timing.check}, the single thread {expected}"
                        )
                    runs[f"{job}_p{p}"].append(timing)
                    log(f"  cost {rep + 1}/{size.repeat} {job} on {p}: {timing.without_reading:.3f} s")
        log("  the 2-process ceilings: the kernels on the halves in two bare processes at once ...")
        ceilings_found = {
            "wc_columnar_ceiling_p2": ceilings.wordcount_ceiling(paths, size.repeat),
            "wc_record_ceiling_p2": ceilings.record_wordcount_ceiling(paths, size.repeat),
            "wcc_ceiling_p2": ceilings.wcc_ceiling(edges_path, size.repeat),
        }
    found: dict[str, Metric] = {}
    for key, found_ceiling in ceilings_found.items():
        kernel = CEILING_KERNELS[key.rsplit("_ceiling_", 1)[0]]
        found[key] = Metric(
            found_ceiling.speedup,
            "x",
            f"the {kernel} on the halves in two bare processes at once, no dataflow: speed-up over one (the ceiling)",
        )
        found[key.replace("_ceiling_", "_split_")] = Metric(
            found_ceiling.split,
            "x",
            "the same halves one at a time, each alone: speed-up over one (2: the work halves)",
        )
    for key, timings in runs.items():
        job, count = key.rsplit("_p", 1)
        found.update(
            _timings(
                timings,
                key,
                f"{LABELS[job]} on {count} process{'es' if count != '1' else ''}",
                edges if job == "wcc" else words,
            )
        )
    for key, timings in single_runs.items():
        found.update(_timings(timings, key, f"single thread, {key}", edges if key == "scipy" else words))
    for reading in ("", "_read"):
        fastest = min((found[f"{key}{reading}"] for key in single_runs if key != "scipy"), key=lambda m: m.value)
        found[f"wc_single{reading}"] = Metric(fastest.value, "s", f"the faster single thread ({fastest.what})")
        for p in PROCESSES:
            best = min((found[f"{job}_p{p}{reading}"] for job in jobs if job != "wcc"), key=lambda m: m.value)
            found[f"wc_best_p{p}{reading}"] = Metric(best.value, "s", f"the fastest wordcount ({best.what})")
    for p in PROCESSES:
        routed = [t.routing for t in runs[f"wc_record_p{p}"] if t.routing is not None]
        if routed:  # per word of one process's share of the input
            per_word = 1e9 * p / words
            route, cpu = median(routed), found[f"wc_record_p{p}_cpu"].value
            where = f"{p} process{'es' if p > 1 else ''}"
            found[f"wc_record_route_ns_p{p}"] = Metric(
                route * per_word, "ns", f"routing per word on {where} ({'exchange, wire' if p > 1 else 'key check'})"
            )
            found[f"wc_record_rest_ns_p{p}"] = Metric(
                (cpu - route) * per_word, "ns", f"CPU per word beyond routing on {where}"
            )
    found.update(_kernel_metrics(runs))
    found.update(_wcc_step_metrics(runs))
    for job in jobs:
        share = found[f"{job}_p2_cpu"].value / max(found[f"{job}_p1_cpu"].value, 1e-9)
        found[f"{job}_share_p2"] = Metric(share, "x", "CPU of the busier of 2 processes ÷ 1 process's (0.5: even)")
    found["wcc_nodes_p2"] = Metric(
        nodes_share, "x", "nodes on the edges of the busier of 2 processes ÷ nodes on all edges (0.5: even)"
    )
    found["wcc_start_p2"] = Metric(
        found["wcc_p2_read"].value - found["wcc_p2"].value, "s", "start-up, reading and shutdown on 2 processes"
    )
    found["wc_best_p1_vs_single"] = Metric(
        found["wc_best_p1"].value / found["wc_single"].value, "x", "the fastest 1-process wordcount ÷ the single thread"
    )
    return found


def _kernel_metrics(runs: dict[str, list[Timing]]) -> dict[str, Metric]:
    """Where the columnar wordcount's busiest process spends its CPU: in the kernels (:data:`KERNEL_CALLS`) or
    beyond them, on 1 and 2 processes, and how much faster the kernels are on 2 (none on a compiled build)."""
    found: dict[str, Metric] = {}
    for p in (1, 2):
        timings = [t for t in runs[f"wc_columnar_p{p}"] if t.kernels is not None]
        if not timings:
            return {}
        where = f"{p} process{'es' if p > 1 else ''}"
        kernels = median([t.kernels for t in timings if t.kernels is not None])
        found[f"wc_columnar_kernels_p{p}"] = Metric(kernels, "s", f"CPU in the split and count kernels on {where}")
        found[f"wc_columnar_beyond_p{p}"] = Metric(
            median([t.cpu - t.kernels for t in timings if t.kernels is not None]),
            "s",
            f"CPU beyond the kernels (exchange, progress, scheduling) on {where}",
        )
    found["wc_columnar_kernels_speedup_p2"] = Metric(
        found["wc_columnar_kernels_p1"].value / max(found["wc_columnar_kernels_p2"].value, 1e-9),
        "x",
        "the kernels on 2 processes: speed-up over 1 (their merge of partial counts included)",
    )
    exchanges = [t.exchange for t in runs["wc_columnar_p2"] if t.exchange is not None]
    merges = [t.merge for t in runs["wc_columnar_p2"] if t.merge is not None]
    if exchanges and merges:
        found["wc_columnar_exchange_p2"] = Metric(
            median(exchanges),
            "s",
            "of the CPU beyond the kernels on 2 processes, the exchange of partial counts (hash, split, encode)",
        )
        found["wc_columnar_merge_p2"] = Metric(
            median(merges), "s", "of the kernels on 2 processes, the merge of the partial counts from both (none on 1)"
        )
    return found


def _wcc_step_metrics(runs: dict[str, list[Timing]]) -> dict[str, Metric]:
    """``wcc_<step>_p<n>``: the busiest process's median CPU seconds in each of :data:`WCC_STEPS`, on 1 and 2
    processes (the example's functions, which no build compiles: clocked on either build)."""
    found: dict[str, Metric] = {}
    for p in (1, 2):
        timings = [t.steps for t in runs[f"wcc_p{p}"] if t.steps]
        where = f"{p} process{'es' if p > 1 else ''}"
        if not timings:
            continue
        for label, _ in WCC_STEPS:
            found[f"wcc_{label}_p{p}"] = Metric(
                median([steps[label] for steps in timings]), "s", f"of the CPU on {where}, {WCC_STEP_TEXT[label]}"
            )
    return found


WORDCOUNT_KEYS = {"record": "record-wise", "combiner": "combiner", "columnar": "columnar"}
LABELS = {
    "wc_record": "record-wise wordcount",
    "wc_combiner": "wordcount with a combiner",
    "wc_columnar": "columnar wordcount",
    "wcc": "columnar WCC",
}
