"""Per-record operators: ``map``, ``flat_map``, ``filter``, ``inspect``, ``inspect_batch``.

The user's function is called once per record and nothing else happens per
record.  Consecutive ``map``, ``filter`` and ``flat_map`` stages are fused into
one operator (:class:`Chain`): records flow through the stages as lazy
iterators, and a list is built only where a stream has receivers, and at the end.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from itertools import chain as _itertools_chain
from typing import Any, Generic, TypeVar

from scopes.batches import arrow_as_records, is_arrow
from scopes.bursts import BURST, burst
from scopes.callsite import user_site
from scopes.capability import Capability
from scopes.contracts import ChannelContract, Pipeline
from scopes.core import Stage, StreamCore
from scopes.errors import UserFunctionError
from scopes.operator_builder import OperatorBuilder
from scopes.progress.reachability import connectivity_from
from scopes.signatures import check_function, describe_operator

_THIS_SOURCE = os.path.join(os.sep + "scopes", "per_record.py")
"""How this module's frames end their file name, compiled (its source's path, not ``__file__``) or not."""

S = TypeVar("S", bound=StreamCore)
"""The class of the streams read and made (for users, :class:`~scopes.stream.Stream`)."""

chain_from_iterable = _itertools_chain.from_iterable

MAX_FUSED = 32
"""The most stages fused into one operator; longer chains continue in a new operator."""


def consume(iterator: Iterable[Any]) -> None:
    """Exhaust ``iterator`` at C speed."""
    deque(iterator, maxlen=0)


def identity(batch: Sequence[Any]) -> Sequence[Any]:
    """The batch, unchanged."""
    return batch


def pipe(
    stream: S,
    name: str,
    transform: Callable[[Sequence[Any]], Sequence[Any]],
    contract: ChannelContract = Pipeline,
    records: bool = False,
) -> S:
    """A one-input, one-output operator sending ``transform(batch)`` for each message, at its time.

    With ``records``, ``transform`` iterates the batch's records, and an Arrow batch (which iterates as its
    columns) is refused.
    """
    builder = OperatorBuilder(stream.scope, name, reads=stream)
    port = builder.new_input(stream, contract)
    output, result = builder.new_output()
    pull = port.pull
    send = output.send
    where = describe_operator(name, stream.scope.path)

    def logic() -> None:
        for time, batch in burst(pull, operator):
            if records and batch.__class__ is not list and is_arrow(batch):
                raise arrow_as_records(batch, where, time)
            send(time, transform(batch))

    operator = builder.build(logic)
    for capability in builder.initial_capabilities():
        capability.drop()
    return result


def _check(stream: StreamCore, function: Any, parameters: tuple[str, ...], role: str, name: str) -> None:
    check_function(function, parameters, role, describe_operator(name, stream.scope.path))


def stage(stream: S, name: str, kind: str, apply: Stage) -> S:
    """Add a stateless per-record stage, fused with the stage that produced ``stream`` if possible."""
    chain = stream.chain
    stream.scope.check_building(name, stream)
    if chain is not None and not stream.tee.pushers:
        fused = chain.extend_after(stream, name, kind, apply)
        if fused is not None:
            return fused
    return Chain(stream, name, kind, apply).streams[0]


def map_records(stream: S, function: Callable[[Any], Any], name: str) -> S:
    """Replace each record ``x`` by ``function(x)``."""
    _check(stream, function, ("record",), "the map function", name)
    return stage(stream, name, "map", lambda records: map(function, records))


def flat_map(stream: S, function: Callable[[Any], Iterable[Any]], name: str) -> S:
    """Replace each record ``x`` by the records of ``function(x)``, which must be iterable."""
    _check(stream, function, ("record",), "the flat_map function", name)
    return stage(stream, name, "flat_map", lambda records: chain_from_iterable(map(function, records)))


def filter_records(stream: S, predicate: Callable[[Any], bool], name: str) -> S:
    """Keep the records for which ``predicate`` is true."""
    _check(stream, predicate, ("record",), "the filter predicate", name)
    return stage(stream, name, "filter", lambda records: filter(predicate, records))


def inspect(stream: S, function: Callable[[Any], None], name: str) -> S:
    """Call ``function(record)`` on each record and pass the records on unchanged."""
    _check(stream, function, ("record",), "the inspect function", name)

    def transform(batch: Sequence[Any]) -> Sequence[Any]:
        for record in batch:
            function(record)
        return batch

    return pipe(stream, name, transform, records=True)


def inspect_batch(stream: S, function: Callable[[Any, Sequence[Any]], None], name: str) -> S:
    """Call ``function(time, batch)`` on each message and pass it on unchanged."""
    _check(stream, function, ("time", "batch"), "the inspect_batch function", name)
    builder = OperatorBuilder(stream.scope, name, reads=stream)
    port = builder.new_input(stream, Pipeline)
    output, result = builder.new_output()

    def logic() -> None:
        for time, batch in burst(port.pull, operator):
            function(time, batch)
            output.send(time, batch)

    operator = builder.build(logic)
    for capability in builder.initial_capabilities():
        capability.drop()
    return result


class Chain(Generic[S]):
    """Consecutive stateless stages (``map``, ``filter``, ``flat_map``) run as one operator.

    Each stage has its own output (and stream), so the graph keeps every stream;
    at run time records flow through the stages as lazy iterators and a list is
    built only where a stream has receivers, and at the end.
    """

    __slots__ = ("builder", "operator", "stages", "outputs", "streams", "last", "names", "kinds")

    def __init__(self, stream: S, name: str, kind: str, apply: Stage) -> None:
        """Start a chain reading ``stream``, with one stage ``apply`` called ``name``."""
        builder = OperatorBuilder(stream.scope, name, reads=stream)
        port = builder.new_input(stream, Pipeline)
        self.builder = builder
        self.stages: list[Stage] = []
        self.outputs: list[Any] = []
        self.streams: list[S] = []
        self.names: list[str] = []
        self.kinds: list[str] = []
        pull = port.pull
        stages = self.stages
        outputs = self.outputs

        def logic() -> None:
            sent = 0
            try:
                while sent < BURST and (message := pull()) is not None:
                    time, records = message
                    if records.__class__ is not list and is_arrow(records):
                        raise arrow_as_records(records, self._where(), time)
                    data: Iterable[Any] = records
                    last = len(stages) - 1
                    if not last:  # one stage (the usual case): no enumerate/zip
                        output = outputs[0]
                        if output.tee.pushers:
                            batch = list(stages[0](data))
                            sent += len(batch)
                            output.send(time, batch)
                        else:
                            consume(stages[0](data))
                        continue
                    for index, (apply, output) in enumerate(zip(stages, outputs)):  # noqa: B905
                        data = apply(data)
                        if output.tee.pushers:
                            data = list(data)
                            sent += len(data)
                            output.send(time, data)
                        elif index == last:
                            consume(data)  # run the functions even when nothing listens
            except TypeError as error:
                self._explain_type_error(error)
                raise
            if sent >= BURST:  # the rest of the input waits for the next run (see scopes.bursts)
                self.operator.activate()

        self.operator = builder.build(logic)
        self.last: S | None = None
        self.extend(name, kind, apply)

    def extend_after(self, stream: StreamCore, name: str, kind: str, apply: Stage) -> S | None:
        """Append stage ``apply`` reading ``stream`` if that is this chain's last stream and there is room.

        Returns the new stage's stream, or ``None`` (then ``apply`` starts a chain of its own).
        """
        if stream is not self.last or len(self.stages) >= MAX_FUSED:
            return None
        return self.extend(name, kind, apply)

    def extend(self, name: str, kind: str, apply: Stage) -> S:
        """Append stage ``apply`` (a ``kind`` stage called ``name``); return its stream."""
        output, stream = self.builder.new_output()
        self.stages.append(apply)
        self.outputs.append(output)
        self.names.append(name)
        self.kinds.append(kind)
        self.streams.append(stream)
        scope = self.builder.scope
        self.operator.connectivity = connectivity_from(
            None, 1, len(self.outputs), scope.timestamp_type.identity(), f"operator '{self.builder.name}'"
        )
        if len(self.names) > 1:
            self.operator.name = f"{self.names[0]}+{len(self.names) - 1} fused"
            scope.subgraph.child_names[self.builder.index] = self.operator.name
            self._add_site(user_site())
        Capability.initial(scope.timestamp_type.minimum(), output).drop()
        stream.chain = self
        stream.name = name
        self.last = stream
        return stream

    def _where(self) -> str:
        """The chain's operator, for messages."""
        return describe_operator(self.operator.name, self.operator.scope_path)

    def _add_site(self, site: str | None) -> None:
        """Name a fused stage's line beside the chain's own: a failure names the lines of all its stages."""
        sites = self.builder.scope.subgraph.graph.child_sites
        first = sites.get(self.builder.index)
        if site is None or first is None:
            return
        sites[self.builder.index] = self.operator.site = f"{first} and {site}"

    def _explain_type_error(self, error: TypeError) -> None:
        """If a ``flat_map`` function returned something not iterable, say so clearly.

        Runs only when a ``TypeError`` escapes the stages, so the records pay
        nothing for it.  The error comes from iterating a ``flat_map`` result
        when it was raised by C code called directly from the chain's own frame
        (no frame of a user function in between) with Python's "not iterable"
        message.
        """
        flat_maps = [name for name, kind in zip(self.names, self.kinds, strict=True) if kind == "flat_map"]
        if not flat_maps or "is not iterable" not in str(error):
            return
        traceback = error.__traceback__
        while traceback is not None and traceback.tb_next is not None:
            traceback = traceback.tb_next
        if traceback is None or not traceback.tb_frame.f_code.co_filename.endswith(_THIS_SOURCE):
            return  # raised inside a user function: leave it as it is
        stages = " or ".join(f"'{name}'" for name in flat_maps)
        operator = self.operator
        explained = UserFunctionError(
            f"{describe_operator(operator.name, operator.scope_path)}: the function given to "
            f"flat_map {stages} must return an iterable of records (a list, tuple, generator, "
            f"...) for each record, but it returned a value that is not iterable ({error}); "
            "use map for one record in, one record out"
        )
        explained.__cause__ = error  # as well: mypyc compiles `raise ... from` without the cause
        raise explained from error
