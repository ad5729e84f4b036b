"""runtime.testing.check_interleavings: a user's dataflow under many seeded message orders, shrunk and replayable."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.errors import InterleavingFailure
from runtime.testing import check_interleavings, replay_interleaving
from scopes import Exchange
from scopes.windows import Tumbling

EPOCHS = [[3, 1, 4, 1], [5, 9, 2, 6], [5, 3]]


def eager_max(scope: Any, numbers: Any) -> Any:
    """A bug a user writes: the maximum of each epoch, sent as soon as the first batch of it arrives."""
    sent: set[Any] = set()

    def constructor(capability: Any, info: Any) -> Any:
        capability.drop()

        def logic(input: Any, output: Any) -> None:
            for ref, batch in input:
                if ref.time not in sent:
                    sent.add(ref.time)
                    output.session(ref).give(max(batch))

        return logic

    return numbers.unary(Exchange(lambda n: 0), "EagerMax", constructor)


def windowed_counts(scope: Any, numbers: Any) -> Any:
    return numbers.window(Tumbling(2), key=lambda n: n % 3).count().down


def test_a_correct_dataflow_agrees_under_every_seed() -> None:
    reference = check_interleavings(windowed_counts, EPOCHS, seeds=range(15))
    assert reference.records()  # the reference run produced the windows


def test_an_order_dependent_dataflow_is_caught_with_its_seed_and_a_replayable_schedule() -> None:
    with pytest.raises(InterleavingFailure) as caught:
        check_interleavings(eager_max, EPOCHS, seeds=range(40), shrink=60)
    failure = caught.value
    assert failure.seed < 40 and failure.workers == 2
    assert "differs from 1 worker's" in str(failure) and "replay_interleaving" in str(failure)
    expected = {0: [4], 1: [9], 2: [5]}
    for _ in range(2):  # the schedule replays exactly, every time
        replayed = replay_interleaving(eager_max, EPOCHS, failure.schedule)
        assert replayed.output() != expected
        assert replayed.output() == replay_interleaving(eager_max, EPOCHS, failure.schedule).output()


def test_without_shrinking_the_seeds_whole_schedule_is_reported() -> None:
    with pytest.raises(InterleavingFailure) as caught:
        check_interleavings(eager_max, EPOCHS, seeds=range(40), shrink=0)
    replayed = replay_interleaving(eager_max, EPOCHS, caught.value.schedule)
    assert replayed.output() != {0: [4], 1: [9], 2: [5]}
