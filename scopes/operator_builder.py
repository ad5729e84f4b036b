"""Assembling a leaf operator: its inputs, outputs, connectivity and logic."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Generic, TypeVar

from scopes.batch_keys import Receiver
from scopes.capability import Capability
from scopes.contracts import ChannelContract, Pipeline
from scopes.core import ScopeCore, StreamCore, describe_stream
from scopes.errors import BuildError, ScopeBoundaryError
from scopes.handles import OperatorInput, OperatorOutput
from scopes.nesting import reserve_child
from scopes.operator import Operator, OperatorInfo
from scopes.ports import InputPort, OutputPort
from scopes.progress.location import Source, Target
from scopes.progress.reachability import SummarySpec, connectivity_from
from scopes.signatures import describe_operator

S_co = TypeVar("S_co", bound=StreamCore, covariant=True)
"""The class of the streams the operator's scope makes (for users, :class:`~scopes.stream.Stream`)."""


class OperatorBuilder(Generic[S_co]):
    """Builds one operator in a scope: add inputs and outputs, then :meth:`build` with its logic.

    Its outputs' streams are made by the scope, so they are of the scope's stream class.
    """

    def __init__(
        self, scope: ScopeCore[S_co], name: str, notify: bool = False, reads: StreamCore | None = None
    ) -> None:
        """Reserve a place for operator ``name`` in ``scope``, refused unless ``scope`` is being built.

        ``reads`` is the stream the operator is built on, named if it is refused.
        """
        scope.check_building(name, reads)
        self.scope = scope
        self.name = name
        self.notify = notify
        subgraph = scope.subgraph
        self.index = reserve_child(subgraph, name)
        self.address = subgraph.address + (self.index,)
        self.activate = partial(subgraph.activate_child, self.index)
        self.inputs: list[InputPort] = []
        self.outputs: list[OutputPort] = []
        self.summary: SummarySpec = None
        self.operator: Operator | None = None
        self._info: OperatorInfo | None = None

    @property
    def where(self) -> str:
        """The operator and its scope, as error messages name them."""
        return describe_operator(self.name, self.scope.path)

    @property
    def info(self) -> OperatorInfo:
        """What the operator's logic may know about it (one object per operator: the logic may set its position)."""
        if self._info is None:
            context = self.scope.context
            self._info = OperatorInfo(
                self.name, self.index, self.address, context.worker_index, context.peers, self.activate, context
            )
        return self._info

    def new_input(self, stream: StreamCore, contract: ChannelContract = Pipeline) -> InputPort:
        """Connect ``stream`` to a new input, distributing records by ``contract``."""
        if stream.scope is not self.scope:
            raise ScopeBoundaryError(
                f"{self.where} reads {describe_stream(stream)}, which is in another scope; "
                "move streams between scopes with stream.enter(scope) and stream.leave()"
            )
        if not isinstance(contract, ChannelContract):
            raise BuildError(
                f"operator '{self.name}': {contract!r} is not a channel contract; use Pipeline, "
                "Exchange(key) or Broadcast"
            )
        port = len(self.inputs)
        context = self.scope.context
        channel = context.next_channel()
        site = self.scope.subgraph.graph.child_sites.get(self.index)
        receiver = Receiver(self.name, self.scope.path, self.address, context.worker_index, site)
        pusher, puller = contract.connect(context.allocator, channel, receiver, self.activate)
        stream.tee.add(pusher)
        self.scope.subgraph.graph.connect(
            stream.source, Target(self.index, port), contract.copies(context.peers), contract.name
        )
        input_port = InputPort(self.name, port, puller)
        self.inputs.append(input_port)  # shared with the operator, if already built
        if self.operator is not None:
            self.operator.adopt(input_port)
        return input_port

    def new_output(self) -> tuple[OutputPort, S_co]:
        """Create a new output and the stream that carries what it sends."""
        port = OutputPort(self.name, len(self.outputs), self.scope.timestamp_type)
        observer = self.scope.subgraph.observer
        if observer is not None:  # its capabilities report where the user's code holds them
            port.observer = observer
        self.outputs.append(port)  # shared with the operator, if already built
        if self.operator is not None:
            self.operator.adopt(port)
        stream = self.scope.new_stream(Source(self.index, port.port), port.tee, self.name)
        return port, stream

    def set_summary(self, summary: SummarySpec) -> None:
        """Declare which inputs reach which outputs, and how times change on the way."""
        self.summary = summary

    def initial_capabilities(self, track: bool = True) -> list[Capability]:
        """This worker's capability at the minimum time on each output.

        With logging on, each is reported as created where the user's code
        built the operator, unless ``track`` is false (an input handle's,
        whose own events say where it was created).
        """
        minimum = self.scope.timestamp_type.minimum()
        capabilities = [Capability.initial(minimum, port) for port in self.outputs]
        if self.scope.subgraph.observer is not None and track:
            for capability in capabilities:
                capability.track("created")
        return capabilities

    def build(
        self,
        logic: Callable[[], None] | None,
        handles: list[OperatorOutput] | None = None,
        operator_class: type[Operator] = Operator,
        **extra: Any,
    ) -> Operator:
        """Create the operator with ``logic`` (run at each scheduling) and install it in the scope."""
        scope = self.scope
        connectivity = connectivity_from(
            self.summary,
            len(self.inputs),
            len(self.outputs),
            scope.timestamp_type.identity(),
            f"operator '{self.name}' in scope {' > '.join(repr(part) for part in scope.path)}",
        )
        operator = operator_class(
            self.name,
            scope.timestamp_type,
            scope.context.peers,
            self.inputs,
            self.outputs,
            connectivity,
            self.notify,
            **extra,
        )
        operator.locate(self.address, scope.path, scope.context.worker_index, self.activate)
        operator.site = scope.subgraph.graph.child_sites.get(self.index)
        operator.info = self.info
        operator.set_logic(logic, handles or [])
        scope.subgraph.graph.set_child(self.index, operator)
        self.operator = operator
        return operator

    def handles(self, operator: Operator) -> tuple[list[OperatorInput], list[OperatorOutput]]:
        """User-facing handles for every input and output of ``operator``."""
        inputs = [OperatorInput(port, operator) for port in self.inputs]
        outputs = [OperatorOutput(port, operator) for port in self.outputs]
        operator.flush_after(outputs)
        return inputs, outputs
