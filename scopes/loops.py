"""Loop variables: a stream fed back from later in its own scope, each time advanced by a summary.

:meth:`ScopeBuilder.loop_variable <scopes.builder.ScopeBuilder.loop_variable>` and
:meth:`Stream.connect_loop <scopes.stream.Stream.connect_loop>` call this module
(timely's ``Feedback`` operator and ``ConnectLoop``).
"""

from __future__ import annotations

from itertools import chain
from typing import Any, TypeVar

from scopes.contracts import Pipeline
from scopes.core import ScopeCore, StreamCore
from scopes.errors import BuildError, ScopeBoundaryError
from scopes.operator import Operator
from scopes.operator_builder import OperatorBuilder
from scopes.ports import OutputPort
from scopes.progress.antichain import Antichain
from scopes.progress.timestamp import IntegerSummary, IntegerType, PathSummary, ProductType
from scopes.state_registry import refuse_later_times_under_checkpoints

__all__ = ["LoopHandle", "loop_variable"]

S = TypeVar("S", bound=StreamCore)


def loop_variable(scope: ScopeCore[S], summary: int | PathSummary = 1, name: str = "Feedback") -> tuple[LoopHandle, S]:
    """A stream fed back from later in this scope, each time advanced by ``summary``.

    ``summary`` may be an int (advance the loop counter by that much), an
    :class:`~scopes.progress.timestamp.IntegerSummary` (with a ``limit`` for a bounded loop),
    or a full path summary for this scope's timestamps.  Close the loop with
    ``stream.connect_loop(handle)``; the scope's builder keeps the handle to check it is.
    """
    if scope.parent is None:  # feedback at the top level moves records to later epochs
        refuse_later_times_under_checkpoints(scope, name, "feeds records back to later epochs")
    timestamp_type = scope.timestamp_type
    resolved: PathSummary
    if isinstance(summary, (int, IntegerSummary)):
        step = summary if isinstance(summary, IntegerSummary) else IntegerSummary(summary)
        if isinstance(timestamp_type, ProductType) and isinstance(timestamp_type.inner, IntegerType):
            resolved = timestamp_type.feedback(step.step, step.limit)
        elif isinstance(timestamp_type, IntegerType):
            resolved = step
        else:
            raise BuildError(
                f"loop_variable in scope '{scope.name}': an integer summary does not fit "
                f"{timestamp_type!r} timestamps; pass a PathSummary for them"
            )
    elif isinstance(summary, PathSummary):
        resolved = summary
    else:
        raise BuildError(f"loop_variable in scope '{scope.name}': {summary!r} is not a summary")
    if not resolved.advances():
        raise BuildError(
            f"loop_variable '{name}' in scope '{scope.name}': summary {resolved!r} does not "
            "advance time, so records could circulate forever; use a step of at least 1"
        )
    builder = OperatorBuilder(scope, name)
    output, stream = builder.new_output()
    builder.set_summary({})
    operator = builder.build(None)
    for capability in builder.initial_capabilities():
        capability.drop()
    return LoopHandle(scope, builder, operator, output, resolved, name), stream


class LoopHandle:
    """The open end of a loop variable; close it with ``stream.connect_loop(handle)``."""

    def __init__(
        self,
        scope: ScopeCore[StreamCore],
        builder: OperatorBuilder[StreamCore],
        operator: Operator,
        output: OutputPort,
        summary: PathSummary,
        name: str,
    ) -> None:
        """Created by :func:`loop_variable`."""
        self.scope = scope
        self.name = name
        self.summary = summary
        self._builder = builder
        self._operator = operator
        self._output = output
        self.connected = False

    def connect(self, stream: StreamCore) -> None:
        """Feed ``stream`` back into the loop."""
        if self.connected:
            raise BuildError(f"loop variable '{self.name}' in scope '{self.scope.name}' is already connected")
        if stream.scope is not self.scope:
            raise ScopeBoundaryError(
                f"loop variable '{self.name}' belongs to scope '{self.scope.name}' but stream "
                f"'{stream.name}' is in scope '{stream.scope.name}'; move streams between scopes "
                "with stream.enter(scope) and stream.leave()"
            )
        self.scope.check_building(self.name, stream)
        port = self._builder.new_input(stream, Pipeline)
        operator = self._operator
        operator.connectivity = [[Antichain([self.summary])]]
        summary = self.summary
        output = self._output

        def logic() -> None:
            # The lists that arrive for one time in one invocation go round as one new list: otherwise every
            # piece (the input's chunks, each sender's part of an exchange) would cost every operator of the
            # loop a message per iteration, for as long as the records circulate.  Columnar batches go on as
            # they came (joining them would copy their data).
            lists: dict[Any, list[list[Any]]] = {}
            while (message := port.pull()) is not None:
                time, batch = message
                if batch.__class__ is list:
                    held = lists.get(time)
                    if held is None:
                        lists[time] = [batch]
                    else:
                        held.append(batch)
                else:
                    later = summary.results_in(time)
                    if later is not None:
                        output.send(later, batch)
            for time, batches in lists.items():
                later = summary.results_in(time)
                if later is not None:
                    output.send(later, batches[0] if len(batches) == 1 else list(chain.from_iterable(batches)))

        operator.set_logic(logic)
        self.connected = True
