"""A Sequencer (seed 001): workers propose announcements; all receive them in one order.

Every worker sleeps a different time between rounds and proposes a string
``"worker i, round r"``.  The :class:`~runtime.sequencer.Sequencer` delivers
every announcement to every worker, in the same order on all of them, ordered
by the time it was proposed.  At the end each worker's order is compared.

    python examples/sequence.py -w 2
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime import Worker, execute  # noqa: E402
from runtime.sequencer import Sequencer  # noqa: E402

PRINT_LOCK = threading.Lock()


def say(line: str) -> None:
    """Print one whole line (the workers are threads)."""
    with PRINT_LOCK:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def worker_main(worker: Worker, rounds: int, pause: float) -> list[str]:
    """Propose ``rounds`` announcements and receive everyone's; return them in the order received."""
    start = time.monotonic()
    sequencer: Sequencer[str] = Sequencer(worker)
    received: list[str] = []
    expected = rounds * worker.peers
    for round_ in range(rounds):
        deadline = time.monotonic() + pause * (1 + worker.index)
        while time.monotonic() < deadline:  # "sleep", but keep the dataflows running
            worker.step_or_park(0.005)
            received += _show(worker, sequencer, start)
        sequencer.push(f"worker {worker.index}, round {round_}")
    while len(received) < expected:
        received += sequencer.take(1, timeout=60)
        say(f"{time.monotonic() - start:7.3f}s\tworker {worker.index}:\trecv'd: {received[-1]!r}")
    return received


def _show(worker: Worker, sequencer: Sequencer[str], start: float) -> list[str]:
    got = list(sequencer)
    for element in got:
        say(f"{time.monotonic() - start:7.3f}s\tworker {worker.index}:\trecv'd: {element!r}")
    return got


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-w", "--workers", type=int, default=2, help="number of worker threads")
    parser.add_argument("--rounds", type=int, default=4, help="announcements per worker")
    parser.add_argument("--pause", type=float, default=0.1, help="seconds between rounds, times (1 + index)")
    args = parser.parse_args(argv)
    results = execute(lambda worker: worker_main(worker, args.rounds, args.pause), workers=args.workers)
    same = all(order == results[0] for order in results)
    print(f"{args.workers} worker(s) received {len(results[0])} announcements in the same order: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
