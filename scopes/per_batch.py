"""Per-batch operators: the user's function sees a whole batch (list, NumPy array or Arrow batch).

``map_batch(fn)`` calls ``fn(batch)`` once per message and sends what it returns
at the message's time; an empty result is not sent.  The result must be a batch
(see :mod:`scopes.batches`): returning anything else fails with a
:class:`~scopes.errors.UserFunctionError` naming the operator, its scope, the
time and what was returned.  The batch handed to ``fn`` belongs to it (the
engine copied it if another operator reads the same stream), so ``fn`` may
change it in place and return it.

This is the columnar counterpart of the fused per-record ``map``/``filter``:
with NumPy functions the work per row runs in C, and the engine's cost is one
call per message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from scopes.batches import describe_value, is_batch
from scopes.bursts import burst
from scopes.contracts import Pipeline
from scopes.core import StreamCore
from scopes.errors import UserFunctionError
from scopes.operator_builder import OperatorBuilder
from scopes.signatures import check_function, describe_operator

S = TypeVar("S", bound=StreamCore)
"""The class of the streams read and made (for users, :class:`~scopes.stream.Stream`)."""


def map_batch(stream: S, function: Callable[[Any], Any], name: str) -> S:
    """Replace each batch ``b`` by ``function(b)``, which must return a batch; empty results are dropped."""
    where = describe_operator(name, stream.scope.path)
    check_function(function, ("batch",), "the map_batch function", where)
    builder = OperatorBuilder(stream.scope, name, reads=stream)
    port = builder.new_input(stream, Pipeline)
    output, result = builder.new_output()
    pull = port.pull
    send = output.send

    def logic() -> None:
        for time, given in burst(pull, operator):
            batch = function(given)
            if batch.__class__ is not list and not is_batch(batch):
                raise UserFunctionError(
                    f"{where}: the map_batch function returned {describe_value(batch)} for the batch at time "
                    f"{time!r}; it must return a batch: a list, a NumPy array (at least 1-D), or an Arrow "
                    "RecordBatch or Table (return an empty one to send nothing)"
                )
            send(time, batch)  # sends nothing for an empty batch

    operator = builder.build(logic)
    for capability in builder.initial_capabilities():
        capability.drop()
    return result
