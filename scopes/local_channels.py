"""Channels within one worker: a :class:`LocalQueue` (pusher and puller at once), a :class:`Tee` (a fan-out)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from scopes.batches import (
    Batch,
    copy_batch,
)
from scopes.channel_protocols import Activator, Pusher

Message = tuple[Any, Batch]
"""A batch of records sharing one timestamp: ``(time, records)``."""


class LocalQueue:
    """A FIFO queue within one worker: both pusher and puller.  Pushing activates the reader."""

    __slots__ = ("_queue", "_activate")

    def __init__(self, activate: Activator | None = None) -> None:
        """Create a queue that calls ``activate`` whenever a message is pushed."""
        self._queue: deque[Message] = deque()
        self._activate = activate

    def push(self, time: Any, batch: Batch) -> None:
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

    __slots__ = ("pushers", "_flushers", "push")

    def __init__(self) -> None:
        """Start with no attached pushers."""
        self.pushers: list[Pusher] = []
        self._flushers: list[Callable[[], None]] = []
        #: ``push(time, batch)``: send the batch to each receiver; all but the last get
        #: their own copy.  With one receiver it *is* that receiver's ``push`` (no
        #: extra call per message); attach receivers only with :meth:`add`.
        self.push: Callable[[Any, Any], None] = self._push_all

    def add(self, pusher: Pusher) -> None:
        """Attach another receiver."""
        self.pushers.append(pusher)
        flush = getattr(pusher, "flush", None)
        if callable(flush):
            self._flushers.append(flush)
        self.push = pusher.push if len(self.pushers) == 1 else self._push_all

    @property
    def buffering(self) -> bool:
        """Whether some attached pusher buffers and needs :meth:`flush`."""
        return bool(self._flushers)

    def _push_all(self, time: Any, batch: Any) -> None:
        """Send the batch to each receiver; all but the last get their own copy."""
        pushers = self.pushers
        count = len(pushers)
        if count == 1:
            pushers[0].push(time, batch)
        elif count:
            last = count - 1
            for i, pusher in enumerate(pushers):
                if i == last:
                    pusher.push(time, batch)
                else:
                    pusher.push(time, list(batch) if batch.__class__ is list else copy_batch(batch))

    def flush(self) -> None:
        """Send whatever the buffering pushers hold."""
        for flush in self._flushers:
            flush()
