"""Time the columnar wordcount (``examples/wordcount_columnar.py``) on 1 process against 2 processes x 1 worker.

Prints, for each setting: the total wall time of ``execute`` (start-up included),
the time inside the workers (from the first worker's start to the last one's
end, measured in ``worker_main``) and each worker's thread CPU; and with
``--profile``, worker 0's top functions by own time on 2 processes.

    python benchmarks/profile_wordcount_columnar.py --epochs 10 --lines 20000
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
for path in (ROOT, ROOT / "examples"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import wordcount_columnar  # type: ignore[import-not-found]  # noqa: E402
from wordcount import random_text  # type: ignore[import-not-found]  # noqa: E402

from runtime import Worker, execute  # noqa: E402


def timed(worker: Worker, text: list[list[str]], profile: bool, top: int) -> tuple[float, float, float, str]:
    """Run the example's worker; return (start, end, thread CPU s, profile text)."""
    profiler = cProfile.Profile() if profile else None
    start, cpu = time.perf_counter(), time.thread_time()
    if profiler is not None:
        profiler.enable()
    wordcount_columnar.worker_main(worker, text)
    if profiler is not None:
        profiler.disable()
    end, cpu = time.perf_counter(), time.thread_time() - cpu
    text_out = ""
    if profiler is not None:
        stream = io.StringIO()
        pstats.Stats(profiler, stream=stream).sort_stats("tottime").print_stats(top)
        text_out = stream.getvalue()
    return start, end, cpu, text_out


def main() -> None:
    """Measure 1 and 2 processes ``--repeat`` times each, alternating."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    text = random_text(args.epochs, args.lines, 1)
    print(f"pytimely from {Path(str(sys.modules['runtime'].__file__)).parent.parent}")
    for _ in range(args.repeat):
        for processes in (1, 2):
            began = time.perf_counter()
            job = partial(timed, text=text, profile=False, top=0)
            results: list[Any] = execute(job, workers=1, processes=processes)
            total = time.perf_counter() - began
            inside = max(r[1] for r in results) - min(r[0] for r in results)
            cpus = ", ".join(f"{r[2]:.2f}" for r in results)
            print(
                f"{processes} process(es): total {total:.2f} s, inside the workers {inside:.2f} s, "
                f"worker thread CPU {cpus} s"
            )
    if args.profile:
        results = execute(partial(timed, text=text, profile=True, top=args.top), workers=1, processes=2)
        print(results[0][3])


if __name__ == "__main__":
    main()
