"""The thread communicator: workers that share one process exchange messages through memory.

Each ``(channel, receiving worker)`` pair has a mailbox: a deque that any thread
may append to and only the receiver pops from, so messages from one sender
arrive in the order sent (FIFO per channel, sender and receiver, as
:mod:`runtime.communication` requires).  Pushing delivers at once and queues the
channel's address as an activation of the receiver.  A parked receiver is woken
once the sender's step ends (or at once, for a message sent outside a step):
the workers share the GIL, so a receiver woken earlier would only wait for it.
``flush`` has nothing to do.
"""

from __future__ import annotations

import _thread
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from runtime.communication import WAITING_GAP, Address, Stop
from scopes.batches import Batch
from scopes.channels import Message, Pusher

_NONE: list[Address] = []

HAND_OVER_TIMEOUT = 0.001
"""A worker that steps aside for a peer (:meth:`FabricCommunicator.end_step`) goes on after this many seconds
at the latest, even if the peer has not ended its step (it may be busy in user code)."""


class WakeGate:
    """A one-bit wake-up: :meth:`set` from any thread, :meth:`wait` by its owner.

    It does what the worker needs of a ``threading.Event`` on one raw lock (held
    while no wake is pending), without the ``Condition`` and the new lock that
    each ``Event.wait`` builds: a wake-up costs one ``release`` and one ``acquire``.
    A wait that returns ``True`` consumes the wake.
    """

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        """A gate with no wake pending."""
        self._lock = _thread.allocate_lock()
        self._lock.acquire()

    def set(self) -> None:
        """Make a wake pending (again: no effect)."""
        try:  # noqa: SIM105 - contextlib.suppress costs a context manager on every wake
            self._lock.release()
        except RuntimeError:  # already pending
            pass

    def is_set(self) -> bool:
        """Whether a wake is pending."""
        return not self._lock.locked()

    def clear(self) -> None:
        """Forget a pending wake."""
        self._lock.acquire(False)

    def wait(self, timeout: float | None) -> bool:
        """Wait until a wake is pending (and consume it) or ``timeout`` seconds pass (``None``: no limit)."""
        return self._lock.acquire(True, -1 if timeout is None else timeout)


class WorkerSignal:
    """Activations addressed to one worker from any thread, and the event that wakes it when parked."""

    __slots__ = ("pending", "event", "parked", "handing_over", "stepping", "owes")

    def __init__(self) -> None:
        """An empty signal."""
        self.pending: deque[Address] = deque()
        self.event = WakeGate()
        self.parked = False
        self.handing_over = False
        """Whether the worker waits in :meth:`hand_over`: it has work of its own, pending here or not."""
        self.stepping = False
        """Whether the worker is in a step (from taking its activations to :meth:`FabricCommunicator.end_step`):
        the peers it sends to meanwhile are woken when the step ends, not at each message."""
        self.owes = False
        """Whether the worker's step sent to a parked peer that it has not woken yet."""

    def activate(self, address: Address) -> None:
        """Queue ``address`` for the worker; wake it if it is parked."""
        self.pending.append(address)
        if self.parked:
            self.event.set()

    def wake(self) -> None:
        """Wake the worker without activating anything."""
        self.event.set()

    @property
    def waiting_with_work(self) -> bool:
        """Whether the worker is parked although activations wait for it, or steps aside for a peer.

        Such a worker was woken, or has work of its own: it needs the GIL to
        run.  A worker busy in user code between steps is not counted.
        """
        return self.handing_over or (self.parked and bool(self.pending))

    @property
    def parked_with_work(self) -> bool:
        """Whether the worker was parked with nothing to do and has been activated since: a peer's data woke it.

        A worker that steps aside (:meth:`hand_over`) is not counted: it gave
        the GIL away, and takes it back when the worker it stepped aside for
        parks, or steps aside for a worker parked with work in turn.
        """
        return self.parked and not self.handing_over and bool(self.pending)

    def hand_over(self, timeout: float, stopped: Callable[[], bool]) -> None:
        """Block (releasing the GIL) until woken, ``timeout`` seconds pass, or ``stopped()`` holds.

        Unlike :meth:`park`, this waits even if activations are pending: the
        worker steps aside so that a peer woken for work runs first.  A peer
        that parks, an activation sent from outside a peer's step, or a stop
        wakes it (see :meth:`FabricCommunicator.end_step`).
        """
        self.event.clear()
        self.parked = True
        self.handing_over = True
        try:
            if stopped():
                return
            self.event.wait(timeout)
        finally:
            self.parked = False
            self.handing_over = False

    def park(self, timeout: float | None, stopped: Callable[[], bool]) -> None:
        """Wait until an activation arrives, ``timeout`` seconds pass, or ``stopped()`` holds.

        The event is cleared and ``parked`` set before activations are checked, so an
        activation that races with parking is never slept through.
        """
        self.event.clear()
        self.parked = True
        try:
            if self.pending or stopped():
                return
            self.event.wait(timeout)
        finally:
            self.parked = False


