"""Operators yield to the operators they feed after a burst of records (``scopes.bursts.BURST``).

A fused chain of per-record stages counts the records it sends; a generic operator's pass over its input, and
the built-in operators that read their input themselves (``map_batch``, ``inspect_batch``, ``inspect``,
``branch``, ``partition``, ``delay``), the records they read.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from runtime import execute
from scopes.bursts import BURST
from scopes.contracts import Pipeline
from scopes.input_handle import BATCH_SIZE


def first_batch_seen_after(chain_input: int, doubled: bool) -> tuple[int, int]:
    """Send ``chain_input`` records to a ``flat_map`` (two records out per record in, with ``doubled``) feeding an
    ``inspect_batch``; return (records the chain had read when the first batch reached the inspector, records
    the inspector saw in all)."""
    read = [0]
    seen_at: list[int] = []
    total = [0]

    def main(worker: Any) -> None:
        def twice(record: int) -> list[int]:
            read[0] += 1
            return [record, record] if doubled else [record]

        def look(_time: Any, batch: list[int]) -> None:
            seen_at.append(read[0])
            total[0] += len(batch)

        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            return handle, stream.flat_map(twice).inspect_batch(look).probe()

        handle, probe = worker.dataflow(build)
        handle.send_batch(list(range(chain_input)))
        handle.close()
        worker.step_while(lambda: not probe.done())

    execute(main, workers=1)
    return seen_at[0], total[0]


def test_a_chain_that_sent_a_burst_lets_its_receiver_read_before_it_reads_on() -> None:
    assert BATCH_SIZE * 2 * 2 == BURST  # two pieces of the input, doubled, make a burst
    pieces = 5
    first, total = first_batch_seen_after(pieces * BATCH_SIZE, doubled=True)
    assert first == 2 * BATCH_SIZE  # it stopped after the piece that made the burst
    assert total == 2 * pieces * BATCH_SIZE  # and read the rest later: nothing lost


def test_a_chain_below_a_burst_reads_all_its_input_in_one_run() -> None:
    first, total = first_batch_seen_after(3 * BATCH_SIZE, doubled=False)
    assert first == 3 * BATCH_SIZE
    assert total == 3 * BATCH_SIZE


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_every_record_arrives_once_through_an_exchange_at_every_worker_count(workers: int) -> None:
    words = [f"w{n % 977}" for n in range(20 * BATCH_SIZE)]

    def main(worker: Any) -> Counter[str]:
        counted: Counter[str] = Counter()

        def build(scope: Any) -> Any:
            handle, lines = scope.new_input()
            pairs = lines.flat_map(lambda word: [(word, 1), (word, 2)], name="Split")
            routed = pairs.exchange(lambda pair: pair[0])
            return handle, routed.inspect(lambda pair: counted.update({pair[0]: pair[1]})).probe()

        handle, probe = worker.dataflow(build)
        for epoch in range(3):
            handle.send_batch(words[worker.index :: worker.peers])
            handle.advance_to(epoch + 1)
        handle.close()
        worker.step_while(lambda: not probe.done())
        return counted

    per_worker = execute(main, workers=workers)
    found = sum(per_worker, Counter())
    assert sum(len(counted) for counted in per_worker) == len(found)  # each word counted at one worker only
    assert found == Counter({word: 3 * 3 * count for word, count in Counter(words).items()})


def test_a_generic_operator_reads_a_burst_per_run_and_its_receiver_reads_in_between() -> None:
    """A ``unary`` operator's pass over its input ends after a burst; the operator runs again for the rest."""
    read = [0]
    seen_at: list[int] = []
    total = [0]
    pieces = 6

    def main(worker: Any) -> None:
        def combine(capability: Any, info: Any) -> Any:
            def logic(input: Any, output: Any) -> None:
                for ref, batch in input:
                    read[0] += len(batch)
                    output.session(ref).give_batch(list(batch))

            return logic

        def look(_time: Any, batch: list[int]) -> None:
            seen_at.append(read[0])
            total[0] += len(batch)

        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            return handle, stream.unary(Pipeline, "Pass", combine).inspect_batch(look).probe()

        handle, probe = worker.dataflow(build)
        handle.send_batch(list(range(pieces * BATCH_SIZE)))
        handle.close()
        worker.step_while(lambda: not probe.done())

    execute(main, workers=1)
    assert BURST == 4 * BATCH_SIZE
    assert seen_at[0] == 4 * BATCH_SIZE  # the first pass stopped after a burst's worth of messages
    assert total[0] == pieces * BATCH_SIZE  # and the rest came in the next run


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_a_count_per_time_is_whole_when_its_input_is_read_a_burst_at_a_time(workers: int) -> None:
    def main(worker: Any) -> list[tuple[int, int]]:
        counts: list[tuple[int, int]] = []

        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            counted = stream.exchange(lambda n: n % 5).count()
            return handle, counted.inspect_batch(lambda time, batch: counts.extend((time, n) for n in batch)).probe()

        handle, probe = worker.dataflow(build)
        for epoch in range(3):
            if worker.index == 0:
                handle.send_batch(list(range((epoch + 1) * 3 * BURST)))
            handle.advance_to(epoch + 1)
        handle.close()
        worker.step_while(lambda: not probe.done())
        return counts

    found = sorted(pair for counts in execute(main, workers=workers) for pair in counts)
    assert {time for time, _ in found} == {0, 1, 2}
    for time in range(3):
        assert sum(n for t, n in found if t == time) == (time + 1) * 3 * BURST


