"""The TCP mesh between the processes of a cluster: one authenticated connection per pair.

Process ``i`` listens at ``addresses[i]``, connects to every process ``j < i``
(all at once, so that one that never starts keeps no other from joining:
:mod:`runtime.communication.connecting`) and accepts a connection from every
process ``j > i``.  Every connection opens with a handshake before anything
else is sent:

1. the connecting side sends ``hello``: protocol version, its process index,
   the cluster size, a fresh nonce, a fingerprint of its string hashing, and
   its values of the settings every process must share
   (:mod:`runtime.communication.agreement`);
2. the accepting side checks the version, then answers ``challenge``: its own
   index, nonce, an HMAC-SHA256 of both nonces keyed with the cluster's
   shared token, its fingerprint and its settings;
3. the connecting side checks that HMAC and sends its own (over the nonces in
   the other order, so neither answer can be replayed as the other);
4. the accepting side checks it and sends ``welcome``.

The accepting side handshakes with every connection at once, each on its own
thread and with its own deadline (:data:`HANDSHAKE_TIMEOUT` per step), and at
most :data:`MAX_HANDSHAKES` at a time: when a new connection arrives beyond
that, the one that has been handshaking longest is closed at once and logged.
A real peer finishes within a few round trips, while idle, slow or hostile
connections are the ones left waiting, so they cannot keep the real peers out.  Handshake
frames are small (at most :data:`HANDSHAKE_MAX_FRAME` bytes), are decoded as
plain msgpack with strict length limits and no extension types, and must be a
flat list of the expected fields with the expected types; anything else is
refused with a log line naming the peer's address.  Nothing else from a peer
is decoded (no registered codec runs) before it has proved the token.

The token itself never crosses the network.  A peer with another protocol
version or a wrong token gets ``refused`` with the reason and is disconnected;
the accepting side logs it and keeps waiting for the real peer.  Once the
token is proved, both sides compare the cluster size, the string-hash
fingerprint (processes started with different ``PYTHONHASHSEED`` values would
route exchanged records inconsistently) and the shared settings.  A process
that differs from a peer in the fingerprint or a setting goes on handshaking
with the others and then stops with :class:`~runtime.errors.SettingsMismatch`,
so that every process of the cluster, each of which differs from some other,
ends at once with an explanation rather than at the connect deadline.  If a
peer never arrives, the deadline's error is still that mismatch, naming the
peer awaited too (the mismatch must be fixed whether or not it arrives).

The handshake also derives one session key for each direction of the
connection from the token and everything both sides said (their nonces
included): after it, every byte travels in sealed records
(:mod:`runtime.communication.seal`), each with a keyed MAC that the receiver
checks before anything in it is decoded.  A record that fails is
:class:`~runtime.errors.TamperedFrame`, naming the process it claimed to come
from.  With a :class:`~runtime.communication.tls.TlsConfig`, every connection
is TLS (both certificates checked against the cluster's CA) before the
handshake starts.

After the handshake, :class:`Mesh` runs one reader thread per connection that
opens the records, splits them into frames (:mod:`runtime.communication.wire`)
and hands each to a callback; a connection that ends before the peer said
goodbye is reported as lost, naming the process and its address.  Sending is
thread-safe.  Nothing is called out while a connection's send lock is held, a
lost peer's connection is shut down at once (so a send blocked on it ends), and
:meth:`Mesh.offer` sends without ever waiting: heartbeats use it, so they never
wait on a data send.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import logging
import os
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from runtime.communication.agreement import SETTINGS, ClusterSettings, disagreement
from runtime.communication.connecting import join_lower_peers
from runtime.communication.formation import LossWhileForming, closed_peers
from runtime.communication.handshake import HANDSHAKE_MAX_FRAME as HANDSHAKE_MAX_FRAME
from runtime.communication.handshake import MAGIC as MAGIC
from runtime.communication.handshake import MAX_REASON, NONCE_SIZE
from runtime.communication.handshake import Channel as _Channel
from runtime.communication.handshake import decode_handshake as decode_handshake
from runtime.communication.handshake import fields as _fields
from runtime.communication.handshake import hash_fingerprint as hash_fingerprint
from runtime.communication.handshake import proof as _proof
from runtime.communication.handshake import refusal as _refusal
from runtime.communication.hostfile import MAX_HOSTFILE_LINE as MAX_HOSTFILE_LINE
from runtime.communication.hostfile import Endpoint as Endpoint
from runtime.communication.hostfile import parse_endpoint as parse_endpoint
from runtime.communication.hostfile import port_number as port_number
from runtime.communication.hostfile import read_hostfile as read_hostfile
from runtime.communication.peer_state import lost_report
from runtime.communication.seal import Opener, Sealer, session_keys
from runtime.communication.socket_io import describe_peer as _describe
from runtime.communication.socket_io import send_all as _send_all
from runtime.communication.socket_io import shutdown as _shutdown
from runtime.communication.socket_io import writable as _writable
from runtime.communication.tls import TlsConfig
from runtime.communication.wire import PROTOCOL_VERSION, FrameReader, WireError
from runtime.errors import ClusterError as ClusterError
from runtime.errors import ClusterStopped as ClusterStopped
from runtime.errors import ConnectTimeout as ConnectTimeout
from runtime.errors import HandshakeError as HandshakeError
from runtime.errors import PeerLost as PeerLost
from runtime.errors import SealError
from runtime.errors import SettingsMismatch as SettingsMismatch
from runtime.errors import TamperedFrame as TamperedFrame

log = logging.getLogger("runtime.communication.tcp")

HANDSHAKE_TIMEOUT = 5.0
"""Seconds a peer has to complete each step of the handshake."""
ACCEPT_POLL = 0.5
"""Seconds the accepting loop waits for a connection or a handshake's end before it looks at its deadline again."""
CONNECT_ATTEMPT = 2.0
"""Seconds one attempt to connect to a lower peer may take (each lower peer is tried on its own thread)."""
MAX_HANDSHAKES = 64
"""Connections a process handshakes with at once; beyond it the oldest is closed (and logged)."""
_RECV_SIZE = 1 << 20


