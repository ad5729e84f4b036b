"""Columnar exchange between real processes: the same answer as one process, and batches stay columnar."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from helpers import columnar_helpers

from runtime import execute
from scopes.hashing import stable_hash

pytestmark = pytest.mark.usefixtures("transport")  # every test over shared memory and over TCP


@pytest.mark.parametrize("kind", ["numpy", "arrow"])
def test_a_columnar_exchange_on_two_processes_equals_one_process(kind: str) -> None:
    """Every worker sends the same batches either way, so each worker's sums per key must be identical."""
    main = functools.partial(columnar_helpers.exchange_and_sum, kind=kind, batches=4, rows=3_000)
    threads = execute(main, workers=2)
    processes = execute(main, workers=1, processes=2, stall_timeout=30)
    assert processes == threads and all(threads)
    for index, per_worker in enumerate(processes):
        assert all(stable_hash(key) % 2 == index for key, _, _ in per_worker)
    record_wise = functools.partial(columnar_helpers.exchange_records, batches=4, rows=3_000)
    assert execute(record_wise, workers=2) == threads
    assert execute(main, workers=2, processes=2, stall_timeout=30) == execute(main, workers=4)


def test_workers_of_one_process_receiving_one_broadcast_array_each_own_their_copy() -> None:
    results = execute(columnar_helpers.broadcast_and_mutate, workers=2, processes=2, stall_timeout=30)
    expected = int(np.arange(1_000).sum())
    assert results == [[expected, expected]] * 4
