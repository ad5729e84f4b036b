"""The process communicator: workers in several processes exchange messages over the TCP mesh.

One :class:`ProcessFabric` serves the ``W`` workers of one process of a
cluster of ``P`` processes (worker ``process * W + local``).  Messages between
workers of the same process go through memory, as in :mod:`runtime.communication.fabric`.
Messages to a worker of another process are encoded once (:mod:`runtime.communication.wire`)
when pushed, buffered per destination process, and sent when the worker
flushes (the end of each step, before parking, or when the buffer grows
large).  A progress batch pushed to several workers of one process, the same
list object each time, travels as one frame naming every receiver.

Every frame between two processes uses their one connection, so messages
stay in order per sender.

Flow control: the data that one process has sent to another and that the
receiving workers have not pulled yet is bounded by the send window
(:data:`DEFAULT_SEND_WINDOW` bytes of encoded payload for each ordered pair of
processes, or ``$PYTIMELY_SEND_WINDOW``).  A receiving worker returns credit
(a ``credit`` frame naming the bytes it pulled) when it has pulled a quarter
of the window, or with any frame it sends to that process once it owes a
sixty-fourth of the window (:data:`PIGGYBACK_SHARE`); what it owes below that
goes back at the next heartbeat.  A message is sent whatever its size when at
most that sixty-fourth is in flight (so credit too small to travel with other
frames never holds a sender back).  A sender keeps what does not fit in its
buffer and reports itself :meth:`ProcessCommunicator.backlogged`; the worker
then keeps stepping its dataflows (so that it keeps pulling what others send
it, and returning their credit) until the buffer has gone.  Receiving is
never held back by sending: each connection's reader thread decodes whatever
arrives, so two processes that wait for each other's room still pull each
other's data.

Frames are ``data``, ``credit``, ``beat`` (a heartbeat every
:data:`HEARTBEAT_PERIOD` seconds, sent by :meth:`~runtime.communication.tcp.Mesh.offer`, so never
waiting on a data send: whether every worker of the sender has been
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

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, cast, get_args

from runtime.codec import MAX_SIZE, describe, shown
from runtime.communication import WAITING_GAP, Address, Stop, StopKind
from runtime.communication.byte_sizes import byte_setting
from runtime.communication.fabric import FabricCommunicator, MailboxPusher, WorkerSignal
from runtime.communication.process_channels import (
    CreditingPuller,
    Outgoing,
    RemoteMessage,
    RemotePusher,
    empty_crediting,
)
from runtime.communication.shared_decode import SharedPayload
from runtime.communication.shm_transport import OFFER, RingWatch, ShmTransport, may_spin, usable_cores
from runtime.communication.tcp import Mesh, PeerLost
from runtime.communication.wire import (
    BATCH_COLUMNS,
    BATCH_FAST,
    BATCH_GENERAL,
    MAX_FRAME,
    MAX_FRAME_SETTING,
    EncodingError,
    FrameTooLarge,
    WireError,
    decode_value,
    encode_batch,
    encode_value,
    frame,
    frame_head,
    frame_size,
    payload_pieces,
    prefixed_head,
)
from scopes.batches import Batch
from scopes.channels import Message, Pusher

HEARTBEAT_PERIOD = 0.25
"""Seconds between two heartbeats from each process to every other."""
SILENCE_LIMIT = 6.0
"""Seconds without any frame after which a process is reported as lost."""
HEAD_CACHE = 256
"""Encoded headers of untimed (progress) frames one worker keeps: the same few go out every step."""
FLUSH_BYTES = 1 << 18
"""Buffered bytes for one destination process that trigger an early send."""

DEFAULT_SEND_WINDOW = 8 << 20
"""Bytes of encoded data one process may have sent to another that its workers have not pulled yet."""
SEND_WINDOW_VARIABLE = "PYTIMELY_SEND_WINDOW"
"""The environment variable that sets the send window in bytes (e.g. ``65536``, ``64K``, ``8M``)."""
MIN_SEND_WINDOW = 1 << 16
"""The smallest send window accepted."""
PIGGYBACK_SHARE = 64
"""Credit travels with other frames once a worker owes ``window // PIGGYBACK_SHARE`` bytes; a sender may send
over the window while at most that much is in flight.  Below it, a worker that answers every frame (progress, each
step) would add a credit frame to each: one more frame to encode, split and apply per step, for a few bytes."""

DATA, BEAT, STOP, BYE, CREDIT = 0, 1, 2, 3, 4
_STOP_KINDS = frozenset(get_args(StopKind))

RECORDS_MAX = MAX_SIZE
"""The most bytes a batch of records (msgpack) may take between processes: what the receiver's decoder accepts."""
_RECORD_PATHS = frozenset({BATCH_FAST, BATCH_COLUMNS, BATCH_GENERAL})
_CHECK_FRAME_FROM = min(MAX_FRAME - 65536, RECORDS_MAX)
"""A payload longer than this is measured against the limits (:meth:`ProcessCommunicator._check_frame`)."""

