"""A structured array of more than one dimension is refused by the columnar keyed operators at every worker count.

``np.array(rows, dtype)`` of rows given as lists (not tuples) makes a 2-D
array whose fields hold each value twice; its key column has several keys per
row.  One worker used to pass it through ``exchange_batch`` (two refused it) and
``aggregate_batch`` failed with NumPy's own ``ValueError`` or ``IndexError``.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.columnar_user_mains import aggregate_two_d, exchange_two_d

from runtime import WorkerFailed
from runtime.testing import run_dataflow
from scopes.errors import BatchError

ROWS = [[[1, 2], [3, 4]]]


def root(error: BaseException) -> BaseException:
    while error.__cause__ is not None:
        error = error.__cause__
    return error


@pytest.mark.parametrize(("workers", "processes"), [(1, 1), (2, 1), (1, 2)])
@pytest.mark.parametrize(
    ("build", "operator", "says"),
    [
        (exchange_two_d, "'ExchangeBatch'", "cannot route a NumPy array of shape"),
        (aggregate_two_d, "'AggregateBatch'", "is a structured array of shape"),
    ],
)
def test_a_two_dimensional_structured_array_is_refused_naming_the_operator_and_time(
    build: Any, operator: str, says: str, workers: int, processes: int
) -> None:
    with pytest.raises(WorkerFailed) as failed:
        run_dataflow(build, ROWS, workers=workers, processes=processes, stall_timeout=20.0)
    message = str(failed.value) if processes > 1 else str(root(failed.value))
    assert operator in message and says in message and "at time 0" in message, message
    if processes == 1:
        assert isinstance(root(failed.value), BatchError)
