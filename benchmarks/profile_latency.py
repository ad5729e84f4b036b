"""Profile the epoch-latency dataflow: Python calls per epoch by function, and microseconds per epoch.

Runs input -> map -> probe for ``--epochs`` epochs on one worker, once timed
(best of ``--repeat``) and once under :mod:`cProfile`, and prints the calls per
epoch of every function called at least once per 100 epochs.  Run it with the
interpreter of the checkout to measure (``/work/main/.venv/bin/python
benchmarks/profile_latency.py`` measures whatever that interpreter imports).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import sys
import time
from pathlib import Path
from typing import Any

from runtime.execute import execute
from runtime.worker import Worker


def plus_one(x: int) -> int:
    """The map of the latency dataflow."""
    return x + 1


def latency(epochs: int, profiler: cProfile.Profile | None = None, cpu: bool = False) -> tuple[float, int]:
    """Advance input -> map -> probe one epoch at a time; return (seconds, worker steps).

    With ``cpu``, the seconds are the process's CPU time rather than wall-clock
    time: steadier on a shared machine, and the same thing for one worker.
    """
    clock = time.process_time if cpu else time.perf_counter

    def main(worker: Worker) -> tuple[float, int]:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input("Ticks")
            return handle, stream.map(plus_one).probe()

        handle, probe = worker.dataflow(build, name="epoch latency")
        steps = 0
        if profiler is not None:
            profiler.enable()
        start = clock()
        for epoch in range(epochs):
            handle.send(epoch)
            handle.advance_to(epoch + 1)
            while probe.less_than(epoch + 1):
                worker.step()
                steps += 1
        elapsed = clock() - start
        if profiler is not None:
            profiler.disable()
        return elapsed, steps

    gc.collect()
    result: tuple[float, int] = execute(main, workers=1)[0]
    return result


def _short(file: str, line: int, name: str) -> str:
    for marker in ("/scopes/", "/runtime/", "/benchmarks/"):
        if marker in file:
            return f"{marker[1:]}{file.split(marker, 1)[1]}:{line}({name})"
    return name if file == "~" else f"{file.rsplit('/', 1)[-1]}:{line}({name})"


def main() -> None:
    """Print µs/epoch and the calls per epoch by function."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--top", type=int, default=40, help="how many functions to list (0: none, no profile)")
    parser.add_argument("--cpu", action="store_true", help="time with CPU time instead of wall-clock time")
    parser.add_argument("--python-only", action="store_true", help="list Python functions only (no builtins)")
    args = parser.parse_args()
    print(f"pytimely from {Path(sys.modules['runtime'].__file__).parent.parent}")
    timings = [latency(args.epochs, cpu=args.cpu) for _ in range(args.repeat)]
    best = min(seconds for seconds, _ in timings)
    steps = timings[0][1]
    print(
        f"{'cpu ' if args.cpu else ''}us/epoch best {best / args.epochs * 1e6:.1f}  all "
        + ", ".join(f"{s / args.epochs * 1e6:.1f}" for s, _ in timings)
        + f"  steps/epoch {steps / args.epochs:.2f}"
    )
    if not args.top:
        return
    profiler = cProfile.Profile()
    latency(args.epochs, profiler)
    stats = pstats.Stats(profiler)
    rows = []
    total = 0
    python_calls = 0
    for (file, line, name), (_cc, calls, tottime, _cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if name == "<method 'disable' of '_lsprof.Profiler' objects>":
            continue
        total += calls
        if file != "~":
            python_calls += calls
        elif args.python_only:
            continue
        rows.append((calls / args.epochs, tottime / args.epochs * 1e6, _short(file, line, name)))
    rows.sort(key=lambda row: (-row[0], row[2]))
    print(f"calls per epoch: {total / args.epochs:.1f} in all, {python_calls / args.epochs:.1f} to Python functions")
    print("| calls/epoch | tottime us/epoch (profiled) | function |")
    print("|---:|---:|---|")
    for per_epoch, micros, name in rows[: args.top]:
        if per_epoch >= 0.01:
            print(f"| {per_epoch:.2f} | {micros:.2f} | `{name}` |")


if __name__ == "__main__":
    main()
