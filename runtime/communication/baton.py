"""The baton: one worker thread of a process runs dataflow steps at a time, and the turn passes at step ends.

Worker threads of one process share the GIL, so only one runs at a time
anyway; what matters is *which* runs and for how long.  Left to the
interpreter's switch interval (5 ms) and the OS, a worker that has just sent
data to a peer keeps running steps on its own records alone, and every message
of a loop with an exchange gets smaller at each iteration.  The baton makes
the hand-over a rule instead:

* a worker takes the baton before a step that has work (:meth:`Baton.take`);
  while data between the threads is in flight, it waits while a peer holds
  it, or while it is passed to a peer that has not run its step yet (steps
  that send progress alone, an epoch through a pipeline, do not wait);
* steps go in *rounds*: at the end of a step (:meth:`Baton.release`) the
  baton goes to a peer that has not stepped in this round and wants it (it
  waits in :meth:`~Baton.take`, or it is parked although work waits for it),
  else to one that is in ``main`` between steps; with none left, the round
  ends;
* what a step sends to worker threads of this process is *staged*
  (:meth:`Baton.stage`) and delivered, in the order sent, when the round
  ends.  So every step of a round reads what the previous round sent: in a
  loop with an exchange, each step reads one iteration from every worker, as
  one worker's step reads one iteration of its own.  Without rounds the
  workers drift apart by an iteration at each step, and each iteration's
  records are split over ever more messages.

The baton only orders steps: no data is guarded by it, and a worker outside
its steps never holds it.  Every wait for it ends: after
:data:`OUTSIDE_TIMEOUT` seconds if it was passed to a peer in ``main`` (that
peer is then skipped until it steps again: it may wait for outside data); for
a peer's step, :data:`BATON_TIMEOUT` seconds after that step stops using the
CPU (it waits in user code: its thread's CPU clock says so), and after
:data:`BATON_LIMIT` seconds at most; or at a stop.  The waiting worker then
takes the baton anyway.
"""

from __future__ import annotations

import _thread
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from runtime.communication import Address
from scopes.channels import Message


class WorkerSignal(Protocol):
    """What the baton needs of a worker's signal (:class:`runtime.communication.fabric.WorkerSignal`)."""

    pending: deque[Address]
    parked: bool

    @property
    def event(self) -> Any:
        """The worker's wake-up: ``set``, ``clear`` and ``wait(timeout)``."""

    def activate(self, address: Address) -> None:
        """Queue ``address`` for the worker; wake it if it is parked."""


BATON_TIMEOUT = 0.02
"""Seconds a worker waits for a peer's step to end before it looks whether the peer computes: a step that used
less than a tenth of that CPU meanwhile is blocked in user code (waiting for outside data, say), and the waiting
worker goes on; one that computes is waited for, up to :data:`BATON_LIMIT`."""

BATON_LIMIT = 1.0
"""Seconds a worker waits at most for a peer's step that computes all along (a very large batch)."""

OUTSIDE_TIMEOUT = 0.005
"""Seconds a worker waits at most for a peer in ``main`` that was passed the baton to come and step."""

Staged = tuple[deque[Message], Message, WorkerSignal, Address]
"""A message waiting for the round's end: (mailbox, message, the receiver's signal, the address to activate)."""


