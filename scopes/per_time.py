"""Per-time aggregation: one value per time, emitted once the time is complete.

``count``, ``accumulate`` and ``accumulate_batch`` fold the batches of each
time as they arrive and send the result when the input frontier has passed the
time.  ``count`` works on every kind of batch (it adds ``len(batch)``, a
columnar batch's row count); ``accumulate_batch`` hands the user's fold whole
batches, so it suits columnar ones.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from functools import reduce
from typing import Any, TypeVar

from scopes.batches import arrow_as_records, is_arrow
from scopes.capability import Capability
from scopes.contracts import Pipeline
from scopes.core import StreamCore
from scopes.generic_operators import unary
from scopes.handles import OperatorInput, OperatorOutput
from scopes.operator import OperatorInfo
from scopes.progress.order import in_time_order
from scopes.signatures import check_function, describe_operator

S = TypeVar("S", bound=StreamCore)
"""The class of the streams read and made (for users, :class:`~scopes.stream.Stream`)."""


def accumulate(stream: S, initial: Any, fold: Callable[[Any, Any], Any], name: str) -> S:
    """Fold the records of each time, ``acc = fold(acc, record)``, from a deep copy of ``initial``.

    Each time starts from its own ``copy.deepcopy(initial)``, so a mutable
    initial value such as ``{"counts": {}}`` is never shared between times.
    """
    where = describe_operator(name, stream.scope.path)
    check_function(fold, ("accumulator", "record"), "the fold function", where)
    return per_time(stream, name, lambda: copy.deepcopy(initial), lambda acc, batch: reduce(fold, batch, acc), where)


def accumulate_batch(stream: S, initial: Any, fold: Callable[[Any, Any], Any], name: str) -> S:
    """Fold the batches of each time, ``acc = fold(acc, batch)`` once per batch, from a deep copy of ``initial``.

    The batch is passed as it is (a list, NumPy array or Arrow batch), so the fold
    can use vectorised operations; the result per time is emitted once the time is
    complete, as one record.
    """
    check_function(fold, ("accumulator", "batch"), "the fold function", describe_operator(name, stream.scope.path))
    return per_time(stream, name, lambda: copy.deepcopy(initial), fold)


def count(stream: S, name: str) -> S:
    """Emit the number of records (rows, for columnar batches) at each time, once the time is complete."""
    return per_time(stream, name, int, lambda total, batch: total + len(batch))


def per_time(
    stream: S,
    name: str,
    start: Callable[[], Any],
    fold_batch: Callable[[Any, Sequence[Any]], Any],
    records: str | None = None,
) -> S:
    """One value per time, folded batch by batch from ``start()``, emitted when the time completes.

    With ``records`` (the operator's description), ``fold_batch`` folds records one by one, and an Arrow
    batch, which Python iterates as its columns, is refused (:func:`~scopes.batches.arrow_as_records`).
    """
    values: dict[Any, Any] = {}
    capabilities: dict[Any, Capability] = {}
    key = stream.scope.timestamp_type.sort_key()  # the order of times that complete together

    def constructor(capability: Capability, info: OperatorInfo) -> Callable[[OperatorInput, OperatorOutput], None]:
        capability.drop()

        def logic(input: OperatorInput, output: OperatorOutput) -> None:
            for ref, batch in input:
                time = ref.time
                if records is not None and batch.__class__ is not list and is_arrow(batch):
                    raise arrow_as_records(batch, records, time)
                if time not in capabilities:
                    capabilities[time] = ref.retain()
                    values[time] = start()
                values[time] = fold_batch(values[time], batch)
            frontier = input.frontier
            done = [time for time in capabilities if not frontier.less_equal(time)]
            if not done:
                return
            for time in in_time_order(done, key):
                capability = capabilities.pop(time)
                output.session(capability).give(values.pop(time))
                output.flush()
                capability.drop()

        return logic

    return unary(stream, Pipeline, name, constructor, None, notify=True)
