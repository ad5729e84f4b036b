"""The HTTP server behind ``--metrics``: bounded in threads and in how long one request may take.

Anyone who can reach the port can open connections to it, so the server
holds at most :data:`MAX_REQUEST_THREADS` requests at once (one thread each),
and gives every read and write of a request :data:`REQUEST_TIMEOUT` seconds.
When a connection arrives with every slot taken, the request that has been
running longest is closed to make room for it if it has run longer than
:data:`REQUEST_TIMEOUT` (a connection that sends a byte now and then cannot
hold a slot for ever); otherwise the new connection is closed at once and
counted in :attr:`MetricsHTTPServer.refused`.  A scrape takes milliseconds,
so Prometheus always gets in unless more than :data:`MAX_REQUEST_THREADS`
fresh connections arrive within a few seconds.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

REQUEST_TIMEOUT = 5.0
"""Seconds each read or write of one metrics request may wait; also the age beyond which a request is evicted."""
MAX_REQUEST_THREADS = 16
"""Requests (threads) the metrics endpoint serves at once."""


class _QuietHandler(WSGIRequestHandler):
    """A request handler that logs nothing and times out its socket reads and writes."""

    def setup(self) -> None:
        """Time out every read and write of the request after the server's :attr:`request_timeout`."""
        super().setup()
        self.connection.settimeout(getattr(self.server, "request_timeout", REQUEST_TIMEOUT))

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Log nothing: a scrape every few seconds would flood the log."""


class MetricsHTTPServer(ThreadingMixIn, WSGIServer):
    """A threading WSGI server with at most :data:`MAX_REQUEST_THREADS` requests in progress."""

    daemon_threads = True
    block_on_close = False  # no list of threads is kept: each thread ends with its request
    request_queue_size = 128  # the listen backlog: a burst of connections waits in the kernel, not in threads

    def __init__(
        self, address: tuple[str, int], family: int, limit: int | None = None, timeout: float | None = None
    ) -> None:
        """Bind ``address`` with ``family``; serve at most ``limit`` requests at once, each read within ``timeout``.

        ``None`` takes :data:`MAX_REQUEST_THREADS` and :data:`REQUEST_TIMEOUT` as they are when the server starts.
        """
        self.address_family = family
        super().__init__(address, _QuietHandler)
        self.limit = MAX_REQUEST_THREADS if limit is None else limit
        self.request_timeout = REQUEST_TIMEOUT if timeout is None else timeout
        self.refused = 0
        """Connections closed at once because every slot was taken by a request younger than the timeout."""
        self.failed = 0
        """Requests that ended in an error: timed out, closed early, or malformed."""
        self._running: dict[socket.socket, float] = {}
        self._slots = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Start a thread for ``request`` if a slot is free (or can be freed); else close it."""
        with self._slots:
            if len(self._running) >= self.limit and not self._evict_stale():
                self.refused += 1
                self.shutdown_request(request)
                return
            self._running[request] = time.monotonic()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release(request)
            raise

    def _evict_stale(self) -> bool:
        """Close the oldest request if it has run longer than the timeout (the caller holds the lock)."""
        oldest, started = min(self._running.items(), key=lambda item: item[1])
        if time.monotonic() - started <= self.request_timeout:
            return False
        del self._running[oldest]
        with contextlib.suppress(OSError):
            oldest.shutdown(socket.SHUT_RDWR)  # its thread's next read or write fails, and the thread ends
        return True

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """Serve one request on its own thread, then free its slot."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Count a request that failed (timed out, closed, malformed) instead of printing its traceback."""
        with self._slots:
            self.failed += 1

    def _release(self, request: Any) -> None:
        with self._slots:
            self._running.pop(request, None)

    @property
    def in_progress(self) -> int:
        """Requests being served now (each on its own thread)."""
        with self._slots:
            return len(self._running)


def check_can_listen(host: str, port: int) -> None:
    """Bind ``host:port`` as :func:`start_server` would, and let it go; raises ``OSError`` if it cannot listen."""
    family, _, _, _, sockaddr = next(
        iter(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE))
    )
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does (allow_reuse_address)
        probe.bind((str(sockaddr[0]), port, *sockaddr[2:]))


def start_server(host: str, port: int, app: Callable[..., Any]) -> tuple[MetricsHTTPServer, threading.Thread]:
    """Serve the WSGI ``app`` at ``host:port`` on a daemon thread; raises ``OSError`` if it cannot listen."""
    family, _, _, _, sockaddr = next(
        iter(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE))
    )
    server = MetricsHTTPServer((str(sockaddr[0]), port), family)
    server.set_app(app)
    thread = threading.Thread(target=server.serve_forever, name="pytimely-metrics", daemon=True)
    thread.start()
    return server, thread
