"""A record-wise ``exchange(key)`` on columnar batches checks each row's key on one worker as several workers do.

Several workers route a NumPy or Arrow batch by ``key`` of each row; one
worker used to check the keys of list batches only, so a key no worker count
can route (a structured array's row, an unhashable ``numpy.void``) passed on
one worker and failed on two.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.columnar_user_mains import exchange_rows_by_a_field, exchange_rows_by_themselves

from runtime import WorkerFailed
from runtime.testing import assert_agree, run_dataflow


def root(error: BaseException) -> BaseException:
    while error.__cause__ is not None:
        error = error.__cause__
    return error


@pytest.mark.parametrize(("workers", "processes"), [(1, 1), (2, 1), (1, 2)])
def test_a_row_key_that_cannot_be_routed_fails_at_every_worker_count(workers: int, processes: int) -> None:
    with pytest.raises(WorkerFailed) as failed:
        run_dataflow(exchange_rows_by_themselves, [[1, 2, 3]], workers=workers, processes=processes)
    message = str(failed.value) if processes > 1 else str(root(failed.value))
    assert "unhashable type" in message and "void" in message, message


def test_a_row_key_that_can_be_routed_agrees_everywhere() -> None:
    runs: list[Any] = assert_agree(exchange_rows_by_a_field, [[1, 2, 3], [4]])
    assert runs[0].output() == {0: [(1, 1), (2, 2), (3, 3)], 1: [(4, 4)]}
