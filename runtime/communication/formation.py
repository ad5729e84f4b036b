"""Watching a cluster form: which peers that already joined have closed their connections since.

While the mesh forms (:meth:`runtime.communication.tcp.Mesh.connect`), a
connection kept after its handshake is not read: its reader starts once every
peer has joined.  A peer that joined and then ended (killed, failed, or gave up
joining) is seen only by the end of its connection, looked at here without
reading what it holds (``POLLRDHUP``).  Such a peer cannot join again (its index
is refused as already joined), so the cluster cannot form any more: the mesh
stops with :func:`lost_while_forming` within :data:`FORMING_GRACE` seconds rather
than at the connect deadline.  During that grace it goes on handshaking with the
peers it still awaits (:class:`LossWhileForming`), so that each of them learns
from it what it must (a shared setting they disagree on, see
:mod:`runtime.communication.agreement`) instead of waiting for it until the deadline.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Callable, Iterable

from runtime.errors import PeerLost


def closed_peers(kept: Iterable[tuple[int, socket.socket]]) -> list[int]:
    """The peers among ``kept`` (``(index, connection)``) whose connections have ended, in index order."""
    poller = select.poll()
    by_fd = {}
    for peer, sock in kept:
        if sock.fileno() >= 0:
            by_fd[sock.fileno()] = peer
            poller.register(sock.fileno(), select.POLLRDHUP)
    return sorted(by_fd[fd] for fd, _ in poller.poll(0))  # POLLRDHUP, or POLLHUP or POLLERR (always reported)


def lost_while_forming(
    index: int, closed: list[int], awaited: list[int], describe: Callable[[int], str], address: Callable[[int], str]
) -> PeerLost:
    """The error of process ``index`` when the peers ``closed`` joined it and then closed their connections
    while ``awaited`` had not joined yet; ``describe(p)`` names process ``p``, ``address(p)`` gives its address."""
    names = ", ".join(describe(peer) for peer in closed)
    waiting = ", ".join(describe(peer) for peer in awaited)
    still = f" (still awaited: {waiting})" if waiting else ""
    return PeerLost(
        f"process {index} lost {names}: it joined and then closed its connection while the cluster was forming"
        f"{still}, so it ended or failed (its own output says why). A process cannot join again once it has "
        "joined: restart every process of the cluster",
        closed[0],
        address(closed[0]),
    )


FORMING_GRACE = 5.0
"""Seconds a process that saw a joined peer close goes on handshaking with the peers it still awaits before it
stops: a process that ends at once leaves a peer waiting for it until the deadline, where a handshake would
have told that peer what to stop for."""


class LossWhileForming:
    """The first peer seen to close while the mesh forms, and since when (shared by the accepting and connecting
    threads of :meth:`runtime.communication.tcp.Mesh.connect`)."""

    def __init__(self) -> None:
        """Nothing seen yet."""
        self.error: PeerLost | None = None
        self._since = 0.0
        self._lock = threading.Lock()

    def look(
        self,
        index: int,
        processes: int,
        kept: list[tuple[int, socket.socket]],
        describe: Callable[[int], str],
        address: Callable[[int], str],
    ) -> None:
        """Note the first of the peers ``kept`` (``(index, connection)``, those that joined process ``index`` of
        ``processes``) whose connection has closed, if any; ``describe`` and ``address`` name a process."""
        closed = closed_peers(kept)
        if not closed:
            return
        joined = {peer for peer, _ in kept}
        awaited = [peer for peer in range(processes) if peer != index and peer not in joined]
        error = lost_while_forming(index, closed, awaited, describe, address)
        with self._lock:
            if self.error is None:  # the first one seen stands
                self.error = error
                self._since = time.monotonic()

    def expired(self) -> bool:
        """Whether a loss was seen :data:`FORMING_GRACE` seconds ago or more: the mesh stops now."""
        return self.error is not None and time.monotonic() - self._since >= FORMING_GRACE
