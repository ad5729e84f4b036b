"""Distinct records per epoch: exchange by record, emit at once, clean up on notification.

Records (small integers, with many repeats) arrive over several epochs.  They
are exchanged by value, so every copy of a record reaches the same worker.  The
distinct operator keeps, for each epoch, the set of records it has seen: a
record not in the set is emitted straight away (no need to wait for the epoch to
end) and added to it.  When it first sees an epoch it asks for a notification,
and when the notification arrives — no more records of that epoch can come —
it drops the epoch's set, so its state stays bounded by the epochs in flight.

Run it with ``python examples/distinct.py -w 2 --epochs 5``.
"""

from __future__ import annotations

import argparse
import random
import sys
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime import Worker, execute, execute_from_args  # noqa: E402
from runtime.cluster import cluster_arguments  # noqa: E402
from scopes import (  # noqa: E402
    Exchange,
    Notificator,
    OperatorInput,
    OperatorOutput,
    ScopeBuilder,
    Stream,
)

Epochs = list[list[int]]
"""Per epoch, the input records."""


def random_records(epochs: int, per_epoch: int, values: int, seed: int) -> Epochs:
    """``per_epoch`` random integers below ``values`` for each of ``epochs`` epochs."""
    rng = random.Random(seed)
    return [[rng.randrange(values) for _ in range(per_epoch)] for _ in range(epochs)]


def distinct(stream: Stream, state: dict[Any, set[Any]]) -> Stream:
    """Each record of ``stream`` once per time; ``state`` holds the sets of times in progress."""

    def logic(input: OperatorInput, output: OperatorOutput, notificator: Notificator) -> None:
        for ref, batch in input:
            seen = state.get(ref.time)
            if seen is None:
                seen = state[ref.time] = set()
                notificator.notify_at(ref.retain())
            fresh = []
            for record in batch:
                if record not in seen:
                    seen.add(record)
                    fresh.append(record)
            output.session(ref).give_batch(fresh)
        for capability in notificator:
            del state[capability.time]

    return stream.unary_notify(Exchange(lambda record: record), "Distinct", logic)


def worker_main(worker: Worker, data: Epochs, lockstep: bool) -> tuple[list[tuple[int, int]], int]:
    """Build and drive the dataflow on one worker.

    Returns the ``(epoch, record)`` pairs it emitted and how many per-epoch sets
    it still held at the end (zero if every notification was delivered).
    """
    produced: list[tuple[int, int]] = []
    state: dict[Any, set[Any]] = {}

    def collect(time: Any, batch: list[int]) -> None:
        produced.extend((time, record) for record in batch)

    def build(scope: ScopeBuilder) -> Any:
        handle, stream = scope.new_input("Records")
        probe = distinct(stream, state).inspect_batch(collect, name="Collect").probe()
        return handle, probe

    handle, probe = worker.dataflow(build, name="distinct")
    for epoch, records in enumerate(data):
        handle.send_batch(r for i, r in enumerate(records) if i % worker.peers == worker.index)
        handle.advance_to(epoch + 1)
        if lockstep:
            worker.step_while(lambda: probe.less_than(handle.time))
    handle.close()
    worker.step_while(lambda: not probe.done())
    return produced, len(state)


def run(data: Epochs, workers: int = 1, lockstep: bool = True, processes: int = 1) -> dict[int, list[int]]:
    """The distinct records of each epoch, sorted (epochs without records are left out).

    Raises ``AssertionError`` if an operator kept state for a completed epoch.
    """
    job = partial(worker_main, data=data, lockstep=lockstep)
    return combine(execute(job, workers=workers, processes=processes))


def combine(outputs: list[tuple[list[tuple[int, int]], int]]) -> dict[int, list[int]]:
    """The distinct records of every epoch, from every worker's output; checks that no state was left."""
    result: dict[int, list[int]] = {}
    for produced, leftover in outputs:
        if leftover:
            raise AssertionError(f"{leftover} epoch(s) were never notified")
        for epoch, record in produced:
            result.setdefault(epoch, []).append(record)
    return {epoch: sorted(records) for epoch, records in result.items()}


def reference(data: Epochs) -> dict[int, list[int]]:
    """What :func:`run` should return, computed directly."""
    return {epoch: sorted(set(records)) for epoch, records in enumerate(data) if records}


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False, parents=[cluster_arguments()])
    parser.add_argument("--help", action="help", help="show this help message and exit")
    parser.add_argument("--epochs", type=int, default=4, help="number of epochs")
    parser.add_argument("--records", type=int, default=200, help="records per epoch")
    parser.add_argument("--values", type=int, default=50, help="records are drawn below this")
    parser.add_argument("--seed", type=int, default=1, help="random seed for the records")
    parser.add_argument("--no-lockstep", action="store_true", help="send every epoch without waiting")
    args = parser.parse_args(argv)
    if args.values < 1:
        parser.error(f"--values must be at least 1, got {args.values}")

    data = random_records(args.epochs, args.records, args.values, args.seed)
    result = combine(execute_from_args(partial(worker_main, data=data, lockstep=not args.no_lockstep), argv))
    for epoch in sorted(result):
        print(f"epoch {epoch}: {len(data[epoch])} records, {len(result[epoch])} distinct")
    ok = result == reference(data)
    print(f"{args.workers * args.processes} worker(s); matches reference: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
