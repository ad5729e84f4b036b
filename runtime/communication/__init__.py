"""The communicator: the one interface through which a worker talks to the other workers.

A :class:`~runtime.worker.Worker` never touches threads, sockets or shared
state directly.  It holds one :class:`Communicator`, which has three parts:

Data plane (the :class:`~scopes.channels.Allocator` protocol)
    ``index``, ``peers`` and ``allocate(channel, address) -> (pushers, puller)``.
    Every worker allocates the same channels, identified by the same integers,
    in the same order (the dataflow builders guarantee it).  ``pushers[r]``
    sends to worker ``r`` (including this worker itself); ``puller`` yields what
    was sent to this worker on that channel, from any sender.  ``address`` names
    the operator that reads the channel on *every* worker (a tuple of child
    indices, the first one being the dataflow's index).

    * Messages are ``(time, batch)``.  Data messages carry the batch's
      timestamp.  Progress batches travel on channels too, pushed with time
      ``None``; a batch is one message and must never be split, merged or
      reordered with respect to the other messages of its (channel, sender,
      receiver).
    * Channel identifiers are integers and may be negative: the worker uses
      channel ``-1 - d`` (address ``(d,)``) to send each other worker its
      structural fingerprint of dataflow ``d``, as the message
      ``(sender index, [fingerprint])`` where the fingerprint is nested lists
      of strings and integers.
    * **FIFO per (channel, sender, receiver)**: the messages one worker pushes
      to another on one channel are pulled in the order pushed.  Nothing is
      promised across channels or across senders.
    * ``push`` may be called only by the worker thread that owns the
      communicator, ``pull`` likewise.  The pusher takes ownership of the batch
      list.  A pushed message may be delivered at once or buffered until
      :meth:`Communicator.flush`.
    * **Activation by address**: when a message pushed on a channel reaches
      worker ``r``, that channel's ``address`` is queued as an activation for
      ``r``, and ``r`` is woken if it is parked.  The worker collects the
      addresses with :meth:`Communicator.take_activations` and schedules the
      operators they name.  ``activate_from_outside(address)`` queues an
    activation the same way from any other thread (what waits for outside data
    wakes its operator so).  An activation may be reported more than once, or
      for a message already pulled; activations are hints that make an
      operator look at its puller, never data.

Scheduling
    ``take_activations()`` returns the addresses queued since the last call.
    ``flush()`` is called by the worker at the end of every step: buffered
    outgoing messages must be on their way when it returns.  ``park(timeout)``
    blocks the worker until an activation is queued for it, ``timeout``
    seconds pass (``None``: no limit), or the computation is stopped; it
    returns at once if an activation is already queued.  A communicator whose
    receivers bound what they buffer may keep messages after ``flush``:
    ``backlogged()`` then says so, and the worker keeps stepping (pulling what
    arrives, parking when idle) until it is false, so that a slow receiver
    slows its senders down instead of buffering without bound.  ``park`` must
    then also return when room appears.  The worker calls
    ``dataflow_completed(index)`` when a dataflow completes, so that what still
    arrives on its channels (late progress) is released rather than held.  Implementations wake
    a worker only when it is parked (no event is set for a busy worker).

Stopping
    ``stop(reason)`` may be called from any thread, by any worker or by the
    runner; it is idempotent (the first reason wins) and wakes every parked
    worker, on every process.  ``stop_reason`` is ``None`` until then.  Each
    worker checks it at every step and leaves by raising: ``WorkerAborted`` for
    ``"failed"``, ``"interrupted"`` and ``"lost"``, or ``DataflowStuck`` with
    its own explanation for ``"stalled"``.  The runner turns the first failure
    into ``WorkerFailed`` (a process implementation reports a peer that vanished
    with kind ``"lost"``, naming it in ``detail``).  When every local worker was
    stopped by a worker elsewhere, :func:`~runtime.execute.run_workers` raises
    ``WorkerFailed`` from ``stop_reason`` (so ``detail`` should say what
    happened, e.g. the remote worker's exception type and message), or exits
    with status 130 for ``"interrupted"``.

Stall detection
    After every step the worker calls ``report_idle(True)`` if the step found
    nothing to do and ``report_idle(False)`` when it did work after having been
    idle.  A worker counts as *waiting* while it is parked, or while it keeps
    calling steps that find nothing to do (the last idle step ended less than
    :data:`WAITING_GAP` seconds ago); a worker busy in user code between steps
    (producing input, say) is not waiting.  ``finish()`` says that the worker
    has returned and will never send again (it counts as waiting for ever).
    ``stalled_for()`` answers, on any worker, for how many seconds *every*
    worker of the computation has been waiting with no message in flight
    (``0.0`` if some worker is busy or a message is undelivered).  Threads
    answer from shared memory; processes answer from heartbeats that carry
    each worker's idle state and the counts of messages sent and received.
    When ``stalled_for()`` exceeds the stall timeout, the worker raises
    ``DataflowStuck`` and the runner calls ``stop(Stop("stalled", worker))``, so
    every other worker explains its part too.

    A stall is *certain* only if no worker's ``main`` can end it: each worker
    says, with ``report_stuck(True)``, that its ``main`` waits in ``step_while``
    on probes that nothing but open inputs (which no waiting ``main`` can
    advance) holds back, and ``all_stuck()`` answers whether every worker that
    has not finished says so.  ``report_idle(False)`` withdraws the claim.
    Processes carry the claim in their heartbeats.

Diagnosis
    ``in_flight()`` describes messages sent to this worker that it has not
    pulled yet (for ``DataflowStuck`` explanations).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from scopes.channels import Puller, Pusher

StopKind = Literal["failed", "stalled", "interrupted", "lost"]
"""Why a computation is stopped."""

WAITING_GAP = 0.25
"""Seconds between two idle steps after which a worker counts as busy in user code."""

Address = tuple[int, ...]
"""An operator's address: the dataflow index, then child indices down the scope tree."""


