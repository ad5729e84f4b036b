"""A loop: Collatz stopping times, with the loop counter as the step count.

Numbers enter a nested ``iterative`` scope, whose timestamps are
``Product(epoch, round)``.  Each round applies one Collatz step (``n / 2`` if ``n``
is even, ``3n + 1`` if odd) to every number that has not reached 1 yet and feeds
it back through the loop variable, which advances the round by one; numbers that
reach 1 leave the loop.  So a number that needs ``k`` steps leaves at round
``k``: an operator reads the round off the timestamp (``ref.time.inner``) and
outputs ``(n, k)`` without counting anything itself.  Inside the loop the numbers
are exchanged by their current value, so they wander between workers, in
batches, as they iterate.  Numbers arrive over several epochs, and each epoch's
loop runs to completion independently.

Run it with ``python examples/loopdemo.py -w 2 --limit 1000``.
"""

from __future__ import annotations

import argparse
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
    OperatorInfo,
    OperatorInput,
    OperatorOutput,
    Pipeline,
    ScopeBuilder,
    Stream,
)

Result = tuple[int, int, int]
"""``(epoch, n, steps)``."""


def collatz_step(n: int) -> int:
    """One step of the Collatz map."""
    return n // 2 if n % 2 == 0 else 3 * n + 1


def stamp_rounds(capability: Capability, info: OperatorInfo) -> Callable[..., None]:
    """Operator logic: replace each ``(start, current)`` by ``(start, loop round)``."""
    capability.drop()

    def logic(input: OperatorInput, output: OperatorOutput) -> None:
        for ref, batch in input:
            steps = ref.time.inner
            output.session(ref).give_batch([(start, steps) for start, _ in batch])

    return logic


def collatz(numbers: Stream) -> Stream:
    """``(n, steps to reach 1)`` for every positive number in ``numbers``."""

    def body(inner: ScopeBuilder) -> Stream:
        loop, feedback = inner.loop_variable(1, name="NextRound")
        state = numbers.map(lambda n: (n, n), name="Start").enter(inner).concat(feedback)
        running, finished = state.branch(lambda pair: pair[1] == 1, name="ReachedOne")
        (
            running.map(lambda pair: (pair[0], collatz_step(pair[1])), name="Step")
            .exchange(lambda pair: pair[1])
            .connect_loop(loop)
        )
        return finished.unary(Pipeline, "Rounds", stamp_rounds).leave()

    return numbers.scope.iterative(body, name="Collatz")


def worker_main(worker: Worker, numbers: list[int], per_epoch: int, lockstep: bool = True) -> list[Result]:
    """Build and drive the dataflow on one worker; return the results that reached it."""
    produced: list[Result] = []

    def collect(time: Any, batch: list[tuple[int, int]]) -> None:
        produced.extend((time, n, steps) for n, steps in batch)

    def build(scope: ScopeBuilder) -> Any:
        handle, stream = scope.new_input("Numbers")
        probe = collatz(stream).inspect_batch(collect, name="Collect").probe()
        return handle, probe

    handle, probe = worker.dataflow(build, name="collatz")
    for epoch, start in enumerate(range(0, len(numbers), per_epoch)):
        chunk = numbers[start : start + per_epoch]
        handle.send_batch(n for i, n in enumerate(chunk) if i % worker.peers == worker.index)
        handle.advance_to(epoch + 1)
        if lockstep:
            worker.step_while(lambda: probe.less_than(handle.time))
    handle.close()
    worker.step_while(lambda: not probe.done())
    return produced


def run(
    numbers: list[int], per_epoch: int = 100, workers: int = 1, lockstep: bool = True, processes: int = 1
) -> list[Result]:
    """Collatz stopping times of ``numbers`` (``per_epoch`` per epoch), sorted.

    With ``lockstep`` each worker waits for an epoch's loop to finish before
    sending the next epoch; without it, the epochs iterate concurrently.
    """
    job = partial(worker_main, numbers=numbers, per_epoch=per_epoch, lockstep=lockstep)
    return combine(execute(job, workers=workers, processes=processes))


def combine(results: list[list[Result]]) -> list[Result]:
    """Every worker's results, sorted."""
    return sorted(result for per_worker in results for result in per_worker)


def reference(numbers: list[int], per_epoch: int = 100) -> list[Result]:
    """What :func:`run` should return, computed directly."""
    out: list[Result] = []
    for i, n in enumerate(numbers):
        steps, current = 0, n
        while current != 1:
            current = collatz_step(current)
            steps += 1
        out.append((i // per_epoch, n, steps))
    return sorted(out)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False, parents=[cluster_arguments()])
    parser.add_argument("--help", action="help", help="show this help message and exit")
    parser.add_argument("--limit", type=int, default=300, help="compute for 1 .. limit")
    parser.add_argument("--per-epoch", type=int, default=100, help="numbers per epoch")
    parser.add_argument("--no-lockstep", action="store_true", help="send every epoch without waiting")
    args = parser.parse_args(argv)
    if args.per_epoch < 1:
        parser.error(f"--per-epoch must be at least 1, got {args.per_epoch}")

    numbers = list(range(1, args.limit + 1))
    job = partial(worker_main, numbers=numbers, per_epoch=args.per_epoch, lockstep=not args.no_lockstep)
    result = combine(execute_from_args(job, argv))
    for epoch in sorted({epoch for epoch, _, _ in result}):
        _, n, steps = max((r for r in result if r[0] == epoch), key=lambda r: (r[2], -r[1]))
        print(f"epoch {epoch}: longest is {n}, which takes {steps} steps to reach 1")
    ok = result == reference(numbers, args.per_epoch)
    print(f"{len(result)} numbers on {args.workers * args.processes} worker(s); matches reference: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
