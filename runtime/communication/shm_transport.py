"""Same-host links: the processes of a cluster on one host send their data through shared-memory rings.

Which pairs of processes use shared memory is decided by the hostfile: two
processes whose addresses name the same host exchange data frames through a
pair of :mod:`runtime.communication.shm_ring` rings (one per direction); any
other pair keeps the TCP connection.  ``$PYTIMELY_TRANSPORT=tcp`` (in any
process of a pair) keeps TCP for that pair too.

The TCP connection stays for everything else: the handshake that proves the
cluster's token, heartbeats, stops, goodbyes and credit returned by the
heartbeat, so that a dead or stopped peer is named whatever its ring holds.

Setting up (:meth:`ShmTransport.establish`, after the TCP handshake): every
process sends each same-host peer, over the authenticated connection, an
``offer`` frame: whether it takes shared memory, the name of its abstract Unix
socket (no file anywhere), and a random secret for that peer.  For each pair
that both want, the higher process connects to the lower one's socket and
proves the secret; then each side makes the ring it will receive on (a
``memfd``: anonymous memory, never in ``/dev/shm``) and an ``eventfd`` doorbell,
and passes both to the other with ``SCM_RIGHTS``.  A process that did not prove
the token never gets an offer, so it never learns the socket's name or a secret,
and a connection with a wrong secret, or from another user, is refused before any
descriptor is sent.  Nothing has a name to unlink: the kernel frees the rings
when the last process mapping them ends, SIGKILL included.
Each side also notes the pid of the other end of that Unix socket, as the
kernel gives it (``SO_PEERCRED``, never a field the peer writes), and that
process's start time (:attr:`ShmTransport.identities`): a linked peer that
falls silent is looked at before it is declared lost
(:mod:`runtime.communication.peer_state`).

Receiving needs no thread: a worker drains every incoming ring when it takes
its activations (each step) and when it parks, and parks by polling its own
wake-up ``eventfd`` together with the rings' doorbells.  A worker alone in its
process, with a core for every process of the cluster on its host, first
watches its rings for up to :data:`SPIN_SECONDS`, yielding its core between
looks (:class:`RingWatch`): an answer that comes meanwhile costs no doorbell,
no sleep and no wake-up, which in a 2-process epoch cost more than the work.  Flow control is the
fabric's credit window, as over TCP; a ring that is full as well keeps what
does not fit in order (:class:`~runtime.communication.shm_ring.RingWriter`),
the sending worker counts as backlogged and keeps stepping, and the reader
rings back once it made room.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import math
import os
import select
import socket
import stat
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from runtime.communication.byte_sizes import byte_setting
from runtime.communication.peer_state import Identity, identify
from runtime.communication.shm_ring import MAX_CAPACITY, MIN_CAPACITY, Ring, RingReader, RingWriter, ring_bytes
from runtime.communication.tcp import Endpoint, Mesh
from runtime.communication.wire import frame
from runtime.errors import ClusterError, ClusterStopped, ConfigurationError, PeerLost, WireError

log = logging.getLogger("runtime.communication.shm_transport")

TRANSPORT_VARIABLE = "PYTIMELY_TRANSPORT"
"""``shm`` (the default: shared memory between processes on one host) or ``tcp`` (TCP for every pair)."""
RING_VARIABLE = "PYTIMELY_SHM_RING_BYTES"
"""The bytes of each ring this process receives on (e.g. ``4M``); the default is :data:`DEFAULT_RING`."""
DEFAULT_RING = 4 << 20
"""Bytes of data in each ring."""
OFFER = 5
"""The kind of the TCP frame that offers shared memory to a same-host peer (after the fabric's kinds 0-4)."""
SETUP_STEP_TIMEOUT = 5.0
"""Seconds a connection to the abstract socket has to prove its secret and pass its ring."""

SPIN_SECONDS = 250e-6
"""Seconds a worker watches its shared-memory rings before it parks, when it may spin (see :func:`may_spin`).
A peer's answer that comes meanwhile costs no doorbell, no sleep and no wake-up: in a 2-process epoch those cost
more than the work itself (on 2 CPUs: 120 us per epoch parking at once, 42 us watching first)."""
SPIN_BACKOFF = 64
"""The most parks without spinning after watches that saw nothing (a power of two)."""

_SECRET = 16
_HELLO = struct.Struct("!I16s")
_CAPACITY = struct.Struct("!Q")
_MAX_NAME = 100


def transport_from(text: str | None) -> str:
    """``shm`` or ``tcp`` as ``$PYTIMELY_TRANSPORT`` says (unset or blank: ``shm``); ConfigurationError else."""
    value = (text or "").strip().lower() or "shm"
    if value not in ("shm", "tcp"):
        raise ConfigurationError(f"{TRANSPORT_VARIABLE} must be 'shm' or 'tcp', got {text!r}")
    return value


def ring_capacity_from(text: str | None) -> int:
    """The ring size ``$PYTIMELY_SHM_RING_BYTES`` asks for (``65536``, ``64K``, ``4M``); the default if unset."""
    return byte_setting(RING_VARIABLE, text, DEFAULT_RING, MIN_CAPACITY, MAX_CAPACITY, "64K or 4M")


def shared_memory_supported() -> bool:
    """Whether this platform has what the rings need (Linux: memfds, eventfds, abstract sockets, fd passing)."""
    return sys.platform.startswith("linux") and all(
        hasattr(os, name) for name in ("memfd_create", "eventfd", "eventfd_read", "eventfd_write")
    )


def may_spin(workers: int, processes_on_host: int, cores: int) -> bool:
    """Whether a worker watches its rings before parking: the only worker of its process (a spinning thread holds
    the GIL from the others), with a core for every process of the cluster on its host (else it holds a core from
    the peer it waits for)."""
    return workers == 1 and processes_on_host <= cores


def usable_cores() -> int:
    """The CPUs this process may run on."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


class RingWatch:
    """A worker's watch on the incoming rings before it parks, with its back-off."""

    __slots__ = ("misses", "skips")

    def __init__(self) -> None:
        """A watch that has missed nothing yet."""
        self.misses = 0
        self.skips = 0

    def saw(self, links: ShmTransport, pending: deque[Any], stopped: Callable[[], bool], timeout: float | None) -> bool:
        """Watch the rings for up to :data:`SPIN_SECONDS` (less if ``timeout`` is shorter); whether a frame, an
        activation (``pending``) or a stop came meanwhile (then the worker goes on without parking).

        Each look at the rings is followed by ``sched_yield``: a process that shares this core (the peer, on a
        busy machine) runs first.  A watch that saw nothing makes the next ones skip: after ``n`` misses in a
        row, ``2 ** n`` parks (at most :data:`SPIN_BACKOFF`) do not watch, so a worker whose peer is idle, or
        has no core of its own, does not burn CPU waiting; a hit watches again at every park.
        """
        if self.skips:
            self.skips -= 1
            return False
        now = time.perf_counter
        sched_yield = os.sched_yield
        deadline = now() + (SPIN_SECONDS if timeout is None else min(SPIN_SECONDS, timeout))
        while True:
            if links.has_data() or pending or stopped():
                self.misses = 0
                return True
            sched_yield()
            if now() >= deadline:
                self.misses = misses = min(self.misses + 1, SPIN_BACKOFF.bit_length() - 1)
                self.skips = 1 << misses
                return False


def _ring_doorbell(fd: int) -> Callable[[], None]:
    def ring() -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.eventfd_write(fd, 1)

    return ring


def _reset(fd: int) -> None:
    with contextlib.suppress(BlockingIOError, OSError):
        os.eventfd_read(fd)


class EventGate:
    """A worker's wake-up on an ``eventfd``, with the interface of :class:`~runtime.communication.fabric.WakeGate`.

    :meth:`wait` also ends when a doorbell of an incoming ring rings, so a
    parked worker wakes for a frame from another process without any thread
    in between.
    """

    __slots__ = ("_fd", "_poll", "_own", "_lock")

    def __init__(self, doorbells: tuple[int, ...]) -> None:
        """A gate with no wake pending, that also watches ``doorbells``."""
        self._fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._poll = select.poll()
        for fd in (self._fd, *doorbells):
            self._poll.register(fd, select.POLLIN)
        self._own = select.poll()  # not select.select, which fails on a descriptor above 1023
        self._own.register(self._fd, select.POLLIN)
        self._lock = threading.Lock()

    def set(self) -> None:
        """Make a wake pending (nothing once closed)."""
        with self._lock:  # never a descriptor number that close() has just given back (and another file got)
            fd = self._fd
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.eventfd_write(fd, 1)

    def is_set(self) -> bool:
        """Whether a wake is pending."""
        return self._fd >= 0 and bool(self._own.poll(0))

    def clear(self) -> None:
        """Forget a pending wake."""
        _reset(self._fd)

    def wait(self, timeout: float | None) -> bool:
        """Wait for a wake or a doorbell (each consumed), or ``timeout`` seconds; whether either came."""
        events = self._poll.poll(-1 if timeout is None else math.ceil(max(timeout, 0.0) * 1000))
        for fd, _ in events:
            _reset(fd)
        return bool(events)

    def close(self) -> None:
        """Release the eventfd: a wake from a late thread (a stop relayed while closing) is then dropped."""
        with self._lock:
            fd, self._fd = self._fd, -1
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)


