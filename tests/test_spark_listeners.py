"""The Spark driver's listeners prove the token before reading anything, and bound connections, threads and memory.

No Spark is needed: :class:`Rendezvous` and :class:`ProgressServer` are made
directly, as the driver makes them.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
from helpers.bounds import eventually, rss, threads
from helpers.failing_accept import FailingAccept

from runtime.communication.wire import frame
from runtime.spark import gate
from runtime.spark.gate import HANDSHAKE_TIMEOUT, MAX_UNPROVEN, GateRefused, prove
from runtime.spark.progress import ProgressReporter, ProgressServer
from runtime.spark.rendezvous import Rendezvous, RendezvousFailed, gather

FLOOD = 300
SETTLE = HANDSHAKE_TIMEOUT / 2
"""Seconds the threads of ended connections have to go: half the handshake timeout, so that a flood whose
threads were not bounded is still seen (its silent connections would only time out later)."""
"""Connections in each flood (the review used 1,500: +634 MB and +1,537 MB, 1,505 threads)."""


def port_of(address: str) -> int:
    return int(address.rpartition(":")[2])


def flood(port: int, count: int = FLOOD, silent: bool = False) -> list[socket.socket]:
    """``count`` connections that each declare a 1 MiB frame and send none of it (or, ``silent``, send nothing)."""
    held = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port))
        if not silent:
            sock.sendall(struct.pack("!II", 1 << 20, 1 << 20))
        held.append(sock)
    return held


def close_all(socks: list[socket.socket]) -> None:
    for sock in socks:
        sock.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("silent", [False, True], ids=["declared bodies", "silent connections"])
def test_a_flood_costs_no_memory_or_threads_and_tasks_still_meet(silent: bool) -> None:
    before_threads, before_rss = threads(), rss()
    rendezvous = Rendezvous("127.0.0.1", "secret", 2)
    held = flood(port_of(rendezvous.address), silent=silent)
    try:
        # a real gang of two meets while the flood holds its connections open
        found: dict[int, list[str]] = {}
        tasks = [
            threading.Thread(
                target=lambda i=i: found.__setitem__(i, gather(rendezvous.address, "secret", i, f"h{i}:1", 2, 20))
            )
            for i in range(2)
        ]
        for task in tasks:
            task.start()
        for task in tasks:
            task.join(30)
        assert found == {0: ["h0:1", "h1:1"], 1: ["h0:1", "h1:1"]}
        # the flood's handshakes and the accepting thread, once the threads of evicted connections and of the
        # gang's own (proven, answered) connections have ended: on a loaded machine they may still be ending now.
        # Well within the handshake timeout, after which an unbounded flood's threads would end by themselves.
        eventually(lambda: threads() <= before_threads + MAX_UNPROVEN + 1, SETTLE, "the threads to settle")
        assert rss() - before_rss < 40 << 20
        eventually(lambda: rendezvous.gate.refused >= FLOOD - MAX_UNPROVEN, 10, "refusals")  # too large, or evicted
    finally:
        close_all(held)
        rendezvous.close()
    eventually(lambda: threads() <= before_threads, 10, "the rendezvous's threads to end")


@pytest.mark.timeout(60)
def test_a_flood_on_the_progress_server_costs_no_memory_or_threads_and_events_still_arrive() -> None:
    events: list[dict[str, object]] = []
    before_threads, before_rss = threads(), rss()
    server = ProgressServer("127.0.0.1", "secret", events.append)
    held = flood(server.port)
    try:
        reporter = ProgressReporter(server.address, "secret", task=3, attempt=0)
        reporter.report("round", round=1, records=5)
        eventually(lambda: bool(events), 20, "the real task's event")
        assert events[0]["task"] == 3 and events[0]["records"] == 5
        # the handshakes, the accepting thread and the real task's reader (once evicted connections' threads ended)
        eventually(lambda: threads() <= before_threads + MAX_UNPROVEN + 2, SETTLE, "the threads to settle")
        assert rss() - before_rss < 40 << 20
        reporter.close()
    finally:
        close_all(held)
        server.close()
    eventually(lambda: threads() <= before_threads, 10, "the progress server's threads to end")


def test_the_token_is_proved_before_anything_else_is_read_and_never_sent() -> None:
    events: list[dict[str, object]] = []
    server = ProgressServer("127.0.0.1", "secret", events.append)
    try:
        # the old protocol's first frame, with the right token in clear, is not a proof
        old = socket.create_connection(("127.0.0.1", server.port))
        old.sendall(frame(["hello", "secret"]) + frame([{"event": "forged"}]))
        wrong = ProgressReporter(server.address, "guess", task=0, attempt=0)
        assert wrong._sock is None  # the driver did not welcome it
        wrong.report("forged")
        eventually(lambda: server.gate.refused >= 2, 10, "both intruders to be refused")
        assert "wrong token" in (server.gate.last_refused or "") or "expected a proof" in (
            server.gate.last_refused or ""
        )
        real = ProgressReporter(server.address, "secret", task=1, attempt=0)
        real.report("started")
        eventually(lambda: bool(events), 10, "the real event")
        assert [event["event"] for event in events] == ["started"]
        real.close()
        old.close()
    finally:
        server.close()


def test_a_task_refuses_a_driver_that_does_not_know_the_token() -> None:
    impostor = Rendezvous("127.0.0.1", "other", 1)
    try:
        with pytest.raises(RendezvousFailed, match="could not learn its peers"):
            gather(impostor.address, "secret", 0, "h0:1", 1, 5)
    finally:
        impostor.close()
    a, b = socket.socketpair()
    try:
        b.sendall(frame(["challenge", b"n" * 16]))
        b.sendall(frame(["welcome", b"x" * 32]))
        with pytest.raises(GateRefused, match="did not prove"):
            prove(a, "secret", time.monotonic() + 5)
    finally:
        a.close()
        b.close()


def test_a_connection_that_never_proves_the_token_is_closed_after_the_deadline(monkeypatch) -> None:
    monkeypatch.setattr(gate, "HANDSHAKE_TIMEOUT", 0.3)
    server = ProgressServer("127.0.0.1", "secret", lambda event: None)
    idle = socket.create_connection(("127.0.0.1", server.port))
    try:
        # the handler thread counts the refusal, names it and then ends: wait for the end, not just the count
        eventually(
            lambda: server.gate.refused == 1 and server.gate.handlers == 0, 10, "the idle connection to be closed"
        )
        assert "timed out" in (server.gate.last_refused or "")
        idle.settimeout(5)
        assert idle.recv(1 << 10)  # the challenge
        assert idle.recv(1 << 10) == b""  # then the close
    finally:
        idle.close()
        server.close()


def test_a_declared_frame_beyond_the_handshake_limit_is_refused_unread() -> None:
    server = ProgressServer("127.0.0.1", "secret", lambda event: None)
    sock = socket.create_connection(("127.0.0.1", server.port))
    try:
        sock.sendall(struct.pack("!II", gate.HANDSHAKE_MAX_FRAME + 1, gate.HANDSHAKE_MAX_FRAME + 1))
        eventually(lambda: server.gate.refused == 1, 10, "the refusal")
        assert "too large" in (server.gate.last_refused or "")
    finally:
        sock.close()
        server.close()


@pytest.mark.timeout(60)
def test_the_gate_accepts_again_after_accept_fails() -> None:
    """A flood that used up the driver's descriptors (EMFILE at ``accept``) ended the accepting thread for good,
    so every task after it timed out; the gate now logs the failure and goes on accepting."""
    served: list[list[object]] = []

    def serve(conn: socket.socket, fields: list[object]) -> None:
        served.append(fields)
        conn.close()

    door = gate.Gate("127.0.0.1", "secret", "test-gate", serve, max_proven=4)
    try:
        failing = FailingAccept(door._sock)  # noqa: SLF001 - the accepting thread reads it on every call
        door._sock = failing  # type: ignore[assignment]  # noqa: SLF001
        eventually(lambda: failing.failures == 0, 10, "accept to fail once")
        with socket.create_connection(("127.0.0.1", door.port)) as sock:
            prove(sock, "secret", time.monotonic() + 10, 7)
        eventually(lambda: served == [[7]], 10, "the task after the failure to be served")
    finally:
        door.close()


@pytest.mark.parametrize(
    "header",
    [
        [{"event": "round"}],  # no task, attempt or time: on_progress would meet a KeyError
        [{"event": "round", "task": -1, "attempt": 0, "at": 1.0}],
        [{"event": "round", "task": "1", "attempt": 0, "at": 1.0}],
        [{"event": "round", "task": True, "attempt": 0, "at": 1.0}],
        [{"event": 5, "task": 1, "attempt": 0, "at": 1.0}],
        [{"event": "round", "task": 1, "attempt": 0, "at": float("nan")}],
        [{"event": "round", "task": 1, "attempt": 0, "at": 1.0, 7: "x"}],
        [{"event": "round", "task": 1, "attempt": 0, "at": 1.0}, "more"],
        ["round"],
    ],
    ids=repr,
)
def test_a_proven_task_sending_what_is_not_an_event_ends_its_reporting_and_nothing_reaches_on_progress(
    header: list[object],
) -> None:
    events: list[dict[str, object]] = []
    server = ProgressServer("127.0.0.1", "secret", events.append)
    try:
        reporter = ProgressReporter(server.address, "secret", task=1, attempt=0)
        assert reporter._sock is not None
        reporter._sock.sendall(frame(header))
        reporter.report("after")
        eventually(lambda: server.malformed == 1, 10, "the malformed event to be refused")
        assert "not [event]" in (server.last_malformed or "")
        time.sleep(0.2)
        assert events == []
        honest = ProgressReporter(server.address, "secret", task=2, attempt=0)
        honest.report("round", round=1)
        eventually(lambda: bool(events), 10, "the honest task's event")
        assert events[0]["task"] == 2 and events[0]["event"] == "round"
        honest.close()
        reporter.close()
    finally:
        server.close()
