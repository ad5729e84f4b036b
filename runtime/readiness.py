"""Wake-ups when a socket has something to read: what lets a worker park while its source waits for data.

An operator that reads a socket without blocking (a replay from an
:class:`~runtime.eventlog.EventReader`) has nothing to do while no bytes
arrive.  Instead of asking to run again at once (which keeps its worker
stepping, a CPU core busy doing nothing), it asks :func:`when_readable` to call
back once the socket has bytes to read, or its peer has closed it or failed,
and lets the worker park; the callback activates the operator from this
module's thread (:meth:`~runtime.communication.Communicator.activate_from_outside`).

One thread per process watches every such socket with :mod:`selectors`.  A
request is one-shot: the callback runs once, and the reader asks again if it
still waits.  The thread starts with the first request and ends when no socket
has been watched for :data:`LINGER` seconds, closing its selector and the
socket pair that wakes it (the next request makes new ones).
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import threading
from collections.abc import Callable

__all__ = ["LINGER", "cancel", "watched", "when_readable"]

log = logging.getLogger("runtime.readiness")

LINGER = 2.0
"""Seconds the watching thread stays without a socket to watch before it ends."""


class _Watcher:
    """The sockets watched in one process, and the thread that watches them."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.selector = selectors.DefaultSelector()
        self.bell, self.ringer = socket.socketpair()  # a byte on it makes the thread look at new requests
        self.bell.setblocking(False)
        self.ringer.setblocking(False)
        self.selector.register(self.bell, selectors.EVENT_READ)
        self.thread: threading.Thread | None = None
        self.closed = False
        """Whether the thread ended and closed what it watched with: a request then needs a new watcher."""

    def watch(self, sock: socket.socket, callback: Callable[[], None]) -> bool:
        """Watch ``sock`` for ``callback``; ``False`` if this watcher has closed (ask a new one)."""
        with self.lock:
            if self.closed:
                return False
            with contextlib.suppress(KeyError, ValueError):  # a socket closed since it was watched is forgotten
                self.selector.unregister(sock)
            self.selector.register(sock, selectors.EVENT_READ, callback)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="pytimely-readiness", daemon=True)
                self.thread.start()
        with contextlib.suppress(OSError):  # full: a wake-up is already pending
            self.ringer.send(b"\0")
        return True

    def cancel(self, sock: socket.socket) -> None:
        with self.lock, contextlib.suppress(KeyError, ValueError):
            if not self.closed:  # a closed watcher watches nothing
                self.selector.unregister(sock)

    def watched(self) -> list[socket.socket]:
        """The sockets with a request standing (empty once closed)."""
        with self.lock:
            if self.closed:
                return []
            return [
                key.fileobj
                for key in self.selector.get_map().values()
                if isinstance(key.fileobj, socket.socket) and key.fileobj is not self.bell
            ]

    def _run(self) -> None:
        while True:
            ready = self.selector.select(LINGER)
            callbacks = []
            with self.lock:
                for key, _ in ready:
                    if key.fileobj is self.bell:
                        with contextlib.suppress(OSError):
                            self.bell.recv(4096)
                        continue
                    with contextlib.suppress(KeyError, ValueError):  # cancelled meanwhile: no callback
                        self.selector.unregister(key.fileobj)
                        callbacks.append(key.data)
                if not ready and len(self.selector.get_map()) == 1:  # only the bell: nothing to watch
                    self.thread = None
                    self.closed = True
                    self.selector.close()
                    self.bell.close()
                    self.ringer.close()
                    return
            for callback in callbacks:
                try:
                    callback()
                except Exception:  # the thread must go on watching the other sockets
                    log.exception("a readiness callback failed; the operator it was to wake is not woken")


_watcher: _Watcher | None = None
_create = threading.Lock()


def _the_watcher() -> _Watcher:
    global _watcher
    with _create:
        if _watcher is None or _watcher.pid != os.getpid() or _watcher.closed:  # a forked child has no thread
            _watcher = _Watcher()
        return _watcher


def when_readable(sock: socket.socket, callback: Callable[[], None]) -> None:
    """Call ``callback()`` once, from another thread, when ``sock`` has bytes to read, or is closed or failed.

    If it already has, the callback comes at once.  A second request for the
    same socket replaces the first.  ``callback`` must be quick and must not
    raise (it activates an operator).
    """
    while not _the_watcher().watch(sock, callback):  # that watcher closed meanwhile: the next is new
        pass


def cancel(sock: socket.socket) -> None:
    """Forget a request for ``sock`` (do it before closing the socket); nothing if there is none."""
    watcher = _watcher
    if watcher is not None and watcher.pid == os.getpid():
        watcher.cancel(sock)


def watched() -> list[socket.socket]:
    """The sockets of this process with a :func:`when_readable` request standing (for checks and tests: a
    request that outlives its reader keeps a socket, and the watching thread, alive)."""
    watcher = _watcher
    if watcher is None or watcher.pid != os.getpid():
        return []
    return watcher.watched()
