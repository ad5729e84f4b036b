"""Programs for the flow-control tests: a fast sender and a slow receiver on two processes.

Run as a script (``python tests/helpers/flow_control_mains.py EPOCHS ROWS SLEEP``) it runs
:func:`slow_receiver` on 2 processes and prints the total that worker 1 saw, so
that a test can measure the whole process tree from outside.
"""

from __future__ import annotations

import functools
import sys
import time
from typing import Any

import numpy as np

from runtime import Barrier, execute
from runtime.worker import Worker


def to_worker_one(batch: Any) -> Any:
    """Every row's key is 1, and ``stable_hash(1) % 2 == 1``: every row goes to worker 1."""
    return np.ones(len(batch), dtype=np.int64)


def slow_receiver(worker: Worker, epochs: int, rows: int, sleep: float) -> int:
    """Worker 0 sends ``epochs`` arrays of ``rows`` ints to worker 1, which sleeps ``sleep`` s per array.

    Worker 0 never waits for worker 1 (it only steps), so without flow control
    the arrays pile up in process 1.  Returns the sum of every value worker 1 received
    (0 on worker 0).
    """
    total = [0]

    def consume(_time: Any, batch: Any) -> None:
        time.sleep(sleep)
        total[0] += int(batch.sum())

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Numbers")
        stream.exchange_batch(to_worker_one).inspect_batch(consume, name="SlowConsumer")
        return handle

    handle = worker.dataflow(build)
    base = np.arange(rows, dtype=np.int64)
    for epoch in range(epochs):
        if worker.index == 0:
            handle.send_batch(base + epoch)
        handle.advance_to(epoch + 1)
        worker.step()
    worker.run_to_completion()
    return total[0]


def expected_total(epochs: int, rows: int) -> int:
    """What :func:`slow_receiver` returns on worker 1."""
    return epochs * (rows * (rows - 1) // 2) + rows * (epochs * (epochs - 1) // 2)


def collatz_steps(value: int) -> int:
    """The next Collatz value."""
    return value // 2 if value % 2 == 0 else 3 * value + 1


def _still_going(record: Any) -> bool:
    return record[1] != 1


def _arrived(record: Any) -> bool:
    return record[1] == 1


def _route(record: Any) -> int:
    return record[1]


def _collatz(record: Any) -> Any:
    return (record[0], collatz_steps(record[1]), record[2], record[3] + 1)


def loop_with_exchange_and_barrier(worker: Worker, numbers: int, rounds: int) -> list[int]:
    """Collatz sequences in a loop whose body exchanges every record, with a Barrier between rounds.

    Each record is ``(start, value, padding, steps)``: the padding makes the
    messages far larger than a tiny send window, so both processes keep waiting
    for each other's room while they hold data.  Returns, per round, the total
    number of steps that the records finishing on this worker took to reach 1.
    """
    barrier = Barrier(worker)
    padding = "x" * 200
    steps: list[int] = []
    found = [0]

    def count(_time: Any, batch: Any) -> None:
        found[0] += sum(record[3] for record in batch)

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Starts")

        def body(inner: Any) -> Any:
            loop, feedback = inner.loop_variable(1, name="NextStep")
            moved = stream.enter(inner).concat(feedback).exchange(_route).map(_collatz)
            moved.filter(_still_going).connect_loop(loop)
            return moved.filter(_arrived).leave()

        done = scope.iterative(body, name="Collatz")
        return handle, done.inspect_batch(count).probe()

    handle, probe = worker.dataflow(build)
    for round_ in range(rounds):
        start = worker.index * numbers + round_ * numbers * worker.peers
        handle.send_batch([(n, n, padding, 0) for n in range(start + 2, start + numbers + 2)])
        handle.advance_to(round_ + 1)
        worker.step_while(functools.partial(probe.less_than, round_ + 1))
        steps.append(found[0])
        found[0] = 0
        barrier.wait(timeout=120)
    return steps


def loop_and_window(worker: Worker, numbers: int, rounds: int) -> list[Any]:
    """:func:`loop_with_exchange_and_barrier`, then this process's send window and the most it had in flight.

    Returns ``[steps per round, window, most bytes unacknowledged, largest payload sent]``.
    """
    steps = loop_with_exchange_and_barrier(worker, numbers, rounds)
    fabric = worker.communicator.fabric  # type: ignore[attr-defined]
    return [steps, fabric.send_window, fabric.most_unacknowledged, fabric.largest_payload]


def collatz_total(first: int, last: int) -> int:
    """The steps that every start in ``first..last`` takes to reach 1, summed (computed directly)."""
    total = 0
    for value in range(first, last + 1):
        while value != 1:
            value = collatz_steps(value)
            total += 1
    return total


def main() -> None:
    """Run :func:`slow_receiver` on 2 processes with the sizes on the command line; print worker 1's total."""
    epochs, rows, sleep = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    results = execute(
        functools.partial(slow_receiver, epochs=epochs, rows=rows, sleep=sleep), processes=2, stall_timeout=120
    )
    print(results[1], expected_total(epochs, rows), flush=True)


if __name__ == "__main__":
    main()
