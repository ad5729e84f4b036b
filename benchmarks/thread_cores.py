"""``PYTIMELY_THREAD_CORES`` = ``auto`` against ``one`` and ``all``, on two workloads of 2 worker threads.

* **collatz**: the Collatz loop with exchange of :mod:`scaling` (Python work, GIL-bound): ``auto`` should
  cost about what ``one`` costs.
* **sort**: each worker sends itself batches of 2 M random floats through a dataflow that sorts them with
  NumPy (C work that releases the GIL): ``auto`` should take about what ``all`` takes.

The settings are interleaved run by run so that the machine's drift affects all alike; every figure is the
median of ``--repeat`` runs: wall seconds, CPU seconds of the process (``time.process_time``), and, under
``auto``, the CPU seconds of the core governor's own thread and how often it moved the threads.
``python benchmarks/thread_cores.py --repeat 9`` prints one table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from scaling import collatz_worker, thread_cores  # noqa: E402

from runtime.core_governor import GovernorReport, latest_report  # noqa: E402
from runtime.execute import execute  # noqa: E402
from scopes import ScopeBuilder  # noqa: E402

SETTINGS = ("auto", "one", "all")


def sort_worker(worker: Any, batches: int, size: int, seen: list[GovernorReport | None]) -> int:
    """Send ``batches`` arrays of ``size`` random floats through a dataflow that sorts them; the records sorted."""
    import numpy as np

    sorted_records = [0]

    def build(scope: ScopeBuilder) -> Any:
        handle, stream = scope.new_input()
        probe = stream.map(np.sort).inspect(lambda array: sorted_records.__setitem__(0, sorted_records[0] + len(array)))
        return handle, probe.probe()

    handle, probe = worker.dataflow(build)
    rng = np.random.default_rng(worker.index)
    for epoch in range(batches):
        handle.send(rng.random(size))
        handle.advance_to(epoch + 1)
        worker.step_while(lambda: probe.less_than(handle.time))
    if worker.index == 0:
        seen.append(latest_report())
    return sorted_records[0]


def collatz_main(worker: Any, limit: int, seen: list[GovernorReport | None]) -> None:
    """The Collatz loop of :mod:`scaling`; worker 0 records the governor's report at the end."""
    collatz_worker(worker, limit, lambda time, batch: None)
    if worker.index == 0:
        seen.append(latest_report())


def measure(main: Callable[[Any], Any], setting: str) -> dict[str, float]:
    """One run of ``main`` on 2 worker threads under ``setting``: wall, CPU, and the governor's CPU and moves."""
    seen: list[GovernorReport | None] = []
    with thread_cores(setting):
        cpu = time.process_time()
        start = time.perf_counter()
        execute(partial(main, seen=seen), workers=2)
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
    report = seen[0] if seen else None
    return {
        "wall": wall,
        "cpu": cpu,
        "governor_cpu": report.cpu_seconds if report else 0.0,
        "windows": report.windows if report else 0,
        "moves": report.moves if report else 0,
    }


def compare(name: str, main: Callable[[Any], Any], repeat: int) -> dict[str, dict[str, float]]:
    """Every setting ``repeat`` times, interleaved; the median of each figure per setting."""
    runs: dict[str, list[dict[str, float]]] = {setting: [] for setting in SETTINGS}
    for rep in range(repeat):
        for setting in SETTINGS:
            runs[setting].append(measure(main, setting))
            print(f"  {name} {rep + 1}/{repeat} {setting}: {runs[setting][-1]}", file=sys.stderr, flush=True)
    return {
        setting: {key: statistics.median(run[key] for run in results) for key in results[0]}
        for setting, results in runs.items()
    }


def table(found: dict[str, dict[str, dict[str, float]]]) -> str:
    """A Markdown table of the medians, each setting's wall and CPU also as a ratio to ``one`` and ``all``."""
    lines = [
        "| workload | setting | wall s | CPU s | wall / one | wall / all | governor CPU ms | windows | moves |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, medians in found.items():
        for setting, row in medians.items():
            lines.append(
                f"| {name} | {setting} | {row['wall']:.3f} | {row['cpu']:.3f} "
                f"| {row['wall'] / medians['one']['wall']:.2f} | {row['wall'] / medians['all']['wall']:.2f} "
                f"| {row['governor_cpu'] * 1e3:.2f} | {row['windows']:.0f} | {row['moves']:.0f} |"
            )
    return "\n".join(lines)


def main() -> None:
    """Measure the workloads named on the command line and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--collatz", type=int, nargs="*", default=[3_000, 20_000], help="Collatz limits")
    parser.add_argument("--batches", type=int, default=4, help="sorted arrays per worker")
    parser.add_argument("--size", type=int, default=2_000_000, help="floats per array")
    parser.add_argument("--what", nargs="*", default=["collatz", "sort"])
    args = parser.parse_args()
    found: dict[str, dict[str, dict[str, float]]] = {}
    load = os.getloadavg()[0]
    if "collatz" in args.what:
        for limit in args.collatz:
            found[f"collatz {limit:,}"] = compare(f"collatz {limit}", partial(collatz_main, limit=limit), args.repeat)
    if "sort" in args.what:
        sort = partial(sort_worker, batches=args.batches, size=args.size)
        found[f"sort {args.batches} x {args.size:,}"] = compare("sort", sort, args.repeat)
    print(table(found))
    print(f"\nload average (1 min) {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
