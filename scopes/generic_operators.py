"""Generic operators: the user writes the logic and handles capabilities explicitly.

:func:`generic` builds an operator with any number of inputs and outputs; the
``unary`` and ``binary`` families (plain, ``_frontier`` and ``_notify``) are
shapes of it.  The functions the user passes are checked when the dataflow is
built: a constructor must take ``(capability, info)`` and return a logic
function taking the operator's handles.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from scopes.capability import Capability
from scopes.contracts import ChannelContract
from scopes.core import ScopeCore, StreamCore
from scopes.handles import OperatorInput, OperatorOutput
from scopes.notificator import Notificator
from scopes.operator import OperatorInfo
from scopes.operator_builder import OperatorBuilder
from scopes.progress.reachability import SummarySpec
from scopes.signatures import check_function, check_logic, describe_operator

S = TypeVar("S", bound=StreamCore)
"""The class of the streams read and made (for users, :class:`~scopes.stream.Stream`)."""

UnaryConstructor = Callable[[Capability, OperatorInfo], Callable[[OperatorInput, OperatorOutput], None]]
"""``constructor(capability, info)`` returning ``logic(input, output)``."""

BinaryConstructor = Callable[[Capability, OperatorInfo], Callable[[OperatorInput, OperatorInput, OperatorOutput], None]]
"""``constructor(capability, info)`` returning ``logic(input1, input2, output)``."""

GenericLogic = Callable[[list[OperatorInput], list[OperatorOutput]], None]
"""``logic(inputs, outputs)``, run whenever a generic operator is scheduled."""


def generic(
    scope: ScopeCore[S],
    name: str,
    inputs: Sequence[tuple[S, ChannelContract]],
    outputs: int,
    constructor: Callable[..., GenericLogic],
    summary: SummarySpec = None,
    notify: bool = True,
    frontiers: bool = False,
) -> list[S]:
    """Build an operator with any number of inputs and outputs.

    ``constructor(capabilities, info)`` receives this worker's initial capability
    on each output and returns ``logic(inputs, outputs)``, run whenever the
    operator is scheduled.  ``summary`` declares connectivity (default: every
    input reaches every output unchanged).  With ``frontiers=True`` the
    constructor also receives the input frontiers as a third argument.
    """
    where = describe_operator(name, scope.path)
    constructor_parameters = ("capabilities", "info", "frontiers") if frontiers else ("capabilities", "info")
    check_function(constructor, constructor_parameters, "the constructor", where)
    builder = OperatorBuilder(scope, name, notify=notify, reads=inputs[0][0] if inputs else None)
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
    check_logic(logic, ("inputs", "outputs"), where)
    operator.set_logic(lambda: logic(input_handles, output_handles), output_handles)
    return streams


def unary(
    stream: S,
    contract: ChannelContract,
    name: str,
    constructor: UnaryConstructor,
    summary: SummarySpec,
    notify: bool,
) -> S:
    """One input, one output; ``constructor(capability, info)`` returns ``logic(input, output)``."""
    where = describe_operator(name, stream.scope.path)
    check_function(constructor, ("capability", "info"), "the constructor", where)

    def build(caps: list[Capability], info: OperatorInfo) -> GenericLogic:
        logic = constructor(caps[0], info)
        check_logic(logic, ("input", "output"), where)
        return lambda inputs, outputs: logic(inputs[0], outputs[0])

    return generic(stream.scope, name, [(stream, contract)], 1, build, summary=summary, notify=notify)[0]


def binary(
    stream: S,
    other: S,
    contracts: tuple[ChannelContract, ChannelContract],
    name: str,
    constructor: BinaryConstructor,
    summary: SummarySpec,
    notify: bool,
) -> S:
    """Two inputs, one output; ``constructor(capability, info)`` returns ``logic(input1, input2, output)``."""
    where = describe_operator(name, stream.scope.path)
    check_function(constructor, ("capability", "info"), "the constructor", where)

    def build(caps: list[Capability], info: OperatorInfo) -> GenericLogic:
        logic = constructor(caps[0], info)
        check_logic(logic, ("input1", "input2", "output"), where)
        return lambda inputs, outputs: logic(inputs[0], inputs[1], outputs[0])

    inputs = [(stream, contracts[0]), (other, contracts[1])]
    return generic(stream.scope, name, inputs, 1, build, summary=summary, notify=notify)[0]


def unary_notify(
    stream: S,
    contract: ChannelContract,
    name: str,
    logic: Callable[[OperatorInput, OperatorOutput, Notificator], None],
    notify_at: Sequence[Any],
) -> S:
    """One input with a notificator: ``logic(input, output, notificator)``."""
    where = describe_operator(name, stream.scope.path)
    check_function(logic, ("input", "output", "notificator"), "the unary_notify logic", where)
    constructor = with_notificator(name, notify_at, lambda ins, outs, n: logic(ins[0], outs[0], n))
    return generic(stream.scope, name, [(stream, contract)], 1, constructor, notify=True, frontiers=True)[0]


def binary_notify(
    stream: S,
    other: S,
    contracts: tuple[ChannelContract, ChannelContract],
    name: str,
    logic: Callable[[OperatorInput, OperatorInput, OperatorOutput, Notificator], None],
    notify_at: Sequence[Any],
) -> S:
    """Two inputs with a notificator watching both: ``logic(input1, input2, output, notificator)``."""
    where = describe_operator(name, stream.scope.path)
    check_function(logic, ("input1", "input2", "output", "notificator"), "the binary_notify logic", where)
    constructor = with_notificator(name, notify_at, lambda ins, outs, n: logic(ins[0], ins[1], outs[0], n))
    inputs = [(stream, contracts[0]), (other, contracts[1])]
    return generic(stream.scope, name, inputs, 1, constructor, notify=True, frontiers=True)[0]


def with_notificator(
    name: str, notify_at: Sequence[Any], call: Callable[[Any, Any, Notificator], None]
) -> Callable[..., GenericLogic]:
    """A constructor that makes a notificator over the input frontiers and passes it to ``call``."""

    def constructor(caps: list[Capability], info: OperatorInfo, frontiers: list[Any]) -> GenericLogic:
        notificator = Notificator(frontiers, name, caps[0].output_port.owner)
        for time in notify_at:
            notificator.notify_at(caps[0].delayed(time))
        caps[0].drop()
        return lambda inputs, outputs: call(inputs, outputs, notificator)

    return constructor
