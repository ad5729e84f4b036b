"""The door of the driver's listeners: a connection proves the job's token before anything else is read.

The driver's :class:`~runtime.spark.rendezvous.Rendezvous` and
:class:`~runtime.spark.progress.ProgressServer` listen on a port anyone on the
network may reach.  Each accepts through a :class:`Gate`, which runs a
challenge and response like the cluster mesh's handshake:

1. the driver sends ``["challenge", nonce]`` (a fresh 16-byte nonce);
2. the task answers ``["proof", its nonce, HMAC, *fields]``: an HMAC-SHA256
   keyed with the job's token over both nonces, and the fields its listener
   needs (a rendezvous: its index and address);
3. the driver checks the HMAC and answers ``["welcome", HMAC]`` over the
   nonces in the other order, which the task checks in turn: each side knows
   the other holds the token, and the token never crosses the network.

Until a connection has proved the token, the gate reads exactly the 8-byte
length prefix and then at most :data:`HANDSHAKE_MAX_FRAME` bytes (a longer
declared frame is refused before anything is allocated for it), decoded as
plain msgpack: a flat list of ``str``, ``bytes`` and ``int`` with strict
lengths.  Each connection has :data:`HANDSHAKE_TIMEOUT` seconds to finish.  At
most :data:`MAX_UNPROVEN` connections handshake at once (one thread each);
when another arrives, the one handshaking longest is closed, so a flood of
idle or slow connections cannot keep a real task out.  Proven connections
are capped too (``max_proven``); beyond that a new connection is closed at
once.  Finished threads are forgotten as new connections arrive.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from runtime.communication.handshake import decode_handshake
from runtime.communication.wire import WireError, frame
from runtime.spark.errors import GateRefused as GateRefused

log = logging.getLogger("runtime.spark.gate")

HANDSHAKE_TIMEOUT = 5.0
"""Seconds a new connection has to prove the token."""
HANDSHAKE_MAX_FRAME = 1024
"""Bytes of one frame read before the token is proved; a longer declared frame is refused unread."""
MAX_UNPROVEN = 64
"""Connections the driver handshakes with at once; beyond it the oldest is closed to make room."""
NONCE_SIZE = 16
_POLL = 0.2


def _proof(token: str, role: bytes, first: bytes, second: bytes) -> bytes:
    return hmac.new(token.encode("utf-8"), role + first + second, hashlib.sha256).digest()


def _exactly(sock: socket.socket, size: int, deadline: float) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the handshake timed out")
        sock.settimeout(remaining)
        data = sock.recv(size - len(chunks))
        if not data:
            raise ConnectionError("the connection closed during the handshake")
        chunks += data
    return bytes(chunks)


def read_small(sock: socket.socket, deadline: float) -> list[Any]:
    """One handshake frame: a flat list of plain fields, at most :data:`HANDSHAKE_MAX_FRAME` bytes, by ``deadline``.

    The length is checked before any of the frame's body is read; anything
    malformed raises :class:`~runtime.communication.wire.WireError`.
    """
    prefix = _exactly(sock, 8, deadline)
    body, head = int.from_bytes(prefix[:4], "big"), int.from_bytes(prefix[4:], "big")
    if body > HANDSHAKE_MAX_FRAME:
        raise WireError(f"a handshake frame of {body} bytes is too large (the limit is {HANDSHAKE_MAX_FRAME})")
    if head != body or body == 0:
        raise WireError("a handshake frame must be a header alone")
    return decode_handshake(_exactly(sock, body, deadline))  # the cluster's handshake decoder, its limits


def prove(sock: socket.socket, token: str, deadline: float, *fields: str | int) -> None:
    """The task's side of the handshake on a connected ``sock``: prove ``token``, send ``fields``, check the driver.

    Raises :class:`GateRefused` if the driver does not prove the same token,
    ``OSError``/:class:`~runtime.communication.wire.WireError` if the
    connection fails or carries something else.
    """
    challenge = read_small(sock, deadline)
    if len(challenge) != 2 or challenge[0] != "challenge" or challenge[1].__class__ is not bytes:
        raise GateRefused("the driver did not send a challenge")
    theirs, mine = challenge[1], os.urandom(NONCE_SIZE)
    sock.sendall(frame(["proof", mine, _proof(token, b"task", theirs, mine), *fields]))
    welcome = read_small(sock, deadline)
    if len(welcome) != 2 or welcome[0] != "welcome" or welcome[1].__class__ is not bytes:
        raise GateRefused("the driver refused the token")
    if not hmac.compare_digest(welcome[1], _proof(token, b"driver", mine, theirs)):
        raise GateRefused("the driver did not prove the job's token")


class Gate:
    """Accepts on ``host`` (an ephemeral port) and hands each connection that proved ``token`` to ``serve``.

    ``serve(conn, fields)`` runs on the connection's own thread with the
    fields the task sent with its proof, and owns ``conn`` (it closes it, now
    or later).  See the module's documentation for the limits.
    """

    def __init__(
        self,
        host: str,
        token: str,
        name: str,
        serve: Callable[[socket.socket, list[Any]], None],
        max_proven: int,
        backlog: int = 128,
    ) -> None:
        """Listen now; accept on a daemon thread named ``name`` until :meth:`close`."""
        self._token = token
        self._name = name
        self._serve = serve
        self.max_proven = max_proven
        self._sock = socket.create_server((host, 0), backlog=backlog)
        self._sock.settimeout(_POLL)
        self.port = int(self._sock.getsockname()[1])
        self.refused = 0
        """Connections closed without being served: a wrong token, malformed, too slow, or over a limit."""
        self.last_refused: str | None = None
        self._lock = threading.Lock()
        self._unproven: dict[socket.socket, float] = {}
        self._handlers: dict[threading.Thread, socket.socket] = {}
        self._proven = 0
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name=name, daemon=True)
        self._thread.start()

    @property
    def handlers(self) -> int:
        """Connection threads alive now (handshaking or serving)."""
        with self._lock:
            return sum(1 for thread in self._handlers if thread.is_alive())

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError as error:
                if self._closed.is_set() or self._sock.fileno() < 0:
                    return
                # out of descriptors (a flood), a connection reset before it was accepted: the listener lives on
                log.warning("%s could not accept a connection: %s", self._name, error)
                self._closed.wait(_POLL)
                continue
            with self._lock:
                self._handlers = {t: s for t, s in self._handlers.items() if t.is_alive()}  # reap
                if self._proven >= self.max_proven:
                    self._refuse(conn, f"{self.max_proven} proven connections are open (the limit)")
                    conn.close()
                    continue
                if len(self._unproven) >= MAX_UNPROVEN:
                    oldest = min(self._unproven, key=self._unproven.__getitem__)
                    del self._unproven[oldest]
                    self._refuse(oldest, f"closed to make room: {MAX_UNPROVEN} connections were handshaking")
                    with contextlib.suppress(OSError):
                        oldest.shutdown(socket.SHUT_RDWR)  # its thread's read fails, and the thread ends
                self._unproven[conn] = time.monotonic()
                thread = threading.Thread(target=self._handle, args=(conn,), name=f"{self._name}-task", daemon=True)
                self._handlers[thread] = conn
            thread.start()

    def _refuse(self, conn: socket.socket, reason: str) -> None:
        """Name and count a refusal (the caller holds the lock); named first, so that whoever sees the count
        (a reader without the lock) also sees its reason."""
        try:
            who = "{}:{}".format(*conn.getpeername()[:2])
        except OSError:
            who = "an unknown address"
        self.last_refused = f"{who}: {reason}"
        self.refused += 1
        log.info("%s refused a connection from %s", self._name, self.last_refused)

    def _handle(self, conn: socket.socket) -> None:
        fields = self._handshake(conn)
        with self._lock:
            evicted = self._unproven.pop(conn, None) is None
            if fields is not None and not evicted:
                self._proven += 1
        if fields is None or evicted:
            conn.close()
            return
        try:
            self._serve(conn, fields)
        except Exception as error:  # noqa: BLE001 - a task's bad input must never end the listener
            log.info("%s: a task's connection failed: %s", self._name, error)
            conn.close()
        finally:
            with self._lock:
                self._proven -= 1

    def _handshake(self, conn: socket.socket) -> list[Any] | None:
        """The fields after a valid proof, or ``None`` (counted) for anything else."""
        deadline = time.monotonic() + HANDSHAKE_TIMEOUT
        mine = os.urandom(NONCE_SIZE)
        try:
            conn.sendall(frame(["challenge", mine]))
            answer = read_small(conn, deadline)
            if len(answer) < 3 or answer[0] != "proof" or answer[1].__class__ is not bytes:
                raise WireError("expected a proof")
            theirs, proof = answer[1], answer[2]
            expected = _proof(self._token, b"task", mine, theirs)
            if proof.__class__ is not bytes or not hmac.compare_digest(proof, expected):
                raise WireError("wrong token")
            conn.sendall(frame(["welcome", _proof(self._token, b"driver", theirs, mine)]))
            conn.settimeout(None)
            return answer[3:]
        except (OSError, WireError) as error:
            with self._lock:
                if conn in self._unproven:  # an evicted connection was counted when it was closed
                    self._refuse(conn, str(error) or type(error).__name__)
            return None

    def close(self) -> None:
        """Stop accepting, shut the connections whose threads still run, and wait briefly for the threads."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread now, not at its next poll
        with contextlib.suppress(OSError):
            self._sock.close()
        with self._lock:
            handlers = [thread for thread in self._handlers if thread.is_alive()]
            for thread in handlers:  # handshaking or serving: their reads fail, and the threads end
                with contextlib.suppress(OSError):
                    self._handlers[thread].shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=1.0)
        for thread in handlers:
            thread.join(timeout=1.0)
