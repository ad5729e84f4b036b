"""Channels: how ``(time, batch)`` messages move from an output to an input.

The progress layer never sees data; it sees only counts.  This module defines
the data plane's vocabulary: a :class:`Pusher` accepts messages, a
:class:`Puller` yields them, and an :class:`Allocator` (supplied by the runtime)
creates channels between workers.  Channel contracts say how records are
distributed: :data:`Pipeline` keeps them on the worker that produced them,
:class:`Exchange` routes each record by key, :data:`Broadcast` sends each record
to every worker.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol

from scopes.hashing import MASK64, stable_hash

Message = tuple[Any, list[Any]]
"""A batch of records sharing one timestamp: ``(time, records)``."""

Activator = Callable[[], None]
"""Marks an operator as needing to run."""


class Pusher(Protocol):
    """Accepts messages."""

    def push(self, time: Any, batch: list[Any]) -> None:
        """Deliver ``batch`` at ``time``; the receiver may take ownership of the list."""
        ...


class Puller(Protocol):
    """Yields messages, or ``None`` when none are waiting."""

    def pull(self) -> Message | None:
        """Return the next waiting message, or ``None``."""
        ...


class Allocator(Protocol):
    """Creates channels between the workers of one computation (implemented by the runtime)."""

    @property
    def index(self) -> int:
        """This worker's index."""
        ...

    @property
    def peers(self) -> int:
        """The number of workers."""
        ...

    def allocate(self, channel: int, address: tuple[int, ...]) -> tuple[list[Pusher], Puller]:
        """Create (or join) channel ``channel``.

        Returns one pusher per worker, and this worker's puller.  Every worker must
        allocate the same channels in the same order.  ``address`` names the
        receiving operator, which is activated on each worker that receives a
        message.
        """
        ...


class LocalQueue:
    """A FIFO queue within one worker: both pusher and puller.  Pushing activates the reader."""

    __slots__ = ("_queue", "_activate")

    def __init__(self, activate: Activator | None = None) -> None:
        """Create a queue that calls ``activate`` whenever a message is pushed."""
        self._queue: deque[Message] = deque()
        self._activate = activate

    def push(self, time: Any, batch: list[Any]) -> None:
        """Enqueue a message and activate the reader."""
        self._queue.append((time, batch))
        if self._activate is not None:
            self._activate()

    def pull(self) -> Message | None:
        """Dequeue the oldest message, if any."""
        queue = self._queue
        return queue.popleft() if queue else None

    def __len__(self) -> int:
        return len(self._queue)


class Tee:
    """An output's fan-out: every message goes to every attached pusher.

    Pushers that buffer (they have a ``flush()`` method, like
    :class:`ExchangePusher` and the scope entrance and exit) are also kept in a
    second list, so that :meth:`flush` costs nothing for the common tee whose
    pushers all deliver at once.
    """

    __slots__ = ("pushers", "_flushers")

    def __init__(self) -> None:
        """Start with no attached pushers."""
        self.pushers: list[Pusher] = []
        self._flushers: list[Callable[[], None]] = []

    def add(self, pusher: Pusher) -> None:
        """Attach another receiver."""
        self.pushers.append(pusher)
        flush = getattr(pusher, "flush", None)
        if callable(flush):
            self._flushers.append(flush)

    @property
    def buffering(self) -> bool:
        """Whether some attached pusher buffers and needs :meth:`flush`."""
        return bool(self._flushers)

    def push(self, time: Any, batch: list[Any]) -> None:
        """Send the batch to each receiver; all but the last get their own copy."""
        pushers = self.pushers
        count = len(pushers)
        if count == 1:
            pushers[0].push(time, batch)
        elif count:
            last = count - 1
            for i, pusher in enumerate(pushers):
                pusher.push(time, batch if i == last else list(batch))

    def flush(self) -> None:
        """Send whatever the buffering pushers hold."""
        for flush in self._flushers:
            flush()


EXCHANGE_BUFFER = 4096
"""An exchange sends a destination's buffered records early once it holds this many at one time."""


