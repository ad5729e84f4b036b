"""Loop variables: a stream fed back from later in its own scope, each time advanced by a summary.

:meth:`ScopeBuilder.loop_variable <scopes.builder.ScopeBuilder.loop_variable>` and
:meth:`Stream.connect_loop <scopes.stream.Stream.connect_loop>` call this module
(timely's ``Feedback`` operator and ``ConnectLoop``).
"""

from __future__ import annotations

from typing import Any, TypeVar

from scopes.bursts import BURST
from scopes.contracts import Pipeline
from scopes.core import ScopeCore, StreamCore
from scopes.errors import BuildError, ScopeBoundaryError, SummaryError
from scopes.operator import Operator
from scopes.operator_builder import OperatorBuilder
from scopes.ports import OutputPort
from scopes.progress.antichain import Antichain
from scopes.progress.timestamp import IntegerSummary, IntegerType, PathSummary, ProductType, fits
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
    if not fits(resolved, timestamp_type.identity()):
        raise SummaryError(
            f"loop_variable '{name}' in scope {_label(scope)}: summary {resolved!r} does not fit the scope's "
            f"{timestamp_type!r} timestamps; give an int (the loop counter's step), or a summary shaped like "
            f"{timestamp_type.identity()!r}"
        )
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


JOIN_LIMIT = BURST
"""A loop variable joins the lists that come back for one time in one invocation while the result stays at most
this long (the burst after which operators yield, :data:`scopes.bursts.BURST`, which is as many records as an
exchange buffers for a destination): fewer messages go round, each passes through the loop's operators while its
records are in the CPU's caches, and an operator reading a joined list reads no further in that run."""


def _joined(lists: list[list[Any]]) -> list[Any]:
    """One list: the only one, or a new list with the records of all, in order (none of them is changed).

    Concatenated with ``+`` (one copy of the references, sized once), not through ``chain``, which goes record by
    record: for the 700 records of two senders' parts, 0.55 us against 4.8 us.
    """
    if len(lists) == 1:
        return lists[0]
    joined = lists[0] + lists[1]
    for more in lists[2:]:
        joined += more
    return joined


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
                f"loop variable '{self.name}' belongs to scope {_label(self.scope)} but stream "
                f"'{stream.name}' is in scope {_label(stream.scope)}; move streams between scopes "
                "with stream.enter(scope) and stream.leave()"
            )
        self.scope.check_building(self.name, stream)
        port = self._builder.new_input(stream, Pipeline)
        operator = self._operator
        operator.connectivity = [[Antichain([self.summary])]]
        summary = self.summary
        output = self._output

        def send(time: Any, batch: Any) -> None:
            later = summary.results_in(time)
            if later is not None:
                output.send(later, batch)

        def logic() -> None:
            # Lists that arrive for one time in one invocation go round joined, up to JOIN_LIMIT records a
            # message: otherwise every piece (the input's chunks, each sender's part of an exchange) would cost
            # every operator of the loop a message per iteration for as long as its records circulate.
            groups: dict[Any, list[list[Any]]] = {}
            sizes: dict[Any, int] = {}
            while (message := port.pull()) is not None:
                time, batch = message
                if batch.__class__ is not list or len(batch) >= JOIN_LIMIT:
                    send(time, batch)  # columnar batches too: joining them would copy their data
                    continue
                group = groups.get(time)
                if group is not None:
                    size = sizes[time] + len(batch)
                    if size <= JOIN_LIMIT:
                        group.append(batch)
                        sizes[time] = size
                        continue
                    send(time, _joined(group))
                groups[time] = [batch]
                sizes[time] = len(batch)
            for time, group in groups.items():
                send(time, _joined(group))

        operator.set_logic(logic)
        self.connected = True


def _label(scope: Any) -> str:
    """A scope told apart from any other in messages: its path of names and its address (siblings share names)."""
    return f"{' > '.join(repr(name) for name in scope.path)} (address {scope.address})"
