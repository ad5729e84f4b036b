"""The communicator of one worker of a :class:`~runtime.communication.process_fabric.ProcessFabric`.

It buffers what its worker pushes to workers of other processes, encoded once
per batch (a batch pushed to several workers of one process travels once,
naming every receiver), sends what fits each receiving process's window when
the worker flushes (or a destination's buffer grows past :data:`FLUSH_BYTES`),
returns the credit its worker owes, and parks its worker until an activation,
credit or a stop arrives (on the process's shared-memory rings when linked).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

from runtime.codec import MAX_SIZE
from runtime.communication import Address, Stop
from runtime.communication.arrow_validity import INVALID_ADVICE
from runtime.communication.fabric import FabricCommunicator, MailboxPusher, WorkerSignal
from runtime.communication.frames import CREDIT, DATA
from runtime.communication.process_channels import CreditingPuller, Outgoing, RemoteMessage, RemotePusher
from runtime.communication.shm_transport import RingWatch, ShmTransport
from runtime.communication.wire import (
    BATCH_COLUMNS,
    BATCH_FAST,
    BATCH_GENERAL,
    MAX_FRAME,
    MAX_FRAME_SETTING,
    EncodingError,
    FrameTooLarge,
    encode_batch,
    encode_value,
    frame,
    frame_head,
    frame_size,
    payload_pieces,
    prefixed_head,
)
from runtime.errors import InvalidArrowBatch
from scopes.batches import Batch
from scopes.channels import Message, Pusher

HEAD_CACHE = 256
"""Encoded headers of untimed (progress) frames one worker keeps: the same few go out every step."""
FLUSH_BYTES = 1 << 18
"""Buffered bytes for one destination process that trigger an early send."""
RECORDS_MAX = MAX_SIZE
"""The most bytes a batch of records (msgpack) may take between processes: what the receiver's decoder accepts."""
_RECORD_PATHS = frozenset({BATCH_FAST, BATCH_COLUMNS, BATCH_GENERAL})
_CHECK_FRAME_FROM = min(MAX_FRAME - 65536, RECORDS_MAX)
"""A payload longer than this is measured against the limits (:meth:`ProcessCommunicator._check_frame`)."""


class ProcessFabricView(Protocol):
    """What a :class:`ProcessCommunicator` uses of its :class:`~runtime.communication.process_fabric.ProcessFabric`
    (which creates it, so this module does not import that one)."""

    process: int
    processes: int
    workers: int
    peers: int
    base: int
    send_window: int
    slack: int
    sent: list[int]
    signals: list[WorkerSignal]
    credit_due: list[bool]
    waiting_for_room: list[bool]
    links: ShmTransport | None
    spin: bool
    stop_reason: Stop | None

    def mailbox(self, channel: int, local: int) -> deque[Message]:
        """The mailbox of local worker ``local`` for messages from this process on ``channel``."""

    def remote_mailbox(self, channel: int, local: int) -> deque[RemoteMessage]:
        """The mailbox of local worker ``local`` for messages from other processes on ``channel``."""

    def reserve(self, process: int, size: int) -> bool:
        """Whether ``size`` more bytes may be sent to ``process`` now (and count them if so)."""

    def charge(self, process: int, size: int) -> None:
        """Count ``size`` bytes sent to ``process`` whether or not they fit the window."""

    def send_pieces(self, process: int, pieces: list[bytes | memoryview]) -> None:
        """Send whole frames, gathered from ``pieces``, to ``process``."""

    def close_channels(self, local: int, channels: list[int]) -> None:
        """Local worker ``local`` will never pull ``channels`` again."""

    def finish_receiving(self, local: int) -> None:
        """Local worker ``local`` has returned: it pulls nothing more."""


