"""Sealed records: after the handshake, every byte between two processes carries a keyed MAC.

The handshake (:mod:`runtime.communication.tcp`) proves that both ends know the
cluster's token; :func:`session_keys` then derives two keys from the token and
the handshake's transcript (both sides' fresh nonces included), one for each
direction of the connection.  An on-path attacker who does not know the token
cannot compute them, and keys never repeat across connections.

Each send is cut into records of at most :data:`RECORD_MAX` bytes::

    [u32 length][8-byte head tag][length bytes][16-byte tag]

where, with ``n`` the record's number in its direction (counted from 0 by
both ends, never sent), ``head tag = MAC(n, length, "head")`` and
``tag = MAC(n, length, bytes)``: HMAC-SHA256 truncated (OpenSSL's SHA-256
uses the CPU's SHA instructions where there are some, and measured faster
than keyed BLAKE2b; ``benchmarks/wire_columnar.py`` measures the cost).
The receiver checks the head tag before it waits for the body (so a changed
length is caught at once, not after waiting for bytes that never come), and
the tag before anything in the body is decoded: a changed, dropped, repeated, reordered or spliced record
fails, and :class:`~runtime.errors.SealError` says which record and why.
The frames of :mod:`runtime.communication.wire` travel inside the records
unchanged: the frame interface the fabric sees is the same.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Iterator

from runtime.errors import SealError

RECORD_MAX = 1 << 18
"""The largest record body in bytes (256 KiB, the fabric's flush size); a longer send is cut into several records.

Each connection's :class:`Opener` holds two records at most, so a process's receive buffers stay at 0.5 MiB a peer."""
HEAD_TAG_SIZE = 8
"""Bytes of a record's head tag (over its number and length)."""
TAG_SIZE = 16
"""Bytes of a record's tag (over its number, length and body)."""
KEY_SIZE = 32
"""Bytes of each direction's session key."""

_HEAD = struct.Struct("!I8s")
_NUMBERED = struct.Struct("!QI")
_HEAD_LABEL = b"head"
HEAD_SIZE = _HEAD.size
"""Bytes before a record's body: its length and head tag."""
OVERHEAD = HEAD_SIZE + TAG_SIZE
"""Bytes a record adds to what it carries."""


def session_keys(token: str, transcript: bytes) -> tuple[bytes, bytes]:
    """The keys ``(connector to acceptor, acceptor to connector)`` of one connection.

    ``transcript`` is a digest of the handshake messages both sides saw (the
    nonces in them make every connection's keys new).
    """
    root = hashlib.blake2b(token.encode("utf-8"), digest_size=64, person=b"pytimely-token").digest()
    return (
        hashlib.blake2b(b"connector>acceptor" + transcript, key=root, digest_size=KEY_SIZE).digest(),
        hashlib.blake2b(b"acceptor>connector" + transcript, key=root, digest_size=KEY_SIZE).digest(),
    )


class Sealer:
    """Seals what one side sends in one direction; call :meth:`seal` in the order the bytes go out."""

    def __init__(self, key: bytes) -> None:
        """Seal with ``key`` (one direction's session key)."""
        self._mac = hmac.new(key, digestmod="sha256")
        self._number = 0

    def seal(self, pieces: list[bytes | memoryview]) -> list[bytes | memoryview]:
        """The records that carry the concatenation of ``pieces``, as pieces to write in order (no copy of data)."""
        out: list[bytes | memoryview] = []
        body: list[bytes | memoryview] = []
        size = 0
        for piece in pieces:
            if len(piece) + size <= RECORD_MAX:
                if len(piece):
                    body.append(piece)
                    size += len(piece)
                continue
            view = memoryview(piece).cast("B")
            while len(view):
                take = min(len(view), RECORD_MAX - size)
                body.append(view[:take])
                size += take
                view = view[take:]
                if size == RECORD_MAX:
                    self._record(body, size, out)
                    body, size = [], 0
        if size:
            self._record(body, size, out)
        return out

    def _record(self, body: list[bytes | memoryview], size: int, out: list[bytes | memoryview]) -> None:
        numbered = _NUMBERED.pack(self._number, size)
        self._number += 1
        head = self._mac.copy()
        head.update(numbered + _HEAD_LABEL)
        mac = self._mac.copy()
        mac.update(numbered)
        for piece in body:
            mac.update(piece)
        out.append(_HEAD.pack(size, head.digest()[:HEAD_TAG_SIZE]))
        out.extend(body)
        out.append(mac.digest()[:TAG_SIZE])


class Opener:
    """Checks and opens the records one side receives in one direction, from a buffer of its own.

    Receive into :meth:`space`, then iterate :meth:`received`: it yields the
    body of every record now complete and authentic (a view, valid until the
    next :meth:`space`), and raises :class:`~runtime.errors.SealError` at the
    first that is not.  The buffer holds two records at most: bounded.
    """

    def __init__(self, key: bytes) -> None:
        """Open records sealed with ``key``."""
        self._mac = hmac.new(key, digestmod="sha256")
        self._number = 0
        self._capacity = 2 * (RECORD_MAX + OVERHEAD)
        self._buffer = bytearray(self._capacity)
        self._view = memoryview(self._buffer)
        self._start = 0
        self._filled = 0

    @property
    def records(self) -> int:
        """How many records were opened."""
        return self._number

    def space(self) -> memoryview:
        """Where to receive the next bytes (never empty)."""
        if self._start == self._filled:
            self._start = self._filled = 0
        elif self._start > self._capacity // 2:  # what remains (one unfinished record) fits in the first half
            remaining = self._filled - self._start
            self._buffer[:remaining] = self._view[self._start : self._filled]
            self._start, self._filled = 0, remaining
        return self._view[self._filled :]

    def received(self, count: int) -> Iterator[memoryview]:
        """``count`` bytes arrived in :meth:`space`: yield the body of every record now complete and authentic."""
        self._filled += count
        view = self._view
        while self._filled - self._start >= HEAD_SIZE:
            start = self._start
            length, head_tag = _HEAD.unpack_from(self._buffer, start)
            numbered = _NUMBERED.pack(self._number, length)
            head = self._mac.copy()
            head.update(numbered + _HEAD_LABEL)
            if not hmac.compare_digest(head.digest()[:HEAD_TAG_SIZE], head_tag):
                raise SealError(f"record {self._number}: its head (length {length}) failed its MAC")
            if length > RECORD_MAX:
                raise SealError(f"record {self._number}: {length} bytes, over the limit of {RECORD_MAX}")
            end = start + HEAD_SIZE + length
            if self._filled < end + TAG_SIZE:
                return
            mac = self._mac.copy()
            mac.update(numbered)
            mac.update(view[start + HEAD_SIZE : end])
            if not hmac.compare_digest(mac.digest()[:TAG_SIZE], view[end : end + TAG_SIZE]):
                raise SealError(f"record {self._number} ({length} bytes): its body failed its MAC")
            self._number += 1
            self._start = end + TAG_SIZE
            yield view[start + HEAD_SIZE : end]
