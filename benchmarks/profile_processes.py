"""Profile the epoch-latency dataflow on 2 processes x 1 worker: where the CPU goes.

Each process runs input -> map -> probe for ``--epochs`` epochs; worker 0's
thread runs under :mod:`cProfile`.  Prints, per epoch: wall-clock time, CPU of
the whole process and of the worker thread alone (the rest is the fabric's
reader and heartbeat threads), and the worker thread's Python calls by function.

    python benchmarks/profile_processes.py --epochs 2000 --top 40
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

try:  # the installed pytimely (so that another checkout's interpreter measures that checkout)
    import runtime  # noqa: F401
except ImportError:  # pragma: no cover - run from a clone without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime import Worker, execute  # noqa: E402

WARMUP = 50


def plus_one(x: int) -> int:
    """The map of the latency dataflow."""
    return x + 1


def worker_main(worker: Worker, epochs: int, top: int, profile: bool) -> tuple[float, float, float, int, str]:
    """Run the epochs; return (wall s, process CPU s, worker-thread CPU s, steps, profile text)."""

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Ticks")
        return handle, stream.map(plus_one).probe()

    handle, probe = worker.dataflow(build, name="epoch latency")
    profiler = cProfile.Profile() if profile else None
    steps = 0
    wall = cpu = thread = 0.0
    for epoch in range(WARMUP + epochs):
        if epoch == WARMUP:
            wall, cpu, thread = time.perf_counter(), time.process_time(), time.thread_time()
            if profiler is not None:
                profiler.enable()
        handle.send(epoch)
        handle.advance_to(epoch + 1)
        while probe.less_than(epoch + 1):
            worker.step_or_park(0.01)
            steps += 1
    wall, cpu, thread = time.perf_counter() - wall, time.process_time() - cpu, time.thread_time() - thread
    text = ""
    if profiler is not None:
        profiler.disable()
        stream = io.StringIO()
        stats = pstats.Stats(profiler, stream=stream)
        stats.sort_stats("tottime")
        rows = []
        total = 0
        for (file, line, function), (_cc, calls, tottime, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
            total += calls
            rows.append((calls / epochs, tottime / epochs * 1e6, f"{Path(file).name}:{line}({function})"))
        rows.sort(key=lambda row: -row[1])
        text = f"all calls/epoch {total / epochs:.1f}\n" + "\n".join(
            f"{c:8.2f} {t:8.2f} us  {name}" for c, t, name in rows[:top]
        )
    return wall, cpu, thread, steps, text


def main() -> None:
    """Run once with and once without the profiler; print both processes' figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=2000)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"pytimely from {Path(str(sys.modules['runtime'].__file__)).parent.parent}")
    for _ in range(args.repeat):
        results = execute(partial(worker_main, epochs=args.epochs, top=args.top, profile=False), workers=1, processes=2)
        line = "; ".join(
            f"process {i}: wall {w / args.epochs * 1e6:.1f} us, CPU {c / args.epochs * 1e6:.1f} us "
            f"(worker thread {t / args.epochs * 1e6:.1f}), steps {s / args.epochs:.2f}"
            for i, (w, c, t, s, _) in enumerate(results)
        )
        print(line)
    results = execute(partial(worker_main, epochs=args.epochs, top=args.top, profile=True), workers=1, processes=2)
    print("worker 0 under cProfile (calls/epoch, tottime us/epoch, wall-clock: includes waits for the GIL):")
    print(results[0][4])


if __name__ == "__main__":
    main()
