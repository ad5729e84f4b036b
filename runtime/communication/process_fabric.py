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
processes, or ``$PYTIMELY_SEND_WINDOW``, which the handshake checks is the same
in every process: :mod:`runtime.communication.agreement`).  A receiving worker returns credit
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
at all for :data:`SILENCE_LIMIT` seconds is reported as lost, unless it runs
on this host and is busy: a call that holds the GIL silences its heartbeat
thread, so a silent same-host peer whose pid is known (linked through shared
memory, or started by the same launcher) is first looked at
(:mod:`runtime.communication.peer_state`): one that is stopped, has ended or
is blocked is reported, naming how; one that works is waited for (logged
once).  Time during which this process could not run its
own threads (a late heartbeat: a call here held the GIL) does not count as its
peers' silence, since what they sent meanwhile waits unread.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, cast

from runtime.communication import WAITING_GAP, Stop, StopKind
from runtime.communication.agreement import DEFAULT_SEND_WINDOW as DEFAULT_SEND_WINDOW
from runtime.communication.agreement import MIN_SEND_WINDOW as MIN_SEND_WINDOW
from runtime.communication.agreement import SEND_WINDOW_VARIABLE as SEND_WINDOW_VARIABLE
from runtime.communication.agreement import send_window_from as send_window_from
from runtime.communication.fabric import WorkerSignal
from runtime.communication.frames import BEAT as BEAT
from runtime.communication.frames import BYE as BYE
from runtime.communication.frames import CREDIT as CREDIT
from runtime.communication.frames import DATA as DATA
from runtime.communication.frames import STOP as STOP
from runtime.communication.frames import (
    beat_problem,
    credit_problem,
    data_problem,
    malformed,
    stop_problem,
)
from runtime.communication.frames import decode_results as decode_results
from runtime.communication.peer_state import LOST_ADVICE, WATCH_AFTER, Identity, SilenceJudge, gone, look
from runtime.communication.process_channels import (
    RemoteMessage,
    empty_crediting,
)
from runtime.communication.process_communicator import ProcessCommunicator as ProcessCommunicator
from runtime.communication.shared_decode import SharedPayload
from runtime.communication.shm_transport import OFFER, ShmTransport, may_spin, usable_cores
from runtime.communication.tcp import Mesh, PeerLost
from runtime.communication.wire import (
    frame,
)
from scopes.channels import Message

log = logging.getLogger("runtime.communication.process_fabric")

HEARTBEAT_PERIOD = 0.25
"""Seconds between two heartbeats from each process to every other."""
SILENCE_LIMIT = 6.0
"""Seconds without any frame after which a process is reported as lost (unless it is on this host and busy)."""
END_GRACE = 1.0
"""Seconds a same-host process whose connection ended gets to be seen ended in ``/proc`` (a process closes its
sockets as it exits, before the kernel marks it ended) before its report says it was still running."""
SELF_LOST_RECENT = 5.0
"""Seconds after this process could not run its threads for the silence limit or longer during which a lost
connection is reported as what it most likely is: the other processes counted this process as lost."""
DEAF_GAP = 1.0
"""Seconds a heartbeat may come late before this process counts as having been unable to run its threads
meanwhile (a call held the GIL, or the process was suspended): that time is not its peers' silence."""

PIGGYBACK_SHARE = 64
"""Credit travels with other frames once a worker owes ``window // PIGGYBACK_SHARE`` bytes; a sender may send
over the window while at most that much is in flight.  Below it, a worker that answers every frame (progress, each
step) would add a credit frame to each: one more frame to encode, split and apply per step, for a few bytes."""


TELL_GRACE = 1.0
"""Seconds a stopped process waits for its last ``stop`` frames to leave before it closes its connections
(:meth:`ProcessFabric.tell_before_closing`; a send may wait on a peer that reads nothing)."""

