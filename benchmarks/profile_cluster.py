"""Profile the record-wise wordcount of ``benchmarks/cluster.py`` on 2 processes: where the CPU goes.

Worker 0's thread runs under :mod:`cProfile` (top functions by own time), and
the fabric's decoding on the reader thread is timed separately (thread CPU).

    python benchmarks/profile_cluster.py --processes 2 --top 25
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

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import cluster  # noqa: E402
from runtime import Worker, execute  # noqa: E402
from runtime.communication import process_fabric  # noqa: E402


def profiled(worker: Worker, epochs: int, lines: int, top: int, combine: bool) -> tuple[Any, str, float]:
    """Run the wordcount worker under cProfile; return its result, the profile and reader-side decode CPU."""
    decode_cpu = [0.0]
    original = process_fabric.decode_batch

    def timed_decode(path: int, payload: Any) -> Any:
        began = time.thread_time()
        try:
            return original(path, payload)
        finally:
            decode_cpu[0] += time.thread_time() - began

    process_fabric.decode_batch = timed_decode  # type: ignore[assignment]
    profiler = cProfile.Profile()
    profiler.enable()
    result = cluster.wordcount_worker(worker, epochs, lines, combine)
    profiler.disable()
    stream = io.StringIO()
    pstats.Stats(profiler, stream=stream).sort_stats("tottime").print_stats(top)
    return result, stream.getvalue(), decode_cpu[0]


def main() -> None:
    """Profile one run and print worker 0's profile."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--combine", action="store_true")
    args = parser.parse_args()
    job = partial(profiled, epochs=10, lines=12_000, top=args.top, combine=args.combine)
    results = execute(job, workers=1, processes=args.processes)
    for index, (result, _text, decode) in enumerate(results):
        print(
            f"worker {index}: dataflow {result[1] - result[0]:.2f} s, process CPU {result[3]:.2f} s, "
            f"decoding on the reader thread {decode:.2f} s CPU"
        )
    print(results[0][1])


if __name__ == "__main__":
    main()
