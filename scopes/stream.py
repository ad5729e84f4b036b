"""``Stream``: the output of an operator, and the operators that consume streams.

Every method builds an operator in the stream's scope and returns the stream(s)
it produces.  Data moves as ``(time, batch)`` messages: the per-record
operators call the user's function once per record and do nothing else per
record.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from functools import reduce
from itertools import chain as _itertools_chain
from typing import TYPE_CHECKING, Any

from scopes.channels import Broadcast, ChannelContract, Exchange, Pipeline, Tee
from scopes.errors import BuildError, CapabilityError
from scopes.location import Source, Target
from scopes.operator import (
    Capability,
    Notificator,
    Operator,
    OperatorInfo,
    OperatorInput,
    OperatorOutput,
)
from scopes.operator_builder import OperatorBuilder
from scopes.order import less_equal
from scopes.reachability import SummarySpec, connectivity_from

chain_from_iterable = _itertools_chain.from_iterable

UnaryConstructor = Callable[[Capability, OperatorInfo], Callable[[OperatorInput, OperatorOutput], None]]
"""``constructor(capability, info)`` returning ``logic(input, output)``."""

BinaryConstructor = Callable[
    [Capability, OperatorInfo], Callable[[OperatorInput, OperatorInput, OperatorOutput], None]
]
"""``constructor(capability, info)`` returning ``logic(input1, input2, output)``."""


def consume(iterator: Iterable[Any]) -> None:
    """Exhaust ``iterator`` at C speed."""
    deque(iterator, maxlen=0)


if TYPE_CHECKING:
    from scopes.builder import LoopHandle, ProbeHandle, ScopeBuilder


class Stream:
    """A stream of timestamped records produced by one operator output."""

    __slots__ = ("scope", "source", "tee", "name", "_chain")

    def __init__(self, scope: ScopeBuilder, source: Source, tee: Tee, name: str) -> None:
        """Describe output ``source`` of ``scope``, whose messages go through ``tee``."""
        self.scope = scope
        self.source = source
        self.tee = tee
        self.name = name
        self._chain: _Chain | None = None

    def __repr__(self) -> str:
        return f"Stream({self.name!r} in scope {self.scope.name!r} at {self.source!r})"

    # ------------------------------------------------------------------ plumbing

    def _pipe(
        self,
        name: str,
        transform: Callable[[list[Any]], list[Any]],
        contract: ChannelContract = Pipeline,
    ) -> Stream:
        builder = OperatorBuilder(self.scope, name)
        port = builder.new_input(self, contract)
        output, stream = builder.new_output()
        pull = port.pull
        send = output.send

        def logic() -> None:
            while (message := pull()) is not None:
                send(message[0], transform(message[1]))

        builder.build(logic)
        for capability in builder.initial_capabilities():
            capability.drop()
        return stream

    def _stage(self, name: str, stage: Callable[[Iterable[Any]], Iterable[Any]]) -> Stream:
        """Add a stateless per-record stage, fused with the stage that produced this stream if possible."""
        chain = self._chain
        if chain is not None and chain.last is self and not self.tee.pushers and len(chain.stages) < _MAX_FUSED:
            return chain.extend(name, stage)
        return _Chain(self, name, stage).streams[0]

    # ------------------------------------------------------------------ per-record operators

    def map(self, function: Callable[[Any], Any], name: str = "Map") -> Stream:
        """Replace each record ``x`` by ``function(x)``."""
        return self._stage(name, lambda records: map(function, records))

    def flat_map(self, function: Callable[[Any], Iterable[Any]], name: str = "FlatMap") -> Stream:
        """Replace each record ``x`` by the records of ``function(x)``."""
        return self._stage(name, lambda records: chain_from_iterable(map(function, records)))

    def filter(self, predicate: Callable[[Any], bool], name: str = "Filter") -> Stream:
        """Keep the records for which ``predicate`` is true."""
        return self._stage(name, lambda records: filter(predicate, records))

    def inspect(self, function: Callable[[Any], None], name: str = "Inspect") -> Stream:
        """Call ``function(record)`` on each record and pass the records on unchanged."""

        def transform(batch: list[Any]) -> list[Any]:
            for record in batch:
                function(record)
            return batch

        return self._pipe(name, transform)

    def inspect_batch(
        self, function: Callable[[Any, list[Any]], None], name: str = "InspectBatch"
    ) -> Stream:
        """Call ``function(time, batch)`` on each message and pass it on unchanged."""
        builder = OperatorBuilder(self.scope, name)
        port = builder.new_input(self, Pipeline)
        output, stream = builder.new_output()

        def logic() -> None:
            while (message := port.pull()) is not None:
                function(message[0], message[1])
                output.send(message[0], message[1])

        builder.build(logic)
        for capability in builder.initial_capabilities():
            capability.drop()
        return stream

    def exchange(self, key: Callable[[Any], Hashable], name: str = "Exchange") -> Stream:
        """Move each record to worker ``hash(key(record)) % peers``."""
        return self._pipe(name, _identity, Exchange(key))

    def broadcast(self, name: str = "Broadcast") -> Stream:
        """Send every record to every worker."""
        return self._pipe(name, _identity, Broadcast)

    def concat(self, *others: Stream, name: str = "Concat") -> Stream:
        """Merge this stream with ``others`` into one stream."""
        builder = OperatorBuilder(self.scope, name)
        ports = [builder.new_input(stream, Pipeline) for stream in (self, *others)]
        output, stream = builder.new_output()

        def logic() -> None:
            for port in ports:
                while (message := port.pull()) is not None:
                    output.send(message[0], message[1])

        builder.build(logic)
        for capability in builder.initial_capabilities():
            capability.drop()
        return stream

    def partition(self, parts: int, route: Callable[[Any], int], name: str = "Partition") -> list[Stream]:
        """Split into ``parts`` streams; record ``x`` goes to stream ``route(x)``."""
        if parts.__class__ is not int or parts < 1:
            raise BuildError(f"partition '{name}' needs a number of parts >= 1, got {parts!r}")
        builder = OperatorBuilder(self.scope, name)
        port = builder.new_input(self, Pipeline)
        outputs = [builder.new_output() for _ in range(parts)]
        ports = [output for output, _ in outputs]

        def logic() -> None:
            while (message := port.pull()) is not None:
                time, batch = message
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

        builder.build(logic)
        for capability in builder.initial_capabilities():
            capability.drop()
        return [stream for _, stream in outputs]

    def branch(self, predicate: Callable[[Any], bool], name: str = "Branch") -> tuple[Stream, Stream]:
        """Split by ``predicate``: returns ``(records where false, records where true)``."""
        builder = OperatorBuilder(self.scope, name)
        port = builder.new_input(self, Pipeline)
        false_port, false_stream = builder.new_output()
        true_port, true_stream = builder.new_output()

        def logic() -> None:
            while (message := port.pull()) is not None:
                time, batch = message
                yes: list[Any] = []
                no: list[Any] = []
                for record in batch:
                    (yes if predicate(record) else no).append(record)
                false_port.send(time, no)
                true_port.send(time, yes)

        builder.build(logic)
        for capability in builder.initial_capabilities():
            capability.drop()
        return false_stream, true_stream

    def delay(self, new_time: Callable[[Any, Any], Any], name: str = "Delay") -> Stream:
        """Move each record to the later time ``new_time(record, time)``."""
        builder = OperatorBuilder(self.scope, name)
        port = builder.new_input(self, Pipeline)
        output, stream = builder.new_output()
        timestamp_type = self.scope.timestamp_type

        def logic() -> None:
            while (message := port.pull()) is not None:
                time, batch = message
                groups: dict[Any, list[Any]] = {}
                for record in batch:
                    later = new_time(record, time)
                    group = groups.get(later)
                    if group is None:
                        if not timestamp_type.contains(later) or not less_equal(time, later):
                            raise CapabilityError(
                                f"operator '{name}' output 0: delay moved record {record!r} "
                                f"from time {time!r} to time {later!r}; records may only be "
                                f"delayed to a later {timestamp_type.name} time"
                            )
                        group = groups[later] = []
                    group.append(record)
                for later, group in groups.items():
                    output.send(later, group)

        builder.build(logic)
        for capability in builder.initial_capabilities():
            capability.drop()
        return stream

    # ------------------------------------------------------------------ per-time aggregation

    def accumulate(
        self, initial: Any, fold: Callable[[Any, Any], Any], name: str = "Accumulate"
    ) -> Stream:
        """Fold the records of each time, ``acc = fold(acc, record)`` from a copy of ``initial``.

        Emits one record per time, once the time is complete.
        """
        return self._per_time(name, lambda: copy.copy(initial), lambda acc, batch: reduce(fold, batch, acc))

    def count(self, name: str = "Count") -> Stream:
        """Emit the number of records at each time, once the time is complete."""
        return self._per_time(name, int, lambda total, batch: total + len(batch))

    def _per_time(
        self, name: str, start: Callable[[], Any], fold_batch: Callable[[Any, list[Any]], Any]
    ) -> Stream:
        """One value per time, folded batch by batch from ``start()``, emitted when the time completes."""
        values: dict[Any, Any] = {}
        capabilities: dict[Any, Capability] = {}

        def constructor(capability: Capability, info: OperatorInfo) -> Callable[..., None]:
            capability.drop()

            def logic(input: OperatorInput, output: OperatorOutput) -> None:
                for ref, batch in input:
                    time = ref.time
                    if time not in capabilities:
                        capabilities[time] = ref.retain()
                        values[time] = start()
                    values[time] = fold_batch(values[time], batch)
                frontier = input.frontier
                done = [time for time in capabilities if not frontier.less_equal(time)]
                for time in sorted(done):
                    capability = capabilities.pop(time)
                    output.session(capability).give(values.pop(time))
                    output.flush()
                    capability.drop()

            return logic

        return self.unary_frontier(Pipeline, name, constructor)

    # ------------------------------------------------------------------ probes and sinks

    def probe(self, name: str = "Probe") -> ProbeHandle:
        """Consume the stream and return a handle that reports its frontier."""
        from scopes.builder import ProbeHandle

        handle = ProbeHandle()
        _build_probe(self, handle, name, passthrough=False)
        return handle

    def probe_with(self, handle: ProbeHandle, name: str = "Probe") -> Stream:
        """Add this stream's frontier to ``handle``; returns the stream, unchanged."""
        stream = _build_probe(self, handle, name, passthrough=True)
        assert stream is not None
        return stream

    def sink(
        self,
        contract: ChannelContract,
        name: str,
        logic: Callable[[OperatorInput], None],
    ) -> None:
        """Consume the stream with ``logic(input)``, run on new data and frontier changes."""
        builder = OperatorBuilder(self.scope, name, notify=True)
        builder.new_input(self, contract)
        operator = builder.build(None)
        inputs, _ = builder.handles(operator)
        reader = inputs[0]
        operator.set_logic(lambda: logic(reader))

    # ------------------------------------------------------------------ generic operators

    def unary(
        self,
        contract: ChannelContract,
        name: str,
        constructor: UnaryConstructor,
        summary: SummarySpec = None,
    ) -> Stream:
        """A one-input, one-output operator; ``constructor(capability, info)`` returns its logic."""
        return self._unary(contract, name, constructor, summary, notify=False)

    def unary_frontier(
        self,
        contract: ChannelContract,
        name: str,
        constructor: UnaryConstructor,
        summary: SummarySpec = None,
    ) -> Stream:
        """Like :meth:`unary`, and also scheduled when the input frontier changes."""
        return self._unary(contract, name, constructor, summary, notify=True)

    def _unary(
        self,
        contract: ChannelContract,
        name: str,
        constructor: UnaryConstructor,
        summary: SummarySpec,
        notify: bool,
    ) -> Stream:
        def build(caps: list[Capability], info: OperatorInfo) -> Callable[..., None]:
            logic = constructor(caps[0], info)
            return lambda inputs, outputs: logic(inputs[0], outputs[0])

        return generic(self.scope, name, [(self, contract)], 1, build, summary=summary, notify=notify)[0]

    def unary_notify(
        self,
        contract: ChannelContract,
        name: str,
        logic: Callable[[OperatorInput, OperatorOutput, Notificator], None],
        notify_at: Sequence[Any] = (),
    ) -> Stream:
        """A one-input operator with a :class:`~scopes.operator.Notificator`.

        ``logic(input, output, notificator)`` runs on new data and on frontier
        changes; times in ``notify_at`` are requested at the start.
        """
        return generic(
            self.scope, name, [(self, contract)], 1,
            _with_notificator(name, notify_at, lambda ins, outs, n: logic(ins[0], outs[0], n)),
            notify=True, frontiers=True,
        )[0]

    def binary(
        self,
        other: Stream,
        contract1: ChannelContract,
        contract2: ChannelContract,
        name: str,
        constructor: BinaryConstructor,
        summary: SummarySpec = None,
    ) -> Stream:
        """A two-input, one-output operator; ``constructor(capability, info)`` returns its logic."""
        return self._binary(other, contract1, contract2, name, constructor, summary, notify=False)

    def binary_frontier(
        self,
        other: Stream,
        contract1: ChannelContract,
        contract2: ChannelContract,
        name: str,
        constructor: BinaryConstructor,
        summary: SummarySpec = None,
    ) -> Stream:
        """Like :meth:`binary`, and also scheduled when either input frontier changes."""
        return self._binary(other, contract1, contract2, name, constructor, summary, notify=True)

    def _binary(
        self,
        other: Stream,
        contract1: ChannelContract,
        contract2: ChannelContract,
        name: str,
        constructor: BinaryConstructor,
        summary: SummarySpec,
        notify: bool,
    ) -> Stream:
        def build(caps: list[Capability], info: OperatorInfo) -> Callable[..., None]:
            logic = constructor(caps[0], info)
            return lambda inputs, outputs: logic(inputs[0], inputs[1], outputs[0])

        inputs = [(self, contract1), (other, contract2)]
        return generic(self.scope, name, inputs, 1, build, summary=summary, notify=notify)[0]

    def binary_notify(
        self,
        other: Stream,
        contract1: ChannelContract,
        contract2: ChannelContract,
        name: str,
        logic: Callable[[OperatorInput, OperatorInput, OperatorOutput, Notificator], None],
        notify_at: Sequence[Any] = (),
    ) -> Stream:
        """A two-input operator with a notificator watching both input frontiers."""
        return generic(
            self.scope, name, [(self, contract1), (other, contract2)], 1,
            _with_notificator(name, notify_at, lambda ins, outs, n: logic(ins[0], ins[1], outs[0], n)),
            notify=True, frontiers=True,
        )[0]

    # ------------------------------------------------------------------ scopes and loops

    def enter(self, scope: ScopeBuilder) -> Stream:
        """Bring this stream into ``scope``, nested (at any depth) inside the stream's scope."""
        if scope is self.scope:
            return self
        parent = scope.parent
        if parent is None:
            raise BuildError(
                f"cannot enter stream '{self.name}' into top-level scope '{scope.name}'; "
                "enter() moves a stream into a scope nested inside its own"
            )
        if parent is not self.scope:
            if not _is_ancestor(self.scope, parent):
                raise BuildError(
                    f"cannot enter stream '{self.name}' from scope '{self.scope.name}' into "
                    f"scope '{scope.name}', which is not nested inside it"
                )
            return self.enter(parent).enter(scope)
        subgraph = scope.subgraph
        port, entrance, inner_tee = subgraph.new_input()
        index = scope.index_in_parent
        self.scope.subgraph.connect(self.source, Target(index, port))
        self.tee.add(entrance)
        return Stream(scope, Source(0, port), inner_tee, f"{self.name}>enter")

    def leave(self) -> Stream:
        """Take this stream out of its nested scope into the parent scope."""
        scope = self.scope
        parent = scope.parent
        if parent is None:
            raise BuildError(
                f"stream '{self.name}' is in top-level scope '{scope.name}'; there is no scope to leave to"
            )
        port, exit_pusher, outer_tee = scope.subgraph.new_output()
        scope.subgraph.connect(self.source, Target(0, port))
        self.tee.add(exit_pusher)
        return Stream(parent, Source(scope.index_in_parent, port), outer_tee, f"{self.name}>leave")

    def connect_loop(self, handle: LoopHandle) -> None:
        """Feed this stream back to the loop variable ``handle`` (closing the loop)."""
        handle.connect(self)