class ThreadFabric:
    """The mailboxes, signals and shared stall state of ``peers`` workers in one process."""

    def __init__(self, peers: int) -> None:
        """Create the fabric for ``peers`` workers."""
        self.peers = peers
        self.signals = [WorkerSignal() for _ in range(peers)]
        self.stop_reason: Stop | None = None
        self.idle_since: list[float | None] = [None] * peers
        """When each worker's current run of idle steps began (``None``: it is working)."""
        self.last_idle: list[float] = [0.0] * peers
        """When each worker last reported an idle step."""
        self.finished: list[bool] = [False] * peers
        self.stuck: list[bool] = [False] * peers
        """Whether each worker reports that its ``main`` can only wait (see ``Communicator.report_stuck``)."""
        self._lock = threading.Lock()
        self._mailboxes: dict[tuple[int, int], deque[Message]] = {}

    def communicator(self, index: int) -> ThreadCommunicator:
        """The communicator of worker ``index``."""
        return ThreadCommunicator(self, index)

    def communicators(self) -> list[ThreadCommunicator]:
        """The communicators of every worker, in order."""
        return [ThreadCommunicator(self, index) for index in range(self.peers)]

    def mailbox(self, channel: int, receiver: int) -> deque[Message]:
        """The mailbox of ``receiver`` for ``channel`` (created on first use by either side)."""
        key = (channel, receiver)
        box = self._mailboxes.get(key)
        if box is None:
            with self._lock:
                box = self._mailboxes.setdefault(key, deque())
        return box

    def stop(self, reason: Stop) -> None:
        """Record the first reason to stop, and wake every worker."""
        with self._lock:
            if self.stop_reason is None:
                self.stop_reason = reason
        for signal in self.signals:
            signal.wake()

    def stalled_for(self) -> float:
        """Seconds during which every worker has been waiting and no activation was pending."""
        now = time.monotonic()
        latest = 0.0
        for index in range(self.peers):
            if self.finished[index]:
                continue
            since = self.idle_since[index]
            signal = self.signals[index]
            if since is None or signal.pending:
                return 0.0
            if not signal.parked and now - self.last_idle[index] > WAITING_GAP:
                return 0.0  # busy in user code between steps
            latest = max(latest, since)
        return now - latest if latest else 0.0

    def all_stuck(self) -> bool:
        """Whether every worker that has not finished reports that its ``main`` can only wait."""
        return all(stuck or finished for stuck, finished in zip(self.stuck, self.finished, strict=True))

    def pending_messages(self, receiver: int) -> list[str]:
        """Non-empty mailboxes of ``receiver``, described."""
        with self._lock:
            boxes = [(key, len(box)) for key, box in self._mailboxes.items() if key[1] == receiver]
        return [
            f"{count} message(s) on channel {channel} not yet read by worker {receiver}"
            for (channel, _), count in sorted(boxes)
            if count
        ]