FINISH_POLL = 0.02
"""Seconds :meth:`ProcessFabric.wait_for_goodbyes` waits on the rings' doorbells before it looks again; a goodbye
or a stop that arrives over TCP meanwhile ends the wait at once (``ShmTransport.interrupt``)."""


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
        self.identities: dict[int, Identity] = {}
        """Pid and start time of same-host processes from the launcher that started them (the links add the kernel's):
        a silent one is looked at before it is reported lost (:mod:`runtime.communication.peer_state`)."""
        self._judge: SilenceJudge | None = None
        self._waited: set[int] = set()  # silent same-host processes found busy (each logged once per silence)
        self._deaf: deque[tuple[float, float]] = deque(maxlen=64)
        """The latest spans when this process could not listen: (when it could again, for how many seconds)."""
        self._heart: threading.Thread | None = None
        self._last_beat = 0.0  # when the heartbeat thread last woke (time.monotonic)
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
        malformed, :mod:`runtime.communication.frames`): its kind, its length, and the type and range of each
        field that is acted on here.
        """
        kind = header[0]
        why: str | None = None
        if kind.__class__ is not int:
            why = "its kind is not an integer"
        elif kind == DATA:
            why = data_problem(header, self.base, self.workers)
            if why is None:
                self._deliver(process, header, payload)
        elif kind == CREDIT:
            why = credit_problem(header)
            if why is None:
                self.credit(process, header[1])
        elif kind == BEAT:
            why = beat_problem(header)
            if why is None:
                now = time.monotonic()
                self.beats[process] = (now, header[1], header[2], header[3])
                self.stuck_beats[process] = (now, header[4])
        elif kind == STOP:
            why = stop_problem(header, self.peers)
            if why is None:
                reason = Stop(cast(StopKind, header[1]), header[2], header[3])
                accused = f"lost {self._describe_self()}: "
                itself = reason.kind == "lost" and reason.detail.startswith(accused)
                self._stop_locally(reason, self._lost_itself(reason.detail, True) if itself else None)
        elif kind == OFFER:
            if self.shm is not None:
                self.shm.offer(process, header)
        elif kind == BYE:
            why = None if len(header) == 1 else "a goodbye frame has 1 field"
            if why is None:
                self._said_goodbye(process, payload)
        else:
            why = "its kind is unknown"
        if why is not None:
            raise malformed(process, self.mesh.endpoints[process], header, why)

    def _deliver(self, process: int, header: list[Any], payload: bytes | memoryview) -> None:
        """Give a checked ``data`` frame from ``process`` to each of its receivers here."""
        _, channel, address, receivers, time_, path = header
        base = self.base
        self.arrived[process] = self.arrived.get(process, 0) + len(receivers)
        last = len(receivers) - 1
        size = len(payload)
        if last:  # decoded once, by the first receiver that pulls it
            payload = SharedPayload(path, payload, len(receivers))  # type: ignore[assignment]
        boxes = self._remote_boxes
        for i, receiver in enumerate(receivers):
            local = receiver - base
            owed = size if i == last else 0  # the frame's bytes are credited once, by its last receiver
            box = boxes.get((channel, local))
            if box is None:
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

    def _said_goodbye(self, process: int, payload: bytes | memoryview) -> None:
        """``process``'s workers have all finished; ``payload`` carries their results."""
        self.mesh.said_goodbye(process)
        with self._changed:
            self.byes[process] = payload
            self._changed.notify_all()
        if self.links is not None:  # wait_for_goodbyes may be waiting on the rings' doorbells
            self.links.interrupt()

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
        then closed its connection is not the process that was lost.  Right after this process could not run for
        the silence limit or longer (suspended, or a call held the GIL), the loss is reported as this process's
        own: the others counted it as lost, and ended their connections to it."""
        itself = self._lost_itself(str(error), False)
        self.stop(Stop("lost", None, str(error)), error if itself is None else itself)

    def _describe_self(self) -> str:
        """``process 2 (host:port)``: this process, as the others name it when they find it lost."""
        return f"process {self.process} ({self.mesh.endpoints[self.process]})"

    def _unable_to_run(self, now: float) -> float:
        """The longest time this process could not run its threads (between two wakes of its heartbeat thread),
        lately: until now, or in a span that ended at most :data:`SELF_LOST_RECENT` seconds ago (0 before
        heartbeats start, or once they stopped)."""
        if self._heart is None or self._beating.is_set():
            return 0.0
        longest = now - self._last_beat  # the others heard this process last no sooner than its last beat
        for at, late in list(self._deaf):
            if now - at <= SELF_LOST_RECENT:
                longest = max(longest, late + HEARTBEAT_PERIOD)
        return longest

    def _lost_itself(self, detail: str, accused: bool) -> PeerLost | None:
        """The error saying that the other processes counted this process as lost, if they did (``accused``: a
        ``stop`` frame says so) or most likely did (it could not run for the silence limit or longer, lately);
        ``detail``: what this process learnt."""
        unable = self._unable_to_run(time.monotonic())
        if not accused and unable < SILENCE_LIMIT:
            return None
        me = self._describe_self()
        seen = detail.removesuffix(f". {LOST_ADVICE}").removesuffix("; the other processes stop")
        if unable >= SILENCE_LIMIT:
            what = (
                f"{me[:-1]}, pid {os.getpid()}) could not run its threads for {unable:.1f} s (it was suspended: "
                f"SIGSTOP, Ctrl-Z, a debugger; or one call held the GIL), longer than the silence limit "
                f"({SILENCE_LIMIT:.0f} s) after which the other processes count a process as lost and stop"
            )
            if accused:
                seen = seen.removeprefix(f"lost {me}: ")
                what += f"; they did (they found: {seen})"
            else:
                what += f"; then it found: {seen}"
        else:
            what = f"the other processes counted {me[:-1]}, pid {os.getpid()}) as lost and stopped: "
            what += seen.removeprefix(f"lost {me}: ")
        advice = (
            f"Resume a paused process within {SILENCE_LIMIT:.0f} s, and split a call that holds the GIL that long "
            "(or run it where it releases the GIL); then start every process of the cluster again (a job with a "
            "CheckpointStore resumes from its last complete epoch)"
        )
        return PeerLost(f"{what}. {advice}", self.process, str(self.mesh.endpoints[self.process]))

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
        identities = dict(self.identities)
        if self.shm is not None:
            identities.update(self.shm.identities)  # the kernel's word
        if identities:
            self._judge = SilenceJudge(identities)
            self.mesh.how_ended = self._how_ended
        self._last_beat = time.monotonic()
        self._heart = threading.Thread(target=self._beat, name="timely-heartbeat", daemon=True)
        self._heart.start()

    def _how_ended(self, process: int) -> str | None:
        """How same-host ``process``, whose connection ended, has ended (a clause naming its pid), if known.

        Looked at only while nothing else has stopped this process (then the loss is the first news, and the
        report names it); a process still running after :data:`END_GRACE` is said to be.
        """
        judge = self._judge
        identity = judge.identities.get(process) if judge is not None else None
        if identity is None or self.stop_reason is not None or self._unable_to_run(time.monotonic()) >= SILENCE_LIMIT:
            return None  # (a process that could not run that long was itself counted lost: see on_lost)
        deadline = time.monotonic() + END_GRACE
        while True:
            how = gone(identity, look(identity.pid))
            if how is not None:
                return how
            if time.monotonic() >= deadline:
                return f"its process (pid {identity.pid}) was still running {END_GRACE:.0f} s later"
            time.sleep(0.01)

    def stop_heartbeats(self) -> None:
        """End the heartbeat thread."""
        self._beating.set()
        if self._heart is not None and self._heart is not threading.current_thread():
            self._heart.join(timeout=2.0)

    def _silent_for(self, heard: float, now: float) -> float:
        """Seconds a process last heard at ``heard`` has been silent, less the time this process could not listen."""
        deaf = sum(min(seconds, at - heard) for at, seconds in self._deaf if at > heard)
        return now - heard - deaf

    def _check_silence(self, now: float) -> None:
        """Report every process silent past :data:`SILENCE_LIMIT`, unless it is on this host and busy."""
        mesh = self.mesh
        judge = self._judge
        for process in range(self.processes):
            if process in self._silenced or process == self.process or process in self.byes:
                continue
            heard = mesh.last_heard.get(process, now)
            silent = self._silent_for(heard, now)
            if judge is not None:
                if silent <= WATCH_AFTER:
                    judge.heard(process)
                    self._waited.discard(process)
                    continue
                judge.watch(process, heard, now)
            if silent <= SILENCE_LIMIT:
                continue
            lost, how = (True, None) if judge is None else judge.lost(process, now)
            if not lost:
                if process not in self._waited:
                    self._waited.add(process)
                    assert judge is not None
                    log.warning(
                        "process %d: process %d (%s, pid %d) has sent nothing for %.1f s but is running (holding "
                        "the GIL?); waiting for it",
                        self.process,
                        process,
                        mesh.endpoints[process],
                        judge.identities[process].pid,
                        silent,
                    )
                continue
            # reported on a thread of its own: stopping tells the other processes, and a send to
            # one of them may wait, while this thread must go on watching them all
            self._silenced.add(process)
            threading.Thread(
                target=mesh.report_silence, args=(process, silent, how), name="timely-silence", daemon=True
            ).start()

    def _beat(self) -> None:
        mesh = self.mesh
        previous = time.monotonic()
        while not self._beating.wait(HEARTBEAT_PERIOD):
            now = time.monotonic()
            late = now - previous - HEARTBEAT_PERIOD
            if late > DEAF_GAP:  # this process could not run its threads: what arrived meanwhile waits unread
                self._deaf.append((now, late))
            self._last_beat = now
            waiting = self.local_waiting_for(now)
            if waiting == float("inf"):
                waiting = 1e9
            data = frame([BEAT, waiting, sum(self.sent), sum(self.arrived.values()), self.local_stuck()])
            with self._credit_lock:
                late_credit, self._late_credit = self._late_credit, [0] * self.processes
            self._check_silence(now)  # silence first: nothing here waits on a send
            for process in range(self.processes):
                if process == self.process:
                    continue
                # A process that said goodbye still watches this one for silence until this one says goodbye
                # too (its main may run on long after the dataflows completed), so it is beaten as the others;
                # once it has gone, a failed send to it is no fault (the mesh knows it finished).
                # A beat is skipped while a data send to that process is under way (its bytes are heard
                # there) or its socket is full; the credit it would carry waits for the next beat
                owed = late_credit[process]
                if not mesh.offer(process, frame([CREDIT, owed]) + data if owed else data):
                    with self._credit_lock:
                        self._late_credit[process] += owed
            for local, communicator in enumerate(self._communicators):  # leftover credit: once per beat
                if communicator.owes_credit:
                    self.credit_due[local] = True
                    self.signals[local].wake()
            if self.on_tick is not None:
                self.on_tick()
            previous = time.monotonic()

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
