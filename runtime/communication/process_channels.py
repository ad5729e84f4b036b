"""The channel ends of a process fabric, and what its senders buffer.

A :class:`RemotePusher` hands a message for a worker of another process to its
sending communicator, which encodes it and buffers it as an :class:`Outgoing`
record until it flushes; a :class:`CreditingPuller` pops one worker's mailboxes,
decoding what came from other processes and counting the bytes owed back to
them as credit (see :mod:`runtime.communication.process_fabric`).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

from runtime.communication import Address
from runtime.communication.shared_decode import SharedPayload
from runtime.communication.wire import WireError, decode_batch
from scopes.batches import Batch
from scopes.channels import Message

__all__ = ["CreditingPuller", "Enqueuer", "Outgoing", "RemoteMessage", "RemotePusher", "empty_crediting"]

RemoteMessage = tuple[Any, int, Any, int, int]
"""A message from another process in a mailbox, still encoded: ``(time, encoding path, payload, sending process,
bytes to credit)``.  The worker that pulls it decodes it (:func:`~runtime.communication.wire.decode_batch`): the
reader thread only splits frames, and the records are built just before the operator reads them, while in the
CPU's caches."""


class Outgoing:
    """A message buffered for another process: encoded once, for one or more receivers there."""

    __slots__ = ("channel", "address", "receivers", "time", "path", "payload", "batch")

    def __init__(
        self, channel: int, address: Address, receiver: int, time: Any, path: int, payload: Any, batch: Batch
    ) -> None:
        """Buffer ``payload`` (``batch`` encoded by codec ``path``) at ``time`` for ``receiver`` on ``channel``."""
        self.channel = channel
        self.address = address
        self.receivers = [receiver]
        """The receiving workers (of one process): a batch pushed to several travels as one frame."""
        self.time = time
        self.path = path
        self.payload = payload
        self.batch = batch
        """The batch object encoded: another push of the same object at the same time only adds a receiver."""


class Enqueuer(Protocol):
    """The sending communicator, as far as a :class:`RemotePusher` needs it."""

    def enqueue(self, process: int, receiver: int, channel: int, address: Address, time: Any, batch: Batch) -> None:
        """Buffer a message for ``receiver`` on ``process``."""
        ...


class RemotePusher:
    """Encodes for a worker of another process and buffers the frame until the sender flushes."""

    __slots__ = ("_communicator", "_process", "_receiver", "_channel", "_address")

    def __init__(self, communicator: Enqueuer, process: int, receiver: int, channel: int, address: Address):
        self._communicator = communicator
        self._process = process
        self._receiver = receiver
        self._channel = channel
        self._address = address

    def push(self, time: Any, batch: Batch) -> None:
        """Encode ``(time, batch)`` (once per batch object) and buffer it for the receiver's process."""
        self._communicator.enqueue(self._process, self._receiver, self._channel, self._address, time, batch)


class CreditingPuller:
    """Pops one worker's mailbox for a channel: messages from its own process first, then from others.

    A message from another process is decoded here, by the worker that pulls
    it, and its bytes become owed as credit to that process.
    """

    __slots__ = ("_local", "_remote", "_owed", "_channel", "_worker")

    def __init__(
        self, local: deque[Message], remote: deque[RemoteMessage], owed: list[int], channel: int, worker: int
    ) -> None:
        self._local = local
        self._remote = remote
        self._owed = owed
        self._channel = channel
        self._worker = worker

    def pull(self) -> Message | None:
        """The oldest waiting message from this process, else from another process, or ``None``.

        Raises :class:`~runtime.communication.wire.WireError`, naming the process, channel and
        time, if another process's message does not decode.
        """
        if self._local:
            return self._local.popleft()
        if self._remote:
            time_, path, payload, process, size = self._remote.popleft()
            if size:
                self._owed[process] += size
            try:
                if payload.__class__ is SharedPayload:
                    return time_, payload.take()
                return time_, decode_batch(path, payload)
            except WireError as error:
                raise WireError(
                    f"process {process} sent worker {self._worker} a malformed batch on channel {self._channel} "
                    f"at time {time_!r} ({error}); the computation stops: do all processes run the same "
                    f"program, with the same codecs registered?"
                ) from None
        return None


def empty_crediting(boxes: list[deque[RemoteMessage]]) -> dict[int, int]:
    """Empty ``boxes`` (messages nobody will pull); return the bytes owed back to each sending process."""
    owed: dict[int, int] = {}
    for box in boxes:
        for _, _, _, process, size in box:
            owed[process] = owed.get(process, 0) + size
        box.clear()
    return owed