class ProcessCommunicator(FabricCommunicator):
    """The :class:`~runtime.communication.Communicator` of one worker of a :class:`ProcessFabric`."""

    fabric: ProcessFabricView

    def __init__(self, fabric: ProcessFabricView, local: int) -> None:
        """Communicate as local worker ``local`` of ``fabric``."""
        super().__init__(fabric, local, fabric.base + local)
        self._out: dict[int, deque[Outgoing]] = {}
        self._out_bytes: dict[int, int] = {}
        self._last_batch: Batch | None = None
        self._last_time: Any = None
        self._last_encoded: tuple[int, Any] = (0, b"")
        self._owed = [0] * fabric.processes
        """Bytes pulled from each other process and not yet returned to it as credit."""
        self._credit_threshold = max(1, fabric.send_window // 4)
        self._piggyback = max(1, fabric.slack // fabric.workers)
        """Credit owed that travels with data: a share of the slack, so that the workers of this process together
        keep below the slack what they hold back (the sender may send while no more than the slack is in flight)."""
        self._channels_of: dict[int, list[int]] = {}
        """The channels allocated for each dataflow (by index)."""
        self._heads: dict[tuple[int, Address, tuple[int, ...], int], bytes] = {}
        """Encoded headers of untimed data frames (progress batches), by channel, address, receivers and path."""
        self.buffered = False
        """Whether encoded messages wait in this worker's buffers."""
        self._watch = RingWatch()

    def allocate(self, channel: int, address: Address) -> tuple[list[Pusher], CreditingPuller]:
        """One pusher per worker of the cluster for ``channel``, and this worker's puller."""
        fabric = self.fabric
        pushers: list[Pusher] = []
        for peer in range(fabric.peers):
            process = peer // fabric.workers
            if process == fabric.process:
                local = peer - fabric.base
                pushers.append(MailboxPusher(fabric.mailbox(channel, local), fabric.signals[local], address))
            else:
                pushers.append(RemotePusher(self, process, peer, channel, address))
        self._channels_of.setdefault(address[0], []).append(channel)
        local_box = fabric.mailbox(channel, self._local)
        remote_box = fabric.remote_mailbox(channel, self._local)
        return pushers, CreditingPuller(local_box, remote_box, self._owed, channel, self._index)

    def enqueue(self, process: int, receiver: int, channel: int, address: Address, time: Any, batch: Batch) -> None:
        """Buffer a message for ``receiver`` on ``process``; a batch already buffered just gains a receiver."""
        self.fabric.sent[self._local] += 1
        out = self._out.get(process)
        if out is None:
            out = self._out[process] = deque()
            self._out_bytes[process] = 0
        if out:
            last = out[-1]
            if last.batch is batch and last.channel == channel and last.time == time:
                last.receivers.append(receiver)
                return
        if batch is self._last_batch and time == self._last_time:
            path, payload = self._last_encoded
        else:
            try:
                path, payload = encode_batch(batch)
            except InvalidArrowBatch as error:
                raise self._invalid_arrow(error, process, receiver, channel, address, time) from None
            except EncodingError as error:
                raise EncodingError(
                    f"{error} [record pushed by worker {self._index} on channel {channel} to "
                    f"{self._operator(address)} on worker {receiver} (process {process})]",
                    error.type_name,
                ) from None
            self._last_batch = batch
            self._last_time = time
            self._last_encoded = (path, payload)
        if len(payload) > _CHECK_FRAME_FROM:
            self._check_frame(process, receiver, channel, address, time, path, payload)
        out.append(Outgoing(channel, address, receiver, time, path, payload, batch))
        self.buffered = True
        size = self._out_bytes[process] + len(payload)
        self._out_bytes[process] = size
        if size > FLUSH_BYTES:
            self._send(process)

    def _operator(self, address: Address) -> str:
        """The operator at ``address`` (which reads a channel), by name and scope if the worker knows it."""
        return self.describe_operator(address) or f"the operator at address {address}"

    def _invalid_arrow(
        self, error: InvalidArrowBatch, process: int, receiver: int, channel: int, address: Address, time: Any
    ) -> InvalidArrowBatch:
        """The error for an Arrow batch pushed at ``time`` that is not valid Arrow: raised here, by its sender,
        naming the operator its channel leads to, the column, Arrow's text and what to do; the receiving process
        would have refused it as damage on the wire."""
        return InvalidArrowBatch(
            f"worker {self._index} cannot send the Arrow batch it pushed at time {time!r} on channel {channel} to "
            f"{self._operator(address)} on worker {receiver} (process {process}): its {error.part} is not "
            f"valid Arrow: {error.problem}; {INVALID_ADVICE}",
            error.type_name,
            error.column,
            error.column_type,
            error.problem,
        )

    def _check_frame(
        self, process: int, receiver: int, channel: int, address: Address, time: Any, path: int, payload: Any
    ) -> None:
        """Refuse a message too large for one frame, or a batch of records too large to decode, naming the limit,
        the receiver and the time."""
        if path in _RECORD_PATHS and len(payload) > RECORDS_MAX:
            raise FrameTooLarge(
                f"a batch of records of {len(payload)} bytes at time {time!r} for the operator at address {address} "
                f"on worker {receiver} (process {process}) exceeds the {RECORDS_MAX} bytes a batch of records may "
                f"take between processes, whatever ${MAX_FRAME_SETTING} says; send it as smaller batches, or as a "
                "NumPy array or Arrow batch, which may take the whole frame limit"
            )
        size = frame_size([DATA, channel, address, [receiver], time, path], len(payload))
        if size > MAX_FRAME:
            raise FrameTooLarge(
                f"a message of {size} bytes at time {time!r} for the operator at address {address} on worker "
                f"{receiver} (process {process}) exceeds the frame limit of {MAX_FRAME} bytes "
                f"(${MAX_FRAME_SETTING}); send it as smaller batches (records or rows), which travel as frames of "
                "their own"
            )

    def _send(self, process: int, all_credit: bool = False) -> bool:
        """Send the buffered messages for ``process`` that fit its window; whether all went.

        The credit owed to ``process`` travels with them if it is at least this worker's share of
        the fabric's :attr:`~ProcessFabric.slack` (or ``all_credit``: the callers that return credit alone).
        """
        out = self._out.get(process)
        pieces: list[bytes | memoryview] = []  # heads and payloads gathered by sendmsg: a payload is not copied here
        if out:
            fabric = self.fabric
            sent = 0
            while out:
                message = out[0]
                payload = message.payload
                if not fabric.reserve(process, len(payload)):
                    break
                out.popleft()
                sent += len(payload)
                pieces.append(
                    self._head(
                        message.channel, message.address, message.receivers, message.time, message.path, len(payload)
                    )
                )
                payload_pieces(pieces, payload)
            self._out_bytes[process] -= sent
        owed = self._owed[process]
        if owed and (all_credit or owed >= self._piggyback):
            self._owed[process] = 0
            pieces.insert(0, frame([CREDIT, owed]))
        if pieces:
            self.fabric.send_pieces(process, pieces)
        return not out

    def _head(self, channel: int, address: Address, receivers: list[int], time: Any, path: int, length: int) -> bytes:
        """The head of a data frame: for an untimed one (a progress batch), its header encoded once and kept."""
        if time is not None:
            return frame_head([DATA, channel, address, receivers, time, path], length)
        key = (channel, address, tuple(receivers), path)
        encoded = self._heads.get(key)
        if encoded is None:
            if len(self._heads) >= HEAD_CACHE:
                self._heads.clear()
            encoded = self._heads[key] = encode_value([DATA, channel, address, receivers, None, path])
        return prefixed_head(encoded, length)

    def flush(self) -> None:
        """Send every buffered message that fits its receiver's window, and the credit owed.

        Credit goes back once a quarter of the window is owed to a process; what
        remains below that goes back when a heartbeat asks (:attr:`ProcessFabric.credit_due`),
        so that an idle worker sends no frame per step just to return a few bytes.
        """
        fabric = self.fabric
        if fabric.links is not None:
            fabric.links.retry()
        if fabric.credit_due[self._local]:
            fabric.credit_due[self._local] = False
            self._return_credit()
        else:
            threshold = self._credit_threshold
            for process, owed in enumerate(self._owed):
                if owed >= threshold and not self._out.get(process):
                    self._send(process)
        if not self.buffered:
            return
        everything = True
        for process in self._out:
            everything = self._send(process) and everything
        self.buffered = not everything
        if everything:
            self._last_batch = None

    def _return_credit(self) -> None:
        """Send all the credit owed, however small (before parking, or when finishing)."""
        for process, owed in enumerate(self._owed):
            if owed:
                self._send(process, all_credit=True)

    def dataflow_completed(self, index: int) -> None:
        """Dataflow ``index`` completed here: what waits or arrives later on its channels is never pulled."""
        channels = self._channels_of.pop(index, None)
        if channels:
            self.fabric.close_channels(self._local, channels)

    def backlogged(self) -> bool:
        """Whether messages wait for room in a receiver's window (the worker keeps stepping until not)."""
        links = self.fabric.links
        waiting = self.buffered or (links is not None and links.pending)
        self.fabric.waiting_for_room[self._local] = waiting
        return waiting

    def park(self, timeout: float | None) -> None:
        """Send what fits (and credit if a heartbeat asked); wait for an activation, credit, a stop or ``timeout``."""
        self.flush()
        links = self.fabric.links
        if links is None:
            self._signal.park(timeout, lambda: self.fabric.stop_reason is not None)
            return
        if self.fabric.spin and self._watch.saw(links, self._signal.pending, self._stopped, timeout):
            return  # a frame or an activation came while spinning: no doorbell, no sleep, no wake-up
        if not links.going_to_sleep():  # else a frame arrived meanwhile: read it instead of parking
            self._signal.park(timeout, lambda: self.fabric.stop_reason is not None)
        links.woke(reset=False)  # the gate reset the doorbells that rang

    def take_activations(self) -> list[Address]:
        """Read this process's shared-memory rings (when linked), then take the activations queued."""
        links = self.fabric.links
        if links is not None:
            links.drain()
        return super().take_activations()

    @property
    def owes_credit(self) -> bool:
        """Whether this worker pulled bytes from another process that it has not credited yet."""
        return any(self._owed)

    def finish(self) -> None:
        """This worker has returned: send what is buffered, and count it as waiting for ever."""
        try:
            if self.fabric.stop_reason is None:
                self._flush_all()
        finally:
            self.fabric.finish_receiving(self._local)

    def _flush_all(self) -> None:
        """Send everything buffered whatever the windows say (a returned worker sends nothing more)."""
        for process, out in self._out.items():
            pieces: list[bytes | memoryview] = []
            for message in out:
                payload = message.payload
                head = [DATA, message.channel, message.address, message.receivers, message.time, message.path]
                pieces.append(frame_head(head, len(payload)))
                payload_pieces(pieces, payload)
                self.fabric.charge(process, len(payload))
            out.clear()
            self._out_bytes[process] = 0
            if pieces:
                self.fabric.send_pieces(process, pieces)
        self.buffered = False
        self._return_credit()
