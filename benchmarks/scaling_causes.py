"""Why 2 processes are (not) twice as fast as 1: per-process CPU, waits and bytes for the issue 28 workloads.

For each workload and each process count it runs the workload with every worker
instrumented and returns, per process: the timed wall seconds, the process's CPU
seconds (all its threads), the worker thread's CPU seconds, the seconds spent
parked (waiting for another process), the number of parks, and the bytes this
process sent to the other.  On a loaded machine the CPU seconds and the parked
seconds say more than the wall time: ``wall - parked`` is what the worker itself
took, and a process whose CPU is half of one process's CPU could finish in half
the time were it not for the waits.

Workloads (fixed seeds):

* ``wordcount``: ``benchmarks/cluster.py``'s columnar wordcount (4 M words by default);
* ``wcc``: ``examples/connected_components_cost.py`` on 4 M random edges over 2 M nodes,
  each process given its contiguous share of the edges (parsing excluded);
* ``propagation``: ``examples/connected_components_columnar.py``'s label propagation on the
  same kind of graph (``process_ratios.wcc``'s workload).

Usage::

    python benchmarks/scaling_causes.py --what wordcount wcc --repeat 3

Wire into ``benchmarks/run.py`` by calling :func:`measure` (returns a dict of
figures per workload) and :func:`summary` (one line per workload: the ratio and
its limit).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE), str(HERE.parent / "examples")):
    if _path not in sys.path:
        sys.path.append(_path)

from runtime import Worker, execute  # noqa: E402


class Meter:
    """Counts one worker's parks (seconds and calls) and the bytes its process sends, by wrapping its communicator."""

    def __init__(self, worker: Worker) -> None:
        """Wrap ``worker``'s communicator (and its fabric's ``send_pieces``, when it has one)."""
        self.parked = 0.0
        self.parks = 0
        self.sent = 0
        self.profiler: cProfile.Profile | None = None
        comm: Any = worker._comm  # noqa: SLF001 - a benchmark's instrument
        park = comm.park

        def timed_park(timeout: float | None) -> None:
            began = time.perf_counter()
            park(timeout)
            self.parked += time.perf_counter() - began
            self.parks += 1

        comm.park = timed_park
        fabric = getattr(comm, "fabric", None)
        if fabric is not None and hasattr(fabric, "send_pieces"):
            send = fabric.send_pieces

            def counted(process: int, pieces: list[Any]) -> None:
                self.sent += sum(len(piece) for piece in pieces)
                send(process, pieces)

            fabric.send_pieces = counted

    def start(self) -> tuple[float, float, float]:
        """Zero the counters; return the clocks (wall, process CPU, thread CPU) at the start of the timed part.

        With ``$SCALING_PROFILE`` set to a number, the timed part runs under :mod:`cProfile`
        (timed by the thread's CPU clock) and :meth:`figures` adds that many of its functions
        by own time (``"profile"``).
        """
        self.parked, self.parks, self.sent = 0.0, 0, 0
        profiling = os.environ.get("SCALING_PROFILE")
        self.profiler = cProfile.Profile(time.thread_time) if profiling else None  # CPU: fair under load
        if self.profiler is not None:
            self.profiler.enable()
        return time.perf_counter(), time.process_time(), time.thread_time()

    def figures(self, clocks: tuple[float, float, float]) -> dict[str, Any]:
        """The figures of the timed part that began at ``clocks``."""
        wall, cpu, thread = clocks
        end = time.perf_counter()
        extra: dict[str, Any] = {}
        if self.profiler is not None:
            self.profiler.disable()
            stream = io.StringIO()
            stats = pstats.Stats(self.profiler, stream=stream).sort_stats("tottime")
            stats.print_stats(int(os.environ["SCALING_PROFILE"]))
            extra["profile"] = stream.getvalue()
        return {
            **extra,
            "start": wall,
            "end": end,
            "wall": end - wall,
            "cpu": time.process_time() - cpu,
            "thread_cpu": time.thread_time() - thread,
            "parked": self.parked,
            "parks": self.parks,
            "sent_bytes": self.sent,
        }


def wordcount_worker(worker: Worker, epochs: int, lines: int) -> dict[str, float]:
    """``cluster.py``'s columnar wordcount with a :class:`Meter`; the figures of the timed epochs."""
    import cluster  # benchmarks/cluster.py

    meter = Meter(worker)
    handle, probe, counted = cluster.wordcount_dataflow(worker, False, True)
    mine = [
        np.array([cluster.line(e * lines + i) for i in range(worker.index, lines, worker.peers)])
        for e in range(epochs + 1)
    ]
    handle.send_batch(mine[0])
    handle.advance_to(1)
    worker.step_while(lambda: probe.less_than(1))
    counted[0] = 0
    clocks = meter.start()
    for epoch in range(1, epochs + 1):
        handle.send_batch(mine[epoch])
        handle.advance_to(epoch + 1)
    worker.step_while(lambda: probe.less_than(epochs + 1))
    return {**meter.figures(clocks), "check": counted[0]}


