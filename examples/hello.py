"""Hello, timely dataflow: an input, a map, an exchange, and a probe, over several epochs.

Each worker owns a share of the numbers ``0 .. count - 1`` (number ``i`` belongs to
worker ``i % peers``) and feeds them into the dataflow one epoch at a time, in
batches.  The dataflow squares each number, moves it to the worker
``hash(number) % peers`` with ``exchange``, and records, on the receiving worker,
the epoch and the batch it arrived in.  After each epoch the driver steps the
worker until the probe says the epoch is complete, which is how a timely program
waits for its results.

Run it with ``python examples/hello.py -w 3``; ``-n 2 -w 2`` runs two processes of two
worker threads each, and ``-n 2 -p I -h hostfile`` runs process ``I`` of a cluster
started in several terminals or on several hosts (timely's flags).
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime import Worker, execute, execute_from_args  # noqa: E402
from runtime.cluster import cluster_arguments  # noqa: E402
from scopes import ScopeBuilder  # noqa: E402

Record = tuple[int, int, int]
"""``(epoch, number, square)``."""


def epoch_of(number: int, per_epoch: int) -> int:
    """The epoch at which ``number`` is introduced."""
    return number // per_epoch


def worker_main(worker: Worker, count: int, per_epoch: int) -> list[tuple[int, Record]]:
    """Build and drive the dataflow on one worker; return ``(worker, record)`` pairs it received."""
    received: list[tuple[int, Record]] = []

    def collect(time: Any, batch: list[tuple[int, int]]) -> None:
        for number, square in batch:
            received.append((worker.index, (time, number, square)))

    def build(scope: ScopeBuilder) -> Any:
        handle, numbers = scope.new_input("Numbers")
        probe = (
            numbers.map(lambda x: (x, x * x), name="Square")
            .exchange(lambda pair: pair[0])
            .inspect_batch(collect, name="Collect")
            .probe()
        )
        return handle, probe

    handle, probe = worker.dataflow(build, name="hello")
    epochs = (count + per_epoch - 1) // per_epoch
    for epoch in range(epochs):
        start, stop = epoch * per_epoch, min(count, (epoch + 1) * per_epoch)
        mine = [i for i in range(start, stop) if i % worker.peers == worker.index]
        handle.send_batch(mine)
        handle.advance_to(epoch + 1)
        worker.step_while(lambda: probe.less_than(handle.time))
    handle.close()
    worker.step_while(lambda: not probe.done())
    return received


def run_detailed(count: int, per_epoch: int = 10, workers: int = 1, processes: int = 1) -> list[tuple[int, Record]]:
    """Run the dataflow; return every ``(receiving worker, (epoch, n, n*n))``, sorted."""
    job = partial(worker_main, count=count, per_epoch=per_epoch)
    return combine(execute(job, workers=workers, processes=processes))


def combine(results: list[list[tuple[int, Record]]]) -> list[tuple[int, Record]]:
    """Every worker's ``(worker, record)`` pairs, sorted."""
    return sorted(pair for per_worker in results for pair in per_worker)


def run(count: int, per_epoch: int = 10, workers: int = 1, processes: int = 1) -> list[Record]:
    """The sorted ``(epoch, n, n*n)`` records the dataflow produced."""
    return sorted(record for _, record in run_detailed(count, per_epoch, workers, processes))


def reference(count: int, per_epoch: int = 10) -> list[Record]:
    """What :func:`run` should return, computed directly."""
    return [(epoch_of(n, per_epoch), n, n * n) for n in range(count)]


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False, parents=[cluster_arguments()])
    parser.add_argument("--help", action="help", help="show this help message and exit")
    parser.add_argument("--count", type=int, default=12, help="how many numbers to send")
    parser.add_argument("--per-epoch", type=int, default=4, help="numbers per epoch")
    args = parser.parse_args(argv)
    if args.per_epoch < 1:
        parser.error(f"--per-epoch must be at least 1, got {args.per_epoch}")
    peers = args.workers * args.processes

    job = partial(worker_main, count=args.count, per_epoch=args.per_epoch)
    detailed = combine(execute_from_args(job, argv))
    for index, (epoch, number, square) in sorted(detailed, key=lambda p: (p[1][0], p[0], p[1])):
        print(f"epoch {epoch}: worker {index} received {number} (squared: {square})")
    misrouted = [(i, r) for i, r in detailed if hash(r[1]) % peers != i]
    result = [record for _, record in detailed]
    ok = sorted(result) == reference(args.count, args.per_epoch) and not misrouted
    print(f"{len(result)} records on {peers} worker(s); matches reference: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
