"""Channels between workers that share one process (threads).

Each ``(channel, receiving worker)`` pair has a mailbox: a deque that any thread
may append to and only the receiver pops from, so messages from one sender
arrive in the order sent.  Pushing also records an activation for the receiving
operator and wakes the receiving worker if it is parked.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from scopes.channels import Message, Pusher


class WorkerSignal:
    """Activations addressed to one worker from any thread, and the event that wakes it."""

    __slots__ = ("pending", "event")

    def __init__(self) -> None:
        """An empty signal."""
        self.pending: deque[tuple[int, ...]] = deque()
        self.event = threading.Event()

    def activate(self, address: tuple[int, ...]) -> None:
        """Ask the worker to schedule the operator at ``address`` and wake it."""
        self.pending.append(address)
        self.event.set()

    def wake(self) -> None:
        """Wake the worker without activating anything."""
        self.event.set()


class ThreadFabric:
    """The mailboxes and signals of ``peers`` workers in one process."""

    def __init__(self, peers: int) -> None:
        """Create the fabric for ``peers`` workers."""
        self.peers = peers
        self.signals = [WorkerSignal() for _ in range(peers)]
        self.abort = threading.Event()
        self.activity = 0
        """Bumped by every worker step that ran something; read to detect stalls."""
        self.finishing = 0
        """How many workers have returned from ``main`` and are finishing their dataflows."""
        self._lock = threading.Lock()
        self._mailboxes: dict[tuple[int, int], deque[Message]] = {}

    def mailbox(self, channel: int, receiver: int) -> deque[Message]:
        """The mailbox of ``receiver`` for ``channel`` (created on first use by either side)."""
        key = (channel, receiver)
        box = self._mailboxes.get(key)
        if box is None:
            with self._lock:
                box = self._mailboxes.setdefault(key, deque())
        return box

    def enter_finishing(self) -> None:
        """Record that one more worker is running its dataflows to completion."""
        with self._lock:
            self.finishing += 1

    def stop_all(self) -> None:
        """Tell every worker to stop, and wake those that are parked."""
        self.abort.set()
        for signal in self.signals:
            signal.wake()


class MailboxPusher:
    """Pushes into another (or the same) worker's mailbox and activates the receiver."""

    __slots__ = ("_box", "_signal", "_address")

    def __init__(self, box: deque[Message], signal: WorkerSignal, address: tuple[int, ...]) -> None:
        self._box = box
        self._signal = signal
        self._address = address

    def push(self, time: Any, batch: list[Any]) -> None:
        self._box.append((time, batch))
        self._signal.activate(self._address)


class MailboxPuller:
    """Pops this worker's mailbox."""

    __slots__ = ("_box",)

    def __init__(self, box: deque[Message]) -> None:
        self._box = box

    def pull(self) -> Message | None:
        box = self._box
        return box.popleft() if box else None


class ThreadAllocator:
    """The :class:`~scopes.channels.Allocator` of one worker on a :class:`ThreadFabric`."""

    def __init__(self, fabric: ThreadFabric, index: int) -> None:
        """Allocate channels for worker ``index`` of ``fabric``."""
        self.fabric = fabric
        self._index = index

    @property
    def index(self) -> int:
        """This worker's index."""
        return self._index

    @property
    def peers(self) -> int:
        """The number of workers."""
        return self.fabric.peers

    def allocate(self, channel: int, address: tuple[int, ...]) -> tuple[list[Pusher], MailboxPuller]:
        """One pusher per worker for ``channel``, and this worker's puller."""
        fabric = self.fabric
        pushers: list[Pusher] = [
            MailboxPusher(fabric.mailbox(channel, peer), fabric.signals[peer], address)
            for peer in range(fabric.peers)
        ]
        return pushers, MailboxPuller(fabric.mailbox(channel, self._index))
