"""Watching a worker's stalls: when a stall is worth a warning or an error, and what to tell the user.

A step that finds nothing to do asks the :class:`StallWatch` how long every
worker has waited with work unfinished; the watch warns once (after
:data:`STALL_WARNING` seconds), raises :class:`~runtime.errors.DataflowStuck`
for a stall that is certain (:mod:`runtime.stalls` says when) or longer than the
``stall_timeout``, and explains the stall: open inputs, held capabilities,
waiting messages, loops still circulating.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from runtime.audit import Auditor
from runtime.communication import Communicator
from runtime.errors import DataflowStuck
from runtime.metrics import report_stall
from runtime.stalls import Holder, Holding, Wait, describe_input, holding_inputs, wait_holders
from scopes.builder import BuildContext
from scopes.probes import ProbeHandle
from scopes.progress.location import Source
from scopes.progress.subgraph import Subgraph
from scopes.progress.timestamp import Product

__all__ = ["CERTAIN_STALL", "STALL_WARNING", "StallWatch", "circulating"]

log = logging.getLogger("runtime.worker")

STALL_WARNING = 30.0
"""Seconds every worker must wait, with work unfinished, before a worker logs why (once)."""

CERTAIN_STALL = 1.0
"""Seconds every worker must wait before a stall known to be permanent raises ``DataflowStuck``
(the default of :attr:`runtime.worker.Worker.certain_stall`)."""


class Described(Protocol):
    """What the explanation needs of a hosted dataflow (``runtime.worker.Dataflow``)."""

    name: str
    root: Subgraph
    unverified: set[int]


class StallWatch:
    """One worker's stall state: its thresholds, whether its ``main`` waits, and what was reported."""

    def __init__(
        self, index: int, peers: int, comm: Communicator, context: BuildContext, dataflows: Mapping[int, Described]
    ) -> None:
        """Watch worker ``index`` of ``peers``, which hosts ``dataflows`` and made its inputs in ``context``."""
        self._index = index
        self._peers = peers
        self._comm = comm
        self._context = context
        self._dataflows = dataflows
        self.stall_timeout: float | None = None
        """Seconds of any stall before it raises ``DataflowStuck`` (``None``: never)."""
        self.stall_warning: float | None = STALL_WARNING
        """Seconds of stall before the explanation is logged as a warning (``None``: never)."""
        self.certain_stall: float = CERTAIN_STALL
        """Seconds of stall before a stall known to be permanent raises ``DataflowStuck``."""
        self._reported: bool | None = None
        """What the metrics endpoint (if any) was told of this idle period: ``None`` nothing, else whether ``main``
        was free to feed the inputs (waiting) rather than inside ``step_while`` or returned (stalled)."""
        self._warned = False
        self.wait: Wait | None = None
        """Set while ``main`` is inside ``step_while``, so it cannot feed its inputs."""
        self.draining = False
        """Whether ``main`` has returned: only the dataflows can still move."""
        self._judged: int | None = None  # consulted probes when this idle period was last judged
        self._holding: Holding | None = None  # what alone holds the wait back
        self._peers_only = False  # the wait (see begin_wait's peers) can end only when another worker's main acts

    def resumed(self) -> None:
        """Work is being done again after an idle period: forget the judgement, withdraw a reported stall."""
        self._judged = self._holding = None
        self._peers_only = False
        if self._reported is not None:
            self._reported = None
            report_stall(self._index, None)

    def begin_wait(
        self, probes: Sequence[ProbeHandle], peers: tuple[str, Callable[[], bool]] | None = None
    ) -> Wait | None:
        """``main`` enters ``step_while`` (reading some of ``probes``); returns the wait it was in before.

        ``peers``: the wait is for other workers' ``main`` (a ``Sequencer.take``): what it is, for messages, and
        a test of whether, once every worker is idle, only another worker's ``main`` can end it.
        """
        outer, self.wait = self.wait, Wait(probes)
        self.wait.peers = peers
        self._judged = self._holding = None
        self._peers_only = False
        self._comm.report_stuck(False)
        return outer

    def end_wait(self, outer: Wait | None) -> None:
        """``main`` leaves ``step_while``, back to the wait ``outer`` (``None``: none)."""
        self.wait = outer
        if outer is not None:  # what was read during the inner wait was not the outer condition's
            outer.rebase()
        self._judged = self._holding = None
        self._peers_only = False
        self._comm.report_stuck(False)

    def idle_began(self) -> None:
        """A step found nothing to do after one that worked: from here on only the wait's condition reads probes."""
        if self.wait is not None:
            self.wait.rebase()

    def poll_began(self) -> list[int] | None:
        """Only timers woke the idle worker: what the wait's probes have been read so far (``None``: no wait)."""
        return self.wait.snapshot() if self.wait is not None else None

    def poll_found_nothing(self, snapshot: list[int] | None) -> None:
        """The run since :meth:`poll_began` moved nothing, so the idle period goes on: the operators' reads of
        probes during it were not the wait's condition's."""
        if self.wait is not None and snapshot is not None:
            self.wait.exclude(snapshot)

    def drain(self) -> None:
        """``main`` has returned: only the dataflows can still move."""
        self.draining = True
        self._judged = None

    def check(self, stalled: float, auditor: Auditor | None) -> None:
        """Raise for a stall that is certain or longer than ``stall_timeout``; warn once for another."""
        if not stalled:
            return
        if auditor is not None:  # the audit names an over-count before any stall is reported
            auditor.stalled(stalled, self._comm.in_flight)
        timeout = self.stall_timeout
        if timeout is not None and stalled > timeout:
            explanation = self.explain_stuck()
            report_stall(self._index, explanation)
            raise DataflowStuck(explanation)
        if stalled > self.certain_stall / 2:
            self._judge()
        if (
            self._holding is not None
            and self.wait is not None
            and stalled > self.certain_stall
            and self._comm.all_stuck()
        ):
            raise DataflowStuck(self.certain_message())
        if self._peers_only and self.wait is not None and stalled > self.certain_stall and self._comm.all_stuck():
            raise DataflowStuck(self._peers_message())
        if self.draining and stalled > self.certain_stall:
            unbuilt = {index: set(hosted.unverified) for index, hosted in self._dataflows.items() if hosted.unverified}
            if unbuilt and self._comm.all_stuck():
                raise DataflowStuck(f"{self.explain_stuck()}\n{self._unbuilt_message(unbuilt)}")
        warning = self.stall_warning
        # main may be waiting for outside data, or an operator that something outside wakes: no stall
        feeding = (self.wait is None and not self.draining) or self._woken_from_outside()
        if warning is not None and stalled > warning and self._reported is not feeding:
            self._reported = feeding
            report_stall(self._index, self.explain_stuck(), waiting=feeding)
        if warning is not None and stalled > warning and not self._warned:
            self._warned = True
            log.warning(
                "every worker has waited %.0f s with work unfinished; this is normal for a program "
                "waiting for outside data, and pytimely keeps running (pass stall_timeout to execute "
                "to make a stall an error). This warning is given once.\n%s",
                stalled,
                self.explain_stuck(),
            )

    def _woken_from_outside(self) -> bool:
        """Whether a live dataflow holds an operator that something outside may wake (a replay from a socket, a
        source given a waker): the dataflows wait for outside data then."""
        dataflows = self._dataflows
        return any(address[0] in dataflows for address in self._context.woken_from_outside)

    def _judge(self) -> None:
        """Tell the other workers whether this worker's ``main`` can only wait (once per idle period and wait)."""
        wait = self.wait
        consulted = wait.consulted() if wait is not None else []
        if self._judged == len(consulted):
            return
        self._judged = len(consulted)
        if wait is not None and wait.peers is not None:
            self._peers_only = not self._comm.in_flight() and wait.peers[1]()
            self._comm.report_stuck(self._peers_only)
        elif wait is not None:
            inputs = self._context.inputs
            holding = None if self._comm.in_flight() else holding_inputs(consulted, self._dataflows, inputs)
            self._holding = holding
            self._comm.report_stuck(holding is not None)
        else:
            self._comm.report_stuck(self.draining)

    def _peers_message(self) -> str:
        """Why a wait that only other workers' ``main`` can end cannot end, and what to do."""
        assert self.wait is not None and self.wait.peers is not None
        return (
            f"{self.explain_stuck()}\nThis cannot change: worker {self._index} waits in {self.wait.peers[0]}, which "
            "only a main that pushes (or closes its sequencer) can end, and every worker's main waits in a wait "
            "that cannot end either or has returned. Push as many items as are taken, or take with a timeout."
        )

    def stopped_message(self) -> str:
        """The explanation when another worker found the stall certain and stopped this one: :meth:`certain_message`
        if this worker's own wait was judged held by open inputs alone, else :meth:`explain_stuck`."""
        if self._holding is not None and self.wait is not None:
            return self.certain_message()
        return self.explain_stuck()

    def certain_message(self) -> str:
        """The explanation of a certain stall, naming the inputs that hold it and where they were made."""
        holding = self._holding or Holding()
        if holding.unbuilt and not holding.inputs:
            return f"{self.explain_stuck()}\n{self._unbuilt_message(holding.unbuilt)}"
        inputs_held = holding.inputs
        mine = [
            describe_input(handle, inputs_held[handle.operator.address] or None)
            for handle in self._context.inputs
            if not handle.closed and handle.operator is not None and handle.operator.address in inputs_held
        ]
        inputs = f" (input {', '.join(mine)})" if mine else " (of other workers)"
        if self._peers == 1:
            why = f"only its own open inputs{inputs} hold back the probe(s) its condition reads"
        else:
            why = (
                f"only open inputs{inputs} hold back the probe(s) its condition reads, and every "
                "other worker waits the same way or has returned, so none can advance or close them"
            )
        unbuilt = f"\n{self._unbuilt_message(holding.unbuilt)}" if holding.unbuilt else ""
        return (
            f"{self.explain_stuck()}\nThis cannot change: worker {self._index} waits in step_while, and "
            f"{why}. Advance or close the input(s) before waiting for their results (a wait that also "
            f"ends on something outside the dataflow, such as a deadline, belongs in a loop of worker.step()).{unbuilt}"
        )

    def _unbuilt_message(self, unbuilt: dict[int, set[int]]) -> str:
        """Why a wait on dataflows that other workers have not built cannot end, and what to do."""
        names = ", ".join(
            f"'{self._dataflows[index].name}' (not built by worker(s) {', '.join(map(str, sorted(missing)))})"
            if index in self._dataflows
            else f"dataflow {index}"
            for index, missing in sorted(unbuilt.items())
        )
        waits = "returned from main with" if self.wait is None else "waits in step_while on"
        return (
            f"This cannot change: worker {self._index} {waits} dataflow(s) {names}, and every "
            "other worker waits the same way or has returned, so none will build it. Every worker must build "
            "the same dataflows in the same order (a Barrier or a Sequencer is a dataflow too): build it on "
            "every worker, not under a condition on worker.index."
        )

    def explain_stuck(self) -> str:
        """Describe open inputs, held capabilities and waiting messages of unfinished dataflows."""
        lines = [f"worker {self._index}: {len(self._dataflows)} dataflow(s) cannot complete:"]
        section, held_inputs = self._wait_section()
        lines.extend(section)
        open_inputs = [handle for handle in self._context.inputs if not handle.closed]
        for handle in open_inputs:
            site = f" (created at {handle.site})" if handle.site else ""
            address = handle.operator.address if handle.operator is not None else None
            if held_inputs is not None and address not in held_inputs:
                lines.append(
                    f"  input '{handle.name}' is still open at time {handle.time!r}{site}: not what holds the wait "
                    "now (see above), but advance it with advance_to() or close() it for its dataflow to complete"
                )
                continue
            lines.append(
                f"  input '{handle.name}' is still open at time {handle.time!r}{site}: "
                "advance it with advance_to() or close() it"
            )
        for dataflow in self._dataflows.values():
            lines.append(f"  dataflow '{dataflow.name}':")
            if dataflow.unverified:
                waiting = ", ".join(str(peer) for peer in sorted(dataflow.unverified))
                lines.append(
                    f"    not started: worker(s) {waiting} have not built it (did every worker "
                    "build the same dataflows?)"
                )
                continue
            held = _pointstamps(dataflow.root, (dataflow.name,), self._index)
            if not held:
                lines.append("    (no capabilities or messages remain here; waiting for other workers)")
            for what in held:
                lines.append(f"    {what}")
        for what in self._comm.in_flight():
            lines.append(f"  {what}")
        lines.append(
            "An operator that holds a capability must downgrade or drop it, and every input "
            "must be advanced or closed, for a dataflow to complete."
        )
        return "\n".join(lines)

    def _wait_section(self) -> tuple[list[str], set[tuple[int, ...]] | None]:
        """Lines naming what holds back the probes that ``main``'s ``step_while`` condition reads (its wait's
        consulted probes, in their dataflows' top scopes), and the addresses of the inputs among them; nothing
        and ``None`` when ``main`` is not waiting on probes, or nothing could be traced."""
        wait = self.wait
        probes = wait.consulted() if wait is not None else []
        holders, times = wait_holders(probes, self._dataflows) if probes else ([], [])
        if not holders:
            return [], None
        inputs = {handle.operator.address: handle for handle in self._context.inputs if handle.operator is not None}
        at = ", ".join(map(repr, times))
        lines = [f"  what holds the probe(s) that worker {self._index}'s step_while reads at time {at}:"]
        held_inputs: set[tuple[int, ...]] = set()
        for holder in holders:
            address = holder.scope.address + (holder.location.node,)
            handle = inputs.get(address)
            if handle is not None and isinstance(holder.location, Source):
                held_inputs.add(address)
                lines.append(f"    input {describe_input(handle, {holder.time})}")  # may be another worker's
            else:
                lines.append(f"    {describe_holder(holder)}")
        return lines, held_inputs

    def circulating(self) -> list[str]:
        """The loop scopes with records or capabilities in them, each with its iterations."""
        return circulating(self._dataflows)