class MailboxPusher:
    """Pushes into a worker's mailbox and activates the receiving operator."""

    __slots__ = ("_box", "_signal", "_address", "_sender")

    def __init__(
        self, box: deque[Message], signal: WorkerSignal, address: Address, sender: WorkerSignal | None = None
    ) -> None:
        """Push into ``box`` and activate ``address`` at the receiver ``signal``; ``sender``: the pushing worker's
        signal, when it is a worker of the same fabric (its steps then wake a parked receiver once, at their end).
        """
        self._box = box
        self._signal = signal
        self._address = address
        self._sender = sender

    def push(self, time: Any, batch: Batch) -> None:
        """Deliver ``(time, batch)`` and activate the receiver.

        A receiver parked idle is woken at once, unless the message comes from
        a peer's step: waking it now would only make it wait for the GIL, which
        the sender holds until its step ends; the sender wakes it then
        (:meth:`FabricCommunicator.end_step`), or hands the GIL to it.
        """
        self._box.append((time, batch))
        signal = self._signal
        signal.pending.append(self._address)
        if signal.parked:
            sender = self._sender
            if sender is not None and sender.stepping:
                sender.owes = True
            else:
                signal.event.set()


class MailboxPuller:
    """Pops this worker's mailbox."""

    __slots__ = ("_box",)

    def __init__(self, box: deque[Message]) -> None:
        self._box = box

    def pull(self) -> Message | None:
        """The oldest waiting message, or ``None``."""
        box = self._box
        return box.popleft() if box else None


def _unknown_operator(address: Address) -> str | None:
    """No operator is known by address (a communicator whose worker did not say how to name them)."""
    return None