class Mesh:
    """Authenticated connections from process ``index`` to every other process of a cluster.

    ``on_frame(process, header, payload)`` runs on that connection's reader
    thread for every frame received after the handshake; ``on_lost(error)``
    runs once if a connection ends before :meth:`said_goodbye` was called for
    its peer (or :meth:`close` for this process).
    """

    def __init__(
        self,
        index: int,
        endpoints: list[Endpoint],
        token: str,
        on_frame: Callable[[int, list[Any], bytes | memoryview], None],
        on_lost: Callable[[PeerLost], None],
        listener: socket.socket | None = None,
        tls: TlsConfig | None = None,
        settings: ClusterSettings | None = None,
    ) -> None:
        """Prepare the mesh; ``listener`` is an already bound listening socket (else one is bound).

        With ``tls``, every connection is TLS with both certificates checked against its CA.  ``settings`` are this
        process's values of the settings every process must share (default: 1 worker, and this process's
        environment), compared with each peer's in the handshake.
        """
        if not token:
            raise HandshakeError("a cluster needs a non-empty shared token")
        self.index = index
        self.endpoints = endpoints
        self.processes = len(endpoints)
        self._token = token
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._listener = listener
        self._sockets: dict[int, socket.socket] = {}
        self._locks: dict[int, threading.Lock] = {}
        self._sealers: dict[int, Sealer] = {}
        self._openers: dict[int, Opener] = {}
        self._tls = tls
        self.settings = settings if settings is not None else ClusterSettings.of_this_process()
        self._disagreements: dict[int, SettingsMismatch] = {}
        self._forming_loss = LossWhileForming()
        """Peers that proved the token and differ from this process in a shared setting (under the sockets lock):
        they are not awaited, and :meth:`connect` raises the first once every other peer has handshaken."""
        self._finished: set[int] = set()
        self._reported: set[int] = set()
        self._told: set[int] = set()
        """Processes reported lost for what they sent, that may still be sent why meanwhile (:meth:`_lost`)."""
        self._send_failed: dict[int, str] = {}
        """Why a send to each process failed: its reader reports the loss (:meth:`_send_failure`)."""
        self._state = threading.Lock()
        """Guards :attr:`_reported`, :attr:`_send_failed` and :attr:`_closing` (held only to test and set them,
        never across a call)."""
        self._closing = False
        self._readers: list[threading.Thread] = []
        self.last_heard: dict[int, float] = {}
        """When a frame last arrived from each process (``time.monotonic``)."""
        self.how_ended: Callable[[int], str | None] | None = None
        """Set by the process fabric once the cluster has formed: how a process whose connection ended has ended,
        as a clause naming its pid (``its process (pid 42) no longer exists: ...``), where its pid is known (a
        same-host peer); None where it is not."""
        self.refused = 0
        """How many connections were refused (wrong token, version, malformed, over the limit, ...)."""
        self._refused_lock = threading.Lock()
        self._sockets_lock = threading.Lock()
        self._evicted: set[socket.socket] = set()
        self._wrapped: dict[socket.socket, socket.socket] = {}
        """Accepted connections now wrapped in TLS, to their TLS sockets (under :attr:`_sockets_lock`)."""

    def describe(self, process: int) -> str:
        """``process 2 (host:port)``."""
        return f"process {process} ({self.endpoints[process]})"

    # ------------------------------------------------------------------ connecting

    def connect(self, timeout: float = 30.0) -> None:
        """Connect to every other process and authenticate, or raise within ``timeout`` seconds.

        Raises :class:`SettingsMismatch` if a peer differs in a shared setting (at the deadline too, then naming the
        peers never reached, its cause the :class:`ConnectTimeout`), :class:`ConnectTimeout` if a peer never arrives.
        """
        deadline = time.monotonic() + timeout
        if self.processes == 1:
            return
        if self._listener is None and self.index < self.processes - 1:
            endpoint = self.endpoints[self.index]
            try:
                self._listener = self._bind(endpoint)
            except OSError as error:
                advice = {
                    errno.EADDRINUSE: "another program, or another cluster, listens on that port",
                    errno.EADDRNOTAVAIL: f"{endpoint.host} is not an address of this machine",
                }.get(error.errno or 0, "check the hostfile and -p")
                reason = os.strerror(error.errno) if error.errno and error.errno > 0 else error.strerror or str(error)
                raise ClusterError(
                    f"process {self.index} cannot listen at {endpoint}, its address in the cluster's list "
                    f"({reason}): {advice}"
                ) from error
        accept_error: list[BaseException] = []
        failed = threading.Event()  # either side failed: the other gives up at once instead of at the deadline
        too_late: ConnectTimeout | PeerLost | None = None
        acceptor = None
        if self.index < self.processes - 1:
            acceptor = threading.Thread(
                target=self._accept_all, args=(deadline, accept_error, failed), name="timely-accept", daemon=True
            )
            acceptor.start()
        try:
            if self.index > 0:
                join_lower_peers(
                    self.index,
                    list(range(self.index)),
                    self._connect_once,
                    (OSError, TimeoutError, WireError),
                    self._check_forming,
                    self._disagree,
                    self.describe,
                    self._closed_meanwhile,
                    deadline,
                    failed,
                )
        except (ConnectTimeout, PeerLost) as error:  # raised below, once the acceptor ended and disagreements are known
            failed.set()
            too_late = error
        except BaseException:
            failed.set()
            raise
        finally:
            if acceptor is not None:
                acceptor.join()
            if self._listener is not None:
                self._listener.close()
        ended = too_late or (accept_error[0] if accept_error else None) or self._forming_loss.error
        if isinstance(ended, ConnectTimeout | PeerLost) and self._disagreements:  # the mismatch must be fixed anyway
            first = self._disagreements[min(self._disagreements)]
            raise SettingsMismatch(f"{first}; besides, {ended}") from ended
        if ended is not None:
            raise ended
        if self._disagreements:
            raise self._disagreements[min(self._disagreements)]
        for peer, sock in self._sockets.items():
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.last_heard[peer] = time.monotonic()
            reader = threading.Thread(
                target=self._read, args=(peer, sock, self._openers[peer]), name=f"timely-read-{peer}", daemon=True
            )
            self._readers.append(reader)
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _bind(endpoint: Endpoint) -> socket.socket:
        """A listener at ``endpoint``, of the address family its host has (an IPv6 address, or a name of one)."""
        family = socket.getaddrinfo(endpoint.host, endpoint.port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((endpoint.host, endpoint.port), family=family, reuse_port=False, backlog=64)

    def _connect_once(self, peer: int, deadline: float) -> None:
        """Connect to ``peer`` once and handshake (see :func:`~runtime.communication.connecting.join_lower_peers`)."""
        endpoint = self.endpoints[peer]
        sock = socket.create_connection(
            (endpoint.host, endpoint.port), timeout=max(0.01, min(deadline - time.monotonic(), CONNECT_ATTEMPT))
        )
        try:
            step_deadline = min(deadline, time.monotonic() + HANDSHAKE_TIMEOUT)
            if self._tls is not None:
                sock.settimeout(max(0.01, step_deadline - time.monotonic()))
                sock = self._tls.client.wrap_socket(sock)
            keys = self._handshake_as_connector(peer, sock, step_deadline)
        except BaseException:
            sock.close()
            raise
        with self._sockets_lock:
            self._keep(peer, sock, sending=keys[0], receiving=keys[1])
        log.info("process %d joined %s", self.index, self.describe(peer))

    def _disagree(self, peer: int, error: SettingsMismatch) -> None:
        """Note that ``peer`` differs in a shared setting: :meth:`connect` raises it once every other peer has
        handshaken (or at the deadline)."""
        with self._sockets_lock:
            self._disagreements[peer] = error

    def _closed_meanwhile(self) -> str:
        """At the deadline of forming the mesh: which peers already joined have closed their connections since, as
        a clause for the error; empty if none (:meth:`_check_forming` reports them sooner, between its looks)."""
        with self._sockets_lock:
            closed = closed_peers(list(self._sockets.items()))
        if not closed:
            return ""
        names = ", ".join(self.describe(peer) for peer in closed)
        return f"; meanwhile {names}, already joined, closed its connection (it ended, or gave up joining)"

    def _check_forming(self) -> None:
        """While the mesh forms: raise :class:`PeerLost` once a peer that joined has closed its connection (see
        :mod:`runtime.communication.formation`; it cannot join again, so the mesh can no longer form), after
        the grace in which this process goes on handshaking with the peers it still awaits."""
        loss = self._forming_loss
        if loss.error is None:
            with self._sockets_lock:
                kept = list(self._sockets.items())
            loss.look(self.index, self.processes, kept, self.describe, lambda p: str(self.endpoints[p]))
        if loss.expired():
            assert loss.error is not None
            raise loss.error

    def _keep(self, peer: int, sock: socket.socket, sending: bytes, receiving: bytes) -> None:
        """Keep ``peer``'s authenticated connection and its session keys (under :attr:`_sockets_lock`)."""
        self._sockets[peer] = sock
        self._locks[peer] = threading.Lock()
        self._sealers[peer] = Sealer(sending)
        self._openers[peer] = Opener(receiving)

    def _handshake_as_connector(self, peer: int, sock: socket.socket, deadline: float) -> tuple[bytes, bytes]:
        """Handshake with ``peer``; return the session keys ``(sending, receiving)``."""
        channel = _Channel(sock)
        nonce = os.urandom(NONCE_SIZE)
        channel.send(
            ["hello", MAGIC, PROTOCOL_VERSION, self.index, self.processes, nonce, hash_fingerprint()]
            + self.settings.fields()
        )
        answer = channel.receive(deadline)
        keys = session_keys(self._token, channel.transcript.digest())
        reason = _refusal(answer)
        if reason is not None:
            raise HandshakeError(f"{self.describe(peer)} refused process {self.index}: {reason}")
        if answer[0] == "challenge" and len(answer) > 1 and answer[1] != PROTOCOL_VERSION:
            raise HandshakeError(
                f"{self.describe(peer)} speaks protocol version {answer[1]!r}, this process {PROTOCOL_VERSION}; "
                "run the same pytimely version in every process"
            )
        _, their_index, processes, their_nonce, their_proof, fingerprint, *settings = _fields(
            answer, "challenge", int, int, int, bytes, bytes, int, *[int] * len(SETTINGS)
        )
        if not hmac.compare_digest(_proof(self._token, "acceptor", nonce, their_nonce), their_proof):
            channel.send(["refused", "wrong token"])
            raise HandshakeError(
                f"wrong token: the process listening at {self.endpoints[peer]} (process {peer}) and process "
                f"{self.index} do not share the cluster's token; refusing to send it anything. Use the same "
                f"PYTIMELY_TOKEN or --token in every process"
            )
        channel.send(["proof", _proof(self._token, "connector", their_nonce, nonce)])
        self._check_configuration(peer, their_index, processes, fingerprint, settings)
        welcome = channel.receive(deadline)
        reason = _refusal(welcome)
        if reason is not None:
            raise HandshakeError(f"{self.describe(peer)} refused process {self.index}: {reason}")
        _fields(welcome, "welcome")
        return keys

    def _check_configuration(
        self, peer: int, their_index: Any, processes: Any, fingerprint: Any, settings: list[Any]
    ) -> None:
        """Refuse a proven peer whose place in the cluster (:class:`HandshakeError`), string hashing or shared
        settings (:class:`SettingsMismatch`) differ from this process's."""
        if their_index != peer or processes != self.processes:
            raise HandshakeError(
                f"{self.endpoints[peer]} answered as process {their_index} of {processes}, but process "
                f"{self.index} expects process {peer} of {self.processes} there; use the same hostfile "
                f"and -n everywhere"
            )
        me, them = (self.index, self.endpoints[self.index]), (peer, self.endpoints[peer])
        differ = disagreement(self.settings, settings, fingerprint == hash_fingerprint(), me, them)
        if differ is not None:
            raise SettingsMismatch(differ)

    # ------------------------------------------------------------------ accepting

    def _accept_all(self, deadline: float, errors: list[BaseException], failed: threading.Event) -> None:
        """Accept until every process ``j > index`` has joined: each connection handshakes on its own thread.

        A handshake's thread wakes the loop when it ends, so the mesh is complete
        as soon as the last peer is kept, not at the next timeout of ``accept``.
        The loop ends within :data:`ACCEPT_POLL` once ``failed`` is set (connecting
        failed), and sets it when accepting fails.
        """
        listener = self._listener
        assert listener is not None
        expected = set(range(self.index + 1, self.processes))
        pending: dict[socket.socket, threading.Thread] = {}
        state = self._sockets_lock
        wake_reader, wake_writer = socket.socketpair()
        wake_reader.setblocking(False)
        wake_writer.setblocking(False)  # a flood's handshakes never block on a full pair: one waiting byte will do
        watched = select.poll()  # not select.select, which fails on a descriptor above 1023
        watched.register(listener, select.POLLIN)
        watched.register(wake_reader, select.POLLIN)

        def handshake_then_wake(*args: Any) -> None:
            try:
                self._handshake_in_thread(*args)
            finally:
                with contextlib.suppress(OSError):
                    wake_writer.send(b"\0")

        try:
            while True:
                with state:
                    if errors or failed.is_set() or not expected - set(self._sockets) - set(self._disagreements):
                        break
                    for sock in [sock for sock, thread in pending.items() if not thread.is_alive()]:
                        del pending[sock]
                self._check_forming()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    awaited = expected - set(self._sockets) - set(self._disagreements)
                    missing = ", ".join(self.describe(p) for p in sorted(awaited))
                    raise ConnectTimeout(
                        f"process {self.index} was not reached by {missing} before the deadline; check "
                        f"that they are running with the same hostfile, process count and token"
                        f"{self._closed_meanwhile()}"
                    )
                ready = {fd for fd, _ in watched.poll(1000 * min(remaining, ACCEPT_POLL))}
                if wake_reader.fileno() in ready:  # a handshake ended: look again whether every peer is in
                    with contextlib.suppress(BlockingIOError):
                        wake_reader.recv(4096)
                if listener.fileno() not in ready:
                    continue
                listener.settimeout(ACCEPT_POLL)  # ready, but a connection reset meanwhile is not waited for long
                try:
                    sock, _ = listener.accept()
                except TimeoutError:
                    continue
                if len(pending) >= MAX_HANDSHAKES:
                    self._evict_oldest(pending, state)
                thread = threading.Thread(
                    target=handshake_then_wake,
                    args=(sock, expected, min(deadline, time.monotonic() + HANDSHAKE_TIMEOUT), state, errors),
                    name="timely-handshake",
                    daemon=True,
                )
                pending[sock] = thread
                thread.start()
        except BaseException as error:  # noqa: BLE001 - handed to the connecting thread
            with state:
                errors.append(error)
        finally:
            if errors:
                failed.set()
            with state:
                leftovers = [self._live(sock) for sock in pending if self._live(sock) not in self._sockets.values()]
            for sock in leftovers:  # unblocks their threads, which then end
                _shutdown(sock)
            for thread in pending.values():
                thread.join(timeout=1.0)
            wake_reader.close()
            wake_writer.close()

    def _live(self, accepted: socket.socket) -> socket.socket:
        """The socket an accepted connection now uses: its TLS socket once wrapped (under the state lock)."""
        return self._wrapped.get(accepted, accepted)

    def _handshake_in_thread(
        self,
        sock: socket.socket,
        expected: set[int],
        deadline: float,
        state: threading.Lock,
        errors: list[BaseException],
    ) -> None:
        """Handshake with one accepted connection; keep it if it is an expected peer, else close it."""
        who = _describe(sock)
        accepted = sock
        peer: int | None = None
        try:
            if self._tls is not None:
                sock = self._wrap(accepted, deadline, state)
            peer = self._handshake_as_acceptor(sock, accepted, who, expected, deadline, state)
        except HandshakeError as error:  # the real peer, misconfigured: the cluster cannot form
            with state:
                errors.append(error)
        except (OSError, TimeoutError, WireError) as error:
            if accepted not in self._evicted:  # an evicted connection was logged when it was closed
                self._count_refusal(who, str(error) or type(error).__name__)
        except Exception as error:  # noqa: BLE001 - hostile input must never end the accept loop
            self._count_refusal(who, f"{type(error).__name__}: {error}")
        if peer is None:
            sock.close()
        with state:
            self._evicted.discard(accepted)
            self._wrapped.pop(accepted, None)

    def _wrap(self, accepted: socket.socket, deadline: float, state: threading.Lock) -> socket.socket:
        """``accepted`` as the server side of a TLS connection, its TLS handshake done before ``deadline``."""
        assert self._tls is not None
        accepted.settimeout(max(0.01, deadline - time.monotonic()))
        sock = self._tls.server.wrap_socket(accepted, server_side=True, do_handshake_on_connect=False)
        with state:  # from now on, evicting it shuts down the TLS connection
            self._wrapped[accepted] = sock
            evicted = accepted in self._evicted
        if evicted:
            raise ConnectionError("closed to make room while starting TLS")
        sock.do_handshake()
        return sock

    def _evict_oldest(self, pending: dict[socket.socket, threading.Thread], state: threading.Lock) -> None:
        """Close the connection that has been handshaking longest, to make room for a new one.

        A real peer completes its handshake within a few round trips, so only a
        flood of new connections arriving faster than that could crowd it out;
        an idle or stalling connection is what gets closed.
        """
        with state:
            oldest = next((sock for sock in pending if self._live(sock) not in self._sockets.values()), None)
            if oldest is None:
                return
            self._evicted.add(oldest)
            live = self._live(oldest)
        del pending[oldest]
        self._count_refusal(
            _describe(live), f"closed to make room: {MAX_HANDSHAKES} connections were handshaking (the limit)"
        )
        _shutdown(live)

    def _count_refusal(self, who: str, reason: str) -> None:
        # logged first, so that whoever sees the count also finds the reason in the log
        log.warning("process %d refused a connection from %s: %s", self.index, who, reason)
        with self._refused_lock:
            self.refused += 1

    def _refuse(self, channel: _Channel, who: str, reason: str) -> None:
        self._count_refusal(who, reason)
        with contextlib.suppress(OSError):
            channel.send(["refused", reason])

    def _may_join(self, channel: _Channel, who: str, their_index: int, expected: set[int]) -> bool:
        """Whether process ``their_index``, which has proved the token, may join here; else refuse it, saying why."""
        if their_index in self._sockets:
            self._refuse(
                channel,
                who,
                f"process {their_index} has already joined process {self.index} (from "
                f"{_describe(self._sockets[their_index])}); is another process running with -p {their_index}?",
            )
            return False
        if their_index not in expected:
            self._refuse(
                channel,
                who,
                f"unexpected process index {their_index!r}: process {self.index} of {self.processes} is joined by "
                f"processes {self.index + 1} to {self.processes - 1}; use the same hostfile and -n everywhere",
            )
            return False
        return True

    def _handshake_as_acceptor(
        self,
        sock: socket.socket,
        accepted: socket.socket,
        who: str,
        expected: set[int],
        deadline: float,
        state: threading.Lock,
    ) -> int | None:
        channel = _Channel(sock)
        hello = channel.receive(deadline)
        if hello[0] != "hello" or len(hello) < 3 or hello[1] != MAGIC:
            self._refuse(channel, who, "not a pytimely handshake")
            return None
        if hello[2] != PROTOCOL_VERSION:
            self._refuse(
                channel,
                who,
                f"protocol version {hello[2]!r} (this process speaks {PROTOCOL_VERSION}); run the same pytimely "
                "version in every process",
            )
            return None
        try:
            _, _, their_index, processes, their_nonce, fingerprint, *settings = _fields(
                hello, "hello", str, int, int, int, bytes, int, *[int] * len(SETTINGS)
            )
        except WireError as error:
            self._refuse(channel, who, f"malformed hello: {error}")
            return None
        if len(their_nonce) != NONCE_SIZE:
            self._refuse(channel, who, f"malformed hello: a nonce of {len(their_nonce)} bytes, not {NONCE_SIZE}")
            return None
        nonce = os.urandom(NONCE_SIZE)
        channel.send(
            [
                "challenge",
                PROTOCOL_VERSION,
                self.index,
                self.processes,
                nonce,
                _proof(self._token, "acceptor", their_nonce, nonce),
                hash_fingerprint(),
                *self.settings.fields(),
            ]
        )
        receiving, sending = session_keys(self._token, channel.transcript.digest())
        answer = channel.receive(deadline)
        reason = _refusal(answer)
        if reason is not None:
            self._count_refusal(who, f"{reason} (the peer could not verify this process's proof)")
            return None
        try:
            (proof,) = _fields(answer, "proof", bytes)
        except WireError as error:
            self._refuse(channel, who, f"malformed proof: {error}")
            return None
        if not hmac.compare_digest(_proof(self._token, "connector", nonce, their_nonce), proof):
            self._refuse(channel, who, "wrong token")
            return None
        # the peer has proved the token: from here on it is one of the cluster's processes
        with state:
            if accepted in self._evicted:
                return None
            if not self._may_join(channel, who, their_index, expected):
                return None
            try:
                self._check_configuration(their_index, their_index, processes, fingerprint, settings)
            except HandshakeError as error:
                with contextlib.suppress(OSError):
                    channel.send(["refused", str(error)[:MAX_REASON]])
                if not isinstance(error, SettingsMismatch):
                    raise
                self._disagreements[their_index] = error  # raised by connect once every other peer has handshaken
                return None
            channel.send(["welcome"])
            self._keep(their_index, sock, sending=sending, receiving=receiving)
        log.info("process %d joined %s (it connected from %s)", self.index, self.describe(their_index), who)
        return their_index

    # ------------------------------------------------------------------ after the handshake

    def send(self, process: int, data: bytes) -> None:
        """Send whole frames to ``process`` (thread-safe; frames from one thread stay in order)."""
        self._send(process, [data])

    def send_pieces(self, process: int, pieces: list[bytes | memoryview]) -> None:
        """Send the concatenation of ``pieces`` to ``process`` without joining them first (thread-safe).

        Large payloads (columnar batches) go from their own buffers to the socket:
        ``sendmsg`` gathers up to :data:`_GATHER` buffers per call.  Nothing is
        sent to a process reported lost; a failure is reported after the lock is released.
        """
        self._send(process, pieces)

    def _send(self, process: int, pieces: list[bytes | memoryview]) -> None:
        lock = self._locks.get(process)
        if lock is None or (process in self._reported and process not in self._told) or process in self._send_failed:
            return  # not connected (yet), or lost: nothing can be waiting for this
        failure = None
        with lock:
            try:
                _send_all(self._sockets[process], self._sealers[process].seal(pieces))
            except OSError as error:
                failure = error
        if failure is not None:
            self._send_failure(process, failure)

    def offer(self, process: int, data: bytes) -> bool:
        """Send whole frames to ``process`` only if that needs no waiting; whether they went.

        They do not go while another thread sends to ``process`` (a data send may
        block for as long as the peer reads nothing), nor while its socket's
        buffer is full: a heartbeat must never wait on either.
        """
        lock = self._locks.get(process)
        if lock is None or process in self._reported or process in self._send_failed:
            return False
        if not lock.acquire(blocking=False):
            return False
        failure = None
        try:
            sock = self._sockets[process]
            if not _writable(sock):
                return False
            _send_all(sock, self._sealers[process].seal([data]))
        except OSError as error:
            failure = error
        finally:
            lock.release()
        if failure is not None:
            self._send_failure(process, failure)
            return False
        return True

    def said_goodbye(self, process: int) -> None:
        """``process`` has finished: its connection may now end without being a fault."""
        self._finished.add(process)

    def report_silence(self, process: int, seconds: float, how: str | None = None) -> None:
        """``process`` has sent nothing for ``seconds``: report it as lost (``how``: what else is known, a clause)."""
        self._lost(process, f"nothing arrived from it for {seconds:.1f} s" + (f", and {how}" if how else ""))

    def _send_failure(self, process: int, failure: OSError) -> None:
        """A send to ``process`` failed: its connection has ended.  Shut it down, and leave the report to its
        reader, which first reads what ``process`` sent before it ended: a process that stops because another was
        lost says so (a ``stop`` frame) before it closes, and is then not named as the lost one."""
        with self._state:
            self._send_failed.setdefault(process, f"sending failed: {failure}")
        sock = self._sockets.get(process)
        if sock is not None:
            _shutdown(sock)

    def _lost(
        self, process: int, why: str, kind: type[PeerLost] = PeerLost, refused: bool = False, ended: bool = False
    ) -> None:
        """Report ``process`` lost (once), after shutting its connection down so that no send stays blocked on it.

        ``refused``: this process refuses what ``process`` sent (it may still run, and read): ``on_lost`` may
        still send it why (the stop it relays) before the connection is shut down, so that ``process`` does not
        see the connection close unexplained and name this process as the lost one.  ``ended``: the connection
        ended (closed or failed): where :attr:`how_ended` knows the process, the report says how it ended.
        """
        with self._state:
            if self._closing or process in self._finished or process in self._reported:
                return
            self._reported.add(process)
            if refused:
                self._told.add(process)
        sock = self._sockets.get(process)
        if sock is not None and not refused:
            _shutdown(sock)
        how_ended = self.how_ended
        how = how_ended(process) if ended and how_ended is not None else None
        message = lost_report(self.describe(process), why, how, advise=kind is PeerLost and not refused)
        try:
            self._on_lost(kind(message, process, str(self.endpoints[process])))
        finally:
            if refused:
                with self._state:
                    self._told.discard(process)
                if sock is not None:
                    _shutdown(sock)

    def _read(self, peer: int, sock: socket.socket, opener: Opener) -> None:
        reader = FrameReader()
        on_frame = self._on_frame
        last_heard = self.last_heard
        why = "the connection closed"
        kind: type[PeerLost] = PeerLost
        refused = True  # unless the connection ended: then the peer cannot be told why
        try:
            while True:
                count = sock.recv_into(opener.space())
                if not count:
                    break
                last_heard[peer] = time.monotonic()
                for body in opener.received(count):  # nothing is decoded before its record is authentic
                    for header, payload in reader.feed(body):
                        on_frame(peer, header, payload)
        except OSError as error:
            why = f"the connection failed ({error})"
            refused = False
        except SealError as error:
            kind = TamperedFrame
            why = (
                f"what arrived from it failed authentication ({error}): it was changed, dropped or replayed on "
                f"the way, or sent by something that does not know the token; process {self.index} refuses it. "
                "Check the network path between them (--tls encrypts and protects it)"
            )
        except WireError as error:
            why = f"it sent malformed data ({error})"
        except BaseException as error:  # noqa: BLE001 - a reader must always report its end
            why = f"handling its data failed ({type(error).__name__}: {error})"
        else:
            why = self._send_failed.get(peer, why)  # a failed send found the end first (it shut the connection)
            refused = False
        self._lost(peer, why, kind, refused, ended=kind is PeerLost and not refused)

    def close(self) -> None:
        """Close every connection (what arrives afterwards is ignored)."""
        with self._state:
            self._closing = True
        for sock in self._sockets.values():
            _shutdown(sock)
            sock.close()
        current = threading.current_thread()
        for reader in self._readers:
            if reader is not current:
                reader.join(timeout=2.0)