def circulating(dataflows: Mapping[int, Described]) -> list[str]:
    """The loop scopes with records or capabilities in them, each with its iterations."""
    found: list[str] = []
    for dataflow in dataflows.values():
        _circulating(dataflow.root, (dataflow.name,), found)
    return found


def _circulating(subgraph: Subgraph, path: tuple[str, ...], found: list[str]) -> None:
    """Describe, into ``found``, each loop scope in ``subgraph`` (or below) still holding times."""
    for child in subgraph.children[1:]:
        if not isinstance(child, Subgraph):
            continue
        inner = path + (child.name,)
        tracker = child.tracker
        times = [
            time_
            for location in tracker.locations()
            for time_, count in tracker.pointstamps(location).items()
            if count > 0 and isinstance(time_, Product)
        ]
        if times:
            values = {time_.inner for time_ in times}
            try:
                iterations = sorted(values)
            except TypeError:
                iterations = sorted(values, key=repr)
            shown = f"{iterations[0]!r}" if len(iterations) == 1 else f"{iterations[0]!r} to {iterations[-1]!r}"
            earliest = min(times, key=lambda time_: (repr(time_.outer), repr(time_.inner)))
            found.append(
                f"scope {' > '.join(repr(name) for name in inner)} at iteration {shown} (for example time {earliest!r})"
            )
        _circulating(child, inner, found)


