"""A streaming hash join: a binary operator with Exchange on both inputs and per-key tables.

Two inputs, ``left`` records ``(key, value)`` and ``right`` records ``(key, value)``,
arrive over several epochs.  Both are exchanged by key, so records with the
same key meet on the same worker.  The join operator keeps one hash table per
input, mapping each key to the ``(time, value)`` pairs seen so far.  When a
batch arrives on one side it probes the other side's table and emits
``(key, left value, right value)`` for each match, then adds the batch to its own
table (a symmetric hash join: each pair is produced exactly once, by whichever
record arrives second).  A match is emitted at the later of the two records'
times, which the operator may do with the capability of the message in hand
because that time is never earlier than the message's own.  The operator needs
no notifications: it just reacts to data.

Run it with ``python examples/hashjoin.py -w 3 --epochs 4``.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime import Worker, execute, execute_from_args  # noqa: E402
from runtime.cluster import cluster_arguments  # noqa: E402
from scopes import (  # noqa: E402
    Capability,
    Exchange,
    OperatorInfo,
    OperatorInput,
    OperatorOutput,
    ScopeBuilder,
    Stream,
)

Pair = tuple[int, str]
"""A ``(key, value)`` record of either input."""
Epochs = list[list[Pair]]
"""Per epoch, the records of one input."""
Match = tuple[int, int, str, str]
"""``(epoch, key, left value, right value)``."""


def random_inputs(epochs: int, per_epoch: int, keys: int, seed: int) -> tuple[Epochs, Epochs]:
    """Random left and right inputs: ``per_epoch`` records per side and epoch, keys below ``keys``."""
    rng = random.Random(seed)

    def side(tag: str) -> Epochs:
        return [[(rng.randrange(keys), f"{tag}{epoch}.{i}") for i in range(per_epoch)] for epoch in range(epochs)]

    return side("L"), side("R")


def hash_join(left: Stream, right: Stream) -> Stream:
    """Join ``(key, value)`` records of ``left`` and ``right``: ``(key, left value, right value)``."""

    def constructor(capability: Capability, info: OperatorInfo) -> Callable[..., None]:
        capability.drop()
        tables: tuple[dict[int, list[tuple[Any, str]]], dict[int, list[tuple[Any, str]]]] = ({}, {})

        def consume(input: OperatorInput, side: int, output: OperatorOutput) -> None:
            mine, other = tables[side], tables[1 - side]
            for ref, batch in input:
                time = ref.time
                matches: dict[Any, list[tuple[int, str, str]]] = {}
                for key, value in batch:
                    for other_time, other_value in other.get(key, ()):
                        pair = (value, other_value) if side == 0 else (other_value, value)
                        later = max(time, other_time)
                        matches.setdefault(later, []).append((key, *pair))
                    mine.setdefault(key, []).append((time, value))
                for later, records in sorted(matches.items()):
                    output.session(ref, later).give_batch(records)

        def logic(left: OperatorInput, right: OperatorInput, output: OperatorOutput) -> None:
            consume(left, 0, output)
            consume(right, 1, output)

        return logic

    key = Exchange(lambda pair: pair[0])
    return left.binary(right, key, key, "HashJoin", constructor)


def worker_main(worker: Worker, left: Epochs, right: Epochs, lockstep: bool) -> list[Match]:
    """Build and drive the dataflow on one worker; return the matches it produced."""
    produced: list[Match] = []

    def collect(time: Any, batch: list[tuple[int, str, str]]) -> None:
        produced.extend((time, *record) for record in batch)

    def build(scope: ScopeBuilder) -> Any:
        left_handle, left_stream = scope.new_input("Left")
        right_handle, right_stream = scope.new_input("Right")
        joined = hash_join(left_stream, right_stream)
        probe = joined.inspect_batch(collect, name="Collect").probe()
        return left_handle, right_handle, probe

    left_handle, right_handle, probe = worker.dataflow(build, name="hashjoin")
    peers, index = worker.peers, worker.index
    for epoch in range(max(len(left), len(right))):
        for handle, data in ((left_handle, left), (right_handle, right)):
            records = data[epoch] if epoch < len(data) else []
            handle.send_batch(r for i, r in enumerate(records) if i % peers == index)
            handle.advance_to(epoch + 1)
        if lockstep:
            worker.step_while(lambda: probe.less_than(left_handle.time))
    left_handle.close()
    right_handle.close()
    worker.step_while(lambda: not probe.done())
    return produced


def run(left: Epochs, right: Epochs, workers: int = 1, lockstep: bool = True, processes: int = 1) -> list[Match]:
    """All matches of the two inputs, sorted.

    With ``lockstep`` each worker waits for an epoch's results before sending the
    next epoch; without it, every epoch is sent at once.
    """
    job = partial(worker_main, left=left, right=right, lockstep=lockstep)
    return combine(execute(job, workers=workers, processes=processes))


def combine(results: list[list[Match]]) -> list[Match]:
    """Every worker's matches, sorted."""
    return sorted(match for produced in results for match in produced)


def reference(left: Epochs, right: Epochs) -> list[Match]:
    """What :func:`run` should return, by nested loops."""
    return sorted(
        (max(left_epoch, right_epoch), left_key, left_value, right_value)
        for left_epoch, left_records in enumerate(left)
        for left_key, left_value in left_records
        for right_epoch, right_records in enumerate(right)
        for right_key, right_value in right_records
        if left_key == right_key
    )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False, parents=[cluster_arguments()])
    parser.add_argument("--help", action="help", help="show this help message and exit")
    parser.add_argument("--epochs", type=int, default=4, help="number of epochs")
    parser.add_argument("--records", type=int, default=30, help="records per input and epoch")
    parser.add_argument("--keys", type=int, default=20, help="number of distinct keys")
    parser.add_argument("--seed", type=int, default=1, help="random seed for the inputs")
    parser.add_argument("--no-lockstep", action="store_true", help="send every epoch without waiting")
    args = parser.parse_args(argv)
    if args.keys < 1:
        parser.error(f"--keys must be at least 1, got {args.keys}")

    left, right = random_inputs(args.epochs, args.records, args.keys, args.seed)
    job = partial(worker_main, left=left, right=right, lockstep=not args.no_lockstep)
    result = combine(execute_from_args(job, argv))
    for epoch in range(args.epochs):
        matches = [m for m in result if m[0] == epoch]
        sample = ", ".join(f"{k}:{lv}+{rv}" for _, k, lv, rv in matches[:3])
        print(f"epoch {epoch}: {len(matches)} new matches, e.g. {sample}")
    ok = result == reference(left, right)
    print(f"{len(result)} matches on {args.workers * args.processes} worker(s); matches reference: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
