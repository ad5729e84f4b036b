"""Barrier synchronization (seed 001): start every worker's timer at the same moment.

Each worker "loads data" for a different time (worker ``i`` sleeps ``i * delay``
seconds), then waits at a :class:`~runtime.barrier.Barrier`.  Once every worker
has arrived, all leave together, so the time measured after the barrier is the
computation's, not the wait for slower workers.  The barrier is reusable: the
program passes it ``rounds`` times.

    python examples/barrier.py -w 3
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime import Worker, execute  # noqa: E402
from runtime.barrier import Barrier  # noqa: E402

PRINT_LOCK = threading.Lock()


def say(line: str) -> None:
    """Print one whole line (the workers are threads)."""
    with PRINT_LOCK:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def worker_main(worker: Worker, rounds: int, delay: float) -> list[tuple[float, float]]:
    """Pass the barrier ``rounds`` times; return each round's (arrival, departure) times."""
    barrier = Barrier(worker)
    start = time.monotonic()
    times = []
    for round_ in range(rounds):
        time.sleep(delay * ((worker.index + round_) % worker.peers))
        arrived = time.monotonic()
        say(f"{arrived - start:8.3f}s\tworker {worker.index} loaded (round {round_})")
        barrier.wait(timeout=60)
        left = time.monotonic()
        say(f"{left - start:8.3f}s\tworker {worker.index} passed the barrier (round {round_})")
        times.append((arrived, left))
    return times


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-w", "--workers", type=int, default=2, help="number of worker threads")
    parser.add_argument("--rounds", type=int, default=2, help="how many times to pass the barrier")
    parser.add_argument("--delay", type=float, default=0.2, help="seconds of 'loading' per worker index")
    args = parser.parse_args(argv)
    results = execute(lambda worker: worker_main(worker, args.rounds, args.delay), workers=args.workers)
    ok = all(
        min(per_worker[r][1] for per_worker in results) >= max(per_worker[r][0] for per_worker in results)
        for r in range(args.rounds)
    )
    print(f"{args.workers} worker(s) passed {args.rounds} barrier(s) together: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