def wcc_worker(worker: Worker, edges: int, nodes: int, seed: int) -> dict[str, float]:
    """The COST example's WCC of random edges, this worker's contiguous share, with a :class:`Meter`."""
    import connected_components_cost as cost  # type: ignore[import-not-found]

    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, nodes, edges), rng.integers(0, nodes, edges)
    low, high = edges * worker.index // worker.peers, edges * (worker.index + 1) // worker.peers
    share = np.empty(high - low, cost.EDGES)
    share["src"], share["dst"] = src[low:high], dst[low:high]
    meter = Meter(worker)
    found: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Edges")
        labels = cost.weak_components(stream, cost.default_method())
        return handle, labels.inspect_batch(lambda _t, batch: found.append(batch), name="Collect").probe()

    handle, probe = worker.dataflow(build, name="wcc cost")
    handle.advance_to(1)
    worker.step_while(lambda: probe.less_than(1))
    clocks = meter.start()
    handle.send_batch(share)
    handle.close()
    worker.step_while(lambda: not probe.done())
    labels = cost.concat(found, cost.PAIRS)
    return {**meter.figures(clocks), "check": int(np.count_nonzero(labels["node"] == labels["label"]))}


def propagation_worker(worker: Worker, edges: int, nodes: int, seed: int) -> dict[str, float]:
    """``examples/connected_components_columnar.py``'s label propagation (the issue's "columnar WCC"), metered."""
    from connected_components_columnar import Graph, weak_labels  # type: ignore[import-not-found]

    rng = np.random.default_rng(seed)
    src = rng.integers(0, nodes, edges, dtype=np.int32)
    dst = rng.integers(0, nodes, edges, dtype=np.int32)
    graph = Graph(np.arange(nodes).astype("S"), src, dst)
    meter = Meter(worker)
    found: list[int] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Edges")
        labels = weak_labels(stream, graph.nodes)
        return handle, labels.inspect_batch(lambda _t, batch: found.append(len(batch))).probe()

    handle, probe = worker.dataflow(build, name="wcc")
    share = graph.share(worker.index, worker.peers)
    handle.advance_to(1)
    worker.step_while(lambda: probe.less_than(1))
    clocks = meter.start()
    handle.send_batch(share)
    handle.close()
    worker.step_while(lambda: not probe.done())
    return {**meter.figures(clocks), "check": sum(found)}


WORKLOADS: dict[str, Any] = {
    "propagation": partial(propagation_worker, edges=4_000_000, nodes=2_000_000, seed=18),
    "wordcount": partial(wordcount_worker, epochs=10, lines=50_000),
    "wcc": partial(wcc_worker, edges=4_000_000, nodes=2_000_000, seed=28),
}


def run_once(what: str, processes: int) -> dict[str, Any]:
    """One run of workload ``what`` on ``processes`` processes of 1 worker: the span and each process's figures."""
    results = execute(WORKLOADS[what], workers=1, processes=processes, stall_timeout=300)
    span = max(r["end"] for r in results) - min(r["start"] for r in results)
    return {"processes": processes, "span": span, "check": sum(r["check"] for r in results), "each": results}


def measure(what: list[str], repeat: int = 3) -> dict[str, Any]:
    """Run each workload on 1 and 2 processes ``repeat`` times, back to back; all the figures and the load."""
    report: dict[str, Any] = {"load_before": os.getloadavg(), "cpus": os.cpu_count()}
    for name in what:
        runs = []
        for _ in range(repeat):
            for processes in (1, 2):
                runs.append(run_once(name, processes))
        report[name] = runs
    report["load_after"] = os.getloadavg()
    return report


def summary(report: dict[str, Any]) -> list[str]:
    """One line per workload: best spans, their ratio, and the CPU-bound ratio (1-process CPU / busier's CPU)."""
    lines = []
    for name, runs in report.items():
        if not isinstance(runs, list):
            continue
        one = [r for r in runs if r["processes"] == 1]
        two = [r for r in runs if r["processes"] == 2]
        best1, best2 = min(r["span"] for r in one), min(r["span"] for r in two)
        cpu1 = min(r["each"][0]["cpu"] for r in one)
        busier = min(max(e["cpu"] for e in r["each"]) for r in two)
        parked = min(max(e["parked"] for e in r["each"]) for r in two)
        sent = max(max(e["sent_bytes"] for e in r["each"]) for r in two)
        lines.append(
            f"{name}: 1 process {best1:.3f} s, 2 processes {best2:.3f} s, ratio {best1 / best2:.2f}x; "
            f"CPU 1 process {cpu1:.3f} s, busier of 2 {busier:.3f} s (CPU ratio {cpu1 / busier:.2f}x); "
            f"most parked of 2 {parked:.3f} s; sent {sent / 1e6:.2f} MB by one process"
        )
    lines.append(f"load before {report['load_before']}, after {report['load_after']}, {report['cpus']} CPUs")
    return lines


def main() -> None:
    """Print the summary (and with ``--json`` every figure)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--what", nargs="*", default=["wordcount", "wcc"], choices=list(WORKLOADS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = measure(args.what, args.repeat)
    for name in args.what:
        for run in report[name]:
            for index, each in enumerate(run["each"]):
                if "profile" in each:
                    print(f"{name}, {run['processes']} process(es), process {index}:\n{each.pop('profile')}")
    if args.json:
        print(json.dumps(report, indent=1))
    for line in summary(report):
        print(line)


if __name__ == "__main__":
    main()
