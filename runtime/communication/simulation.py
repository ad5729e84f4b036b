"""A deterministic simulated communicator, for testing dataflows under every message order.

:func:`simulate` runs every worker of a computation as if in one thread: each
worker's ``main`` runs in a thread of its own, but a strict baton lets exactly
one of them run at any moment, and only the scheduler (the caller's thread)
passes it on.  A worker gives the baton back at the end of every step (in
``flush``) and whenever it would park.

Every pushed message is held *in flight*, also those a worker sends to itself.
Between turns the scheduler delivers in-flight messages, one at a time, in an
order drawn from the seed, keeping FIFO per (channel, sender, receiver) and
nothing more.  Which worker runs next is drawn from the seed too, so a seed
fixes the whole interleaving: the same seed gives the same run.

Stall detection counts steps instead of seconds: the computation is stuck when
every worker has taken :data:`STALL_STEPS` idle steps in a row with nothing in
flight and no timer pending.

Timers (``info.activate_after``, a replay's polling) run on a virtual clock
(:meth:`SimulatedCommunicator.clock`, starting at 0) that only the scheduler
moves: straight to the earliest pending timer, when every worker's last step
was idle with nothing in flight or activated, and else at a moment the seed
draws (with probability :data:`TIMER_BIAS` per turn while a timer is pending),
so a timer may fire between any two steps, and the same seed fires it at the
same point.  A simulation whose timers keep being renewed without end runs
until ``max_turns``.  A waker called from the worker threads (an operator's
logic) is as deterministic as they are; one called from a thread of the test's
own is taken at the worker's next turn after the call, which the seed does not
decide; and since idle steps take no real time, a computation waiting only for
such a call is stuck after :data:`STALL_STEPS` of them, unless a timer is
pending (an ``activate_after`` backstop keeps the simulation turning meanwhile).

``split_progress=True`` is a negative control: it breaks every progress batch
(a message with time ``None``) into one message per update, which the progress
protocol forbids; tests use it to show that their safety checks can fail.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

from runtime.communication import Address, Stop
from runtime.communication.fabric import MailboxPuller
from runtime.errors import ConfigurationError, WorkerAborted
from runtime.errors import SimulationError as SimulationError
from runtime.execute import failure_of, run_worker
from runtime.worker import Worker
from scopes.batches import Batch
from scopes.channels import Message, Pusher

R = TypeVar("R")

STALL_STEPS = 100
"""Consecutive idle steps of every worker (nothing in flight) after which the run is stuck."""

TIMER_BIAS = 0.05
"""The chance, at each scheduler turn while a timer is pending, that the virtual clock moves to the earliest one."""

TURN_TIMEOUT = 120.0
"""Real seconds one worker may keep the baton before the simulation gives up."""

_NONE: list[Address] = []


class Choices(Protocol):
    """Where a simulation draws its decisions from: a :class:`random.Random`, or a recorded schedule."""

    def random(self) -> float:
        """A float in ``[0, 1)``."""
        ...

    def randrange(self, stop: int, /) -> int:
        """An integer in ``[0, stop)``."""
        ...


class RecordedChoices:
    """Choices drawn from ``source`` and written down, so that the run they made can be replayed exactly."""

    def __init__(self, source: Choices) -> None:
        """Record what ``source`` answers."""
        self.source = source
        self.schedule: list[float | int] = []

    def random(self) -> float:
        """The source's float, recorded."""
        value = float(self.source.random())
        self.schedule.append(value)
        return value

    def randrange(self, stop: int, /) -> int:
        """The source's integer, recorded."""
        value = int(self.source.randrange(stop))
        self.schedule.append(value)
        return value


class ReplayedChoices:
    """A recorded schedule played back; past its end, a fixed default (0.5, and the first choice)."""

    def __init__(self, schedule: list[float | int]) -> None:
        """Replay ``schedule``."""
        self.schedule = list(schedule)
        self.position = 0

    def _next(self) -> float | int | None:
        if self.position >= len(self.schedule):
            return None
        value = self.schedule[self.position]
        self.position += 1
        return value

    def random(self) -> float:
        """The next recorded float (0.5 once the schedule has run out)."""
        value = self._next()
        return 0.5 if value is None else min(max(float(value), 0.0), 0.999999)

    def randrange(self, stop: int, /) -> int:
        """The next recorded integer, within ``[0, stop)`` (0 once the schedule has run out)."""
        value = self._next()
        return 0 if value is None else int(value) % stop