TELL_GRACE = 1.0
"""Seconds a stopped process waits for its last ``stop`` frames to leave before it closes its connections
(:meth:`ProcessFabric.tell_before_closing`; a send may wait on a peer that reads nothing)."""

FINISH_POLL = 0.02
"""Seconds :meth:`ProcessFabric.wait_for_goodbyes` waits on the rings' doorbells before it looks again; a goodbye
or a stop that arrives over TCP meanwhile ends the wait at once (``ShmTransport.interrupt``)."""


def send_window_from(text: str | None) -> int:
    """The send window in bytes that ``text`` (``$PYTIMELY_SEND_WINDOW``) asks for; the default if unset."""
    return byte_setting(SEND_WINDOW_VARIABLE, text, DEFAULT_SEND_WINDOW, MIN_SEND_WINDOW, None, "65536, 64K or 8M")


class ProcessFabric:
    """Mailboxes, signals and the connection to other processes for the workers of one process."""

    def __init__(self, process: int, processes: int, workers: int, mesh: Mesh, send_window: int | None = None) -> None:
        """Serve workers ``process * workers .. (process + 1) * workers - 1`` over ``mesh``.

        ``send_window`` bounds the bytes sent to each other process and not yet
        pulled there (default: ``$PYTIMELY_SEND_WINDOW``, else :data:`DEFAULT_SEND_WINDOW`).
        """
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
        self.stuck: list[bool] = [False] * workers
        """Whether each local worker reports that its ``main`` can only wait."""
        self.sent = [0] * workers
        """Messages each local worker sent to workers of other processes."""
        self.arrived: dict[int, int] = {}
        """Messages that arrived from each other process (each counted by that connection's reader)."""
        self.beats: dict[int, tuple[float, float, int, int]] = {}
        """For each other process: (received at, waiting for, sent, arrived) from its last heartbeat."""
        self.stuck_beats: dict[int, tuple[float, bool]] = {}
        """For each other process: (received at, whether all its workers can only wait) from its last heartbeat."""
        self.byes: dict[int, bytes | memoryview] = {}
        """The payload of each process's ``bye`` frame."""
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._mailboxes: dict[tuple[int, int], deque[Message]] = {}
        self._remote_boxes: dict[tuple[int, int], deque[RemoteMessage]] = {}
        self._closed: set[tuple[int, int]] = set()
        """``(channel, local worker)`` pairs of completed dataflows: what arrives for them is credited at once."""
        if send_window is None:
            send_window = send_window_from(os.environ.get(SEND_WINDOW_VARIABLE))
        self.send_window = send_window
        """Bytes this process may have in flight to each other process (see the module docstring)."""
        self.slack = send_window // PIGGYBACK_SHARE
        """Bytes in flight below which anything may be sent, and credit owed below which none travels with data."""
        self.unacknowledged = [0] * processes
        """Bytes sent to each process that it has not returned as credit yet."""
        self.most_unacknowledged = 0
        """The most bytes this process ever had unacknowledged to one process (below window + largest payload)."""
        self.largest_payload = 0
        """The largest payload this process sent to another."""
        self._credit_lock = threading.Lock()
        self._late_credit = [0] * processes
        """Bytes that arrived for workers that had returned, to credit with the next heartbeat."""
        self.credit_due = [False] * workers
        """Set by the heartbeat for each local worker that owes credit: return it all at the next flush."""
        self.waiting_for_room = [False] * workers
        """Whether each local worker waits for credit (it is woken when credit arrives)."""
        self._communicators: list[ProcessCommunicator] = []
        self._beating = threading.Event()
        self._silenced: set[int] = set()
        """Processes the heartbeat thread found silent (each reported once)."""
        self._heart: threading.Thread | None = None
        self.lost: PeerLost | None = None
        """The connection whose loss stopped this process, if that was the first reason it stopped."""
        self.on_tick: Callable[[], None] | None = None
        """Called by the heartbeat thread at every beat (a child checks on its parent there)."""
        self.joined = False
        """True once this process has joined the cluster (the mesh formed and the rings linked) and its
        workers may start: until then no worker runs to notice a stop, so a stop must end the wait itself."""
        self.shm: ShmTransport | None = None
        """The shared-memory links to same-host processes, set before the mesh connects."""
        self.links: ShmTransport | None = None
        """:attr:`shm` once it links at least one process (else ``None``: every frame goes over TCP)."""
        self.spin = False
        """Whether workers watch the rings before parking (:class:`RingWatch`; set by :meth:`use_links`)."""

    def use_links(self) -> None:
        """After :meth:`ShmTransport.establish`: park workers on eventfds that also watch the rings' doorbells."""
        shm = self.shm
        if shm is None or not shm.links:
            return
        for signal in self.signals:
            signal.event = shm.gate()  # type: ignore[assignment]
        self.links = shm
        self.spin = may_spin(self.workers, len(shm.same_host) + 1, usable_cores())

    def send_pieces(self, process: int, pieces: list[bytes | memoryview]) -> None:
        """Send frames to ``process``: through its shared-memory ring if linked, else over TCP."""
        links = self.links
        if links is not None and process in links.links:
            links.send(process, pieces)
        else:
            self.mesh.send_pieces(process, pieces)

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
        return self._box(self._mailboxes, (channel, local))

    def remote_mailbox(self, channel: int, local: int) -> deque[RemoteMessage]:
        """The messages from other processes to local worker ``local`` on ``channel``."""
        return self._box(self._remote_boxes, (channel, local))

    def _box(self, boxes: dict[tuple[int, int], deque[Any]], key: tuple[int, int]) -> deque[Any]:
        """``boxes[key]``, made under the lock the first time (readers and workers may ask at once)."""
        box = boxes.get(key)
        if box is None:
            with self._lock:
                box = boxes.setdefault(key, deque())
        return box

    # ------------------------------------------------------------------ flow control

    def reserve(self, process: int, size: int) -> bool:
        """Take ``size`` bytes of the window to ``process`` if they fit, or if at most :attr:`slack` is in flight.

        So the bytes in flight stay at most the window, or the slack and one message larger than it.
        """
        with self._credit_lock:
            used = self.unacknowledged[process]
            if used > self.slack and used + size > self.send_window:
                return False
            used += size
            self.unacknowledged[process] = used
            if used > self.most_unacknowledged:
                self.most_unacknowledged = used
            if size > self.largest_payload:
                self.largest_payload = size
            return True

    def charge(self, process: int, size: int) -> None:
        """Count ``size`` bytes sent to ``process`` whether or not they fit the window."""
        with self._credit_lock:
            self.unacknowledged[process] += size

    def credit(self, process: int, size: int) -> None:
        """``process`` pulled ``size`` bytes: give them back to the window, wake local workers waiting for room."""
        with self._credit_lock:
            self.unacknowledged[process] -= size
        for local, waiting in enumerate(self.waiting_for_room):
            if waiting:
                self.signals[local].wake()

    # ------------------------------------------------------------------ receiving

    def on_frame(self, process: int, header: list[Any], payload: bytes | memoryview) -> None:
        """Handle one frame from ``process`` (on its reader thread).

        The header is checked before anything is done with it (:class:`WireError` naming the process if it is
        malformed): its kind, its length, and the type and range of each field that is acted on here.
        """
        kind = header[0]
        if kind.__class__ is not int:
            raise self._malformed(process, header, "its kind is not an integer")
        if kind == DATA:
            if len(header) != 6:
                raise self._malformed(process, header, "a data frame has 6 fields")
            _, channel, address, receivers, time_, path = header
            base = self.base
            if (
                channel.__class__ is not int
                or address.__class__ is not tuple
                or not all(step.__class__ is int for step in address)
                or path.__class__ is not int
                or receivers.__class__ is not list
                or not receivers
            ):
                raise self._malformed(process, header, "a data frame needs a channel, an address, receivers and a path")
            # every receiver before any is given the frame (a negative index would reach the last worker's mailbox)
            if not all(receiver.__class__ is int and 0 <= receiver - base < self.workers for receiver in receivers):
                raise self._malformed(
                    process,
                    header,
                    f"a data frame for a worker that is not one of this process's workers ({base} to "
                    f"{base + self.workers - 1})",
                )
            self.arrived[process] = self.arrived.get(process, 0) + len(receivers)
            last = len(receivers) - 1
            size = len(payload)
            if last:  # decoded once, by the first receiver that pulls it
                payload = SharedPayload(path, payload, len(receivers))  # type: ignore[assignment]
            for i, receiver in enumerate(receivers):
                local = receiver - base
                owed = size if i == last else 0  # the frame's bytes are credited once, by its last receiver
                box = self.remote_mailbox(channel, local)
                with self._lock:  # against finish_receiving and close_channels: nothing pulls these any more
                    finished = self.finished[local] or (channel, local) in self._closed
                    if not finished:
                        box.append((time_, path, payload, process, owed))
                if finished:
                    if owed:  # the reader never sends (it must never block): the heartbeat returns it
                        with self._credit_lock:
                            self._late_credit[process] += owed
                    continue
                self.signals[local].activate(address)
        elif kind == CREDIT:
            if len(header) != 2 or header[1].__class__ is not int or header[1] < 0:
                raise self._malformed(process, header, "a credit frame carries a count of bytes")
            self.credit(process, header[1])
        elif kind == BEAT:
            if len(header) != 5:
                raise self._malformed(process, header, "a heartbeat has 5 fields")
            _, waiting_for, sent, arrived, stuck = header
            if (
                waiting_for.__class__ is not float
                or waiting_for != waiting_for  # NaN
                or sent.__class__ is not int
                or arrived.__class__ is not int
                or sent < 0
                or arrived < 0
                or stuck.__class__ is not bool
            ):
                raise self._malformed(process, header, "a heartbeat carries seconds, two counts and a flag")
            now = time.monotonic()
            self.beats[process] = (now, waiting_for, sent, arrived)
            self.stuck_beats[process] = (now, stuck)
        elif kind == STOP:
            if len(header) != 4:
                raise self._malformed(process, header, "a stop frame has 4 fields")
            _, stop_kind, worker, detail = header
            if (
                stop_kind.__class__ is not str
                or stop_kind not in _STOP_KINDS
                or detail.__class__ is not str
                or not (worker is None or (worker.__class__ is int and 0 <= worker < self.peers))
            ):
                raise self._malformed(
                    process, header, f"a stop frame carries a reason, a worker (of {self.peers}) or None, and text"
                )
            self._stop_locally(Stop(cast(StopKind, stop_kind), worker, detail))
        elif kind == OFFER:
            if self.shm is not None:
                self.shm.offer(process, header)
        elif kind == BYE:
            if len(header) != 1:
                raise self._malformed(process, header, "a goodbye frame has 1 field")
            self.mesh.said_goodbye(process)
            with self._changed:
                self.byes[process] = payload
                self._changed.notify_all()
            if self.links is not None:  # wait_for_goodbyes may be waiting on the rings' doorbells
                self.links.interrupt()
        else:
            raise self._malformed(process, header, "its kind is unknown")

    def _malformed(self, process: int, header: list[Any], why: str) -> WireError:
        """The error for a frame from ``process`` whose ``header`` is not one this protocol sends."""
        return WireError(
            f"process {process} ({self.mesh.endpoints[process]}) sent a malformed frame (header {shown(header)}): {why}"
        )

    def close_channels(self, local: int, channels: list[int]) -> None:
        """Local worker ``local`` will never pull ``channels`` again (their dataflow completed): credit them."""
        with self._lock:
            boxes = []
            for channel in channels:
                key = (channel, local)
                self._closed.add(key)
                box = self._remote_boxes.get(key)
                if box:
                    boxes.append(box)
            owed = empty_crediting(boxes)
        self._send_credit(owed)

    def finish_receiving(self, local: int) -> None:
        """Local worker ``local`` has returned: credit what waits for it now, and whatever arrives later."""
        with self._lock:
            self.finished[local] = True
            owed = empty_crediting([box for key, box in self._remote_boxes.items() if key[1] == local])
        self._send_credit(owed)

    def _send_credit(self, owed: dict[int, int]) -> None:
        """Give each process back the bytes of its messages that will never be pulled."""
        for process, size in owed.items():
            if size:
                self.mesh.send(process, frame([CREDIT, size]))

    def on_lost(self, error: PeerLost) -> None:
        """A connection ended early: stop every worker here and tell the other processes.

        :attr:`lost` is ``error`` only if it is the first reason to stop: a peer that relayed another's loss and
        then closed its connection is not the process that was lost."""
        self.stop(Stop("lost", None, str(error)), error)

    # ------------------------------------------------------------------ stopping

    def _stop_locally(self, reason: Stop, lost: PeerLost | None = None) -> bool:
        with self._changed:
            first = self.stop_reason is None
            if first:
                self.stop_reason = reason
                self.lost = lost
            self._changed.notify_all()
        for signal in self.signals:
            signal.wake()
        links = self.links
        if links is not None:  # say_goodbye or wait_for_goodbyes may be waiting on the rings' doorbells
            links.interrupt()
        return first

    def stop(self, reason: Stop, lost: PeerLost | None = None) -> None:
        """Stop every worker here, and relay the reason to every other process (first reason wins)."""
        if self._stop_locally(reason, lost):
            data = frame([STOP, reason.kind, reason.worker, reason.detail])
            for process in range(self.processes):
                if process != self.process:
                    self.mesh.send(process, data)

    def tell_before_closing(self) -> None:
        """Once stopped, before this process closes its connections: send every other process the reason.

        A process stopped by another's ``stop`` frame relays nothing when it stops (the first reason is relayed
        once, by the process that found it), and a relay may still be on its way when the workers have ended.
        Without this, a peer could see this process's connection close before any frame saying why, and name this
        healthy process as the lost one.  A ``stop`` frame read first makes the close a consequence.
        """
        reason = self.stop_reason
        if reason is None or self.processes == 1:
            return
        data = frame([STOP, reason.kind, reason.worker, reason.detail])

        def tell() -> None:
            for process in range(self.processes):
                if process != self.process:
                    self.mesh.send(process, data)

        teller = threading.Thread(target=tell, name="timely-tell-stop", daemon=True)
        teller.start()
        teller.join(TELL_GRACE)  # then closing the connections ends a send that still waits

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
        if self.links is not None and self.links.pending:
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

    def local_stuck(self) -> bool:
        """Whether every local worker that has not finished reports that its ``main`` can only wait."""
        return all(stuck or finished for stuck, finished in zip(self.stuck, self.finished, strict=True))

    def all_stuck(self) -> bool:
        """Whether every worker of every process reports that its ``main`` can only wait (fresh heartbeats)."""
        if not self.local_stuck():
            return False
        now = time.monotonic()
        for process in range(self.processes):
            if process == self.process or process in self.byes:
                continue
            beat = self.stuck_beats.get(process)
            if beat is None or not beat[1] or now - beat[0] > 4 * HEARTBEAT_PERIOD:
                return False
        return True

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
            data = frame([BEAT, waiting, sum(self.sent), sum(self.arrived.values()), self.local_stuck()])
            with self._credit_lock:
                late, self._late_credit = self._late_credit, [0] * self.processes
            for process in range(self.processes):  # silence first: nothing here waits on a send
                heard = mesh.last_heard.get(process, now)
                if process in self._silenced or process == self.process or process in self.byes:
                    continue
                if now - heard > SILENCE_LIMIT:
                    # reported on a thread of its own: stopping tells the other processes, and a send to
                    # one of them may wait, while this thread must go on watching them all
                    self._silenced.add(process)
                    threading.Thread(
                        target=mesh.report_silence, args=(process, now - heard), name="timely-silence", daemon=True
                    ).start()
            for process in range(self.processes):
                if process == self.process:
                    continue
                # A process that said goodbye still watches this one for silence until this one says goodbye
                # too (its main may run on long after the dataflows completed), so it is beaten as the others;
                # once it has gone, a failed send to it is no fault (the mesh knows it finished).
                # A beat is skipped while a data send to that process is under way (its bytes are heard
                # there) or its socket is full; the credit it would carry waits for the next beat
                if not mesh.offer(process, frame([CREDIT, late[process]]) + data if late[process] else data):
                    with self._credit_lock:
                        self._late_credit[process] += late[process]
            for local, communicator in enumerate(self._communicators):  # leftover credit: once per beat
                if communicator.owes_credit:
                    self.credit_due[local] = True
                    self.signals[local].wake()
            if self.on_tick is not None:
                self.on_tick()

    # ------------------------------------------------------------------ finishing

    def say_goodbye(self, payload: bytes = b"") -> None:
        """Tell every other process that this process's workers have finished (once their data left)."""
        links = self.links
        while links is not None and links.pending and self.stop_reason is None:
            links.wait(0.05)  # the rings' readers make room; meanwhile this process reads its own rings
        data = frame([BYE], payload)
        for process in range(self.processes):
            if process != self.process:
                self.mesh.send(process, data)

    def wait_for_goodbyes(self) -> None:
        """Block until every other process said goodbye, or the computation stopped."""
        while True:
            with self._changed:
                if len(self.byes) >= self.processes - 1 or self.stop_reason is not None:
                    return
                if self.links is None:
                    self._changed.wait(0.5)
                    continue
            self.links.wait(FINISH_POLL)  # no worker reads the rings any more: what still arrives is credited here

    def pending_messages(self, local: int) -> list[str]:
        """Non-empty mailboxes of local worker ``local``, described."""
        with self._lock:
            counts: dict[tuple[int, int], int] = {}
            for mailboxes in (self._mailboxes, self._remote_boxes):
                for key, box in mailboxes.items():
                    if key[1] == local:
                        counts[key] = counts.get(key, 0) + len(box)
            boxes = list(counts.items())
        worker = self.base + local
        return [
            f"{count} message(s) on channel {channel} not yet read by worker {worker}"
            for (channel, _), count in sorted(boxes)
            if count
        ]


class ProcessCommunicator(FabricCommunicator):
    """The :class:`~runtime.communication.Communicator` of one worker of a :class:`ProcessFabric`."""

    fabric: ProcessFabric

    def __init__(self, fabric: ProcessFabric, local: int) -> None:
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
            except EncodingError as error:
                raise EncodingError(
                    f"{error} [record pushed by worker {self._index} on channel {channel} to the operator "
                    f"at address {address} on worker {receiver} (process {process})]",
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


def decode_results(payload: bytes | memoryview, process: int) -> list[Any]:
    """The worker results in the ``bye`` frame of ``process``; :class:`WireError` naming it if there are none."""
    try:
        results = decode_value(payload)
    except WireError as error:
        raise WireError(f"the results process {process} sent with its goodbye do not decode: {error}") from None
    if results.__class__ is not list:
        raise WireError(
            f"process {process} sent {describe(results)} with its goodbye, not the list of its workers' results"
        )
    return results
