"""Routing operators: where records go and at which time.

``exchange`` and ``broadcast`` move records between workers (``exchange_batch``
moves the rows of columnar batches, by a key column or a vectorised key
function, without iterating them), ``concat`` merges
streams, ``partition`` and ``branch`` split one, and ``delay`` moves records to
later times.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from scopes.batch_keys import BatchKey
from scopes.batches import arrow_as_records, is_arrow
from scopes.bursts import burst
from scopes.contracts import Broadcast, Exchange, ExchangeBatch, Pipeline
from scopes.core import StreamCore
from scopes.errors import BuildError, CapabilityError
from scopes.operator_builder import OperatorBuilder
from scopes.per_record import identity, pipe
from scopes.progress.order import less_equal
from scopes.signatures import check_function, describe_operator
from scopes.state_registry import refuse_later_times_under_checkpoints

S = TypeVar("S", bound=StreamCore)
"""The class of the streams read and made (for users, :class:`~scopes.stream.Stream`)."""


def exchange(stream: S, key: Callable[[Any], Hashable], name: str) -> S:
    """Move each record to the worker its ``key(record)`` selects."""
    check_function(key, ("record",), "the exchange key", describe_operator(name, stream.scope.path))
    return pipe(stream, name, identity, Exchange(key))


def exchange_batch(stream: S, key: BatchKey, name: str) -> S:
    """Move each row of each batch to the worker its key selects (see :class:`~scopes.channels.ExchangeBatch`).

    ``key`` is a column (field) name, or a function ``batch -> keys`` returning one
    key per row.  A row goes where :func:`exchange` sends a record with the same key.
    """
    where = describe_operator(name, stream.scope.path)
    if not isinstance(key, str):
        check_function(key, ("batch",), "the exchange_batch key function", where)
    return pipe(stream, name, identity, ExchangeBatch(key, where))


def broadcast(stream: S, name: str) -> S:
    """Send every record to every worker."""
    return pipe(stream, name, identity, Broadcast)


def concat(stream: S, others: tuple[S, ...], name: str) -> S:
    """Merge ``stream`` with ``others`` into one stream."""
    builder = OperatorBuilder(stream.scope, name, reads=stream)
    ports = [builder.new_input(each, Pipeline) for each in (stream, *others)]
    output, result = builder.new_output()

    def logic() -> None:
        for port in ports:
            while (message := port.pull()) is not None:
                output.send(message[0], message[1])

    builder.build(logic)
    for capability in builder.initial_capabilities():
        capability.drop()
    return result


def partition(stream: S, parts: int, route: Callable[[Any], int], name: str) -> list[S]:
    """Split into ``parts`` streams; record ``x`` goes to stream ``route(x)``."""
    if parts.__class__ is not int or parts < 1:
        raise BuildError(f"partition '{name}' needs a number of parts >= 1, got {parts!r}")
    check_function(route, ("record",), "the partition route", describe_operator(name, stream.scope.path))
    builder = OperatorBuilder(stream.scope, name, reads=stream)
    port = builder.new_input(stream, Pipeline)
    outputs = [builder.new_output() for _ in range(parts)]
    ports = [output for output, _ in outputs]

    where = describe_operator(name, stream.scope.path)

    def logic() -> None:
        for time, batch in burst(port.pull, operator):
            if batch.__class__ is not list and is_arrow(batch):
                raise arrow_as_records(batch, where, time)
            split: list[list[Any]] = [[] for _ in range(parts)]
            for record in batch:
                index = route(record)
                if index.__class__ is not int or not 0 <= index < parts:
                    raise BuildError(
                        f"partition '{name}': route returned {index!r} for record {record!r} "
                        f"at time {time!r}; it must return an int in [0, {parts})"
                    )
                split[index].append(record)
            for output, part in zip(ports, split, strict=True):
                output.send(time, part)

    operator = builder.build(logic)
    for capability in builder.initial_capabilities():
        capability.drop()
    return [result for _, result in outputs]


def branch(stream: S, predicate: Callable[[Any], bool], name: str) -> tuple[S, S]:
    """Split by ``predicate``: returns ``(records where false, records where true)``."""
    where = describe_operator(name, stream.scope.path)
    check_function(predicate, ("record",), "the branch predicate", where)
    builder = OperatorBuilder(stream.scope, name, reads=stream)
    port = builder.new_input(stream, Pipeline)
    false_port, false_stream = builder.new_output()
    true_port, true_stream = builder.new_output()

    def logic() -> None:
        for time, batch in burst(port.pull, operator):
            if batch.__class__ is not list and is_arrow(batch):
                raise arrow_as_records(batch, where, time)
            yes: list[Any] = []
            no: list[Any] = []
            for record in batch:
                (yes if predicate(record) else no).append(record)
            false_port.send(time, no)
            true_port.send(time, yes)

    operator = builder.build(logic)
    for capability in builder.initial_capabilities():
        capability.drop()
    return false_stream, true_stream


def delay(stream: S, new_time: Callable[[Any, Any], Any], name: str) -> S:
    """Move each record to the later time ``new_time(record, time)``."""
    where = describe_operator(name, stream.scope.path)
    check_function(new_time, ("record", "time"), "the delay function", where)
    refuse_later_times_under_checkpoints(stream.scope, name, "delays records to later times")
    builder = OperatorBuilder(stream.scope, name, reads=stream)
    port = builder.new_input(stream, Pipeline)
    output, result = builder.new_output()
    timestamp_type = stream.scope.timestamp_type

    def logic() -> None:
        for time, batch in burst(port.pull, operator):
            if batch.__class__ is not list and is_arrow(batch):
                raise arrow_as_records(batch, where, time)
            groups: dict[Any, list[Any]] = {}
            for record in batch:
                later = new_time(record, time)
                group = groups.get(later)
                # a time of another class (1.0 for 1) is checked too: found among the groups, it would be taken
                if group is None or later.__class__ is not time.__class__:
                    if not timestamp_type.contains(later) or not less_equal(time, later):
                        raise CapabilityError(
                            f"operator '{name}' output 0: delay moved record {record!r} "
                            f"from time {time!r} to time {later!r}; records may only be "
                            f"delayed to a later {timestamp_type.name} time"
                        )
                    if group is None:
                        group = groups[later] = []
                group.append(record)
            for later, group in groups.items():
                output.send(later, group)

    operator = builder.build(logic)
    for capability in builder.initial_capabilities():
        capability.drop()
    return result