class FabricCommunicator:
    """What every communicator of a fabric's local workers shares.

    The fabric (threads of one process, or the local workers of a cluster
    process) keeps one :class:`WorkerSignal` and one idle/finished slot per local
    worker at index ``local``; the subclasses say how messages travel
    (:meth:`allocate`, :meth:`flush`).
    """

    def __init__(self, fabric: Any, local: int, index: int) -> None:
        """Communicate as local worker ``local`` of ``fabric``, worker ``index`` of the computation."""
        self.fabric = fabric
        self._local = local
        self._index = index
        self._signal: WorkerSignal = fabric.signals[local]
        self._others: list[WorkerSignal] = [signal for other, signal in enumerate(fabric.signals) if other != local]
        self.describe_operator: Callable[[Address], str | None] = _unknown_operator
        """The operator at an address of one of this worker's dataflows, named for messages (``operator 'name' in
        scope 'outer' (address (0, 3))``), or ``None`` if unknown; the worker sets it."""

    @property
    def index(self) -> int:
        """This worker's index among all workers."""
        return self._index

    @property
    def peers(self) -> int:
        """The number of workers in the computation."""
        peers: int = self.fabric.peers
        return peers

    def flush(self) -> None:
        """Send whatever is buffered (nothing, unless a subclass buffers)."""

    def backlogged(self) -> bool:
        """Whether sent messages wait for room at their receivers (never: memory delivers at once)."""
        return False

    def dataflow_completed(self, index: int) -> None:
        """Dataflow ``index`` completed on this worker (nothing to release: mailboxes are not bounded)."""

    def take_activations(self) -> list[Address]:
        """Every address queued since the last call."""
        signal = self._signal
        signal.stepping = True  # a step begins (see end_step)
        pending = signal.pending
        if not pending:
            return _NONE
        taken = []
        while pending:
            taken.append(pending.popleft())
        return taken

    def activate_from_outside(self, address: Address) -> None:
        """Queue ``address`` as an activation from any thread, and wake this worker if it is parked."""
        self._signal.activate(address)

    def park(self, timeout: float | None) -> None:
        """Send what is buffered, then wait for an activation, ``timeout`` seconds, or a stop.

        Peers of this fabric that wait with work (handing over, or woken) are
        woken first, so that parking passes the GIL to them at once.
        """
        self.flush()
        mine = self._signal
        mine.stepping = mine.owes = False  # every peer waiting with work is woken here
        for signal in self._others:
            if signal.waiting_with_work:
                signal.event.set()
        mine.park(timeout, self._stopped)

    def _stopped(self) -> bool:
        return self.fabric.stop_reason is not None

    def end_step(self, more_work: bool) -> None:
        """After a step: if this worker has ``more_work`` and a peer of this fabric is parked with work (data that
        this worker sent woke it), let the peer run before this worker goes on.

        Workers that share a process share the GIL, so only one of them runs at
        a time.  Without this, the worker holding the GIL keeps stepping (for up
        to the interpreter's switch interval, 5 ms by default) while a peer it
        woke with data waits: in a loop with an exchange, each worker then races
        through iterations with its own records alone, and every iteration's
        records reach the operators in ever smaller pieces.  Stepping aside
        (blocking on this worker's event, which releases the GIL) lets the peer
        run; the peer wakes this worker when it parks, or when it steps aside in
        turn for a worker parked with work.

        Peers that this step sent to while they were parked idle were not woken
        by each message (see :class:`MailboxPusher`): they are woken here, once.

        The rule depends on no clock: a worker steps aside at the end of every
        step that leaves it work while a peer is parked with work, and never for
        a peer that is itself stepping aside (that peer gave the GIL to this
        worker, which keeps it until it parks).  In a loop with an exchange on
        2 threads, the worker stepped aside for runs its steps until it has
        nothing left and parks, so each iteration's records cross in one message
        per worker and time (``benchmarks/scaling.py``: records per message).
        The wait is bounded by :data:`HAND_OVER_TIMEOUT`: a peer busy in user
        code between steps does not hold this worker.
        """
        mine = self._signal
        mine.stepping = False
        owes, mine.owes = mine.owes, False
        if not more_work:
            if owes:  # the peers this step sent to run once this worker parks or returns to user code
                for signal in self._others:
                    if signal.parked_with_work:
                        signal.event.set()
            return
        woken = False
        for signal in self._others:
            if signal.parked_with_work:
                signal.event.set()
                woken = True
        if woken:
            mine.hand_over(HAND_OVER_TIMEOUT, self._stopped)

    def stop(self, reason: Stop) -> None:
        """Stop every worker."""
        self.fabric.stop(reason)

    @property
    def stop_reason(self) -> Stop | None:
        """Why the computation stopped, or ``None``."""
        reason: Stop | None = self.fabric.stop_reason
        return reason

    def report_idle(self, idle: bool) -> None:
        """Record whether this worker's last step found nothing to do."""
        fabric = self.fabric
        local = self._local
        if idle:
            now = time.monotonic()
            fabric.last_idle[local] = now
            if fabric.idle_since[local] is None:
                fabric.idle_since[local] = now
        else:
            fabric.idle_since[local] = None
            fabric.stuck[local] = False

    def finish(self) -> None:
        """This worker has returned."""
        self.fabric.finished[self._local] = True

    def stalled_for(self) -> float:
        """Seconds every worker has been waiting with nothing pending."""
        stalled: float = self.fabric.stalled_for()
        return stalled

    def report_stuck(self, stuck: bool) -> None:
        """Say whether this worker's ``main`` can only wait."""
        self.fabric.stuck[self._local] = stuck

    def all_stuck(self) -> bool:
        """Whether every unfinished worker says its ``main`` can only wait."""
        stuck: bool = self.fabric.all_stuck()
        return stuck

    def in_flight(self) -> list[str]:
        """Messages waiting in this worker's mailboxes."""
        messages: list[str] = self.fabric.pending_messages(self._local)
        return messages


class ThreadCommunicator(FabricCommunicator):
    """The :class:`~runtime.communication.Communicator` of one worker on a :class:`ThreadFabric`."""

    fabric: ThreadFabric

    def __init__(self, fabric: ThreadFabric, index: int) -> None:
        """Communicate as worker ``index`` of ``fabric``."""
        super().__init__(fabric, index, index)

    def allocate(self, channel: int, address: Address) -> tuple[list[Pusher], MailboxPuller]:
        """One pusher per worker for ``channel``, and this worker's puller."""
        fabric = self.fabric
        mine = fabric.signals[self._index]
        pushers: list[Pusher] = [
            MailboxPusher(fabric.mailbox(channel, peer), fabric.signals[peer], address, mine)
            for peer in range(fabric.peers)
        ]
        return pushers, MailboxPuller(fabric.mailbox(channel, self._index))
