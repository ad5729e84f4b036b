"""``Worker``: hosts dataflows and drives them through the ``Operate`` interface.

A worker talks to the other workers only through its
:class:`~runtime.communication.Communicator`.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
import weakref
from collections.abc import Callable
from functools import partial
from pathlib import Path
from threading import get_ident
from types import FrameType
from typing import Any, TypeVar, cast

from runtime.audit import Auditor, ProcessLedger, audit_requested, combine
from runtime.checkpoints import CheckpointManager, CheckpointStore, new_registry, resume
from runtime.communication import Communicator, Stop
from runtime.communication.fabric import FabricCommunicator
from runtime.errors import ConfigurationError, DataflowMismatch, DataflowStuck, WorkerAborted
from runtime.fingerprint import Fingerprint, fingerprint, first_difference
from runtime.instrument import Instrument, logger_for
from runtime.settings import check_stall_timeout
from runtime.stall_watch import StallWatch
from runtime.timers import Timers, wake_from_outside
from scopes.builder import BuildContext, ScopeBuilder
from scopes.capability import stop_sites_at
from scopes.channel_protocols import Puller
from scopes.progress.change_batch import ChangeBatch
from scopes.progress.subgraph import Subgraph
from scopes.progress.timestamp import INTEGER, TimestampType
from scopes.signatures import describe_operator, guard_signature_reads

R = TypeVar("R")

# Worker threads build dataflows at once; CPython 3.11 cannot parse signatures in two threads.  Re-entrant:
# a callable's own ``__signature__`` may check another function in the same thread.
guard_signature_reads(threading.RLock())

log = logging.getLogger("runtime.worker")

CIRCULATING_FIRST = 5.0
"""Seconds after ``main`` returns before a loop still circulating is first reported."""

CIRCULATING_EVERY = 30.0
"""Seconds between later reports of loops still circulating."""

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
        self.scopes: list[Subgraph] = _scopes(root)
        """The top-level subgraph and every scope nested in it (a poll moved something if any of them did)."""

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
        # a communicator written before activate_from_outside existed still runs: waiting replays then poll
        if getattr(communicator, "activate_from_outside", None) is not None:
            self._context.wake_from_outside = partial(wake_from_outside, weakref.ref(self))
        if isinstance(communicator, FabricCommunicator):  # names the operator a batch it cannot send was for
            communicator.describe_operator = partial(_describe_operator, weakref.ref(self))
        self._timers = Timers(communicator, partial(_in_step_of, weakref.ref(self)))
        """Operators to activate once their time has come (see :mod:`runtime.timers`)."""
        self._context.timer = self._timers.add  # refuses a thread other than the one stepping this worker
        self._timers_pending = self._timers.pending  # tested at every step: a list's truth, not a call
        self._dataflows: dict[int, Dataflow] = {}
        self._active: set[int] = set()
        self._next_dataflow = 0
        self._checkpoint_paths: dict[Path, tuple[int, str]] = {}
        """Each checkpoint directory a dataflow of this worker uses, and that dataflow's index and name."""
        self._park = 0.002 if communicator.peers > 1 else 0.0
        self._idle = False
        self._several = communicator.peers > 1
        kind = type(communicator)
        # The threads' fabric delivers at once: its flush does nothing and it is never backlogged, so a step
        # need not call them (two Python calls an epoch).
        self._delivers_at_once = (
            kind.flush is FabricCommunicator.flush and kind.backlogged is FabricCommunicator.backlogged
        )
        self._stalls = StallWatch(communicator.index, communicator.peers, communicator, self._context, self._dataflows)
        self._stalls.stall_timeout = stall_timeout
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
        self._timers.thread = get_ident()  # operators built here may add timers from this thread
        index = self._next_dataflow
        label = name or f"dataflow {index}"
        if isinstance(checkpoint, CheckpointStore):
            self._claim_checkpoint_path(checkpoint, index, label)
        self._next_dataflow += 1
        root = Subgraph(
            label,
            (index,),
            timestamp,
            None,
            self._comm,
            self._context.next_channel(),
            partial(self._active.add, index),  # a C call, no Python frame: the scopes call it on each wake-up
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

    def _claim_checkpoint_path(self, store: CheckpointStore, index: int, label: str) -> None:
        """Refuse ``store`` for dataflow ``index`` if another dataflow of this worker checkpoints into its directory.

        Their files share names (one per worker and epoch): each would overwrite
        the other's, and a resumed run would find only files of another dataflow.
        """
        path = store.path.absolute()
        other, other_label = self._checkpoint_paths.setdefault(path, (index, label))
        if other != index:
            raise ConfigurationError(
                f"dataflow {label!r} checkpoints into {str(store.path)!r}, where {other_label!r} (the dataflow built "
                f"{_ordinal(other)} on this worker) checkpoints too: their files would overwrite each other's. Give "
                "each dataflow a CheckpointStore of its own directory"
            )

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

    def wakes(self, address: tuple[int, ...]) -> bool:
        """Whether an activation of ``address`` from another thread may still matter: its dataflow has not
        completed and the computation has not stopped (read from any thread)."""
        return address[0] in self._dataflows and self._comm.stop_reason is None

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
        if self._delivers_at_once:
            return more
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
        polled = False  # only timers gave the worker work: a poll, which may find nothing (see _poll_moved)
        addresses = comm.take_activations()
        if addresses:
            self._activate(addresses)
        if self._timers_pending:
            quiet = not self._active
            wait = self._timers.fire(self._activate)
            polled = quiet and bool(self._active)
            if wait is not None and (timeout is None or wait < timeout):
                timeout = wait  # parks only until the next timer (a timeout of 0 stays 0)
        if not self._active and timeout != 0 and self._dataflows:
            self._timers.thread = get_ident()  # the thread that parks steps this worker (see runtime.timers)
            comm.park(timeout)
            addresses = comm.take_activations()
            if addresses:
                self._activate(addresses)
            if self._timers_pending:
                quiet = not self._active
                self._timers.fire(self._activate)
                polled = quiet and bool(self._active)
        if self._active:
            if polled:
                polled_indices, polled_reads = self._begin_poll()
            elif self._idle:
                self._resume()
            if len(self._active) == 1:  # the usual case: one dataflow, no sorting
                active = [self._active.pop()]
            else:
                active = sorted(self._active)
                self._active.clear()
            try:
                for index in active:
                    dataflow = self._dataflows.get(index)
                    if dataflow is None or (dataflow.unverified and not self._verify(dataflow)):
                        continue
                    running = dataflow.root.pull_internal_progress(_NOTHING, _NOTHING, _NOTHING)
                    if dataflow.checkpoints is not None:
                        dataflow.checkpoints.poll()
                    if not running:
                        self._completed(index, dataflow)
            except BaseException:
                if self._several:  # wake the peers this step sent to (see end_step) before the error leaves it
                    comm.end_step(False)
                raise
            if polled:
                self._end_poll(polled_indices, polled_reads)
        else:
            self._idle_step()
        if not self._delivers_at_once:
            comm.flush()
        if self._several:
            comm.end_step(bool(self._active))
        return bool(self._dataflows)

    def _idle_step(self) -> None:
        """The step found nothing to do (or only a poll that moved nothing): the worker waits, and the stall it is
        part of may be judged."""
        if not self._idle:
            self._timers.thread = get_ident()  # noted when the worker goes idle or resumes, not at every step
            self._idle = True
            self._stalls.idle_began()
        comm = self._comm
        comm.report_idle(True)
        if self._dataflows:  # a worker with no dataflow unfinished has no stall of its own to report
            self._stalls.check(comm.stalled_for(), self.auditor)

    def _begin_poll(self) -> tuple[list[int], list[int] | None]:
        """Only timers woke the active dataflows: clear their scopes' ``moved``; return the dataflows, and (while
        idle) the wait's probe reads so far, for :meth:`_end_poll`."""
        for index in self._active:
            dataflow = self._dataflows.get(index)
            if dataflow is not None:
                for subgraph in dataflow.scopes:
                    subgraph.moved = False
        return list(self._active), self._stalls.poll_began() if self._idle else None

    def _end_poll(self, indices: list[int], reads: list[int] | None) -> None:
        """After a run only timers woke: work resumes if it moved anything (:meth:`_poll_moved`), else the worker
        goes on waiting as in an idle step (a poller that runs at every step must not keep a stall from being
        judged), and the operators' probe reads in the run were not the wait's condition's."""
        if self._poll_moved(indices):
            if self._idle:
                self._resume()
            return
        if self._idle:
            self._stalls.poll_found_nothing(reads)
        self._idle_step()

    def _completed(self, index: int, dataflow: Dataflow) -> None:
        """Dataflow ``index`` has completed on this worker: forget it, and tell whoever keeps count."""
        del self._dataflows[index]
        self._active.discard(index)
        self._timers.drop_dataflow(index)
        self._context.dataflow_completed(index)
        self._comm.dataflow_completed(index)
        if self.logger is not None:
            self.logger.dataflow_completed(index, dataflow.name)
        if self.auditor is not None:
            self.auditor.dataflow_completed(index, dataflow.name)

    def _resume(self) -> None:
        """The worker has work again after an idle period: tell the stall watch and the other workers."""
        self._timers.thread = get_ident()  # noted when the worker resumes or goes idle, not at every step
        self._idle = False
        self._comm.report_idle(False)  # also withdraws a report_stuck
        self._stalls.resumed()

    def _poll_moved(self, indices: list[int]) -> bool:
        """Whether the run of dataflows ``indices``, which only timers woke while the worker was idle, moved anything.

        An operator polling for outside data (``info.activate_after``) runs every few milliseconds; a run that
        finds nothing sends nothing, changes no capability and wakes no other operator, so the worker goes on
        waiting, and so does the stall it is part of, which may still be judged. (Before, every such run ended
        the stall: a poller anywhere hid a certain stall, a ``stall_timeout`` and the warning for ever.)
        """
        if self._active:
            return True
        dataflows = self._dataflows
        return any(
            index not in dataflows or any(subgraph.moved for subgraph in dataflows[index].scopes) for index in indices
        )

    def _stopped(self, reason: Stop) -> None:
        if reason.kind == "stalled" and self._idle:
            raise DataflowStuck(self._stalls.stopped_message())
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
        outer = self._stalls.begin_wait(self._context.probes)
        try:
            while condition():
                self.step_or_park(0.01)
        finally:
            self._stalls.end_wait(outer)

    def wait_for_peers(self, condition: Callable[[], bool], what: str, only_peers: Callable[[], bool]) -> None:
        """Step while ``condition()`` holds, on something only other workers' ``main`` provides (a
        ``Sequencer.take``): ``what`` names it for messages, and ``only_peers()`` says whether, with every worker
        idle, only another worker's ``main`` can end the wait.

        Judged as :meth:`step_while` is: when every other worker waits in a wait that cannot end either (or has
        returned), raises :class:`~runtime.errors.DataflowStuck` after :attr:`certain_stall` seconds.
        """
        outer = self._stalls.begin_wait(self._context.probes, (what, only_peers))
        try:
            while condition():
                self.step_or_park(0.01)
        finally:
            self._stalls.end_wait(outer)

    def abandon(self) -> None:
        """Release what this worker's unfinished dataflows hold outside them (a replay's socket watch, and a
        socket its reader owns): called when the worker ends without completing them, on an error or a stop
        (:func:`~runtime.execute.run_worker` does it).  A release that fails is logged; the others still run."""
        for address, error in self._context.abandon():
            log.warning(
                "worker %d: releasing the operator at address %s of an abandoned dataflow failed: %r",
                self.index,
                address,
                error,
            )

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
        self._stalls.drain()
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
        return self._stalls.circulating()

    def explain_stuck(self) -> str:
        """Describe open inputs, held capabilities and waiting messages of unfinished dataflows."""
        return self._stalls.explain_stuck()

    @property
    def stall_timeout(self) -> float | None:
        """Seconds of any stall before it raises ``DataflowStuck`` (``None``: never)."""
        return self._stalls.stall_timeout

    @stall_timeout.setter
    def stall_timeout(self, seconds: float | None) -> None:
        check_stall_timeout(seconds, "worker")
        self._stalls.stall_timeout = seconds

    @property
    def stall_warning(self) -> float | None:
        """Seconds of stall before the explanation is logged as a warning (``None``: never)."""
        return self._stalls.stall_warning

    @stall_warning.setter
    def stall_warning(self, seconds: float | None) -> None:
        check_stall_timeout(seconds, "worker", "stall_warning")
        self._stalls.stall_warning = seconds

    @property
    def certain_stall(self) -> float:
        """Seconds of stall before a stall known to be permanent raises ``DataflowStuck``."""
        return self._stalls.certain_stall

    @certain_stall.setter
    def certain_stall(self, seconds: float) -> None:
        check_stall_timeout(seconds, "worker", "certain_stall", optional=False)
        self._stalls.certain_stall = seconds


stop_sites_at(Worker._step_or_park.__code__)  # noqa: SLF001 - the logic runner's first Python caller, compiled


def _in_step_of(worker: weakref.ref[Worker]) -> bool:
    """Whether the calling thread is inside a step of ``worker`` (a frame of :meth:`Worker._step_or_park` on
    it): the check a timer added by a thread other than the one last noted makes, not one made at every step."""
    alive = worker()
    frame: FrameType | None = inspect.currentframe()  # the calling thread's own frames
    while alive is not None and frame is not None:
        if frame.f_code is _STEP_CODE and frame.f_locals.get("self") is alive:
            return True
        frame = frame.f_back
    return False


_STEP_CODE = Worker._step_or_park.__code__  # noqa: SLF001


def _describe_operator(worker: weakref.ref[Worker], address: tuple[int, ...]) -> str | None:
    """``operator 'name' in scope 'outer' > 'inner' (address (0, 3))``: the operator at ``address`` of one of
    ``worker``'s dataflows, for messages; ``None`` if there is none (the dataflow completed, say)."""
    alive = worker()
    dataflows = [] if alive is None else alive.dataflows
    dataflow = next((dataflow for dataflow in dataflows if dataflow.index == address[0]), None)
    if dataflow is None or len(address) < 2:
        return None
    subgraph = dataflow.root
    path = [subgraph.name]
    for index in address[1:-1]:
        child = subgraph.children[index] if 0 < index < len(subgraph.children) else None
        if not isinstance(child, Subgraph):
            return None
        subgraph = child
        path.append(child.name)
    if not 0 < address[-1] < len(subgraph.child_names):
        return None
    return f"{describe_operator(subgraph.child_names[address[-1]], path)} (address {address})"


def _scopes(subgraph: Subgraph) -> list[Subgraph]:
    """``subgraph`` and every scope nested in it, at any depth."""
    found = [subgraph]
    for child in subgraph.children[1:]:
        if isinstance(child, Subgraph):
            found.extend(_scopes(child))
    return found


def _ordinal(index: int) -> str:
    suffix = "th" if 10 <= (index + 1) % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get((index + 1) % 10, "th")
    return f"{index + 1}{suffix}"
