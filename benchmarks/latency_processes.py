"""Benchmark: epoch latency (input -> map -> probe) on 1 worker, 2 worker threads, and 2 processes.

Every worker sends one record per epoch, advances its input and steps until
its probe passes the epoch; with more than one worker each epoch needs the
others' progress, so the time per epoch includes a progress exchange (through
shared memory for threads, TCP for processes).  The time reported is the
slowest worker's, after a warm-up of ``WARMUP`` epochs; process start-up is not
included.  The ``latency`` workload (:func:`bench`) measures every setting with
:func:`measure`; its goals are in ``goals.toml``.

Usage::

    python benchmarks/latency_processes.py            # 2,000 epochs per setting
    python benchmarks/latency_processes.py --epochs 500 --repeat 1
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

try:  # the installed pytimely (so that another checkout's interpreter measures that checkout)
    import runtime  # noqa: F401
except ImportError:  # pragma: no cover - run from a clone without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import Log, Metric, Size, WrongAnswer, in_seconds, interleaved, median  # noqa: E402

from runtime import Worker, compiled_modules, execute  # noqa: E402

WARMUP = 50


def plus_one(x: int) -> int:
    """The map of the latency dataflow."""
    return x + 1


def latency_worker(worker: Worker, epochs: int) -> tuple[float, float, int, float]:
    """Run ``epochs`` timed epochs after a warm-up; return (start, end, steps taken, CPU seconds of the process)."""

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Ticks")
        return handle, stream.map(plus_one).probe()

    handle, probe = worker.dataflow(build, name="epoch latency")
    steps = 0
    start = cpu = 0.0
    for epoch in range(WARMUP + epochs):
        if epoch == WARMUP:
            start = time.perf_counter()
            cpu = time.process_time()
            steps = 0
        handle.send(epoch)
        handle.advance_to(epoch + 1)
        while probe.less_than(epoch + 1):
            worker.step_or_park(0.01)
            steps += 1
    return start, time.perf_counter(), steps, time.process_time() - cpu


def measure(epochs: int, workers: int, processes: int) -> tuple[float, float, float]:
    """Microseconds per epoch (slowest worker, from the first start), steps per epoch of worker 0,
    and CPU microseconds per epoch of the busiest process (threads of one process share one figure)."""
    results = execute(partial(latency_worker, epochs=epochs), workers=workers, processes=processes)
    start = min(r[0] for r in results)
    end = max(r[1] for r in results)
    cpu = max(r[3] for r in results)
    return (end - start) / epochs * 1e6, results[0][2] / epochs, cpu / epochs * 1e6


def measure_fresh(epochs: int, workers: int, processes: int, pure: bool) -> tuple[float, float, float]:
    """:func:`measure` in a fresh interpreter, running pure Python (``pure``) or the compiled build if current.

    The compiled build (``make compiled``, :mod:`scopes.native`) is chosen when
    ``scopes`` is imported, so comparing the two takes one interpreter each.
    """
    env = dict(os.environ, PYTIMELY_PURE="1" if pure else "0")
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(epochs), str(workers), str(processes)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the latency child failed:\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["compiled"] == pure:
        raise RuntimeError(f"asked for {'pure Python' if pure else 'the compiled build'}, the child ran the other")
    return float(result["micros"]), float(result["steps"]), float(result["cpu"])


def main() -> None:
    """Measure each setting ``--repeat`` times and print the best and all repetitions."""
    if len(sys.argv) == 5 and sys.argv[1] == "--child":  # measure_fresh's child
        micros, steps, cpu = measure(*map(int, sys.argv[2:]))
        compiled = bool(compiled_modules())
        print(json.dumps({"micros": micros, "steps": steps, "cpu": cpu, "compiled": compiled}))
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"pytimely from {Path(str(sys.modules['runtime'].__file__)).parent.parent}")
    for label, workers, processes in (("1 worker", 1, 1), ("2 threads", 2, 1), ("2 processes", 1, 2)):
        runs = [measure(args.epochs, workers, processes) for _ in range(args.repeat)]
        best = min(micros for micros, _, _ in runs)
        print(
            f"{label:12s} best {best:8.1f} us/epoch; all "
            + ", ".join(f"{micros:.1f}" for micros, _, _ in runs)
            + f"; steps/epoch (worker 0) {runs[0][1]:.2f}"
            + f"; CPU us/epoch (busiest process, best) {min(cpu for _, _, cpu in runs):.1f}"
        )


if __name__ == "__main__":
    main()


def bytewax_epoch_interval_zero(epochs: int) -> float:
    """Seconds per epoch of bytewax 0.21.1: ``epochs`` records, one per batch, through ``op.map``, with
    ``epoch_interval=0`` so that every record closes an epoch (``run_main`` builds and runs: building included)."""
    from datetime import timedelta

    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("epoch_latency")
    out: list[int] = []
    op.output("out", op.map("map", op.input("ticks", flow, TestingSource(range(epochs))), plus_one), TestingSink(out))
    start = time.perf_counter()
    run_main(flow, epoch_interval=timedelta(0))
    seconds = time.perf_counter() - start
    if len(out) != epochs:
        raise WrongAnswer(f"bytewax delivered {len(out)} records, expected {epochs}")
    return seconds / epochs


LABELS = {
    "one": "1 worker",
    "threads": "2 threads",
    "processes": "2 processes",
    "pure": "1 worker, pure Python",
    "compiled": "1 worker, compiled",
    "bytewax": "bytewax, epoch_interval=0",
}


def bench(size: Size, log: Log) -> dict[str, Metric]:
    """The workload for ``run.py``: seconds per epoch on 1 worker, 2 threads, 2 processes, fresh pure and compiled
    interpreters and bytewax, interleaved; with each setting's CPU per epoch (busiest process) and steps per epoch."""
    from scopes.native import manifest_problem

    epochs, process_epochs = (1_000, 300) if size.quick else (10_000, 10_000)
    settings: dict[str, Callable[[], tuple[float, float, float]]] = {
        "one": partial(measure, epochs, 1, 1),
        "threads": partial(measure, epochs, 2, 1),
        "processes": partial(measure, process_epochs, 1, 2),
        "pure": partial(measure_fresh, epochs, 1, 1, True),
    }
    compiled = manifest_problem()
    if compiled is None:
        settings["compiled"] = partial(measure_fresh, epochs, 1, 1, False)
    detail: dict[str, list[tuple[float, float, float]]] = {key: [] for key in settings}

    def timed(key: str) -> Callable[[], float]:
        def run() -> float:
            detail[key].append(settings[key]())
            return detail[key][-1][0] / 1e6

        return run

    variants = {key: timed(key) for key in settings}
    if importlib.util.find_spec("bytewax") is not None:
        variants["bytewax"] = partial(bytewax_epoch_interval_zero, epochs)
    values = interleaved(variants, size, log, "latency")
    found = {key: in_seconds(times, f"{LABELS[key]}, per epoch") for key, times in values.items()}
    for key, runs in detail.items():
        cpu = median([run[2] for run in runs]) / 1e6
        found[f"{key}_cpu"] = Metric(cpu, "s", f"CPU per epoch of the busiest process, {LABELS[key]}")
        steps = median([run[1] for run in runs])
        found[f"{key}_steps"] = Metric(steps, "", f"steps per epoch of worker 0, {LABELS[key]}")
        found[f"{key}_wait"] = Metric(found[key].value - cpu, "s", f"wall − CPU per epoch (waiting), {LABELS[key]}")
    if compiled is not None:
        found["compiled"] = Metric(math.nan, "", f"{compiled} (`make compiled` builds it)")
    if "bytewax" not in found:
        found["bytewax"] = Metric(math.nan, "", "bytewax is not installed (`make bench` installs it)")
    return found
