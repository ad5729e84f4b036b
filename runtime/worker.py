"""``Worker``: hosts dataflows and drives them through the ``Operate`` interface.

A worker talks to the other workers only through its
:class:`~runtime.communication.Communicator`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from runtime.audit import Auditor, ProcessLedger, audit_requested, combine
from runtime.checkpoints import CheckpointManager, CheckpointStore, new_registry, resume
from runtime.communication import Communicator, Stop
from runtime.errors import DataflowMismatch, DataflowStuck, WorkerAborted
from runtime.fingerprint import Fingerprint, fingerprint, first_difference
from runtime.instrument import Instrument, logger_for
from runtime.metrics import report_stall
from runtime.stalls import Wait, describe_input, holding_inputs
from scopes.builder import BuildContext, ScopeBuilder
from scopes.channels import Puller
from scopes.progress.change_batch import ChangeBatch
from scopes.progress.subgraph import Subgraph
from scopes.progress.timestamp import INTEGER, Product, TimestampType

R = TypeVar("R")

log = logging.getLogger("runtime.worker")

STALL_WARNING = 30.0
"""Seconds every worker must wait, with work unfinished, before a worker logs why (once)."""

CIRCULATING_FIRST = 5.0
"""Seconds after ``main`` returns before a loop still circulating is first reported."""

CIRCULATING_EVERY = 30.0
"""Seconds between later reports of loops still circulating."""

CERTAIN_STALL = 1.0
"""Seconds every worker must wait before a stall known to be permanent raises ``DataflowStuck``
(the default of :attr:`Worker.certain_stall`)."""

_NOTHING: list[ChangeBatch[Any]] = []
_ROOM_PARK = 0.01
"""Seconds a worker waiting for room at its receivers parks at most between two looks."""


class Dataflow:
    """A dataflow hosted by a worker: its name, top-level subgraph, and structure check.

    With several workers, the dataflow runs only once every other worker's
    fingerprint has arrived and matched (``unverified`` lists the workers still
    awaited), so that workers that built different graphs never exchange data.
    """

    def __init__(self, index: int, name: str, root: Subgraph) -> None:
        """Describe dataflow ``index``."""
        self.index = index
        self.name = name
        self.root = root
        self.fingerprint: Fingerprint = []
        self.unverified: set[int] = set()
        self.fingerprints: Puller | None = None
        self.checkpoints: CheckpointManager | None = None

    def __repr__(self) -> str:
        return f"Dataflow({self.index}, {self.name!r})"

    def _repr_svg_(self) -> str | None:
        """Jupyter display: the diagram ``viz.render(self)`` draws, once ``viz`` is imported (else the text repr).

        ``viz`` sits above ``runtime``, so it registers the drawing itself
        (:func:`set_svg_renderer`) when it is imported.
        """
        return _svg_renderer(self) if _svg_renderer is not None else None


_svg_renderer: Callable[[Dataflow], str] | None = None


def set_svg_renderer(renderer: Callable[[Dataflow], str] | None) -> None:
    """Draw dataflows as SVG in Jupyter with ``renderer`` (``viz`` registers its own on import)."""
    global _svg_renderer
    _svg_renderer = renderer


class Worker:
    """One worker: builds dataflows and runs them a step at a time.

    Every worker of a computation must build the same dataflows in the same order.

    A step that finds nothing to do checks how long every worker has been waiting
    with work unfinished (a stall):

    * a stall that can never end raises :class:`~runtime.errors.DataflowStuck`
      after :attr:`certain_stall` seconds: this worker waits in :meth:`step_while`
      on a condition that reads probes, only open inputs (and what they could
      still cause) hold those probes back, and every other worker's ``main``
      waits the same way or has returned, so no one can advance or close them
      (see :mod:`runtime.stalls`);
    * any other stall (a streaming program waiting for outside data, a wait
      with a deadline, a timer) is explained once, as a warning through
      :mod:`logging`, after :attr:`stall_warning` seconds, and the worker keeps running;
    * with ``stall_timeout`` set, any stall that long raises ``DataflowStuck``.
    """

    def __init__(
        self,
        communicator: Communicator,
        stall_timeout: float | None = None,
        audit: ProcessLedger | bool | None = None,
    ) -> None:
        """Create a worker that communicates through ``communicator``.

        ``audit``: check the progress ledger as the computation runs (see
        :mod:`runtime.audit`); a :class:`~runtime.audit.ProcessLedger` shared by
        this process's workers also checks every channel's balance.  ``None``
        (the default) follows ``PYTIMELY_AUDIT``.
        """
        self._comm = communicator
        self._context = BuildContext(communicator, threading.Lock)
        self._dataflows: dict[int, Dataflow] = {}
        self._active: set[int] = set()
        self._next_dataflow = 0
        self._park = 0.002 if communicator.peers > 1 else 0.0
        self._idle = False
        self._several = communicator.peers > 1
        self.stall_timeout = stall_timeout
        self._stall_reported = False  # the metrics endpoint (if any) shows this worker as stalled
        self.stall_warning: float | None = STALL_WARNING
        """Seconds of stall before the explanation is logged as a warning (``None``: never)."""
        self._stall_warned = False
        self.certain_stall: float = CERTAIN_STALL
        """Seconds of stall before a stall known to be permanent raises ``DataflowStuck``."""
        self._wait: Wait | None = None  # main is inside step_while, so it cannot feed its inputs
        self._draining = False  # main has returned: only the dataflows can still move
        self._judged: int | None = None  # consulted probes when this idle period was last judged
        self._holding: set[tuple[int, ...]] | None = None  # inputs that alone hold the wait back
        self.logger: Instrument | None = logger_for(communicator.index)
        """This worker's instrumentation logger; ``None`` when logging is off (the default)."""
        if audit is None:
            audit = audit_requested()
        if audit is True:
            audit = ProcessLedger(1, communicator.peers)
        self.auditor: Auditor | None = Auditor(communicator.index, communicator.peers, audit) if audit else None
        """This worker's progress auditor; ``None`` unless the audit is on."""

    @property
    def index(self) -> int:
        """This worker's index, from 0 to ``peers - 1``."""
        return self._comm.index

    @property
    def peers(self) -> int:
        """The number of workers in the computation."""
        return self._comm.peers

    @property
    def communicator(self) -> Communicator:
        """The communicator this worker talks to other workers through."""
        return self._comm

    def dataflow(
        self,
        build: Callable[[ScopeBuilder], R],
        name: str | None = None,
        timestamp: TimestampType = INTEGER,
        checkpoint: CheckpointStore | None = None,
    ) -> R:
        """Build a new dataflow with ``build(scope)`` and return what it returns.

        With ``checkpoint``, the dataflow's state is checkpointed into that
        store at epoch boundaries, and resumed from its latest complete one
        (:mod:`runtime.checkpoints`): the program then sends its inputs from
        ``checkpoint.resume_epoch``.
        """
        index = self._next_dataflow
        self._next_dataflow += 1
        label = name or f"dataflow {index}"
        root = Subgraph(
            label,
            (index,),
            timestamp,
            None,
            self._comm,
            self._context.next_channel(),
            lambda: self._active.add(index),
        )
        root.observer = combine(self.logger, self.auditor)
        scope = ScopeBuilder(root, self._context)
        registry = new_registry(checkpoint, timestamp, label)
        inputs_before = len(self._context.inputs)
        self._context.state_registry = registry
        try:
            with scope.open():
                result = build(scope)
        finally:
            self._context.state_registry = None
        scope.check_complete()
        root.get_internal_summary()
        root.set_external_summary([], [])
        dataflow = Dataflow(index, label, root)
        if checkpoint is not None and registry is not None:
            inputs = self._context.inputs[inputs_before:]
            dataflow.checkpoints = resume(checkpoint, registry, root, inputs, self.index, self.peers)
        if self.peers > 1:
            self._send_fingerprint(dataflow)
        self._dataflows[index] = dataflow
        self._active.add(index)
        return result

    def _send_fingerprint(self, dataflow: Dataflow) -> None:
        """Send this worker's fingerprint of ``dataflow`` to every other worker."""
        dataflow.fingerprint = fingerprint(dataflow.root)
        dataflow.unverified = set(range(self.peers)) - {self.index}
        pushers, dataflow.fingerprints = self._comm.allocate(-1 - dataflow.index, (dataflow.index,))
        for peer, pusher in enumerate(pushers):
            if peer != self.index:
                pusher.push(self.index, [dataflow.fingerprint])

    def _verify(self, dataflow: Dataflow) -> bool:
        """Compare the fingerprints that arrived; return whether every worker's has matched."""
        puller = dataflow.fingerprints
        assert puller is not None
        while (message := puller.pull()) is not None:
            sender, (theirs,) = cast(tuple[int, list[Any]], message)  # a fingerprint message
            difference = first_difference(dataflow.fingerprint, theirs, self.index, sender)
            if difference is not None:
                raise DataflowMismatch(
                    f"dataflow '{dataflow.name}' (the dataflow built {_ordinal(dataflow.index)} on "
                    f"each worker) differs between worker {self.index} and worker {sender}: "
                    f"{difference}. Every worker must build the same dataflows, with the same "
                    "operators in the same order.",
                    dataflow.name,
                    (self.index, sender),
                )
            dataflow.unverified.discard(sender)
        return not dataflow.unverified

    @property
    def dataflows(self) -> list[Dataflow]:
        """The dataflows that have not completed yet."""
        return list(self._dataflows.values())

    def _activate(self, addresses: list[tuple[int, ...]]) -> None:
        dataflows = self._dataflows
        for address in addresses:
            dataflow = dataflows.get(address[0])
            if dataflow is None:
                continue
            if len(address) == 1:
                self._active.add(address[0])
            else:
                dataflow.root.activate_address(address[1:])

    def step(self) -> bool:
        """Run every dataflow that has work once; return whether any dataflow is unfinished."""
        return self.step_or_park(self._park)

    def step_or_park(self, timeout: float | None = None) -> bool:
        """Like :meth:`step`, but first wait up to ``timeout`` seconds if there is nothing to do.

        If the step's messages do not all fit at their receivers (another process
        pulls more slowly than this worker sends), it keeps stepping, parking
        when idle, until they have gone: the worker keeps running every dataflow
        meanwhile, and returns to its caller (which may send more input) only
        when its receivers have room.
        """
        more = self._step_or_park(timeout)
        comm = self._comm
        while comm.backlogged():
            if self._dataflows:
                more = self._step_or_park(_ROOM_PARK)
            else:
                comm.park(_ROOM_PARK)
                comm.flush()
                if comm.stop_reason is not None:
                    self._stopped(comm.stop_reason)
        return more

    def _step_or_park(self, timeout: float | None) -> bool:
        comm = self._comm
        if comm.stop_reason is not None:
            self._stopped(comm.stop_reason)
        addresses = comm.take_activations()
        if addresses:
            self._activate(addresses)
        if not self._active and timeout != 0 and self._dataflows:
            comm.park(timeout)
            addresses = comm.take_activations()
            if addresses:
                self._activate(addresses)
        if self._active:
            if self._idle:
                self._idle = False
                comm.report_idle(False)  # also withdraws a report_stuck
                self._judged = self._holding = None
                if self._stall_reported:
                    self._stall_reported = False
                    report_stall(self.index, None)
            active = sorted(self._active)
            self._active.clear()
            for index in active:
                dataflow = self._dataflows.get(index)
                if dataflow is None or (dataflow.unverified and not self._verify(dataflow)):
                    continue
                running = dataflow.root.pull_internal_progress(_NOTHING, _NOTHING, _NOTHING)
                if dataflow.checkpoints is not None:
                    dataflow.checkpoints.poll()
                if not running:
                    del self._dataflows[index]
                    self._active.discard(index)
                    comm.dataflow_completed(index)
                    if self.logger is not None:
                        self.logger.dataflow_completed(index, dataflow.name)
                    if self.auditor is not None:
                        self.auditor.dataflow_completed(index, dataflow.name)
        else:
            self._idle = True
            comm.report_idle(True)
            self._check_stall(comm.stalled_for())
        comm.flush()
        if self._several:
            comm.end_step(bool(self._active))
        return bool(self._dataflows)

    def _check_stall(self, stalled: float) -> None:
        """Raise for a stall that is certain or longer than ``stall_timeout``; warn once for another."""
        if not stalled:
            return
        if self.auditor is not None:  # the audit names an over-count before any stall is reported
            self.auditor.stalled(stalled, self._comm.in_flight)
        timeout = self.stall_timeout
        if timeout is not None and stalled > timeout:
            explanation = self.explain_stuck()
            report_stall(self.index, explanation)
            raise DataflowStuck(explanation)
        if stalled > self.certain_stall / 2:
            self._judge()
        if (
            self._holding is not None
            and self._wait is not None
            and stalled > self.certain_stall
            and self._comm.all_stuck()
        ):
            raise DataflowStuck(self._certain_message())
        warning = self.stall_warning
        if warning is not None and stalled > warning and not self._stall_reported:
            self._stall_reported = True
            report_stall(self.index, self.explain_stuck())
        if warning is not None and stalled > warning and not self._stall_warned:
            self._stall_warned = True
            log.warning(
                "every worker has waited %.0f s with work unfinished; this is normal for a program "
                "waiting for outside data, and pytimely keeps running (pass stall_timeout to execute "
                "to make a stall an error). This warning is given once.\n%s",
                stalled,
                self.explain_stuck(),
            )

    def _judge(self) -> None:
        """Tell the other workers whether this worker's ``main`` can only wait (once per idle period and wait)."""
        wait = self._wait
        consulted = wait.consulted() if wait is not None else []
        if self._judged == len(consulted):
            return
        self._judged = len(consulted)
        if wait is not None:
            inputs = self._context.inputs
            holding = None if self._comm.in_flight() else holding_inputs(consulted, self._dataflows, inputs)
            self._holding = holding
            self._comm.report_stuck(holding is not None)
        else:
            self._comm.report_stuck(self._draining)

    def _certain_message(self) -> str:
        """The explanation of a certain stall, naming the inputs that hold it and where they were made."""
        holding = self._holding or set()
        mine = [
            describe_input(handle)
            for handle in self._context.inputs
            if not handle.closed and handle.operator is not None and handle.operator.address in holding
        ]
        inputs = f" (input {', '.join(mine)})" if mine else " (of other workers)"
        if self.peers == 1:
            why = f"only its own open inputs{inputs} hold back the probe(s) its condition reads"
        else:
            why = (
                f"only open inputs{inputs} hold back the probe(s) its condition reads, and every "
                "other worker waits the same way or has returned, so none can advance or close them"
            )
        return (
            f"{self.explain_stuck()}\nThis cannot change: worker {self.index} waits in step_while, and "
            f"{why}. Advance or close the input(s) before waiting for their results (a wait that also "
            "ends on something outside the dataflow, such as a deadline, belongs in a loop of worker.step())."
        )

    def _stopped(self, reason: Stop) -> None:
        if reason.kind == "stalled" and self._idle:
            raise DataflowStuck(self.explain_stuck())
        raise WorkerAborted(f"worker {self.index} stopped because {reason.describe()}")

    def step_while(self, condition: Callable[[], bool]) -> None:
        """Step (parking when idle) while ``condition()`` holds.

        Like timely's ``step_while``, a condition that does not read the dataflow
        (a deadline, an outside queue) just decides how long to step.  If the
        condition reads probes, and the wait can never end (every worker idle,
        only open inputs hold those probes back, and every worker's ``main``
        waits the same way; see :mod:`runtime.stalls`), raises
        :class:`~runtime.errors.DataflowStuck` after :attr:`certain_stall` seconds.
        """
        outer, self._wait = self._wait, Wait(self._context.probes)
        self._judged = self._holding = None
        self._comm.report_stuck(False)
        try:
            while condition():
                self.step_or_park(0.01)
        finally:
            self._wait = outer
            self._judged = self._holding = None
            self._comm.report_stuck(False)

    def close_inputs(self) -> None:
        """Close every input this worker created (done automatically when ``main`` returns)."""
        for handle in self._context.inputs:
            handle.close()

    def run_to_completion(self) -> None:
        """Close inputs and step until every dataflow has completed.

        A loop that keeps circulating (one that never converges runs for ever) is
        reported through :mod:`logging` after :data:`CIRCULATING_FIRST` seconds, and
        again every :data:`CIRCULATING_EVERY` seconds: its scope and iterations.
        """
        self.close_inputs()
        self._draining = True
        self._judged = None
        started = time.monotonic()
        report = started + CIRCULATING_FIRST
        while self._dataflows:
            self.step_or_park(0.01)
            if time.monotonic() >= report:
                report = time.monotonic() + CIRCULATING_EVERY
                loops = self.circulating()
                if loops:
                    log.warning(
                        "worker %d: main returned %.0f s ago and loop(s) still circulate: %s; a loop that "
                        "never converges runs for ever (bound it with IntegerSummary(step, limit) or "
                        "stop feeding records back)",
                        self.index,
                        time.monotonic() - started,
                        "; ".join(loops),
                    )

    def circulating(self) -> list[str]:
        """The loop scopes with records or capabilities in them, each with its iterations."""
        found: list[str] = []
        for dataflow in self._dataflows.values():
            _circulating(dataflow.root, (dataflow.name,), found)
        return found

    def explain_stuck(self) -> str:
        """Describe open inputs, held capabilities and waiting messages of unfinished dataflows."""
        lines = [f"worker {self.index}: {len(self._dataflows)} dataflow(s) cannot complete:"]
        open_inputs = [handle for handle in self._context.inputs if not handle.closed]
        for handle in open_inputs:
            site = f" (created at {handle.site})" if handle.site else ""
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
            held = _pointstamps(dataflow.root, (dataflow.name,), self.index)
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