class _Baton:
    """Lets exactly one worker thread (or the scheduler) run at a time.

    Each worker has a lock that the scheduler releases to hand it the baton;
    the worker releases the scheduler's lock to hand it back.
    """

    def __init__(self, workers: int) -> None:
        self._turn = [threading.Lock() for _ in range(workers)]
        for lock in self._turn:
            lock.acquire()
        self._back = threading.Lock()
        self._back.acquire()
        self.abandoned = False

    def run(self, worker: int) -> None:
        """Scheduler: let ``worker`` run until it yields or finishes."""
        self._turn[worker].release()
        if not self._back.acquire(timeout=TURN_TIMEOUT):
            self.abandoned = True
            raise SimulationError(f"simulated worker {worker} kept running for {TURN_TIMEOUT} s without a step")

    def wait_turn(self, worker: int) -> None:
        """Worker: wait until the scheduler hands over the baton."""
        turn = self._turn[worker]
        while not turn.acquire(timeout=1.0):
            if self.abandoned:
                raise WorkerAborted(f"simulated worker {worker}: the simulation was abandoned")
        if self.abandoned:
            raise WorkerAborted(f"simulated worker {worker}: the simulation was abandoned")

    def give_back(self) -> None:
        """Worker: hand the baton to the scheduler (without waiting for it to come back)."""
        with contextlib.suppress(RuntimeError):  # already released in an abandoned simulation
            self._back.release()

    def yield_(self, worker: int) -> None:
        """Worker: hand the baton back and wait for the next turn."""
        self.give_back()
        self.wait_turn(worker)


class SimulatedNetwork:
    """Every message in flight, the workers' mailboxes, and the shared state of a simulation."""

    def __init__(self, peers: int, seed: int, split_progress: bool = False, choices: Choices | None = None) -> None:
        """A network of ``peers`` workers whose delivery order is drawn from ``seed`` (or from ``choices``)."""
        self.peers = peers
        self.rng: Choices = random.Random(seed) if choices is None else choices
        self.split_progress = split_progress
        self.baton = _Baton(peers)
        self.stop_reason: Stop | None = None
        self.in_flight: dict[tuple[int, int, int], deque[Message]] = {}
        self.mailboxes: dict[tuple[int, int], deque[Message]] = {}
        self.addresses: dict[int, Address] = {}
        self.activations: list[list[Address]] = [[] for _ in range(peers)]
        self.idle_steps = [0] * peers
        self.finished = [False] * peers
        self.stuck = [False] * peers
        self.delivered = 0
        self.now = 0.0
        """The virtual clock's time, in seconds: timers are due on it."""
        self.timers: list[float | None] = [None] * peers
        """Each worker's earliest pending timer (``None``: none)."""
        self.outside: list[deque[Address]] = [deque() for _ in range(peers)]
        """Activations queued by ``activate_from_outside``, from any thread."""

    def mailbox(self, channel: int, receiver: int) -> deque[Message]:
        """The mailbox of ``receiver`` for ``channel``."""
        box = self.mailboxes.get((channel, receiver))
        if box is None:
            box = self.mailboxes[(channel, receiver)] = deque()
        return box

    def send(self, channel: int, sender: int, receiver: int, message: Message) -> None:
        """Put a message in flight (split into single updates if it is a progress batch and asked to)."""
        key = (channel, sender, receiver)
        queue = self.in_flight.get(key)
        if queue is None:
            queue = self.in_flight[key] = deque()
        time, batch = message
        if self.split_progress and time is None and len(batch) > 1:
            queue.extend((None, [update]) for update in cast(list[Any], batch))  # a progress batch
        else:
            queue.append(message)

    def undelivered(self) -> list[tuple[int, int, int]]:
        """The (channel, sender, receiver) queues with messages in flight, in a fixed order."""
        return [key for key, queue in self.in_flight.items() if queue]

    def deliver(self, key: tuple[int, int, int]) -> None:
        """Deliver the oldest in-flight message of ``key`` and activate its reader."""
        channel, _, receiver = key
        self.mailbox(channel, receiver).append(self.in_flight[key].popleft())
        self.activations[receiver].append(self.addresses[channel])
        self.idle_steps[receiver] = 0
        self.delivered += 1

    def stalled(self) -> bool:
        """Whether every live worker has idled :data:`STALL_STEPS` times with nothing in flight or timed."""
        if any(self.activations) or any(self.outside) or self.undelivered() or self.pending_timer() is not None:
            return False
        return all(
            finished or steps >= STALL_STEPS for finished, steps in zip(self.finished, self.idle_steps, strict=True)
        )

    def pending_timer(self) -> float | None:
        """The earliest timer of a live worker (``None``: none)."""
        dues = [
            due for due, finished in zip(self.timers, self.finished, strict=True) if due is not None and not finished
        ]
        return min(dues) if dues else None

    def move_clock(self) -> None:
        """Move the virtual clock to the earliest pending timer if every worker waits for it, or if the seed says
        so now; draws from the seed only while a timer is pending and not yet due."""
        due = self.pending_timer()
        if due is None or due <= self.now:
            return
        waiting = not any(self.activations) and not any(self.outside) and not self.undelivered()
        waiting = waiting and all(done or steps > 0 for done, steps in zip(self.finished, self.idle_steps, strict=True))
        if waiting or self.rng.random() < TIMER_BIAS:
            self.now = due


