"""A TCP viewer started after the program: events wait for it in a bounded buffer, and drops past it are counted."""

from __future__ import annotations

import io
import socket
import threading
import time
from typing import Any

from runtime import execute
from runtime.instrument import (
    EventsDropped,
    EventShipper,
    Mark,
    OperatorCreated,
    TcpSink,
    configure_from,
    iter_stream,
    stop_logging,
)
from scopes.builder import ScopeBuilder
from viz.model import Model


def unlistened_server() -> tuple[socket.socket, int]:
    """A bound socket that refuses connections until ``listen()`` is called on it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    return server, server.getsockname()[1]


def receive_all(connection: socket.socket) -> bytes:
    connection.settimeout(5)
    data = b""
    while chunk := connection.recv(65536):
        data += chunk
    connection.close()
    return data


def wait_for(condition: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_events_before_the_first_connection_are_buffered_and_sent_when_the_viewer_comes() -> None:
    server, port = unlistened_server()
    sink = TcpSink("127.0.0.1", port, retry=0.02)
    pipeline = EventShipper([sink], interval=3600)
    log = pipeline.logger(0)
    for i in range(50):
        log.mark(f"early {i}")
    pipeline.flush()
    time.sleep(0.1)  # several refused connection attempts
    assert not sink.connected and sink.buffered == 50 and sink.dropped == 0
    server.listen(1)
    connection, _ = server.accept()
    wait_for(lambda: sink.buffered == 0)
    log.mark("late")
    pipeline.close()
    events = list(iter_stream(io.BytesIO(receive_all(connection)), "tcp"))
    server.close()
    assert [e.label for e in events if isinstance(e, Mark)] == [f"early {i}" for i in range(50)] + ["late"]
    assert not [e for e in events if isinstance(e, EventsDropped)]
    assert sink.dropped == 0


def test_past_the_bound_early_events_are_dropped_and_the_viewer_is_told_how_many() -> None:
    server, port = unlistened_server()
    sink = TcpSink("127.0.0.1", port, retry=0.02, max_events=100)
    pipeline = EventShipper([sink], interval=3600)
    log = pipeline.logger(0)
    for batch in range(5):  # 5 chunks of 50 events: the first two fit
        for i in range(50):
            log.mark(f"{batch}.{i}")
        pipeline.flush()
    assert sink.buffered == 100 and sink.dropped == 150
    server.listen(1)
    connection, _ = server.accept()
    wait_for(lambda: sink.buffered == 0)
    pipeline.close()
    events = list(iter_stream(io.BytesIO(receive_all(connection)), "tcp"))
    server.close()
    assert [e.count for e in events if isinstance(e, EventsDropped)] == [150]
    assert [e.label for e in events if isinstance(e, Mark)] == [f"{b}.{i}" for b in range(2) for i in range(50)]
    model = Model()
    for event in events:
        model.apply(event)
    assert model.dropped == 150


def test_buffered_events_nobody_received_count_as_dropped_at_close() -> None:
    server, port = unlistened_server()
    sink = TcpSink("127.0.0.1", port, retry=0.02)
    pipeline = EventShipper([sink], interval=3600)
    log = pipeline.logger(0)
    for i in range(30):
        log.mark(str(i))
    start = time.monotonic()
    pipeline.close()
    assert time.monotonic() - start < 2
    assert sink.dropped == 30 and sink.buffered == 0
    server.close()


def test_a_viewer_started_after_the_program_sees_the_dataflow_being_created() -> None:
    server, port = unlistened_server()
    pipeline = configure_from(f"tcp://127.0.0.1:{port}")
    assert pipeline is not None
    (sink,) = pipeline.sinks
    assert isinstance(sink, TcpSink)
    built = threading.Event()

    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            handle, numbers = scope.new_input("numbers")
            return handle, numbers.map(lambda n: n + 1, name="AddOne").probe(name="Seen")

        handle, probe = worker.dataflow(build, name="late viewer")
        handle.send(1)
        handle.advance_to(1)
        worker.step_while(lambda: probe.less_than(1))
        built.set()
        wait_for(lambda: sink.connected and sink.buffered == 0, 10)  # the viewer comes only now

    runner = threading.Thread(target=lambda: execute(main, workers=1, stall_timeout=5))
    runner.start()
    assert built.wait(10)
    time.sleep(0.1)
    server.listen(1)
    connection, _ = server.accept()
    runner.join(10)
    assert not runner.is_alive()
    stop_logging()
    events = list(iter_stream(io.BytesIO(receive_all(connection)), "tcp"))
    server.close()
    names = {e.name for e in events if isinstance(e, OperatorCreated)}
    assert {"late viewer", "numbers", "AddOne", "Seen"} <= names
    model = Model()
    for event in events:
        model.apply(event)
    assert model.view().completed == {0}
    assert model.dropped == 0


def test_events_no_viewer_ever_received_are_reported_at_close(caplog: Any) -> None:
    """Found by the new-user audit: --log tcp://HOST:PORT with no viewer there (a wrong port, or the viewer not
    started yet) lost the whole recording without a word."""
    server, port = unlistened_server()
    sink = TcpSink("127.0.0.1", port, retry=0.02, process=1)
    pipeline = EventShipper([sink], interval=3600)
    log = pipeline.logger(0)
    for i in range(30):
        log.mark(str(i))
    with caplog.at_level("WARNING", logger="runtime.instrument"):
        pipeline.close()
    server.close()
    (record,) = [r for r in caplog.records if r.name == "runtime.instrument"]
    message = record.getMessage()
    assert f"--log tcp://127.0.0.1:{port}: no viewer connected" in message
    assert "the 30 event(s) of process 1 were not delivered" in message
    assert f"python -m viz tui --listen 127.0.0.1:{port}" in message


def test_a_viewer_that_received_the_events_brings_no_warning(caplog: Any) -> None:
    server, port = unlistened_server()
    server.listen(1)
    sink = TcpSink("127.0.0.1", port, retry=0.02)
    pipeline = EventShipper([sink], interval=3600)
    pipeline.logger(0).mark("one")
    pipeline.flush()
    connection, _ = server.accept()
    received = threading.Thread(target=receive_all, args=(connection,))
    received.start()
    with caplog.at_level("WARNING", logger="runtime.instrument"):
        pipeline.close()
    received.join(timeout=10)
    server.close()
    assert sink.dropped == 0
    assert not [r for r in caplog.records if r.name == "runtime.instrument"]
