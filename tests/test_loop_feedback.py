"""A loop variable's feedback: what arrives for one time in one invocation goes round as one message."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np
import pytest

from runtime import execute
from scopes.input_handle import BATCH_SIZE
from scopes.loops import JOIN_LIMIT


def countdown(worker: Any, numbers: list[int], messages: dict[Any, list[list[int]]]) -> None:
    """Every number goes round the loop, one less each time, until it reaches 0; ``messages[time]``: the batches
    that the loop body saw at each time."""

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()

        def body(inner: Any) -> Any:
            loop, feedback = inner.loop_variable(1)
            running, done = stream.enter(inner).concat(feedback).branch(lambda n: n == 0)
            running.map(lambda n: n - 1).inspect_batch(lambda time, batch: messages[time].append(batch)).connect_loop(
                loop
            )
            return done.leave()

        return handle, scope.iterative(body).probe()

    handle, probe = worker.dataflow(build)
    if worker.index == 0:
        handle.send_batch(numbers)
    handle.close()
    worker.step_while(lambda: not probe.done())


def test_an_input_sent_in_pieces_circulates_as_one_message_per_iteration() -> None:
    numbers = [5] * (2 * BATCH_SIZE) + [3] * (BATCH_SIZE // 2)  # the input handle sends three pieces
    messages: dict[Any, list[list[int]]] = defaultdict(list)
    execute(lambda worker: countdown(worker, numbers, messages), workers=1)
    by_round = sorted(messages.items(), key=lambda item: item[0].inner)
    assert [len(batches) for _, batches in by_round] == [3, 1, 1, 1, 1]  # the pieces, then one message a round
    for round_, (time, batches) in enumerate(by_round):
        assert time.inner == round_
        expected = Counter({4 - round_: 2 * BATCH_SIZE} | ({2 - round_: BATCH_SIZE // 2} if round_ < 3 else {}))
        assert Counter(record for batch in batches for record in batch) == expected


def test_joined_messages_hold_at_most_the_join_limit() -> None:
    numbers = [3] * (10 * BATCH_SIZE)  # ten pieces: more than one joined message holds
    messages: dict[Any, list[list[int]]] = defaultdict(list)
    execute(lambda worker: countdown(worker, numbers, messages), workers=1)
    by_round = sorted(messages.items(), key=lambda item: item[0].inner)
    assert [len(batch) for batch in by_round[0][1]] == [BATCH_SIZE] * 10
    for _, batches in by_round[1:]:
        assert [len(batch) for batch in batches] == [JOIN_LIMIT, JOIN_LIMIT, 10 * BATCH_SIZE - 2 * JOIN_LIMIT]


def test_joining_the_pieces_changes_no_batch_that_was_sent() -> None:
    numbers = [2] * (3 * BATCH_SIZE)
    messages: dict[Any, list[list[int]]] = defaultdict(list)
    execute(lambda worker: countdown(worker, numbers, messages), workers=1)
    first = min(messages, key=lambda time: time.inner)
    assert [len(batch) for batch in messages[first]] == [BATCH_SIZE] * 3  # the lists kept by inspect are intact
    assert all(record == 1 for batch in messages[first] for record in batch)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_every_record_goes_round_as_often_at_every_worker_count(workers: int) -> None:
    numbers = [n % 7 for n in range(3 * BATCH_SIZE + 5)]
    messages: dict[Any, list[list[int]]] = defaultdict(list)
    execute(lambda worker: countdown(worker, numbers, messages), workers=workers)
    seen = Counter((time.inner, record) for time, batches in messages.items() for batch in batches for record in batch)
    expected = Counter((steps, n - 1 - steps) for n in numbers for steps in range(n))
    assert seen == expected


def test_columnar_batches_go_round_as_they_came() -> None:
    sent: list[Any] = []

    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()

            def body(inner: Any) -> Any:
                loop, feedback = inner.loop_variable(1)
                both = stream.enter(inner).concat(feedback)
                both.map_batch(lambda batch: batch[batch > 0] - 1).inspect_batch(
                    lambda time, batch: sent.append((time.inner, batch))
                ).connect_loop(loop)
                return both.leave()

            return handle, scope.iterative(body).probe()

        handle, probe = worker.dataflow(build)
        handle.send_batch(np.array([2, 2, 1], dtype=np.int64))
        handle.send_batch(np.array([2], dtype=np.int64))
        handle.close()
        worker.step_while(lambda: not probe.done())

    execute(main, workers=1)
    assert all(isinstance(batch, np.ndarray) for _, batch in sent)
    rows = Counter((round_, int(value)) for round_, batch in sent for value in batch)
    assert rows == Counter({(0, 1): 3, (0, 0): 1, (1, 0): 3})
    assert sorted(len(batch) for round_, batch in sent if round_ == 1) == [1, 2]  # both arrays came back, unjoined