class _SimPusher:
    __slots__ = ("_network", "_channel", "_sender", "_receiver")

    def __init__(self, network: SimulatedNetwork, channel: int, sender: int, receiver: int) -> None:
        self._network = network
        self._channel = channel
        self._sender = sender
        self._receiver = receiver

    def push(self, time: Any, batch: Batch) -> None:
        """Put ``(time, batch)`` in flight."""
        self._network.send(self._channel, self._sender, self._receiver, (time, batch))


class SimulatedCommunicator:
    """One worker's :class:`~runtime.communication.Communicator` on a :class:`SimulatedNetwork`."""

    def __init__(self, network: SimulatedNetwork, index: int) -> None:
        """Communicate as worker ``index`` of ``network``."""
        self.network = network
        self._index = index
        self._parked = False

    @property
    def index(self) -> int:
        """This worker's index."""
        return self._index

    @property
    def peers(self) -> int:
        """The number of workers."""
        return self.network.peers

    def allocate(self, channel: int, address: Address) -> tuple[list[Pusher], MailboxPuller]:
        """One pusher per worker for ``channel``, and this worker's puller."""
        network = self.network
        network.addresses.setdefault(channel, address)
        pushers: list[Pusher] = [_SimPusher(network, channel, self._index, peer) for peer in range(network.peers)]
        return pushers, MailboxPuller(network.mailbox(channel, self._index))

    def take_activations(self) -> list[Address]:
        """The addresses activated by deliveries, and from outside, since the last call."""
        queued = self.network.activations[self._index]
        outside = self.network.outside[self._index]
        if outside:
            queued = queued + [outside.popleft() for _ in range(len(outside))]
        if not queued:
            return _NONE
        self.network.activations[self._index] = []
        return queued

    def activate_from_outside(self, address: Address) -> None:
        """Queue ``address`` as an activation from any thread (taken at this worker's next turn, which the
        scheduler chooses)."""
        self.network.outside[self._index].append(address)

    def clock(self) -> float:
        """The simulation's virtual time, in seconds: what this worker's timers are due on."""
        return self.network.now

    def timers_due(self, due: float | None) -> None:
        """This worker's earliest pending timer is now ``due`` on :meth:`clock` (``None``: it has none)."""
        self.network.timers[self._index] = due

    def flush(self) -> None:
        """End of a step: give the baton back to the scheduler (unless the step already parked)."""
        if self._parked:
            self._parked = False
            return
        self.network.baton.yield_(self._index)

    def end_step(self, more_work: bool) -> None:
        """Nothing to do: the simulation's scheduler already decides which worker runs each step."""

    def backlogged(self) -> bool:
        """Whether sent messages wait for room (never: the simulated network takes everything)."""
        return False

    def dataflow_completed(self, index: int) -> None:
        """Dataflow ``index`` completed on this worker (nothing to release)."""

    def park(self, timeout: float | None) -> None:
        """Give the baton back; the scheduler decides when this worker runs again."""
        self._parked = True
        self.network.baton.yield_(self._index)

    def stop(self, reason: Stop) -> None:
        """Stop every worker (the first reason wins)."""
        if self.network.stop_reason is None:
            self.network.stop_reason = reason

    @property
    def stop_reason(self) -> Stop | None:
        """Why the simulation stopped, or ``None``."""
        return self.network.stop_reason

    def report_idle(self, idle: bool) -> None:
        """Count consecutive idle steps."""
        steps = self.network.idle_steps
        steps[self._index] = steps[self._index] + 1 if idle else 0
        if not idle:
            self.network.stuck[self._index] = False

    def finish(self) -> None:
        """This worker has returned."""
        self.network.finished[self._index] = True

    def stalled_for(self) -> float:
        """Infinity once every worker has idled :data:`STALL_STEPS` times with nothing in flight."""
        return float("inf") if self.network.stalled() else 0.0

    def report_stuck(self, stuck: bool) -> None:
        """Say whether this worker's ``main`` can only wait."""
        self.network.stuck[self._index] = stuck

    def all_stuck(self) -> bool:
        """Whether every unfinished worker says its ``main`` can only wait."""
        network = self.network
        return all(stuck or finished for stuck, finished in zip(network.stuck, network.finished, strict=True))

    def in_flight(self) -> list[str]:
        """Messages to this worker, delivered or not, that it has not pulled."""
        network = self.network
        found = [
            f"{len(queue)} message(s) in flight on channel {channel} from worker {sender} to worker {receiver}"
            for (channel, sender, receiver), queue in network.in_flight.items()
            if queue and receiver == self._index
        ]
        found.extend(
            f"{len(box)} message(s) on channel {channel} not yet read by worker {receiver}"
            for (channel, receiver), box in network.mailboxes.items()
            if box and receiver == self._index
        )
        return found