def _identity(batch: list[Any]) -> list[Any]:
    return batch


_MAX_FUSED = 32
"""The most stages fused into one operator; longer chains continue in a new operator."""


class _Chain:
    """Consecutive stateless stages (``map``, ``filter``, ``flat_map``) run as one operator.

    Each stage has its own output (and stream), so the graph keeps every stream;
    at run time records flow through the stages as lazy iterators and a list is
    built only where a stream has receivers, and at the end.
    """

    __slots__ = ("builder", "operator", "stages", "outputs", "streams", "last", "names")

    def __init__(self, stream: Stream, name: str, stage: Callable[[Iterable[Any]], Iterable[Any]]) -> None:
        builder = OperatorBuilder(stream.scope, name)
        port = builder.new_input(stream, Pipeline)
        self.builder = builder
        self.stages: list[Callable[[Iterable[Any]], Iterable[Any]]] = []
        self.outputs: list[Any] = []
        self.streams: list[Stream] = []
        self.names: list[str] = []
        pull = port.pull
        stages = self.stages
        outputs = self.outputs

        def logic() -> None:
            while (message := pull()) is not None:
                time, records = message
                data: Iterable[Any] = records
                last = len(stages) - 1
                for index, (apply, output) in enumerate(zip(stages, outputs)):  # noqa: B905
                    data = apply(data)
                    if output.tee.pushers:
                        data = list(data)
                        output.send(time, data)
                    elif index == last:
                        consume(data)  # run the functions even when nothing listens

        self.operator = builder.build(logic)
        self.last: Stream | None = None
        self.extend(name, stage)

    def extend(self, name: str, stage: Callable[[Iterable[Any]], Iterable[Any]]) -> Stream:
        output, stream = self.builder.new_output()
        self.stages.append(stage)
        self.outputs.append(output)
        self.names.append(name)
        self.streams.append(stream)
        scope = self.builder.scope
        self.operator.connectivity = connectivity_from(
            None, 1, len(self.outputs), scope.timestamp_type.identity(), f"operator '{self.builder.name}'"
        )
        if len(self.names) > 1:
            self.operator.name = f"{self.names[0]}+{len(self.names) - 1} fused"
            scope.subgraph.child_names[self.builder.index] = self.operator.name
        Capability._initial(scope.timestamp_type.minimum(), output).drop()
        stream._chain = self
        stream.name = name
        self.last = stream
        return stream


