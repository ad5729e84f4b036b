"""The live viewer bounds what a connection can make it hold: names, the model, the queue, idle slots, threads.

The review's numbers: 300 events with 3 MiB operator names grew the viewer
from 41 MB to 1,940 MB; 400 such events queued 1,269 MB; 32 connections that
sent a header and idled locked a real program out; 20,000 short connections
left 20,001 thread objects.  These tests use smaller but telling numbers.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest
from helpers.bounds import eventually, rss, threads

from runtime.instrument import (
    K_FRONTIERS,
    K_MESSAGES,
    K_OPERATOR,
    K_POINTSTAMPS,
    K_SCHEDULE,
    K_SHUTDOWN,
    OperatorCreated,
    RecordingStream,
    encode_events,
    encode_header,
)
from scopes.progress.timestamp import Product
from viz import limits
from viz.model import Model
from viz.tui import sources
from viz.tui.adapter import TuiState
from viz.tui.ingest import apply_raw
from viz.tui.sources import MAX_CONNECTIONS, LiveListener

BIG = 3 << 20
"""Characters of a hostile operator name, as in the review."""


def operator(index: int, name: str) -> tuple[object, ...]:
    return (K_OPERATOR, 0, index + 1, time.monotonic(), (0, index + 1), name, 1, 1, ((0,),), None, None)


def connect(listener: LiveListener) -> socket.socket:
    return socket.create_connection(("127.0.0.1", listener.port))


@pytest.mark.timeout(120)
def test_huge_operator_names_are_clipped_and_neither_the_queue_nor_the_model_grows() -> None:
    listener = LiveListener("127.0.0.1", 0)
    listener.start()
    state = TuiState()
    before = rss()
    sender = connect(listener)
    try:
        sender.sendall(encode_header(0))
        for index in range(60):  # 180 MiB of names: held whole, the queue and the model would pass 360 MB
            sender.sendall(encode_events([operator(index, chr(ord("a") + index % 26) * BIG)]))
            for _connection, raws in listener.take():
                apply_raw(state, raws)
        eventually(lambda: listener.received == 60, 30, "the 60 events")
        for _connection, raws in listener.take():
            apply_raw(state, raws)
        assert len(state.model.operators) == 60
        name = state.model.operators[(0, 1)].name
        assert name.startswith("a" * limits.MAX_NAME) and name.endswith(f"[{BIG - limits.MAX_NAME:,} more characters]")
        assert len(name) < limits.MAX_NAME + 40
        assert rss() - before < 64 << 20, f"the viewer grew by {(rss() - before) >> 20} MiB"
    finally:
        sender.close()
        listener.close()


@pytest.mark.timeout(120)
def test_huge_timestamps_in_progress_events_are_clipped_too() -> None:
    listener = LiveListener("127.0.0.1", 0)
    listener.start()
    state = TuiState()
    before = rss()
    sender = connect(listener)
    try:
        sender.sendall(encode_header(0) + encode_events([operator(0, "Op")]))
        for index in range(60):  # a pointstamp at a 3 MiB time, never retracted: 180 MiB if kept whole
            huge = chr(ord("a") + index % 26) * BIG + str(index)
            sender.sendall(encode_events([(K_POINTSTAMPS, 0, index + 2, time.monotonic(), (0,), ((0, huge, 1),))]))
            for _connection, raws in listener.take():
                apply_raw(state, raws)
        eventually(lambda: listener.received == 61, 30, "the 61 events")
        for _connection, raws in listener.take():
            apply_raw(state, raws)
        state.model.settle()
        times = [t for counts in state.model.workers[0].tracked.values() for t in counts]
        assert times and all(len(t) < limits.MAX_NAME + 40 and t.endswith("more characters]") for t in times)
        assert rss() - before < 64 << 20, f"the viewer grew by {(rss() - before) >> 20} MiB"
    finally:
        sender.close()
        listener.close()


def test_the_model_clips_names_from_recordings_too_and_caps_its_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_OPERATORS", 10)
    monkeypatch.setattr(limits, "MAX_WORKERS", 3)
    model = Model()
    for index in range(25):
        model.apply(OperatorCreated(0, index, 0.0, (0, index + 1), "x" * 5000, 1, 1, ((0,),), None, "f.py:1" * 1000))
    assert len(model.operators) == 10 and model.over_limit == 15
    info = model.operators[(0, 1)]
    assert len(info.name) < limits.MAX_NAME + 40 and info.name.endswith("more characters]")
    assert info.site is not None and len(info.site) < limits.MAX_NAME + 40
    for worker in range(10):
        model.apply(OperatorCreated(worker, 99, 0.0, (0, 1), "again", 1, 1, ((0,),), None, None))
    assert set(model.workers) == {0, 1, 2} and model.over_limit == 15 + 7


@pytest.mark.timeout(60)
def test_the_queue_is_bounded_in_bytes_when_nothing_takes_from_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "MAX_QUEUED_BYTES", 1 << 20)
    listener = LiveListener("127.0.0.1", 0)
    listener.start()
    sender = connect(listener)
    sender.settimeout(0.5)
    before = rss()
    chunk = encode_events([operator(i, "n" * 20_000) for i in range(50)])  # about 1 MiB per frame
    sent = 0
    try:
        sender.sendall(encode_header(0))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and sent < 64:  # the listener stops reading: sendall times out
            try:
                sender.sendall(chunk)
            except TimeoutError:
                break
            sent += 1
        eventually(lambda: listener.queued_bytes > 1 << 20, 10, "the queue to fill")
        time.sleep(0.3)  # the listener had time to read more if it were going to
        assert listener.queued_bytes <= (1 << 20) + (1 << 18) + len(chunk)  # the bound, one read, one frame
        assert sent < 64, "the listener kept reading with a full queue"
        assert rss() - before < 48 << 20
        taken = listener.take(10**9)
        assert taken and listener.queued_bytes == 0
    finally:
        sender.close()
        listener.close()


@pytest.mark.timeout(60)
def test_idle_connections_that_sent_a_header_cannot_lock_a_real_program_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "IDLE_EVICTION", 0.3)
    listener = LiveListener("127.0.0.1", 0)
    listener.start()
    before = threads()
    idle = []
    try:
        for _ in range(MAX_CONNECTIONS):
            sock = connect(listener)
            sock.sendall(encode_header(0))
            idle.append(sock)
        eventually(lambda: sum(c.pid is not None for c in listener.connections) == MAX_CONNECTIONS, 10, "headers")
        time.sleep(0.4)  # they have all been silent longer than IDLE_EVICTION
        real = connect(listener)
        real.sendall(encode_header(1) + encode_events([operator(0, "Real")]))
        eventually(lambda: any(c.events == 1 and c.process == 1 for c in listener.connections), 10, "the real program")
        assert listener.refused == 0 and listener.evicted == 1
        assert threads() <= before + MAX_CONNECTIONS  # one reader per open connection
        assert sum(1 for c in listener.connections if c.open) == MAX_CONNECTIONS
        evicted = [c for c in listener.connections if c.error and "idle to make room" in c.error]
        assert len(evicted) == 1 and evicted[0].process == 0
        real.close()
    finally:
        for sock in idle:
            sock.close()
        listener.close()


@pytest.mark.timeout(120)
def test_short_connections_leave_no_threads_behind() -> None:
    listener = LiveListener("127.0.0.1", 0)
    listener.start()
    before = threads()
    try:
        for _ in range(3 * (sources._KEPT_CLOSED + MAX_CONNECTIONS)):  # three times what the listener may keep
            socket.create_connection(("127.0.0.1", listener.port)).close()

        def reaped() -> bool:
            socket.create_connection(("127.0.0.1", listener.port)).close()  # each accept reaps the ended threads
            return len(listener._threads) <= 3  # the accepting thread, and the newest connections' readers

        eventually(reaped, 30, "the ended threads to be forgotten")
        eventually(lambda: listener.reading_threads == 0, 30, "the reading threads to end")
        assert threads() <= before + 1
        assert len(listener.connections) <= sources._KEPT_CLOSED + MAX_CONNECTIONS
    finally:
        listener.close()
    eventually(lambda: threads() < before, 10, "the accepting thread to end")
    assert threading.active_count() < before


def test_message_rates_keep_only_recent_buckets_however_long_a_live_run() -> None:
    """Found by the viewer audit: the rate history kept every 0.25 s bucket of every channel port for ever, so a
    live view grew without bound with the run's length (100,000 messages a quarter second apart: 200,000 buckets)."""
    state = TuiState(0.25)
    apply_raw(state, [operator(0, "map")])
    for batch in range(50):
        start = batch * 2000
        apply_raw(
            state,
            [(K_MESSAGES, 0, 10 + i, 0.25 * i, (0, 1), (((3, 5),),), (((3, 5),),)) for i in range(start, start + 2000)],
        )
    kept = [len(buckets) for buckets in state.rates.counts.values()]
    assert len(kept) == 2 and max(kept) <= 200  # was 100,000 each
    end = 0.25 * (50 * 2000 - 1)
    assert state.rates.series(((0, 1), 0, False), end, 20) == [5 / 0.25] * 20  # the sparkline still full


