"""Probes and sinks: the operators at the end of a stream.

A probe mirrors the frontier of the streams it watches into a
:class:`ProbeHandle`, which ``main`` reads to know which times are complete.
A sink hands every message and frontier change to a user function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from scopes.contracts import ChannelContract, Pipeline
from scopes.core import StreamCore
from scopes.errors import TimestampError
from scopes.handles import OperatorInput
from scopes.operator import Operator
from scopes.operator_builder import OperatorBuilder
from scopes.probe_frontier import ProbeFrontier
from scopes.progress.antichain import Antichain, MutableAntichain
from scopes.progress.operate import Updates
from scopes.progress.order import Time
from scopes.progress.timestamp import PathSummary
from scopes.signatures import check_function, describe_operator

S = TypeVar("S", bound=StreamCore)
"""The class of the streams read and made (for users, :class:`~scopes.stream.Stream`)."""


class ProbeHandle:
    """Reports the frontier of the streams it probes: the times that may still appear there."""

    def __init__(self) -> None:
        """An empty handle; attach it with ``stream.probe_with(handle)`` or get one from ``stream.probe()``."""
        self._frontier: MutableAntichain[Any] = MutableAntichain()
        # probes reporting here; while there is only one, it shares its input's frontier
        # with the handle (one antichain update per frontier change instead of two)
        self._attached = 0
        self._sharing: ProbeOperator | None = None
        self.reads = 0
        """How many times the frontier was read (``less_than``, ``less_equal``, ``done``, ``frontier``) on the
        thread :attr:`reader` names (on any thread while :attr:`thread_of` is ``None``).

        The worker compares it before and during ``step_while`` to learn whether
        the wait's condition reads this probe, which a certain stall requires; a
        read by another thread (a user's progress reporter, say) is not the condition's.
        """
        self.thread_of: Callable[[], int] | None = None
        """The calling thread's identity (``threading.get_ident``, set by the runtime: this package takes no threads);
        ``None`` counts every read."""
        self.reader = 0
        """The identity of the thread whose reads :attr:`reads` counts: the one that waits in ``step_while``."""
        self.operators: list[ProbeOperator] = []
        """The probe operators reporting here (their addresses locate the probe in its dataflow)."""

    def less_than(self, time: Time) -> bool:
        """Whether some time strictly before ``time`` may still appear (``time`` is not yet ready)."""
        self._count_read()
        try:
            return self._frontier.less_than(time)
        except TypeError as error:
            raise self._not_a_time(time, "less_than", error) from error

    def less_equal(self, time: Time) -> bool:
        """Whether ``time`` itself or an earlier time may still appear."""
        self._count_read()
        try:
            return self._frontier.less_equal(time)
        except TypeError as error:
            raise self._not_a_time(time, "less_equal", error) from error

    def _count_read(self) -> None:
        """Count a read of the frontier in :attr:`reads` when the calling thread is the :attr:`reader`."""
        thread_of = self.thread_of
        if thread_of is None or thread_of() == self.reader:
            self.reads += 1

    def _not_a_time(self, time: Any, method: str, error: TypeError) -> Exception:
        """The error for ``method(time)`` failing with ``error``: a :class:`TimestampError` when ``time`` is of
        another type than the probed scope's times (a loop's probe asked about an epoch, say), else ``error``."""
        probe = self.operators[0] if self.operators else None
        if probe is None or probe.timestamp_type.contains(time):
            return error
        scope = " > ".join(repr(name) for name in probe.scope_path)
        times = probe.timestamp_type
        return TimestampError(
            f"probe '{probe.name}' (scope {scope}, address {probe.address}) on worker {probe.worker_index}: "
            f"{method}({time!r}): the probed stream's times are {times.name} timestamps (the least is "
            f"{times.minimum()!r}) and {time!r} is not one; ask about a time of the probed stream's scope"
        )

    def done(self) -> bool:
        """Whether no time at all may appear any more."""
        self._count_read()
        return self._frontier.is_empty()

    @property
    def frontier(self) -> ProbeFrontier:
        """The current frontier: call it, ``probe.frontier()``, as ``less_than`` and ``done``.

        Reading it without the call (``list(probe.frontier)``, ``probe.frontier.elements``)
        still works, and warns that it is deprecated.
        """
        self._count_read()
        return ProbeFrontier(self._frontier.frontier().elements)

    def update(self, updates: Updates) -> None:
        """Apply frontier changes reported by a probe that does not share its antichain."""
        self._frontier.update_iter(updates)

    def attach(self, probe: ProbeOperator, frontier: MutableAntichain[Any], initial: Updates) -> bool:
        """Count ``probe`` in; return whether it shares ``frontier`` (its input's) with the handle.

        The first probe of a handle that has seen nothing shares; when a second
        one attaches, the handle takes a copy of the shared frontier and both probes
        report their changes to it separately again.
        """
        self._attached += 1
        self.operators.append(probe)
        if self._attached == 1 and not self._frontier.counts():
            self._frontier = frontier
            self._sharing = probe
            return True
        sharing, self._sharing = self._sharing, None
        if sharing is not None:  # the sharing probe keeps the antichain; the handle takes a copy
            sharing.stop_sharing()
            # One count per element: the shared antichain may be the scope tracker's, whose counts are
            # pointstamps, while the handle from now on accumulates frontier changes (one per element).
            self._frontier = MutableAntichain((time, 1) for time in self._frontier.elements)
        self._frontier.update_iter(initial)
        return False

    def share_implied(self, probe: ProbeOperator, implied: MutableAntichain[Any]) -> None:
        """Read the frontier from ``implied`` (the probe's scope tracker's, at its input) while ``probe`` shares."""
        if self._sharing is probe:
            self._frontier = implied

    def __repr__(self) -> str:
        return f"ProbeHandle(frontier={list(self._frontier.elements)!r})"


class ProbeOperator(Operator):
    """An operator that mirrors its input frontier into a :class:`ProbeHandle` (:attr:`handle`, set once built).

    While it is its handle's only probe, the handle reads the frontier its
    scope's tracker implies at the probe's input, and the probe has no frontier
    interest: the tracker pushes it nothing, and an epoch costs the probe no
    frontier work at all.  A second probe on the handle ends the sharing, and
    this probe then takes its frontier interest and reports every change.
    """

    handle: ProbeHandle
    """The handle that receives every frontier change."""
    shared: bool = False
    """Whether the handle reads this probe's input frontier itself (so changes need not be reported)."""

    def set_external_summary(
        self, summaries: Sequence[Sequence[Antichain[PathSummary]]], frontier: Sequence[Updates]
    ) -> None:
        """Record the initial frontier in the operator and the handle."""
        super().set_external_summary(summaries, frontier)
        self.shared = self.handle.attach(self, self.input_ports[0].frontier, list(frontier[0]))
        if self.shared:
            self.frontier_interest = False  # the scope defers the frontier to its tracker (defer_frontiers)

    def defer_frontiers(self, implied: Sequence[MutableAntichain[Any]], on_interest: Callable[[], None]) -> None:
        """Read the input frontier from the tracker's ``implied[0]``, and have the handle read it too."""
        super().defer_frontiers(implied, on_interest)
        if self.shared:
            self.handle.share_implied(self, implied[0])

    def stop_sharing(self) -> None:
        """Another probe reports to the handle: report every frontier change to it from now on."""
        self.shared = False
        self.take_frontier_interest()

    def push_external_progress(self, external: Sequence[Updates]) -> None:
        """Apply frontier changes to the operator and the handle (once, when they share the antichain)."""
        updates = external[0]
        if updates:
            self.input_ports[0].advance_frontier(updates)
            if not self.shared:
                self.handle.update(updates)


def build_probe(stream: S, handle: ProbeHandle, name: str, passthrough: bool) -> S | None:
    """A probe on ``stream`` reporting to ``handle``; with ``passthrough``, also a copy of the stream."""
    # no notify: the logic only drains messages, so frontier changes need not wake it
    # (the operator still receives them in push_external_progress, for the handle)
    builder = OperatorBuilder(stream.scope, name, notify=False, reads=stream)
    port = builder.new_input(stream, Pipeline)
    result: S | None = None
    output = None
    if passthrough:
        output, result = builder.new_output()

    def logic() -> None:
        while (message := port.pull()) is not None:
            if output is not None:
                output.send(message[0], message[1])

    probe = cast(ProbeOperator, builder.build(logic, operator_class=ProbeOperator))
    probe.handle = handle  # before the dataflow is finished, which attaches it (set_external_summary)
    probes = stream.scope.context.probes
    if handle not in probes:
        probes.append(handle)
    for capability in builder.initial_capabilities():
        capability.drop()
    return result


def probe(stream: StreamCore, name: str) -> ProbeHandle:
    """Consume ``stream`` and return a handle that reports its frontier."""
    handle = ProbeHandle()
    build_probe(stream, handle, name, passthrough=False)
    return handle


def probe_with(stream: S, handle: ProbeHandle, name: str) -> S:
    """Add ``stream``'s frontier to ``handle``; return the stream's copy, unchanged."""
    result = build_probe(stream, handle, name, passthrough=True)
    assert result is not None
    return result


def sink(
    stream: StreamCore,
    contract: ChannelContract,
    name: str,
    logic: Callable[[OperatorInput], None],
) -> None:
    """Consume ``stream`` with ``logic(input)``, run on new data and frontier changes."""
    check_function(logic, ("input",), "the sink logic", describe_operator(name, stream.scope.path))
    builder = OperatorBuilder(stream.scope, name, notify=True, reads=stream)
    builder.new_input(stream, contract)
    operator = builder.build(None)
    inputs, _ = builder.handles(operator)
    reader = inputs[0]
    operator.set_logic(lambda: logic(reader))
