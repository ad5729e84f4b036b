"""The handshake's messages: small frames of plain fields, decoded with strict limits before a peer is trusted.

Used by :mod:`runtime.communication.tcp` (which describes the handshake).
Nothing here decodes an extension type, so no registered codec ever runs for
a peer that has not proved the cluster's token.
"""

from __future__ import annotations

import hashlib
import hmac
import socket
import struct
import time
from typing import Any

import msgpack  # type: ignore[import-untyped]

from runtime.communication.wire import WireError, frame

PREFIX = struct.Struct("!II")
"""A frame's length prefix: body length, header length."""
MAGIC = "pytimely"
"""The first field of every hello."""
HANDSHAKE_MAX_FRAME = 1024
"""The largest handshake frame accepted, in bytes (a real one is under 100)."""
NONCE_SIZE = 16
"""Bytes of each side's fresh nonce."""
PROOF_SIZE = 32
"""Bytes of a proof (HMAC-SHA256)."""
MAX_REASON = 512
"""The longest string field accepted (a refusal's reason)."""
MAX_FIELDS = 12
"""The most fields a handshake message may have, its name included (a ``hello`` has 10)."""


def hash_fingerprint() -> int:
    """The hash of a fixed string: equal in two processes iff they hash strings alike."""
    return hash("pytimely: exchange routes records by hash") & 0xFFFFFFFF


def proof(token: str, role: str, first: bytes, second: bytes) -> bytes:
    """Proof of the token by ``role`` over both nonces (never the token itself)."""
    return hmac.new(token.encode("utf-8"), role.encode() + first + second, hashlib.sha256).digest()


def decode_handshake(head: bytes) -> list[Any]:
    """One handshake message: a flat list of scalars, decoded as plain msgpack with strict limits.

    No extension type is decoded (so no codec runs) and nothing nests; any
    other input raises :class:`~runtime.communication.wire.WireError`.
    """
    try:
        message = msgpack.unpackb(
            head,
            raw=False,
            strict_map_key=True,
            max_str_len=MAX_REASON,
            max_bin_len=PROOF_SIZE,
            max_array_len=MAX_FIELDS,
            max_map_len=0,
            max_ext_len=0,
        )
    except (ValueError, TypeError, msgpack.UnpackException) as error:
        raise WireError(f"a malformed handshake frame ({type(error).__name__}: {error})") from None
    if message.__class__ is not list or not message or message[0].__class__ is not str:
        raise WireError("a handshake frame must be a list that starts with the message's name")
    for field in message:
        if field.__class__ not in (str, bytes, int):
            raise WireError(f"a handshake frame holds a {type(field).__name__}, not a plain field (str, bytes, int)")
    return message


def fields(message: list[Any], name: str, *types: type) -> list[Any]:
    """``message``'s fields after its name, checked to be ``name`` and ``types`` exactly; else :class:`WireError`."""
    if message[0] != name or len(message) != len(types) + 1:
        raise WireError(f"expected a {name} of {len(types)} field(s), got {message[0]!r} with {len(message) - 1}")
    for position, (field, kind) in enumerate(zip(message[1:], types, strict=True), 1):
        if field.__class__ is not kind:
            raise WireError(f"field {position} of the {name} has type {type(field).__name__}, not {kind.__name__}")
    return message[1:]


def refusal(message: list[Any]) -> str | None:
    """The reason of a well-formed ``refused`` message, else None.

    The peer may not have proved the token: its text goes into errors and logs with every character that is not
    printable (a line break, a terminal's escape sequence) escaped, so it cannot forge lines there.
    """
    if message[0] == "refused" and len(message) == 2 and message[1].__class__ is str:
        reason = str(message[1])
        return reason if reason.isprintable() else "".join(c if c.isprintable() else ascii(c)[1:-1] for c in reason)
    return None


class Channel:
    """Blocking frame I/O on one socket, used during the handshake.

    It reads exactly one frame at a time and never more: the peer may send its
    first data right after the handshake, and those bytes belong to the
    connection's reader thread.  Every frame sent or received is added to
    :attr:`transcript`, from which the session keys are derived.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.transcript = hashlib.blake2b(digest_size=32)

    def send(self, header: list[Any]) -> None:
        data = frame(header)
        self.transcript.update(data)
        self.sock.sendall(data)

    def _exactly(self, size: int, deadline: float) -> bytes:
        chunks = bytearray()
        while len(chunks) < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the handshake timed out")
            self.sock.settimeout(remaining)
            data = self.sock.recv(size - len(chunks))
            if not data:
                raise ConnectionError("the connection closed during the handshake")
            chunks += data
        return bytes(chunks)

    def receive(self, deadline: float) -> list[Any]:
        """The next handshake message (see :func:`decode_handshake`), read before ``deadline``."""
        prefix = self._exactly(8, deadline)
        body, head = PREFIX.unpack(prefix)
        if body > HANDSHAKE_MAX_FRAME:
            hint = ""
            if prefix[:2] == b"\x16\x03":
                hint = "; it looks like TLS: give every process the same --tls and --tls-ca options, or none"
            raise WireError(
                f"a handshake frame of {body} bytes is too large (the limit is {HANDSHAKE_MAX_FRAME}){hint}"
            )
        if head != body or body == 0:
            raise WireError("a handshake frame must be a header alone")
        data = self._exactly(body, deadline)
        self.transcript.update(PREFIX.pack(body, head) + data)
        return decode_handshake(data)
