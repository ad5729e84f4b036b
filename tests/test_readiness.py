"""runtime.readiness: one-shot callbacks when a socket has bytes to read, from one watching thread per process."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from helpers import eventually

import runtime
from runtime import execute, readiness
from runtime.errors import WorkerFailed
from runtime.eventlog import EventReader, encode_event, event_log_bytes
from scopes import INTEGER
from scopes.capture import CapturedBatch


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected pair of sockets, closed after the test."""
    ours, theirs = socket.socketpair()
    yield ours, theirs
    readiness.cancel(theirs)
    ours.close()
    theirs.close()


def test_a_callback_comes_when_bytes_arrive_and_only_once(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    calls: list[str] = []
    readiness.when_readable(theirs, lambda: calls.append("ready"))
    ours.sendall(b"x")
    eventually(lambda: calls, what="the callback")
    ours.sendall(b"y")  # still readable: a request is one-shot, so no second call without a second request
    readiness.when_readable(ours, lambda: calls.append("other"))
    theirs.sendall(b"z")
    eventually(lambda: "other" in calls, what="the other socket's callback")
    assert calls == ["ready", "other"]


def test_a_socket_already_readable_or_closed_by_its_peer_calls_back_at_once(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    ours.sendall(b"x")
    ready = threading.Event()
    readiness.when_readable(theirs, ready.set)
    assert ready.wait(10)
    ours.close()
    ended = threading.Event()
    other, closing = socket.socketpair()
    closing.close()  # the peer closes: reading would see the end, so it is readable
    readiness.when_readable(other, ended.set)
    assert ended.wait(10)
    readiness.cancel(other)
    other.close()


def test_a_cancelled_request_never_calls_back(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    calls: list[str] = []
    readiness.when_readable(theirs, lambda: calls.append("cancelled"))
    readiness.cancel(theirs)
    ours.sendall(b"x")  # readable from now on: a request still standing would fire with the next one
    second_ours, second_theirs = socket.socketpair()
    try:
        readiness.when_readable(second_theirs, lambda: calls.append("second"))
        second_ours.sendall(b"y")
        eventually(lambda: "second" in calls, what="the second callback")
        assert calls == ["second"]
    finally:
        second_ours.close()
        second_theirs.close()


def test_the_watching_thread_ends_when_nothing_is_watched_closing_its_sockets(
    pair: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread ends once nothing is watched.  Its wake-up socket pair was left open then (an 'unclosed socket'
    ResourceWarning at exit in every process that had replayed from a socket); it is closed now, and the next
    request makes a new watcher."""
    monkeypatch.setattr(readiness, "LINGER", 0.05)
    ours, theirs = pair
    first = threading.Event()
    readiness.when_readable(theirs, first.set)
    ours.sendall(b"x")
    assert first.wait(10)
    watcher = readiness._watcher
    assert watcher is not None
    eventually(
        lambda: not any(thread.name == "pytimely-readiness" for thread in threading.enumerate()),
        what="the watching thread to end",
    )
    assert watcher.closed and watcher.bell.fileno() == -1 and watcher.ringer.fileno() == -1
    second = threading.Event()
    readiness.when_readable(ours, second.set)  # a new watcher, and a new thread
    theirs.sendall(b"y")
    assert second.wait(10)
    assert readiness._watcher is not watcher


@pytest.mark.parametrize("workers", [1, 2], ids=["the failing worker", "a worker stopped by another's failure"])
def test_a_replay_abandoned_by_an_error_leaves_no_socket_watched_nor_open(
    workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each worker replays a socket that stays open with more to come, so each replay asks the watcher for it;
    the last worker's records make an operator downstream raise.  The worker that raised, and (with two) the
    worker stopped because of it, drop their requests and close the sockets their readers own, and the watching
    thread ends; before, a request stood until the socket became readable (here: never)."""
    monkeypatch.setattr(readiness, "LINGER", 0.05)
    pairs = [socket.socketpair() for _ in range(workers)]
    for index, (sender, _) in enumerate(pairs):
        record = "boom" if index == workers - 1 else "fine"
        sender.sendall(event_log_bytes([encode_event(CapturedBatch(0, [record]))]))  # and the log goes on
    readers = [EventReader(receiver, INTEGER) for _, receiver in pairs]

    def explode(record: str) -> str:
        if record == "boom":  # the replays have taken their records and wait: each has asked the watcher
            eventually(
                lambda: {id(receiver) for _, receiver in pairs} <= {id(sock) for sock in readiness.watched()},
                what="every replay to ask the watcher for its socket",
            )
            raise RuntimeError("a user operator failed")
        return record

    def main(worker: runtime.Worker) -> None:
        probe = worker.dataflow(lambda scope: scope.replay(readers).map(explode).probe())
        worker.step_while(lambda: not probe.done())

    try:
        with pytest.raises(WorkerFailed, match="a user operator failed"):
            execute(main, workers=workers, stall_timeout=30.0)
        assert readiness.watched() == []
        assert all(receiver.fileno() == -1 for _, receiver in pairs)  # the readers owned them: closed
        eventually(
            lambda: not any(thread.name == "pytimely-readiness" for thread in threading.enumerate()),
            what="the watching thread to end",
        )
    finally:
        for sender, receiver in pairs:
            readiness.cancel(receiver)
            sender.close()
            receiver.close()
