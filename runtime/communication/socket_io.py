"""Blocking socket helpers of the TCP mesh (:mod:`runtime.communication.tcp`): gathered sends, shutting down, looks."""

from __future__ import annotations

import contextlib
import select
import socket
import ssl

_GATHER = 512
"""Buffers handed to one ``sendmsg`` call (below every platform's ``IOV_MAX``)."""
_JOIN_BELOW = 1 << 16
"""Pieces smaller than this in total are joined and sent with one ``sendall``."""


def send_all(sock: socket.socket, pieces: list[bytes | memoryview]) -> None:
    """Write every byte of ``pieces`` to ``sock``, in order, with gathered writes (blocking)."""
    if sum(map(len, pieces)) < _JOIN_BELOW:  # small: one copy is cheaper than the views
        sock.sendall(b"".join(pieces))
        return
    if isinstance(sock, ssl.SSLSocket):  # no sendmsg through TLS: it copies into its records anyway
        for piece in pieces:
            sock.sendall(piece)
        return
    views = [memoryview(piece).cast("B") for piece in pieces if len(piece)]
    start = 0
    while start < len(views):
        batch = views[start : start + _GATHER]
        sent = sock.sendmsg(batch)
        for view in batch:  # skip what was written; keep the rest of a partly written buffer
            if sent >= len(view):
                sent -= len(view)
                start += 1
            else:
                views[start] = view[sent:]
                break


def describe_peer(sock: socket.socket) -> str:
    """``host:port`` of the peer of ``sock``, or ``an unknown address``."""
    try:
        host, port = sock.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "an unknown address"


def shutdown(sock: socket.socket) -> None:
    """Shut ``sock`` down both ways (TLS included, without unwrapping it): blocked sends and reads end."""
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def writable(sock: socket.socket) -> bool:
    """Whether ``sock`` has room to send a few bytes now (its buffer is not full, and it is open)."""
    if sock.fileno() < 0:
        return False
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLOUT)
    return any(events & select.POLLOUT for _, events in poller.poll(0))