def test_a_stream_of_large_distinct_times_is_not_held_by_the_time_cache() -> None:
    """Found by the viewer audit: the live decoder kept every distinct product time it decoded (up to 100,000),
    key and value, so a peer sending times of 20 kB each grew the viewer by twice what it sent: 775 MiB for 382."""
    stream = RecordingStream("live", cache_times=True, max_pending=sources.MAX_PENDING_BYTES, check_fields=False)
    stream.feed(encode_header(0))
    before = rss()
    for frame in range(100):
        raws = [(K_FRONTIERS, 0, i, 1.0, (0,), ((0, Product(frame * 100 + i, "x" * 20_000), 1),)) for i in range(100)]
        assert len(stream.feed(encode_events(raws))) == 100
    assert rss() - before < 64 << 20, f"the viewer grew by {(rss() - before) >> 20} MiB for 190 MiB received"


def test_the_live_ingest_caps_workers_as_the_model_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the viewer audit: the bulk ingest made a view for every worker index its frequent events named,
    past limits.MAX_WORKERS (100,000 schedulings of distinct workers: 100,000 views, one worker 10**9 more)."""
    monkeypatch.setattr(limits, "MAX_WORKERS", 8)
    state = TuiState()
    apply_raw(state, [(K_SCHEDULE, worker, 1, 1.0, (0, 1), 0.0, 0.5) for worker in range(100)])
    apply_raw(state, [(K_FRONTIERS, 10**9, 1, 2.0, (0,), ((0, 1, 1),)), (K_SCHEDULE, 3, 2, 2.0, (0, 1), 0.0, 0.5)])
    model = state.model
    assert sorted(model.workers) == list(range(8)) and model.over_limit == 93
    assert model.events == 102 and model.last_t == 2.0 and model.workers[3].scheduled[(0, 1)] == [2, 1.0]


def test_a_connection_remembers_at_most_about_max_workers_worker_indices(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the viewer audit: each connection kept every worker index its events named (and every one that
    shut down), so a peer naming 1,000,000 workers grew two sets of 1,000,000 ints, past what the model keeps."""
    monkeypatch.setattr(limits, "MAX_WORKERS", 8)
    listener = LiveListener("127.0.0.1", 0)
    listener.start()
    try:
        with connect(listener) as sock:
            sock.sendall(encode_header(0))
            for frame in range(200):
                sock.sendall(encode_events([(K_SHUTDOWN, frame * 1000 + i, 1, 1.0) for i in range(1000)]))
            eventually(lambda: listener.received == 200_000, what="every event received")
            connection = listener.connections[0]
            assert len(connection.workers) <= 40_000 and len(connection.shut_down) <= 40_000  # one read: 256 KiB
    finally:
        listener.close()