def _ordinal(index: int) -> str:
    suffix = "th" if 10 <= (index + 1) % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get((index + 1) % 10, "th")
    return f"{index + 1}{suffix}"


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

    Counts are over all workers; for capabilities, the part ``worker`` holds is added.
    """
    from scopes.progress.location import Source

    found: list[str] = []
    tracker = subgraph.tracker
    scope = " / ".join(path)
    for location in tracker.locations():
        if location.node == 0:
            continue
        name = subgraph.child_names[location.node]
        address = subgraph.address + (location.node,)
        for time_, count in sorted(tracker.pointstamps(location).items(), key=lambda item: repr(item[0])):
            if count <= 0:
                continue
            if isinstance(location, Source):
                held = getattr(subgraph.children[location.node], "held_capabilities", None)
                mine = held()[location.port] if callable(held) else 0
                found.append(
                    f"operator '{name}' (scope '{scope}', address {address}) holds "
                    f"{count} capability(ies) for time {time_!r} at output {location.port}"
                    + (f" (worker {worker} holds {mine} at that output)" if mine else "")
                )
            else:
                found.append(
                    f"{count} message(s) at time {time_!r} wait at input {location.port} of "
                    f"operator '{name}' (scope '{scope}', address {address})"
                )
    for child in subgraph.children[1:]:
        if isinstance(child, Subgraph):
            found.extend(_pointstamps(child, path + (child.name,), worker))
    return found