def _pointstamps(subgraph: Subgraph, path: tuple[str, ...], worker: int) -> list[str]:
    """Positive pointstamps in ``subgraph`` and its nested scopes, described for a person.

    Counts are over all workers.  For capabilities, the part ``worker`` holds is added: on the line of the
    output's one time, or (the worker knows its count per output, not per time) on a line after its times.
    """
    found: list[str] = []
    tracker = subgraph.tracker
    scope = " / ".join(path)
    for location in tracker.locations():
        if location.node == 0:
            continue
        name = subgraph.child_names[location.node]
        address = subgraph.address + (location.node,)
        site = subgraph.child_sites.get(location.node)
        where = f"scope '{scope}', address {address}" + (f", built at {site}" if site else "")
        stamps = [
            (time_, count)
            for time_, count in sorted(tracker.pointstamps(location).items(), key=lambda item: repr(item[0]))
            if count > 0
        ]
        if isinstance(location, Source):
            if isinstance(subgraph.children[location.node], Subgraph):
                continue  # the nested scope's summary of what holds it inside, listed from inside below
            held = getattr(subgraph.children[location.node], "held_capabilities", None)
            mine = held()[location.port] if callable(held) and stamps else 0
            for time_, count in stamps:
                found.append(
                    f"operator '{name}' ({where}) holds "
                    f"{count} capability(ies) for time {time_!r} at output {location.port}"
                    + (f" (worker {worker} holds {mine} at that output)" if mine and len(stamps) == 1 else "")
                )
            if mine and len(stamps) > 1:  # this worker's count is per output, not per time
                total = sum(count for _, count in stamps)
                found.append(
                    f"  (worker {worker} holds {mine} of those {total} capabilities at output {location.port} "
                    f"of operator '{name}'; the others are other workers')"
                    if mine < total
                    else f"  (worker {worker} holds all {total} at output {location.port} of operator '{name}')"
                )
            continue
        for time_, count in stamps:
            found.append(
                f"{count} message(s) at time {time_!r} wait at input {location.port} of operator '{name}' ({where})"
            )
    for child in subgraph.children[1:]:
        if isinstance(child, Subgraph):
            found.extend(_pointstamps(child, path + (child.name,), worker))
    return found


def describe_holder(holder: Holder) -> str:
    """An operator's capability or the messages at its input that hold a wait back, for a person: the operator's
    name, its scope, the line that built it, the time and the port."""
    scope = holder.scope
    node = holder.location.node
    site = scope.child_sites.get(node)
    where = f"scope '{' / '.join(holder.path)}', address {scope.address + (node,)}" + (
        f", built at {site}" if site else ""
    )
    name = scope.child_names[node]
    if isinstance(holder.location, Source):
        return (
            f"operator '{name}' ({where}) holds a capability for time {holder.time!r} at output {holder.location.port}"
        )
    return f"message(s) at time {holder.time!r} wait at input {holder.location.port} of operator '{name}' ({where})"
