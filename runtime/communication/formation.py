"""Watching a cluster form: which peers that already joined have closed their connections since.

While the mesh forms (:meth:`runtime.communication.tcp.Mesh.connect`), a
connection kept after its handshake is not read: its reader starts once every
peer has joined.  A peer that joined and then ended (killed, failed, or gave up
joining) is seen only by the end of its connection, looked at here without
reading what it holds (``POLLRDHUP``).  Such a peer cannot join again (its index
is refused as already joined), so the cluster cannot form any more: the mesh
stops at once with :func:`lost_while_forming` rather than at the connect deadline.
"""

from __future__ import annotations

import select
import socket
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