@dataclass(frozen=True)
class Stop:
    """Why a computation was stopped: ``kind``, the worker that caused it (if any), and details."""

    kind: StopKind
    worker: int | None = None
    detail: str = ""

    def describe(self) -> str:
        """A short phrase for messages: ``'worker 2 failed'``, ``'Ctrl-C was pressed'``, ..."""
        who = f"worker {self.worker}" if self.worker is not None else "a worker"
        if self.kind == "failed":
            text = f"{who} failed"
        elif self.kind == "stalled":
            text = f"{who} found that no worker can make progress"
        elif self.kind == "interrupted":
            text = "the computation was interrupted (Ctrl-C)"
        else:
            text = "a peer was lost"
        return f"{text}: {self.detail}" if self.detail else text


class Communicator(Protocol):
    """One worker's connection to the other workers (see the module docstring for the contract)."""

    @property
    def index(self) -> int:
        """This worker's index, ``0 <= index < peers``."""
        ...

    @property
    def peers(self) -> int:
        """The number of workers in the computation."""
        ...

    def allocate(self, channel: int, address: Address) -> tuple[list[Pusher], Puller]:
        """One pusher per worker for ``channel``, and this worker's puller; ``address`` reads it."""
        ...

    def take_activations(self) -> list[Address]:
        """The addresses activated by arrivals since the last call (possibly with repeats)."""
        ...

    def flush(self) -> None:
        """Send buffered messages; called by the worker at the end of every step."""
        ...

    def activate_from_outside(self, address: Address) -> None:
        """Queue ``address`` as an activation from any thread (a socket watcher, another worker), and wake this
        worker if it is parked; :meth:`take_activations` returns it."""
        ...

    def park(self, timeout: float | None) -> None:
        """Block until an activation is queued, ``timeout`` seconds pass, or the computation stops."""
        ...

    def end_step(self, more_work: bool) -> None:
        """After each step (with several workers).  With ``more_work`` (this worker would step again at once),
        let a worker sharing this one's interpreter run first if it waits with work; else return at once."""
        ...

    def backlogged(self) -> bool:
        """After :meth:`flush`: whether messages still wait for room at their receivers."""
        ...

    def dataflow_completed(self, index: int) -> None:
        """Dataflow ``index`` completed on this worker: its channels will never be pulled again."""
        ...

    def stop(self, reason: Stop) -> None:
        """Stop every worker of the computation (any thread; the first reason wins)."""
        ...

    @property
    def stop_reason(self) -> Stop | None:
        """Why the computation was stopped, or ``None`` while it runs."""
        ...

    def report_idle(self, idle: bool) -> None:
        """After a step: ``True`` if it found nothing to do, ``False`` if it worked after idling."""
        ...

    def finish(self) -> None:
        """This worker has returned and will send nothing more."""
        ...

    def stalled_for(self) -> float:
        """Seconds for which every worker has been waiting with nothing in flight (0.0 if not)."""
        ...

    def report_stuck(self, stuck: bool) -> None:
        """Say whether this worker's ``main`` can only wait (see *Stall detection*); work withdraws it."""
        ...

    def all_stuck(self) -> bool:
        """Whether every worker that has not finished reports that its ``main`` can only wait."""
        ...

    def in_flight(self) -> list[str]:
        """Messages sent to this worker and not yet pulled, described for a person."""
        ...