class Link:
    """The two rings between this process and one peer on the same host."""

    def __init__(self, peer: int, outgoing: Ring, incoming: Ring, doorbell: int, peer_doorbell: int) -> None:
        """Write to ``outgoing``, read ``incoming``; ``doorbell`` is ours to poll, ``peer_doorbell`` wakes the peer."""
        self.peer = peer
        self.outgoing = outgoing
        self.incoming = incoming
        self.doorbell = doorbell
        self.peer_doorbell = peer_doorbell
        wake_peer = _ring_doorbell(peer_doorbell)
        self.writer = RingWriter(outgoing, wake_peer)
        self.reader = RingReader(incoming, wake_peer)
        self.reading = threading.Lock()

    def close(self) -> None:
        """Unmap both rings and close both doorbells."""
        self.outgoing.close()
        self.incoming.close()
        for fd in (self.doorbell, self.peer_doorbell):
            with contextlib.suppress(OSError):
                os.close(fd)


class ShmTransport:
    """The shared-memory links of one process to its same-host peers (see the module docstring)."""

    def __init__(
        self,
        process: int,
        endpoints: list[Endpoint],
        mesh: Mesh,
        on_frame: Callable[[int, list[Any], bytes | memoryview], None],
        on_lost: Callable[[PeerLost], None],
    ) -> None:
        """Links for process ``process``; frames read go to ``on_frame``, a broken ring to ``on_lost``."""
        self.process = process
        self.mesh = mesh
        host = endpoints[process].host
        self.same_host = [peer for peer, e in enumerate(endpoints) if peer != process and e.host == host]
        self.wanted = bool(self.same_host) and transport_from(os.environ.get(TRANSPORT_VARIABLE)) == "shm"
        if self.wanted and not shared_memory_supported():
            self.wanted = False
        self.capacity = ring_capacity_from(os.environ.get(RING_VARIABLE)) if self.wanted else 0
        self._on_frame = on_frame
        self._on_lost = on_lost
        self.links: dict[int, Link] = {}
        self.used: list[int] = []
        """The peers linked through shared memory (kept after :meth:`close`)."""
        self.identities: dict[int, Identity] = {}
        """The pid and start time of each linked peer, as the kernel gave them while linking (kept after
        :meth:`close`); a peer whose pid this process cannot see (another pid namespace) is missing."""
        self._links: list[Link] = []
        self.doorbells: tuple[int, ...] = ()
        self._offers: dict[int, tuple[bool, bytes, bytes]] = {}
        self._offered = threading.Condition()
        self._secrets = {peer: os.urandom(_SECRET) for peer in self.same_host}
        self._sleep_lock = threading.Lock()
        self._sleepers = 0
        self._gates: list[EventGate] = []
        self._finishing: EventGate | None = None
        """What :meth:`wait` waits on once the rings are linked: their doorbells, and :meth:`interrupt`."""
        self._broken = False
        self._stopped: Callable[[], bool] = lambda: False
        self.sleeps = 0
        """Parks that asked the writers to ring (each costs the peer a doorbell and this process a wake-up)."""
        self.refused = 0
        """Connections to the abstract socket that were refused (wrong secret, another user, malformed)."""

    # ------------------------------------------------------------------ setting up

    def offer(self, process: int, header: list[Any]) -> None:
        """An ``offer`` frame from ``process`` (on its TCP reader thread); a malformed one counts as a refusal."""
        if len(header) != 4 or process not in self._secrets:
            raise WireError(f"an unexpected shared-memory offer from process {process}")
        _, wanted, name, secret = header
        if wanted.__class__ is not bool or name.__class__ is not bytes or secret.__class__ is not bytes:
            raise WireError(f"a malformed shared-memory offer from process {process}")
        if len(name) > _MAX_NAME or len(secret) != _SECRET:
            raise WireError(f"a shared-memory offer from process {process} has fields of the wrong size")
        with self._offered:
            self._offers[process] = (wanted, name, secret)
            self._offered.notify_all()

    def establish(self, deadline: float, stopped: Callable[[], bool] = lambda: False) -> None:
        """Agree with every same-host peer whether to use shared memory, and link those that both want it.

        Runs after the TCP handshake (so only processes that proved the token
        take part) and before any worker starts.  Raises :class:`ClusterError`
        if a peer does not answer before ``deadline``; returns early, linking
        nothing more, once ``stopped()`` holds (a peer was lost meanwhile).
        """
        if not self.same_host:
            return
        self._stopped = stopped
        listener = None
        name = b""
        if self.wanted and any(peer > self.process for peer in self.same_host):
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
            name = b"\0pytimely-" + os.urandom(12).hex().encode()
            listener.bind(name)
            listener.listen(len(self.same_host))
        try:
            for peer in self.same_host:
                self.mesh.send(peer, frame([OFFER, self.wanted, name, self._secrets[peer]]))
            self._wait_for_offers(deadline)
            pairs = [peer for peer in self.same_host if self.wanted and self._offers[peer][0]]
            for peer in pairs:
                if peer < self.process:
                    self._connect(peer, deadline)
            if listener is not None:
                self._accept(listener, {peer for peer in pairs if peer > self.process}, deadline)
        except ClusterStopped:  # a peer was lost: the caller reports it
            return
        finally:
            if listener is not None:
                listener.close()
        self._links = [self.links[peer] for peer in sorted(self.links)]
        self.used = sorted(self.links)
        self.doorbells = tuple(link.doorbell for link in self._links)
        if self._links:
            self._finishing = self.gate()

    def _wait_for_offers(self, deadline: float) -> None:
        with self._offered:
            while len(self._offers) < len(self.same_host):
                if self._stopped():
                    raise ClusterStopped("the cluster stopped while linking")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    missing = ", ".join(self.mesh.describe(p) for p in self.same_host if p not in self._offers)
                    raise ClusterError(
                        f"process {self.process} did not hear from {missing} whether it takes shared memory "
                        f"before the deadline; do all processes run the same version of pytimely?"
                    )
                self._offered.wait(min(remaining, 0.1))

    def _connect(self, peer: int, deadline: float) -> None:
        _, name, secret = self._offers[peer]
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                sock.connect(name)
                sock.sendall(_HELLO.pack(self.process, secret))
                self.links[peer] = self._trade_rings(peer, sock)
                self._identify(peer, sock)
            except (OSError, WireError) as error:
                if self._stopped():
                    raise ClusterStopped("the cluster stopped while linking") from None
                raise ClusterError(
                    f"process {self.process} could not link to {self.mesh.describe(peer)} through shared memory "
                    f"({type(error).__name__}: {error}); set {TRANSPORT_VARIABLE}=tcp to use TCP instead"
                ) from None
        finally:
            sock.close()

    def _accept(self, listener: socket.socket, expected: set[int], deadline: float) -> None:
        while expected - set(self.links):
            if self._stopped():
                raise ClusterStopped("the cluster stopped while linking")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = ", ".join(self.mesh.describe(p) for p in sorted(expected - set(self.links)))
                raise ClusterError(
                    f"process {self.process} was not linked through shared memory by {missing} before the deadline"
                )
            listener.settimeout(min(remaining, 0.5))
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            try:
                sock.settimeout(min(SETUP_STEP_TIMEOUT, max(0.01, deadline - time.monotonic())))
                peer = self._check_hello(sock, expected)
                if peer is not None:
                    self.links[peer] = self._trade_rings(peer, sock)
                    self._identify(peer, sock)
            except (OSError, WireError) as error:
                self._refuse(f"{type(error).__name__}: {error}")
            finally:
                sock.close()

    def _identify(self, peer: int, sock: socket.socket) -> None:
        """Note the identity of linked ``peer``: the pid the kernel gives for the other end of ``sock`` (the process
        that connected, or listened), and that process's start time, read while it is still connected."""
        pid, _ = _credentials(sock)
        identity = identify(pid)
        if identity is not None:
            self.identities[peer] = identity

    def _check_hello(self, sock: socket.socket, expected: set[int]) -> int | None:
        """The peer that connected, if it is the same user and proves its secret; else refused (``None``)."""
        _, uid = _credentials(sock)
        if uid != os.getuid():
            self._refuse(f"a connection from user {uid}, not {os.getuid()}")
            return None
        hello = _exactly(sock, _HELLO.size)
        peer, secret = _HELLO.unpack(hello)
        if peer not in expected or peer in self.links or not hmac.compare_digest(secret, self._secrets[peer]):
            self._refuse(f"a connection that did not prove the secret given to process {peer}")
            return None
        return peer

    def _refuse(self, why: str) -> None:
        log.warning("process %d refused a shared-memory connection: %s", self.process, why)
        self.refused += 1  # counted after the log line, so that whoever sees the count also finds the reason

    def _trade_rings(self, peer: int, sock: socket.socket) -> Link:
        """Pass the peer the ring we read (memfd and doorbell) and map the one it passes us."""
        memory = os.memfd_create(f"pytimely-ring-{peer}-to-{self.process}", os.MFD_CLOEXEC)
        doorbell = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        incoming = None
        try:
            os.ftruncate(memory, ring_bytes(self.capacity))
            incoming = Ring(memory, self.capacity)
            socket.send_fds(sock, [_CAPACITY.pack(self.capacity)], [memory, doorbell])
            message, fds, _, _ = socket.recv_fds(sock, _CAPACITY.size, 2)
        except BaseException:
            os.close(doorbell)
            if incoming is not None:
                incoming.close()
            raise
        finally:
            os.close(memory)
        try:
            if len(message) != _CAPACITY.size or len(fds) != 2:
                raise WireError("the peer did not pass a ring and a doorbell")
            (capacity,) = _CAPACITY.unpack(message)
            info = os.fstat(fds[0])
            if not stat.S_ISREG(info.st_mode) or not MIN_CAPACITY <= capacity <= MAX_CAPACITY:
                raise WireError("the peer passed something other than a ring")
            if info.st_size != ring_bytes(capacity):
                raise WireError(f"the peer's ring has {info.st_size} bytes, not {ring_bytes(capacity)}")
            outgoing = Ring(fds[0], capacity)
        except BaseException:
            for fd in fds:
                os.close(fd)
            incoming.close()
            os.close(doorbell)
            raise
        os.close(fds[0])
        return Link(peer, outgoing, incoming, doorbell, fds[1])

    # ------------------------------------------------------------------ running

    def gate(self) -> EventGate:
        """A worker's wake-up that also watches every incoming ring's doorbell (closed with the transport)."""
        gate = EventGate(self.doorbells)
        self._gates.append(gate)
        return gate

    def serves(self, process: int) -> bool:
        """Whether frames to ``process`` go through shared memory."""
        return process in self.links

    def send(self, process: int, pieces: list[bytes | memoryview]) -> None:
        """Write frames to ``process``'s ring (what does not fit waits in order for :meth:`retry`)."""
        self.links[process].writer.send(pieces)

    def has_data(self) -> bool:
        """Whether bytes wait in an incoming ring (no system call: a look at each ring's counters)."""
        for link in self._links:
            if link.reader.has_data():
                return True
        return False

    @property
    def pending(self) -> bool:
        """Whether bytes wait for room in a ring."""
        for link in self._links:  # a loop, not any(): asked at every step
            if link.writer.pending_bytes:
                return True
        return False

    def retry(self) -> None:
        """Write what waits for room, as far as it fits."""
        for link in self._links:
            if link.writer.pending_bytes:
                link.writer.retry()

    def drain(self) -> None:
        """Hand every whole frame waiting in an incoming ring to ``on_frame`` (one thread per ring at a time)."""
        for link in self._links:
            reader = link.reader
            if not reader.has_data() or not link.reading.acquire(False):
                continue
            peer = link.peer
            try:
                on_frame = self._on_frame
                for header, payload in reader.frames():
                    on_frame(peer, header, payload)
            except WireError as error:
                self._broke(peer, f"it wrote malformed data into its shared-memory ring ({error})")
            finally:
                link.reading.release()

    def _broke(self, peer: int, why: str) -> None:
        if not self._broken:
            self._broken = True
            self._on_lost(
                PeerLost(f"lost {self.mesh.describe(peer)}: {why}; the other processes stop", peer, "shared memory")
            )

    def going_to_sleep(self) -> bool:
        """A worker is about to park: ask writers to ring; whether a frame arrived meanwhile (then do not park)."""
        with self._sleep_lock:
            self._sleepers += 1
            self.sleeps += 1
            arrived = False
            for link in self._links:
                arrived = link.reader.sleep(True) or arrived
            return arrived

    def woke(self, reset: bool = True) -> None:
        """A worker is back from parking: drain the rings, write what waited for room.

        ``reset``: first reset every doorbell (a system call each).  A worker's
        :meth:`EventGate.wait` already reset those that rang; one that rang after it
        ends the next wait at once, and is reset there.
        """
        with self._sleep_lock:
            self._sleepers -= 1
            if not self._sleepers:
                for link in self._links:
                    link.reader.sleep(False)
        if reset:
            for fd in self.doorbells:
                _reset(fd)
        self.drain()
        self.retry()

    def wait(self, seconds: float) -> None:
        """Without a worker (finishing): wait up to ``seconds`` for a doorbell or :meth:`interrupt`, then drain and
        retry."""
        gate = self._finishing
        if not self._links or gate is None:
            return
        if not self.going_to_sleep():
            gate.wait(seconds)
        self.woke()

    def interrupt(self) -> None:
        """End a :meth:`wait` now, or the next one at once: something it waits for came another way (a peer's
        goodbye over TCP, a stop)."""
        gate = self._finishing
        if gate is not None:
            gate.set()

    def close(self) -> None:
        """Unmap every ring and close every doorbell."""
        for link in self.links.values():
            link.close()
        for gate in self._gates:
            gate.close()
        self._gates = []
        self._finishing = None
        self._links = []
        self.links = {}
        self.doorbells = ()


def _credentials(sock: socket.socket) -> tuple[int, int]:
    """The pid and user id of the process at the other end of the Unix socket ``sock``, as the kernel says."""
    credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _ = struct.unpack("3i", credentials)
    return pid, uid


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise WireError("the connection closed before its hello")
        data += chunk
    return bytes(data)
