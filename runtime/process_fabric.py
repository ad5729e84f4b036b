"""The process communicator: workers in several processes exchange messages over the TCP mesh.

One :class:`ProcessFabric` serves the ``W`` workers of one process of a
cluster of ``P`` processes (worker ``process * W + local``).  Messages between
workers of the same process go through memory, as in :mod:`runtime.fabric`.
Messages to a worker of another process are encoded once (:mod:`runtime.wire`)
when pushed, buffered per destination process, and sent when the worker
flushes (the end of each step, before parking, or when the buffer grows
large).  A progress batch pushed to several workers of one process, the same
list object each time, travels as one frame naming every receiver.

Every frame between two processes uses their one connection, so messages
stay in order per sender.  Frames are ``data``, ``beat`` (a heartbeat every
:data:`HEARTBEAT_PERIOD` seconds: whether every worker of the sender has been
waiting and for how long, how many messages its workers sent to other
processes, and how many messages from other processes arrived), ``stop`` (a
reason to stop, relayed to every process) and ``bye`` (the sender's workers
all finished; its payload may carry their results).

Stall detection combines the local workers' state with the latest heartbeat
of every other process: the computation is stalled when every worker
everywhere is waiting, every process's heartbeat is fresh, and the messages
sent between processes all arrived.  (A message that arrived but was not
pulled leaves an activation pending, which counts as work; one that arrives
for a dataflow its receiver has completed is never pulled, which is why
arrivals, not pulls, are counted.)  A process that sends nothing
at all for :data:`SILENCE_LIMIT` seconds is reported as lost.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from runtime.communication import WAITING_GAP, Address, Stop
from runtime.fabric import FabricCommunicator, MailboxPuller, MailboxPusher, WorkerSignal
from runtime.tcp import Mesh, PeerLost
from runtime.wire import (
    MAX_FRAME,
    MAX_FRAME_SETTING,
    EncodingError,
    FrameTooLarge,
    copy_decoded,
    decode_batch,
    decode_value,
    encode_batch,
    frame,
    frame_head,
)
from scopes.channels import Message, Pusher

HEARTBEAT_PERIOD = 0.25
"""Seconds between two heartbeats from each process to every other."""
SILENCE_LIMIT = 6.0
"""Seconds without any frame after which a process is reported as lost."""
FLUSH_BYTES = 1 << 18
"""Buffered bytes for one destination process that trigger an early send."""

DATA, BEAT, STOP, BYE = 0, 1, 2, 3


class ProcessFabric:
    """Mailboxes, signals and the connection to other processes for the workers of one process."""

    def __init__(self, process: int, processes: int, workers: int, mesh: Mesh) -> None:
        """Serve workers ``process * workers .. (process + 1) * workers - 1`` over ``mesh``."""
        self.process = process
        self.processes = processes
        self.workers = workers
        self.peers = processes * workers
        self.base = process * workers
        self.mesh = mesh
        self.signals = [WorkerSignal() for _ in range(workers)]
        self.stop_reason: Stop | None = None
        self.idle_since: list[float | None] = [None] * workers
        self.last_idle: list[float] = [0.0] * workers
        self.finished: list[bool] = [False] * workers
        self.sent = [0] * workers
        """Messages each local worker sent to workers of other processes."""
        self.arrived: dict[int, int] = {}
        """Messages that arrived from each other process (each counted by that connection's reader)."""
        self.beats: dict[int, tuple[float, float, int, int]] = {}
        """For each other process: (received at, waiting for, sent, arrived) from its last heartbeat."""
        self.byes: dict[int, bytes | memoryview] = {}
        """The payload of each process's ``bye`` frame."""
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._mailboxes: dict[tuple[int, int], deque[Message]] = {}
        self._communicators: list[ProcessCommunicator] = []
        self._beating = threading.Event()
        self._heart: threading.Thread | None = None
        self.lost: PeerLost | None = None
        """The first connection this process lost, if any."""
        self.on_tick: Callable[[], None] | None = None
        """Called by the heartbeat thread at every beat (a child checks on its parent there)."""

    def communicators(self) -> list[ProcessCommunicator]:
        """The communicators of this process's workers, in worker order."""
        if not self._communicators:
            self._communicators = [ProcessCommunicator(self, local) for local in range(self.workers)]
        return self._communicators

    def describe_worker(self, worker: int) -> str:
        """``worker 3 (process 1, host:port)``."""
        process = worker // self.workers
        return f"worker {worker} (process {process}, {self.mesh.endpoints[process]})"

    def mailbox(self, channel: int, local: int) -> deque[Message]:
        """The mailbox of local worker ``local`` for ``channel``."""
        key = (channel, local)
        box = self._mailboxes.get(key)
        if box is None:
            with self._lock:
                box = self._mailboxes.setdefault(key, deque())
        return box

    # ------------------------------------------------------------------ receiving

    def on_frame(self, process: int, header: list[Any], payload: bytes | memoryview) -> None:
        """Handle one frame from ``process`` (on its reader thread)."""
        kind = header[0]
        if kind == DATA:
            _, channel, address, receivers, time_, path = header
            batch = decode_batch(path, payload)
            self.arrived[process] = self.arrived.get(process, 0) + len(receivers)
            last = len(receivers) - 1
            base = self.base
            for i, receiver in enumerate(receivers):
                local = receiver - base
                self.mailbox(channel, local).append((time_, batch if i == last else copy_decoded(path, batch)))
                self.signals[local].activate(address)
        elif kind == BEAT:
            _, waiting_for, sent, arrived = header
            self.beats[process] = (time.monotonic(), float(waiting_for), int(sent), int(arrived))
        elif kind == STOP:
            _, stop_kind, worker, detail = header
            self._stop_locally(Stop(stop_kind, worker, detail))
        elif kind == BYE:
            self.mesh.said_goodbye(process)
            with self._changed:
                self.byes[process] = payload
                self._changed.notify_all()

    def on_lost(self, error: PeerLost) -> None:
        """A connection ended early: stop every worker here and tell the other processes."""
        if self.lost is None:
            self.lost = error
        self.stop(Stop("lost", None, str(error)))

    # ------------------------------------------------------------------ stopping

    def _stop_locally(self, reason: Stop) -> bool:
        with self._changed:
            first = self.stop_reason is None
            if first:
                self.stop_reason = reason
            self._changed.notify_all()
        for signal in self.signals:
            signal.wake()
        return first

    def stop(self, reason: Stop) -> None:
        """Stop every worker here, and relay the reason to every other process (first reason wins)."""
        if self._stop_locally(reason):
            data = frame([STOP, reason.kind, reason.worker, reason.detail])
            for process in range(self.processes):
                if process != self.process:
                    self.mesh.send(process, data)

    # ------------------------------------------------------------------ stall detection

    def local_waiting_for(self, now: float) -> float:
        """Seconds every local worker has been waiting, or ``-1.0`` if one is busy or has work pending."""
        latest = 0.0
        for local in range(self.workers):
            if self.finished[local]:
                continue
            since = self.idle_since[local]
            signal = self.signals[local]
            if since is None or signal.pending:
                return -1.0
            if not signal.parked and now - self.last_idle[local] > WAITING_GAP:
                return -1.0
            latest = max(latest, since)
        for communicator in self._communicators:
            if communicator.buffered:
                return -1.0
        return now - latest if latest else float("inf")

    def stalled_for(self) -> float:
        """Seconds every worker of every process has been waiting with no message in flight."""
        now = time.monotonic()
        waiting = self.local_waiting_for(now)
        if waiting < 0:
            return 0.0
        sent = sum(self.sent)
        arrived = sum(self.arrived.values())
        for process in range(self.processes):
            if process == self.process:
                continue
            beat = self.beats.get(process)
            if beat is None or now - beat[0] > 4 * HEARTBEAT_PERIOD or beat[1] < 0:
                return 0.0
            waiting = min(waiting, beat[1] + (now - beat[0]))
            sent += beat[2]
            arrived += beat[3]
        if sent != arrived or waiting == float("inf"):
            return 0.0
        return waiting

    # ------------------------------------------------------------------ heartbeats

    def start_heartbeats(self) -> None:
        """Send heartbeats and watch for silent peers on a background thread."""
        if self.processes == 1 or self._heart is not None:
            return
        self._heart = threading.Thread(target=self._beat, name="timely-heartbeat", daemon=True)
        self._heart.start()

    def stop_heartbeats(self) -> None:
        """End the heartbeat thread."""
        self._beating.set()
        if self._heart is not None and self._heart is not threading.current_thread():
            self._heart.join(timeout=2.0)

    def _beat(self) -> None:
        mesh = self.mesh
        while not self._beating.wait(HEARTBEAT_PERIOD):
            now = time.monotonic()
            waiting = self.local_waiting_for(now)
            if waiting == float("inf"):
                waiting = 1e9
            data = frame([BEAT, waiting, sum(self.sent), sum(self.arrived.values())])
            for process in range(self.processes):
                if process == self.process or process in self.byes:
                    continue
                mesh.send(process, data)
                heard = mesh.last_heard.get(process, now)
                if now - heard > SILENCE_LIMIT:
                    mesh.report_silence(process, now - heard)
            if self.on_tick is not None:
                self.on_tick()

    # ------------------------------------------------------------------ finishing

    def say_goodbye(self, payload: bytes = b"") -> None:
        """Tell every other process that this process's workers have finished."""
        data = frame([BYE], payload)
        for process in range(self.processes):
            if process != self.process:
                self.mesh.send(process, data)

    def wait_for_goodbyes(self) -> None:
        """Block until every other process said goodbye, or the computation stopped."""
        with self._changed:
            while len(self.byes) < self.processes - 1 and self.stop_reason is None:
                self._changed.wait(0.5)

    def pending_messages(self, local: int) -> list[str]:
        """Non-empty mailboxes of local worker ``local``, described."""
        with self._lock:
            boxes = [(key, len(box)) for key, box in self._mailboxes.items() if key[1] == local]
        worker = self.base + local
        return [
            f"{count} message(s) on channel {channel} not yet read by worker {worker}"
            for (channel, _), count in sorted(boxes)
            if count
        ]


class _RemotePusher:
    """Encodes for a worker of another process and buffers the frame until the sender flushes."""

    __slots__ = ("_communicator", "_process", "_receiver", "_channel", "_address")

    def __init__(self, communicator: ProcessCommunicator, process: int, receiver: int, channel: int, address: Address):
        self._communicator = communicator
        self._process = process
        self._receiver = receiver
        self._channel = channel
        self._address = address

    def push(self, time: Any, batch: list[Any]) -> None:
        """Encode ``(time, batch)`` (once per batch object) and buffer it for the receiver's process."""
        self._communicator.enqueue(self._process, self._receiver, self._channel, self._address, time, batch)


class ProcessCommunicator(FabricCommunicator):
    """The :class:`~runtime.communication.Communicator` of one worker of a :class:`ProcessFabric`."""

    fabric: ProcessFabric

    def __init__(self, fabric: ProcessFabric, local: int) -> None:
        """Communicate as local worker ``local`` of ``fabric``."""
        super().__init__(fabric, local, fabric.base + local)
        self._out: dict[int, list[list[Any]]] = {}
        self._out_bytes: dict[int, int] = {}
        self._last_batch: list[Any] | None = None
        self._last_time: Any = None
        self._last_encoded: tuple[int, bytes | memoryview] = (0, b"")
        self.buffered = False
        """Whether encoded messages wait in this worker's buffers."""

    def allocate(self, channel: int, address: Address) -> tuple[list[Pusher], MailboxPuller]:
        """One pusher per worker of the cluster for ``channel``, and this worker's puller."""
        fabric = self.fabric
        pushers: list[Pusher] = []
        for peer in range(fabric.peers):
            process = peer // fabric.workers
            if process == fabric.process:
                local = peer - fabric.base
                pushers.append(MailboxPusher(fabric.mailbox(channel, local), fabric.signals[local], address))
            else:
                pushers.append(_RemotePusher(self, process, peer, channel, address))
        return pushers, MailboxPuller(fabric.mailbox(channel, self._local))

    def enqueue(self, process: int, receiver: int, channel: int, address: Address, time: Any, batch: list[Any]) -> None:
        """Buffer a message for ``receiver`` on ``process``; a batch already buffered just gains a receiver."""
        self.fabric.sent[self._local] += 1
        out = self._out.get(process)
        if out is None:
            out = self._out[process] = []
            self._out_bytes[process] = 0
        if out:
            last = out[-1]
            if last[6] is batch and last[0] == channel and last[3] == time:
                last[2].append(receiver)
                return
        if batch is self._last_batch and time == self._last_time:
            path, payload = self._last_encoded
        else:
            try:
                path, payload = encode_batch(batch)
            except EncodingError as error:
                raise EncodingError(
                    f"{error} [record pushed by worker {self._index} on channel {channel} to the operator "
                    f"at address {address} on worker {receiver} (process {process})]",
                    error.type_name,
                ) from None
            self._last_batch = batch
            self._last_time = time
            self._last_encoded = (path, payload)
        if len(payload) > MAX_FRAME - 65536:
            self._check_frame(process, receiver, channel, address, time, path, payload)
        out.append([channel, address, [receiver], time, path, payload, batch])
        self.buffered = True
        size = self._out_bytes[process] + len(payload)
        self._out_bytes[process] = size
        if size > FLUSH_BYTES:
            self._send(process)

    def _check_frame(
        self, process: int, receiver: int, channel: int, address: Address, time: Any, path: int, payload: Any
    ) -> None:
        """Refuse a message too large for one frame, naming the limit, the receiver and the time."""
        size = len(frame_head([DATA, channel, address, [receiver], time, path], len(payload))) - 8 + len(payload)
        if size > MAX_FRAME:
            raise FrameTooLarge(
                f"a message of {size} bytes at time {time!r} for the operator at address {address} on worker "
                f"{receiver} (process {process}) exceeds the frame limit of {MAX_FRAME} bytes "
                f"(${MAX_FRAME_SETTING}); send it as smaller batches (records or rows), which travel as frames of "
                "their own"
            )

    def _send(self, process: int) -> None:
        out = self._out[process]
        if not out:
            return
        pieces: list[bytes | memoryview] = []  # heads and payloads joined once: a columnar payload is copied once here
        for channel, address, receivers, time_, path, payload, _ in out:
            pieces += (frame_head([DATA, channel, address, receivers, time_, path], len(payload)), payload)
        out.clear()
        self._out_bytes[process] = 0
        self.fabric.mesh.send(process, b"".join(pieces))

    def flush(self) -> None:
        """Send every buffered message."""
        if not self.buffered:
            return
        for process in self._out:
            self._send(process)
        self.buffered = False
        self._last_batch = None

    def finish(self) -> None:
        """This worker has returned: send what is buffered, and count it as waiting for ever."""
        try:
            if self.fabric.stop_reason is None:
                self.flush()
        finally:
            self.fabric.finished[self._local] = True


def decode_results(payload: bytes | memoryview) -> list[Any]:
    """The worker results carried by a ``bye`` frame."""
    results = decode_value(payload)
    if results.__class__ is not list:
        raise TypeError("a bye frame must carry a list of results")
    return results
