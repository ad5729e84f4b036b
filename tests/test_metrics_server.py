"""The metrics endpoint's HTTP server: a request that never finishes times out, and threads are capped."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from helpers.bounds import eventually, threads

pytest.importorskip("prometheus_client")

from runtime import metrics_http  # noqa: E402
from runtime.metrics import serve_metrics  # noqa: E402


def scrape(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200 and b"pytimely_stalled" in response.read()
    except OSError:
        return False


@pytest.mark.timeout(60)
def test_half_sent_requests_are_capped_timed_out_and_a_scrape_still_gets_in(monkeypatch):
    monkeypatch.setattr(metrics_http, "REQUEST_TIMEOUT", 0.5)
    server = serve_metrics("127.0.0.1:0")
    before = threads()  # with the server's own threads
    held: list[socket.socket] = []
    try:
        for _ in range(200):  # each sends half a request and then waits, holding its connection open
            sock = socket.create_connection(("127.0.0.1", server.port))
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            held.append(sock)
        # one thread per request at most, and never more than the cap
        assert threads() <= before + metrics_http.MAX_REQUEST_THREADS
        eventually(lambda: scrape(server.url), 20, "a real scrape to be served during the flood")
        eventually(lambda: threads() <= before, 30, "the half-sent requests' threads to end")
    finally:
        for sock in held:
            sock.close()
        server.close()
