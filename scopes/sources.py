"""Sources: the operators that bring records into a scope, from outside or from an iterable.

:meth:`~scopes.builder.ScopeBuilder.new_input` (records sent through an
:class:`~scopes.input_handle.InputHandle`), :func:`to_stream` (an iterable) and
:func:`source` (the user's own logic, holding capabilities).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import islice
from typing import Any, TypeVar

from scopes.callsite import user_site
from scopes.capability import Capability
from scopes.core import ScopeCore, StreamCore
from scopes.handles import OperatorOutput
from scopes.input_handle import BATCH_SIZE, InputHandle
from scopes.operator import OperatorInfo
from scopes.operator_builder import OperatorBuilder
from scopes.signatures import check_function, check_logic, describe_operator
from scopes.state_registry import refuse_hand_written_under_checkpoints, registry_of

__all__ = ["new_input", "programmable", "source", "to_stream"]

S = TypeVar("S", bound=StreamCore)


def new_input(scope: ScopeCore[S], name: str = "Input") -> tuple[InputHandle, S]:
    """A stream fed from outside: returns ``(handle, stream)``."""
    builder = OperatorBuilder(scope, name)
    output, stream = builder.new_output()
    operator = builder.build(None)
    capability = builder.initial_capabilities(track=False)[0]
    handle = InputHandle(name, scope.timestamp_type, capability, output, builder.activate)
    operator.set_logic(handle.release)
    scope.context.inputs.append(handle)
    handle.site = user_site()  # once per input, for errors that name where it was made
    if scope.subgraph.observer is not None:
        handle.observe(scope.subgraph.observer, builder.address)
        scope.subgraph.observer.input_event(builder.address, name, "created", handle.time, handle.site)
    return handle, stream


def to_stream(records: Iterable[Any], scope: ScopeCore[S], name: str = "ToStream") -> S:
    """A stream of ``records`` at the scope's minimum time, emitted in batches as it is scheduled.

    Resumed from a checkpoint (:mod:`runtime.checkpoints`) after its time, it sends nothing again.
    """
    iterator = iter(records)
    registry = registry_of(scope)

    def constructor(capability: Capability, info: OperatorInfo) -> Callable[[OperatorOutput], None]:
        held: list[Capability] = [capability]
        if registry is not None:

            def resumed(boundary: int) -> None:
                if boundary > 0 and held:  # its records, all at the minimum time, are in the restored state
                    held.pop().drop()

            registry.on_settle(resumed)

        def logic(output: OperatorOutput) -> None:
            if not held:
                return
            session = output.session(held[0])
            for _ in range(64):
                chunk = list(islice(iterator, BATCH_SIZE))
                if chunk:
                    session.give_batch(chunk)
                if len(chunk) < BATCH_SIZE:
                    held.pop().drop()
                    return
            info.activate()

        return logic

    return programmable(scope, name, constructor)


def source(
    scope: ScopeCore[S],
    name: str,
    constructor: Callable[[Capability, OperatorInfo], Callable[[OperatorOutput], None]],
) -> S:
    """A programmable input: ``constructor(capability, info)`` returns ``logic(output)``.

    The logic runs when the operator is first scheduled and whenever it is
    activated (``info.activate()``, ``info.activate_after(seconds)``, or a call
    of ``info.waker()``'s function from any thread); it sends under
    capabilities it holds, and must downgrade or drop them for downstream
    operators to make progress.  Once it holds none it has finished (it can
    never send again): after its first run, it is not run again however it is
    woken.

    Refused in a dataflow with checkpoints: a checkpoint cannot know where such
    a source stands, so a resumed run would send its records again.
    """
    refuse_hand_written_under_checkpoints(scope, name)
    return programmable(scope, name, constructor, until_finished=True)


def programmable(
    scope: ScopeCore[S],
    name: str,
    constructor: Callable[[Capability, OperatorInfo], Callable[[OperatorOutput], None]],
    until_finished: bool = False,
) -> S:
    """:func:`source` for pytimely's own sources, which resume from checkpoints themselves.

    ``until_finished``: after its first run, run the logic only while it holds a capability (a wake-up that
    comes later, from a timer or another thread, finds nothing to run)."""
    where = describe_operator(name, scope.path)
    check_function(constructor, ("capability", "info"), "the source constructor", where)
    builder = OperatorBuilder(scope, name)
    output_port, stream = builder.new_output()
    operator = builder.build(None)
    _, outputs = builder.handles(operator)
    capability = builder.initial_capabilities()[0]
    logic = constructor(capability, builder.info)
    check_logic(logic, ("output",), where)
    handle = outputs[0]
    if until_finished:
        ran = False

        def run() -> None:
            nonlocal ran
            if output_port.held or not ran:  # its first run comes even if it kept no capability
                ran = True
                logic(handle)

        operator.set_logic(run, outputs)
    else:
        operator.set_logic(lambda: logic(handle), outputs)
    return stream