def _with_notificator(
    name: str, notify_at: Sequence[Any], call: Callable[[Any, Any, Notificator], None]
) -> Callable[..., Callable[..., None]]:
    """A constructor that makes a notificator over the input frontiers and passes it to ``call``."""

    def constructor(caps: list[Capability], info: OperatorInfo, frontiers: list[Any]) -> Callable[..., None]:
        notificator = Notificator(frontiers, name)
        for time in notify_at:
            notificator.notify_at(caps[0].delayed(time))
        caps[0].drop()
        return lambda inputs, outputs: call(inputs, outputs, notificator)

    return constructor


def _is_ancestor(ancestor: ScopeBuilder, scope: ScopeBuilder | None) -> bool:
    while scope is not None:
        if scope is ancestor:
            return True
        scope = scope.parent
    return False


def generic(
    scope: ScopeBuilder,
    name: str,
    inputs: Sequence[tuple[Stream, ChannelContract]],
    outputs: int,
    constructor: Callable[..., Callable[[list[OperatorInput], list[OperatorOutput]], None]],
    summary: SummarySpec = None,
    notify: bool = True,
    frontiers: bool = False,
) -> list[Stream]:
    """Build an operator with any number of inputs and outputs.

    ``constructor(capabilities, info)`` receives this worker's initial capability
    on each output and returns ``logic(inputs, outputs)``, run whenever the
    operator is scheduled.  ``summary`` declares connectivity (default: every
    input reaches every output unchanged).  With ``frontiers=True`` the
    constructor also receives the input frontiers as a third argument.
    """
    builder = OperatorBuilder(scope, name, notify=notify)
    for stream, contract in inputs:
        builder.new_input(stream, contract)
    streams = [builder.new_output()[1] for _ in range(outputs)]
    builder.set_summary(summary)
    operator = builder.build(None)
    input_handles, output_handles = builder.handles(operator)
    capabilities = builder.initial_capabilities()
    if frontiers:
        logic = constructor(capabilities, builder.info, [port.frontier for port in builder.inputs])
    else:
        logic = constructor(capabilities, builder.info)
    if not callable(logic):
        raise BuildError(f"operator '{name}': the constructor must return the operator's logic function, got {logic!r}")
    operator.set_logic(lambda: logic(input_handles, output_handles), output_handles)
    return streams


def _build_probe(stream: Stream, handle: ProbeHandle, name: str, passthrough: bool) -> Stream | None:
    from scopes.builder import ProbeOperator

    builder = OperatorBuilder(stream.scope, name, notify=True)
    port = builder.new_input(stream, Pipeline)
    result: Stream | None = None
    output = None
    if passthrough:
        output, result = builder.new_output()

    def logic() -> None:
        while (message := port.pull()) is not None:
            if output is not None:
                output.send(message[0], message[1])

    builder.build(logic, operator_class=ProbeOperator, handle=handle)
    for capability in builder.initial_capabilities():
        capability.drop()
    return result


__all__ = ["Stream", "generic", "Operator"]
