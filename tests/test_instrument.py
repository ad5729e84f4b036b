"""runtime.instrument: loggers, the writer pipeline, sinks, and reading recordings back."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import msgpack
import pytest
from helpers.ports import refusing_port

from runtime import codec, instrument
from runtime.errors import ConfigurationError
from runtime.instrument import (
    EventShipper,
    FileSink,
    FrontiersChanged,
    InputChanged,
    OperatorCreated,
    Recorder,
    TcpSink,
    configure_from,
    iter_stream,
    log_path,
    logger_for,
    read_events,
    stop_logging,
)
from scopes.timestamp import Product


def test_logging_is_off_by_default() -> None:
    stop_logging()
    assert logger_for(0) is None


def test_recorder_keeps_typed_events_with_worker_seq_and_time() -> None:
    with Recorder() as recording:
        log = logger_for(3)
        assert log is not None
        log.operator_created((0, 1), "numbers", 0, 1, [[]], None)
        log.frontiers((0,), [(0, Product(1, 2), 1)])
        log.input_event((0, 1), "numbers", "advanced", 4)
    assert logger_for(0) is None  # the recorder is no longer active
    events = recording.events
    assert [type(e) for e in events] == [OperatorCreated, FrontiersChanged, InputChanged]
    assert [e.seq for e in events] == [1, 2, 3]
    assert all(e.worker == 3 for e in events)
    assert events[0].t <= events[1].t <= events[2].t
    assert events[1].changes == ((0, Product(1, 2), 1),)
    assert isinstance(events[1].changes[0][1], Product)


def test_file_round_trip_keeps_products_and_tuples(tmp_path: Path) -> None:
    path = tmp_path / "run.msgpack"
    pipeline = EventShipper([FileSink(path)])
    log = pipeline.logger(1)
    log.pointstamps((0, 2), [(3, Product(Product(1, 2), 3), -2)])
    log.messages((0, 2, 1), [[(Product(0, 1), 5)]], [])
    log.channel_created((0,), (1, 0), (2, 0), "Exchange")
    pipeline.close()
    events = read_events(path)
    assert events[0].changes == ((3, Product(Product(1, 2), 3), -2),)
    assert isinstance(events[0].changes[0][1][0], Product)
    assert events[1].consumed == (((Product(0, 1), 5),),)
    assert events[2].source == (1, 0) and events[2].contract == "Exchange"


def test_writer_thread_ships_without_explicit_flush(tmp_path: Path) -> None:
    path = tmp_path / "live.msgpack"
    pipeline = EventShipper([FileSink(path)], interval=0.01)
    log = pipeline.logger(0)
    log.mark("hello")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(read_events(path)) < 1:
        time.sleep(0.01)
    assert [e.label for e in read_events(path)] == ["hello"]  # type: ignore[attr-defined]
    pipeline.close()


@pytest.mark.parametrize("port", ["\u00b2", "99999", "0", "-1", "\u0663\u0664"])
def test_a_log_address_whose_port_is_not_a_port_is_refused_naming_the_flag(port: str) -> None:
    # '²' failed with a bare ValueError from int(); 99999 and 0 were taken, and no viewer could ever be reached
    with pytest.raises(ConfigurationError, match="port from 1 to 65535"):
        configure_from(f"tcp://127.0.0.1:{port}")


def test_configure_from_specs(tmp_path: Path) -> None:
    assert configure_from(None) is None
    assert configure_from("off") is None
    with pytest.raises(ConfigurationError, match="tcp://HOST:PORT"):
        configure_from("tcp://nohostport")
    with pytest.raises(ConfigurationError, match="cannot write"):
        configure_from(str(tmp_path / "missing-dir" / "x.msgpack"))
    assert log_path("run.msgpack", 0, 1) == Path("run.msgpack")
    assert log_path("logs/run.msgpack", 1, 2) == Path("logs/run.1.msgpack")
    pipeline = configure_from(str(tmp_path / "run.msgpack"), process=1, processes=2)
    assert pipeline is not None
    log = logger_for(0)
    assert log is not None
    log.shutdown()
    stop_logging()
    assert logger_for(0) is None
    assert len(read_events(tmp_path / "run.1.msgpack")) == 1


def test_dead_tcp_viewer_never_blocks_and_counts_drops() -> None:
    with refusing_port() as port:  # nobody listens there while the test runs, another test's server included
        sink = TcpSink("127.0.0.1", port, retry=0.05)
        pipeline = EventShipper([sink])
        log = pipeline.logger(0)
        start = time.monotonic()
        for i in range(20_000):
            log.mark(str(i))
        pipeline.flush()
        assert time.monotonic() - start < 5
        pipeline.close()
    assert sink.dropped == 20_000
    assert pipeline.dropped == 20_000


def test_slow_tcp_viewer_gets_drops_not_backpressure() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(server.accept()[0]), daemon=True).start()
    sink = TcpSink("127.0.0.1", port, capacity=2)
    pipeline = EventShipper([sink], interval=3600)
    log = pipeline.logger(0)
    deadline = time.monotonic() + 5
    while not sink.connected and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sink.connected
    start = time.monotonic()
    for round_ in range(200):  # the viewer never reads: the socket buffer and the queue fill up
        for i in range(500):
            log.mark(f"{round_}.{i} " + "x" * 50)
        pipeline.flush()
    assert time.monotonic() - start < 10
    assert sink.dropped > 0
    for conn in accepted:
        conn.close()
    server.close()
    pipeline.close()


def test_live_tcp_viewer_receives_the_recording() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    pipeline = configure_from(f"tcp://127.0.0.1:{port}")
    assert pipeline is not None
    connection, _ = server.accept()
    log = logger_for(2)
    assert log is not None
    deadline = time.monotonic() + 5
    sink = pipeline.sinks[0]
    assert isinstance(sink, TcpSink)
    while not sink.connected and time.monotonic() < deadline:
        time.sleep(0.01)
    log.input_event((0, 1), "words", "closed", 3)
    stop_logging()
    connection.settimeout(5)
    data = b""
    while chunk := connection.recv(65536):
        data += chunk
    connection.close()
    server.close()
    import io

    events = list(iter_stream(io.BytesIO(data), "tcp"))
    assert [(e.worker, e.name, e.action) for e in events] == [(2, "words", "closed")]  # type: ignore[attr-defined]


def test_unknown_kinds_and_shapes_are_recording_errors() -> None:
    with pytest.raises(instrument.RecordingError, match="not a pytimely event"):
        instrument.decode((42, 0, 1, 0.0))
    with pytest.raises(instrument.RecordingError, match="not a pytimely event"):
        instrument.decode((1, 0, 1, 0.0, "too few"))
    assert msgpack.unpackb(codec.pack_recording((1, 2)), raw=False) == [1, 2]