def _counting(read: list[int], kind: str) -> Any:
    """A stream operator of ``kind`` that adds the records it reads to ``read[0]`` and passes them all on."""

    def seen(record: Any) -> None:
        read[0] += 1

    def seen_batch(batch: Any) -> Any:
        read[0] += len(batch)
        return list(batch)

    operators = {
        "map_batch": lambda stream: stream.map_batch(seen_batch),
        "inspect_batch": lambda stream: stream.inspect_batch(lambda _time, batch: seen_batch(batch)),
        "inspect": lambda stream: stream.inspect(seen),
        "branch": lambda stream: stream.branch(lambda record: seen(record) is None)[1],
        "partition": lambda stream: stream.partition(1, lambda record: 0 if seen(record) is None else 1)[0],
        "delay": lambda stream: stream.delay(lambda record, time: time if seen(record) is None else time),
    }
    return operators[kind]


@pytest.mark.parametrize("kind", ["map_batch", "inspect_batch", "inspect", "branch", "partition", "delay"])
def test_an_operator_that_reads_its_own_input_yields_after_a_burst(kind: str) -> None:
    read = [0]
    seen_at: list[int] = []
    total = [0]
    pieces = 6

    def main(worker: Any) -> None:
        def look(_time: Any, batch: list[int]) -> None:
            seen_at.append(read[0])
            total[0] += len(batch)

        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            return handle, _counting(read, kind)(stream).inspect_batch(look).probe()

        handle, probe = worker.dataflow(build)
        handle.send_batch(list(range(pieces * BATCH_SIZE)))
        handle.close()
        worker.step_while(lambda: not probe.done())

    execute(main, workers=1)
    assert seen_at[0] == BURST  # the first run stopped after a burst's worth of messages
    assert total[0] == pieces * BATCH_SIZE  # and the rest came in the next run


def test_a_columnar_batch_longer_than_a_burst_is_read_whole_and_alone() -> None:
    np = pytest.importorskip("numpy")
    sizes: list[int] = []
    runs: list[list[int]] = [[]]

    def main(worker: Any) -> None:
        def split(batch: Any) -> Any:
            runs[-1].append(len(batch))
            return batch

        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            return handle, stream.map_batch(split).inspect_batch(lambda _t, b: sizes.append(len(b))).probe()

        handle, probe = worker.dataflow(build)
        for epoch in range(3):
            handle.send_batch(np.arange(3 * BURST))
            handle.advance_to(epoch + 1)
        handle.close()

        def step() -> bool:
            runs.append([])
            return not probe.done()

        worker.step_while(step)

    execute(main, workers=1)
    assert sizes == [3 * BURST] * 3  # each array passed whole
    assert [run for run in runs if run] == [[3 * BURST]] * 3  # one array a run: each is a burst by itself