def simulate(
    main: Callable[[Worker], R],
    workers: int = 2,
    seed: int = 0,
    split_progress: bool = False,
    max_turns: int = 2_000_000,
    choices: Choices | None = None,
) -> list[R]:
    """Run ``main`` on ``workers`` simulated workers, interleaved and delivered as ``seed`` decides.

    ``choices``, when given, replaces the seed as the source of every decision:
    a :class:`RecordedChoices` writes the schedule down, a :class:`ReplayedChoices`
    plays one back.

    Returns every worker's result in order, or raises
    :class:`~runtime.errors.WorkerFailed` like :func:`~runtime.execute`; a stuck
    computation fails with :class:`~runtime.errors.DataflowStuck` as its cause.
    ``max_turns`` bounds the number of worker turns (a computation that never
    ends raises :class:`SimulationError`).
    """
    if workers.__class__ is not int or workers < 1:
        raise ConfigurationError(f"simulate needs workers >= 1 (an int), got {workers!r}")
    network = SimulatedNetwork(workers, seed, split_progress, choices)
    rng = network.rng
    deliver_bias = 0.1 + 0.8 * rng.random()
    results: list[R | None] = [None] * workers
    failures: list[tuple[int, BaseException]] = []
    done = [False] * workers

    def run(index: int) -> None:
        try:
            network.baton.wait_turn(index)
        except WorkerAborted:
            return
        try:
            result, error = run_worker(main, SimulatedCommunicator(network, index), 1.0)
            results[index] = result
            if error is not None:
                failures.append((index, error))
        finally:
            done[index] = True
            network.baton.give_back()

    threads = [
        threading.Thread(target=run, args=(index,), name=f"simulated-worker-{index}", daemon=True)
        for index in range(workers)
    ]
    for thread in threads:
        thread.start()
    turns = 0
    try:
        while not all(done):
            network.move_clock()
            pending = network.undelivered()
            if pending and rng.random() < deliver_bias:
                network.deliver(pending[rng.randrange(len(pending))])
                continue
            live = [index for index in range(workers) if not done[index]]
            network.baton.run(live[rng.randrange(len(live))])
            turns += 1
            if turns > max_turns:
                raise SimulationError(f"simulation with seed {seed} did not finish in {max_turns} turns")
    finally:
        if not all(done):
            network.baton.abandoned = True
    for thread in threads:
        thread.join(TURN_TIMEOUT)
    if failures:
        raise failure_of(failures, workers)
    return results  # type: ignore[return-value]