class Baton:
    """The turn to run a dataflow step among the worker threads of one process (see the module docstring)."""

    __slots__ = (
        "_signals",
        "_lock",
        "holder",
        "outside",
        "deadline",
        "wanting",
        "stepped",
        "quiet",
        "absent",
        "staging",
        "sent",
        "staged",
        "passes",
        "rounds",
        "timeouts",
        "_main",
        "_clocks",
        "_watch",
        "_outside_limit",
    )

    def __init__(self, signals: Sequence[WorkerSignal], wait_for_main: bool = True) -> None:
        """A free baton for the workers whose signals are ``signals`` (their events wake a waiting worker).

        ``wait_for_main``: pass the baton to peers in ``main`` too (their workers
        must release it when they park: :meth:`release`).
        """
        count = len(signals)
        self._signals = signals
        self._main = wait_for_main
        self._clocks: list[int | None] = [None] * count
        """Each worker's thread CPU clock (``time.pthread_getcpuclockid``), once known (:meth:`register`)."""
        self._watch: tuple[int, float] | None = None
        """The CPU time of the worker in ``main`` that was passed the baton, when last looked at."""
        self._outside_limit = 0.0
        """When that worker is skipped even if it computes (``time.perf_counter``)."""
        self._lock = _thread.allocate_lock()
        self.holder: int | None = None
        """The local worker that runs a step, or was passed the baton for its next one; ``None``: free."""
        self.outside = False
        """Whether the baton was passed to a worker in ``main`` (then waited for until :attr:`deadline` at most)."""
        self.deadline = 0.0
        """When a worker in ``main`` that was passed the baton is skipped if it has not come (``time.perf_counter``)."""
        self.wanting = [False] * count
        """Which local workers wait in :meth:`take`."""
        self.stepped = [False] * count
        """Which local workers have had their step in this round."""
        self.quiet = [False] * count
        """Which local workers have run a step that sent no data in this round (they may run one more)."""
        self.absent = [False] * count
        """Which local workers are skipped until they step again: they returned, or kept a peer waiting."""
        self.staging = [False] * count
        """Which local workers run a step holding the baton: what they send waits for the round's end."""
        self.sent = [False] * count
        """Which local workers have staged data (not progress) since they took the baton."""
        self.staged: list[Staged] = []
        """Messages sent in this round, in the order sent."""
        self.passes = 0
        """Times the baton was passed to a peer at a step end."""
        self.rounds = 0
        """Rounds ended (each delivering what its steps staged)."""
        self.timeouts = 0
        """Times a worker took the baton after a wait ran out."""

    def take(self, local: int, stopped: Callable[[], bool]) -> bool:
        """Hold the baton for a step of worker ``local``; return whether it had to wait.

        Waits (releasing the GIL) while another worker holds it and data is in
        flight, until it is passed here or left free, the wait runs out (then it
        is taken anyway), or ``stopped()`` holds.  The wait for a peer's step
        runs out after :data:`BATON_TIMEOUT` once that step stops computing (it
        waits in user code), after :data:`BATON_LIMIT` at most; the wait for a
        peer in ``main`` after :data:`OUTSIDE_TIMEOUT`.
        """
        lock = self._lock
        event = self._signals[local].event
        waited = False
        deadline = limit = 0.0
        watched: tuple[int, float] | None = None
        while True:
            with lock:
                holder = self.holder
                if holder is None or holder == local or not (self.staged or self.sent[holder]):
                    self._hold(local)  # free, passed here, or no data in flight: no turn to keep
                    return waited
                self.wanting[local] = True
                event.clear()  # before the holder can pass it on: a pass after this sets the event
                outside, until = self.outside, self.deadline
            now = time.perf_counter()
            if not waited:
                waited = True
                deadline, limit = now + BATON_TIMEOUT, now + BATON_LIMIT
            if outside:
                if now >= until and not stopped():
                    with lock:
                        self._overdue()  # skips the peer, or waits longer for one that computes
                    continue
                ends = until
            else:
                if watched is None or watched[0] != holder:
                    watched = self._used(holder)  # (another) peer's step: watch its CPU from now
                elif now >= deadline and now < limit:
                    if self._computes(holder, watched, BATON_TIMEOUT):  # it computes: a long step, not blocked
                        deadline = now + BATON_TIMEOUT
                    watched = self._used(holder)
                ends = deadline
            if now >= ends or stopped():
                break
            event.wait(ends - now)  # also woken by frames and stops: the loop looks again
        with lock:
            if self.holder is not None and self.holder != local:
                self._skip()
            self._hold(local)
        return True

    def _used(self, worker: int) -> tuple[int, float] | None:
        """``(worker, CPU seconds its thread has used)``, if known."""
        clock = self._clocks[worker]
        if clock is None:
            return None
        try:
            return worker, time.clock_gettime(clock)
        except OSError:  # the thread has ended
            return None

    def _computes(self, holder: int, watched: tuple[int, float] | None, interval: float) -> bool:
        """Whether ``holder``'s thread used CPU for a tenth of ``interval`` seconds since ``watched`` (a thread
        blocked in a wait uses next to none; one that computes gets more, even on a loaded machine)."""
        now = self._used(holder)
        if now is None or watched is None or watched[0] != holder:
            return False
        return now[1] - watched[1] >= interval / 10

    def _skip(self) -> None:
        """The holder kept a peer waiting too long: a worker in ``main`` is skipped until it steps again."""
        if self.outside and self.holder is not None:
            self.absent[self.holder] = True
        self.timeouts += 1

    def register(self, local: int) -> None:
        """Called from worker ``local``'s thread: note its CPU clock, so that peers can tell whether it computes."""
        if self._clocks[local] is None and hasattr(time, "pthread_getcpuclockid"):
            self._clocks[local] = time.pthread_getcpuclockid(threading.get_ident())

    def _hold(self, local: int) -> None:
        self.register(local)
        self.holder = local
        self.outside = False
        self.wanting[local] = False
        self.absent[local] = False
        self.staging[local] = True
        self.sent[local] = False

    def stage(self, sender: int, box: deque[Message], message: Message, signal: WorkerSignal, address: Address) -> None:
        """Keep a message that worker ``sender`` sent in its step until the round ends.

        Progress batches travel with the time ``None``; any other message is data for a peer (see :attr:`sent`).
        """
        with self._lock:
            if message[0] is not None:
                self.sent[sender] = True
            self.staged.append((box, message, signal, address))

    def send(self, box: deque[Message], message: Message, signal: WorkerSignal, address: Address) -> None:
        """Send a message from ``main``, or a progress batch: after what is staged if a round has staged any,
        else at once.

        Staged messages are never delivered early, so a round's steps all read
        what the previous round sent, whatever ``main`` sends meanwhile; and a
        step's progress follows its data, as the data's own channel would.
        """
        if self.staged:  # else none of this sender's messages waits: only its own thread could stage them
            with self._lock:
                if self.staged:
                    self.staged.append((box, message, signal, address))
                    return
        box.append(message)
        signal.activate(address)

    def _deliver(self) -> None:
        staged = self.staged
        if staged:
            self.staged = []
            for box, message, signal, address in staged:
                box.append(message)
                signal.activate(address)

    def release(self, local: int) -> None:
        """End of worker ``local``'s step (or an idle one): pass the baton on, or end the round.

        A worker has had its step in a round once a step of its sent data, or
        after a second step that did not (the first may have found nothing to
        do yet: a dataflow whose peers' fingerprints have not arrived, say).
        The baton goes to the next peer that has not had its step:
        first one that wants it (it waits in :meth:`take`, or it is parked
        although activations wait for it), else one in ``main`` between steps.
        With none left, the round ends: what its steps staged is delivered, and
        the baton goes to the next peer that wants it now, or is left free.  A
        worker whose baton a peer took over (no data was in flight, or a wait
        ran out) has had its step; the holder's release ends the round.
        """
        with self._lock:
            in_step = self.staging[local]
            self.staging[local] = False
            self.absent[local] = False
            holder = self.holder
            if holder is not None and holder != local:  # taken over: the holder's release ends the round
                if in_step:
                    self.stepped[local] = True
                else:
                    self._overdue()
                return
            if self.sent[local] or self.quiet[local] or not in_step:
                self.stepped[local] = True
            else:  # a step that sent no data (its dataflow not verified yet, say) may step again in this round
                self.quiet[local] = True
            chosen = self._pass_on(local)
        if chosen is not None:
            self._signals[chosen].event.set()

    def _pass_on(self, local: int) -> int | None:
        """Pass the baton from ``local`` to the next peer of this round, or end the round; the peer chosen if it
        waits (in :meth:`take` or parked) and so must be woken."""
        chosen, outside = self._next(local, self.stepped)
        if chosen is None:
            self._deliver()
            self.rounds += 1
            self.stepped = [False] * len(self.stepped)
            self.quiet = [False] * len(self.quiet)
            chosen, outside = self._next(local, None)
        self.holder = chosen
        self.outside = outside
        if chosen is None:
            return None
        self.passes += 1
        self.sent[chosen] = False
        if outside:  # in main: nothing to wake
            now = time.perf_counter()
            self.deadline = now + OUTSIDE_TIMEOUT
            self._outside_limit = now + BATON_LIMIT
            self._watch = self._used(chosen)
            return None
        self.wanting[chosen] = False
        return chosen

    def _overdue(self) -> None:
        """If a worker in ``main`` was passed the baton and has not come by :attr:`deadline`, skip it, unless its
        ``main`` computes (building a dataflow, sending input: wait :data:`OUTSIDE_TIMEOUT` more, up to
        :data:`BATON_LIMIT`)."""
        holder = self.holder
        if holder is None or not self.outside:
            return
        now = time.perf_counter()
        if now < self.deadline:
            return
        if now < self._outside_limit and self._computes(holder, self._watch, OUTSIDE_TIMEOUT):
            self.deadline = now + OUTSIDE_TIMEOUT
            self._watch = self._used(holder)
            return
        self._skip()
        chosen = self._pass_on(holder)
        if chosen is not None:
            self._signals[chosen].event.set()

    def park_for(self, local: int, timeout: float | None) -> float | None:
        """Before worker ``local`` parks (idle) for ``timeout``: pass on a baton passed here, and say how long
        to park so that a worker in ``main`` that holds up the round is skipped in time (see :meth:`idle`)."""
        self.release(local)
        if not self.outside or self.holder is None:
            return timeout
        left = max(0.0, self.deadline - time.perf_counter())
        return left if timeout is None else min(timeout, left)

    def idle(self) -> None:
        """After an idle worker parked: skip a worker in ``main`` that was passed the baton and has not come."""
        if self.outside:
            with self._lock:
                self._overdue()

    def _next(self, local: int, stepped: list[bool] | None) -> tuple[int | None, bool]:
        """The first peer after ``local`` that wants the baton, else the first one in ``main`` between steps
        (only for a baton that waits for ``main``), skipping ``stepped`` ones; and whether it is in ``main``.
        """
        signals = self._signals
        count = len(signals)
        wanting = self.wanting
        between = None
        for offset in range(1, count):
            peer = (local + offset) % count
            if stepped is not None and stepped[peer]:
                continue
            signal = signals[peer]
            if wanting[peer] or (signal.parked and signal.pending):
                return peer, False
            if between is None and self._main and not signal.parked and not self.absent[peer]:
                between = peer
        return between, between is not None

    def leave(self, local: int) -> None:
        """Worker ``local`` has returned: it is never passed the baton again, and one it holds goes on."""
        self.release(local)
        with self._lock:
            self.absent[local] = True
