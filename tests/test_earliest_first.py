"""Thread mailboxes deliver the earliest time first across senders, FIFO per sender, and lose nothing."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.fabric import EarliestFirstPuller, ThreadFabric
from scopes.timestamp import Product

ADDRESS = (0, 1)


def channel(peers: int) -> tuple[ThreadFabric, list[Any], EarliestFirstPuller]:
    """A fabric of ``peers`` workers, every worker's pushers on channel 0, and worker 0's puller."""
    fabric = ThreadFabric(peers)
    allocations = [comm.allocate(0, ADDRESS) for comm in fabric.communicators()]
    puller = allocations[0][1]
    assert isinstance(puller, EarliestFirstPuller)
    return fabric, [pushers for pushers, _ in allocations], puller


def rounds(fabric: ThreadFabric, puller: EarliestFirstPuller) -> list[list[Any]]:
    """Pull round after round (each until ``None``) while the reader is activated again."""
    taken: list[list[Any]] = []
    signal = fabric.signals[0]
    for _ in range(10_000):
        signal.pending.clear()
        this_round: list[Any] = []
        while (message := puller.pull()) is not None:
            this_round.append(message)
        taken.append(this_round)
        if not signal.pending:
            break
        assert list(signal.pending) == [ADDRESS]  # messages wait: the reader is activated for them
    return taken


messages = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 5)), max_size=40)


@given(messages)
@settings(max_examples=200, deadline=None)
def test_every_message_once_fifo_per_sender_one_time_per_round(sent: list[tuple[int, int]]) -> None:
    fabric, pushers, puller = channel(3)
    for number, (sender, time) in enumerate(sent):
        pushers[sender][0].push(time, [sender, number])
    taken = rounds(fabric, puller)
    flat = [message for each in taken for message in each]
    assert sorted(batch[1] for _, batch in flat) == list(range(len(sent)))
    for sender in range(3):
        numbers = [batch[1] for _, batch in flat if batch[0] == sender]
        assert numbers == sorted(numbers)  # FIFO per (channel, sender, receiver)
    for each in taken:
        assert len({time for time, _ in each}) <= 1
    assert fabric.pending_messages(0) == []


def test_the_earliest_head_goes_first_and_later_times_wait_for_the_next_round() -> None:
    fabric, pushers, puller = channel(2)
    pushers[1][0].push(5, ["peer's 5"])
    pushers[0][0].push(4, ["own 4"])
    pushers[0][0].push(5, ["own 5"])
    assert rounds(fabric, puller) == [[(4, ["own 4"])], [(5, ["own 5"]), (5, ["peer's 5"])]]


def test_product_times_in_a_loop() -> None:
    fabric, pushers, puller = channel(2)
    pushers[1][0].push(Product(0, 3), ["peer"])
    pushers[0][0].push(Product(0, 2), ["own"])
    assert rounds(fabric, puller) == [[(Product(0, 2), ["own"])], [(Product(0, 3), ["peer"])]]


def test_progress_batches_without_a_time_are_pulled_in_order_at_once() -> None:
    fabric, pushers, puller = channel(2)
    pushers[1][0].push(None, ["b1"])
    pushers[0][0].push(None, ["a1"])
    pushers[1][0].push(None, ["b2"])
    taken = rounds(fabric, puller)
    assert len(taken) == 1
    assert [batch for _, batch in taken[0] if batch[0].startswith("b")] == [["b1"], ["b2"]]
    assert sorted(batch[0] for _, batch in taken[0]) == ["a1", "b1", "b2"]


def test_waiting_messages_are_reported_per_channel() -> None:
    fabric, pushers, _ = channel(2)
    pushers[0][0].push(1, [1])
    pushers[1][0].push(2, [2])
    assert fabric.pending_messages(0) == ["2 message(s) on channel 0 not yet read by worker 0"]
