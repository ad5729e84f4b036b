"""Probes and sinks: the operators at the end of a stream.

A probe mirrors the frontier of the streams it watches into a
:class:`ProbeHandle`, which ``main`` reads to know which times are complete.
A sink hands every message and frontier change to a user function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from scopes.antichain import Antichain, MutableAntichain
from scopes.channels import ChannelContract, Pipeline
from scopes.operator import Operator, OperatorInput
from scopes.operator_builder import OperatorBuilder
from scopes.scope import Updates
from scopes.signatures import check_function, describe_operator
from scopes.timestamp import PathSummary

if TYPE_CHECKING:
    from scopes.stream import Stream


class ProbeHandle:
    """Reports the frontier of the streams it probes: the times that may still appear there."""

    def __init__(self) -> None:
        """An empty handle; attach it with ``stream.probe_with(handle)`` or get one from ``stream.probe()``."""
        self._frontier: MutableAntichain[Any] = MutableAntichain()

    def less_than(self, time: Any) -> bool:
        """Whether some time strictly before ``time`` may still appear (``time`` is not yet ready)."""
        return self._frontier.less_than(time)

    def less_equal(self, time: Any) -> bool:
        """Whether ``time`` itself or an earlier time may still appear."""
        return self._frontier.less_equal(time)

    def done(self) -> bool:
        """Whether no time at all may appear any more."""
        return self._frontier.is_empty()

    @property
    def frontier(self) -> Antichain[Any]:
        """The current frontier."""
        return self._frontier.frontier()

    def _update(self, updates: Updates) -> None:
        self._frontier.update_iter(updates)

    def __repr__(self) -> str:
        return f"ProbeHandle(frontier={list(self._frontier.elements)!r})"


class ProbeOperator(Operator):
    """An operator that mirrors its input frontier into a :class:`ProbeHandle`."""

    def __init__(self, *args: Any, handle: ProbeHandle) -> None:
        """Create the operator; ``handle`` receives every frontier change."""
        super().__init__(*args)
        self.handle = handle

    def set_external_summary(
        self, summaries: Sequence[Sequence[Antichain[PathSummary]]], frontier: Sequence[Updates]
    ) -> None:
        """Record the initial frontier in the operator and the handle."""
        super().set_external_summary(summaries, frontier)
        self.handle._update(list(frontier[0]))

    def push_external_progress(self, external: Sequence[Updates]) -> None:
        """Apply frontier changes to the operator and the handle."""
        super().push_external_progress(external)
        if external[0]:
            self.handle._update(external[0])


def build_probe(stream: Stream, handle: ProbeHandle, name: str, passthrough: bool) -> Stream | None:
    """A probe on ``stream`` reporting to ``handle``; with ``passthrough``, also a copy of the stream."""
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


def probe(stream: Stream, name: str) -> ProbeHandle:
    """Consume ``stream`` and return a handle that reports its frontier."""
    handle = ProbeHandle()
    build_probe(stream, handle, name, passthrough=False)
    return handle


def probe_with(stream: Stream, handle: ProbeHandle, name: str) -> Stream:
    """Add ``stream``'s frontier to ``handle``; return the stream's copy, unchanged."""
    result = build_probe(stream, handle, name, passthrough=True)
    assert result is not None
    return result


def sink(
    stream: Stream,
    contract: ChannelContract,
    name: str,
    logic: Callable[[OperatorInput], None],
) -> None:
    """Consume ``stream`` with ``logic(input)``, run on new data and frontier changes."""
    check_function(logic, ("input",), "the sink logic", describe_operator(name, stream.scope.path))
    builder = OperatorBuilder(stream.scope, name, notify=True)
    builder.new_input(stream, contract)
    operator = builder.build(None)
    inputs, _ = builder.handles(operator)
    reader = inputs[0]
    operator.set_logic(lambda: logic(reader))