class ExchangePusher:
    """Routes each record to worker ``route(key(record), peers)``, buffering until :meth:`flush`.

    Routing uses :func:`scopes.hashing.stable_hash`, so every process sends a key
    to the same worker.  Records are gathered per ``(destination, time)`` for the
    whole invocation of the producing operator and sent as one message each when
    the operator is done (:meth:`flush`), as timely's buffers do; otherwise a loop
    with an exchange inside splits its batches a little more at every iteration
    until each message carries one record.  A destination's buffer for one time
    is sent early once it holds :data:`EXCHANGE_BUFFER` records, to bound memory.

    Why holding records until the end of the invocation is safe for progress:
    the operator reports the records it produced (``produced`` counts, which
    become message counts at the receiving input) in the same atomic progress
    batch as any capability it releases, and that batch is only assembled after
    :meth:`~scopes.operator.Operator.pull_internal_progress` has flushed every
    output tee, within the same invocation.  So by the time any worker can see the
    batch, the messages are in the receivers' channels.  And even in between, a
    positive count for messages not yet delivered only holds frontiers back,
    which can never make a worker believe a time is complete too early.  Records
    pushed from outside an invocation (an input handle's ``send`` from ``main``)
    activate their operator, whose next invocation flushes them.
    """

    __slots__ = ("_key", "_pushers", "_peers", "_buffers")

    def __init__(self, key: Callable[[Any], Hashable], pushers: Sequence[Pusher]) -> None:
        """Route by ``key`` among ``pushers`` (one per worker)."""
        self._key = key
        self._pushers = list(pushers)
        self._peers = len(pushers)
        self._buffers: dict[Any, list[list[Any]]] = {}

    def push(self, time: Any, batch: list[Any]) -> None:
        """Add each record of the batch to its destination's buffer for ``time``."""
        peers = self._peers
        key = self._key
        parts = self._buffers.get(time)
        if parts is None:
            parts = self._buffers[time] = [[] for _ in range(peers)]
        appends = [part.append for part in parts]
        for record in batch:
            k = key(record)
            if k.__class__ is int:
                appends[(k & MASK64) % peers](record)
            else:
                appends[stable_hash(k) % peers](record)
        for index, part in enumerate(parts):
            if len(part) >= EXCHANGE_BUFFER:
                parts[index] = []
                self._pushers[index].push(time, part)

    def flush(self) -> None:
        """Send one message per destination and time with everything buffered."""
        buffers = self._buffers
        if buffers:
            self._buffers = {}
            pushers = self._pushers
            for time, parts in buffers.items():
                for pusher, part in zip(pushers, parts, strict=True):
                    if part:
                        pusher.push(time, part)


class BroadcastPusher:
    """Sends every record to every worker."""

    __slots__ = ("_pushers",)

    def __init__(self, pushers: Sequence[Pusher]) -> None:
        """Broadcast among ``pushers`` (one per worker)."""
        self._pushers = list(pushers)

    def push(self, time: Any, batch: list[Any]) -> None:
        """Push a copy of the batch to each worker."""
        last = len(self._pushers) - 1
        for i, pusher in enumerate(self._pushers):
            pusher.push(time, batch if i == last else list(batch))


class ChannelContract(ABC):
    """How an operator input wants its records distributed among workers."""

    name = "contract"

    def copies(self, peers: int) -> int:
        """How many copies of each record sent into the channel are delivered (in all)."""
        return 1

    @abstractmethod
    def connect(
        self, allocator: Allocator, channel: int, address: tuple[int, ...], activate: Activator
    ) -> tuple[Pusher, Puller]:
        """Create the channel; return the pusher the upstream output uses and this input's puller."""

    def __repr__(self) -> str:
        return self.name


class _Pipeline(ChannelContract):
    """Records stay on the worker that produced them."""

    name = "Pipeline"

    def connect(
        self, allocator: Allocator, channel: int, address: tuple[int, ...], activate: Activator
    ) -> tuple[Pusher, Puller]:
        queue = LocalQueue(activate)
        return queue, queue


Pipeline: ChannelContract = _Pipeline()
"""Keep records on the worker that produced them (no communication)."""


class Exchange(ChannelContract):
    """Route each record to the worker ``stable_hash(key(record)) % peers`` (see :mod:`scopes.hashing`)."""

    name = "Exchange"

    def __init__(self, key: Callable[[Any], Hashable]) -> None:
        """Route by ``key``; records with equal keys meet on the same worker."""
        if not callable(key):
            raise TypeError(f"Exchange needs a callable key function, got {key!r}")
        self.key = key

    def connect(
        self, allocator: Allocator, channel: int, address: tuple[int, ...], activate: Activator
    ) -> tuple[Pusher, Puller]:
        if allocator.peers == 1:
            queue = LocalQueue(activate)
            return queue, queue
        pushers, puller = allocator.allocate(channel, address)
        return ExchangePusher(self.key, pushers), puller


class _Broadcast(ChannelContract):
    """Send every record to every worker."""

    name = "Broadcast"

    def copies(self, peers: int) -> int:
        """Every worker receives a copy."""
        return peers

    def connect(
        self, allocator: Allocator, channel: int, address: tuple[int, ...], activate: Activator
    ) -> tuple[Pusher, Puller]:
        if allocator.peers == 1:
            queue = LocalQueue(activate)
            return queue, queue
        pushers, puller = allocator.allocate(channel, address)
        return BroadcastPusher(pushers), puller


Broadcast: ChannelContract = _Broadcast()
"""Send every record to every worker."""
