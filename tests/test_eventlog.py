"""Event logs: the versioned msgpack format, damaged logs, and non-blocking socket reading."""

from __future__ import annotations

import io
import re
import socket
import struct
from pathlib import Path

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import TimelyRuntimeError, WorkerFailed, execute
from runtime.eventlog import (
    FORMAT_VERSION,
    MAGIC,
    EventEncodeError,
    EventLogCorrupt,
    EventLogError,
    EventLogFormatError,
    EventLogTruncated,
    EventLogVersionError,
    EventReader,
    EventWriter,
    LogFile,
    encode_event,
    frame,
    read_event_log,
    write_events,
)
from scopes import INTEGER, Product, ProductType
from scopes.capture import Batch, Progress, ReplayError, capture_into, replay_into
from scopes.errors import OperatorFailed

EVENTS = [
    Batch(0, [1, "two", (3, "three"), None]),
    Progress([(0, -1), (1, 1)]),
    Batch(1, [{"k": [1, 2]}, b"bytes", 2.5, True]),
    Progress([(1, -1), (2, 1)]),
    Batch(2, [frozenset({1, 2}), {3}, 2**64 - 1, -(2**63)]),
    Progress([(2, -1)]),
]


def log_bytes(events=EVENTS, timestamp=INTEGER) -> bytes:
    buffer = io.BytesIO()
    writer = EventWriter(buffer, timestamp, close=False)
    for event in events:
        writer.push(event)
    writer.finish()
    return buffer.getvalue()


def frame_offsets(data: bytes) -> list[int]:
    """Offsets of every frame (the header's first)."""
    offsets, at = [], len(MAGIC)
    while at < len(data):
        offsets.append(at)
        (length,) = struct.unpack_from(">I", data, at)
        at += 8 + length
    return offsets


def read_until_error(data: bytes):
    """The events read before an error, and the error (or None)."""
    events = []
    reader = EventReader(io.BytesIO(data))
    try:
        for event in reader:
            events.append(event)
    except EventLogError as error:
        return events, error
    return events, None


def test_round_trip_preserves_every_type():
    back, error = read_until_error(log_bytes())
    assert error is None and back == EVENTS
    assert type(back[0].data[2]) is tuple and type(back[4].data[0]) is frozenset and type(back[4].data[1]) is set


def test_header_names_format_version_and_timestamp_type(tmp_path):
    path = tmp_path / "product.log"
    product = ProductType(INTEGER, INTEGER)
    events = [Batch(Product(0, 3), [Product(1, 2)]), Progress([(Product(0, 0), -1)])]
    write_events(path, events, product)
    reader = EventReader(path)
    assert list(reader) == events
    assert reader.header == {"format": "pytimely-events", "version": FORMAT_VERSION, "timestamp": product.name}
    assert reader.timestamp_name == "Product[integer, integer]"
    assert isinstance(read_event_log(path)[0].time, Product)


@settings(max_examples=50, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**63), 2**64 - 1)
        | st.floats(allow_nan=False)
        | st.text(max_size=5)
        | st.binary(max_size=5),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.tuples(inner, inner)
            | st.dictionaries(st.text(max_size=3), inner, max_size=3)
            | st.builds(Product, st.integers(0, 9), st.integers(0, 9))
        ),
        max_leaves=10,
    )
)
def test_any_built_in_record_round_trips(record):
    [event] = read_until_error(log_bytes([Batch(0, [record])]))[0]
    assert event.data == [record]
    assert repr(event.data) == repr([record])  # tuples stay tuples, Products stay Products


@pytest.mark.parametrize("record", [object(), 2**70, [1, complex(1, 2)]])
def test_records_the_format_cannot_hold_are_refused_when_written(record):
    writer = EventWriter(io.BytesIO(), close=False)
    with pytest.raises(EventEncodeError, match="cannot write the event at time 4") as failure:
        writer.push(Batch(4, [record]))
    assert isinstance(failure.value, TimelyRuntimeError)


def test_every_truncation_is_detected_at_the_damaged_frame_or_at_a_frame_boundary():
    data = log_bytes()
    offsets = frame_offsets(data)
    for cut in range(len(data)):
        events, error = read_until_error(data[:cut])
        if cut in offsets[1:]:  # a clean frame boundary: a shorter, valid log
            assert error is None and events == EVENTS[: offsets.index(cut) - 1]
            continue
        assert isinstance(error, EventLogTruncated), cut
        start = max([o for o in offsets if o <= cut] or [0])
        assert error.offset == start and f"byte offset {start}" in str(error)
        assert events == EVENTS[: max(0, offsets.index(start) - 1)] if start else events == []


def test_every_flipped_byte_is_detected_and_nothing_after_it_is_returned():
    data = log_bytes()
    offsets = frame_offsets(data)
    for position in range(len(data)):
        damaged = bytearray(data)
        damaged[position] ^= 0x10
        events, error = read_until_error(bytes(damaged))
        assert error is not None, position
        if position < len(MAGIC):
            assert isinstance(error, EventLogFormatError)
            continue
        assert isinstance(error, EventLogCorrupt), (position, error)
        frame_start = max(o for o in offsets if o <= position)
        assert error.offset == frame_start
        assert events == EVENTS[: offsets.index(frame_start) - 1] if frame_start > offsets[0] else events == []


def test_a_damaged_log_keeps_failing_and_names_the_file(tmp_path):
    path = tmp_path / "damaged.log"
    data = bytearray(log_bytes())
    second = frame_offsets(bytes(data))[2]
    data[second + 9] ^= 0xFF
    path.write_bytes(bytes(data))
    reader = EventReader(path)
    assert next(reader) == EVENTS[0]
    for _ in range(2):
        with pytest.raises(EventLogCorrupt) as failure:
            next(reader)
        assert failure.value.offset == second
        assert str(path) in str(failure.value) and f"byte offset {second}" in str(failure.value)
        assert "CRC-32" in str(failure.value)


def test_a_log_of_another_version_is_refused_naming_the_version():
    header = msgpack.packb({"format": "pytimely-events", "version": 4, "timestamp": "integer"})
    with pytest.raises(EventLogVersionError, match="format version 4; this pytimely reads versions 1, 2, 3") as failure:
        list(EventReader(io.BytesIO(MAGIC + frame(header))))
    assert failure.value.version == 4


@pytest.mark.parametrize("version", [1, 2])
def test_a_log_of_version_1_or_2_is_still_read(version):
    header = msgpack.packb({"format": "pytimely-events", "version": version, "timestamp": "integer"})
    old = MAGIC + frame(header) + b"".join(frame(encode_event(event)) for event in EVENTS)  # frames not chained
    reader = EventReader(io.BytesIO(old))
    assert list(reader) == EVENTS and reader.header is not None and reader.header["version"] == version


def test_other_data_and_other_timestamp_types_are_refused(tmp_path):
    with pytest.raises(EventLogFormatError, match="not a pytimely event log"):
        list(EventReader(io.BytesIO(b"hello world, this is not a log")))
    header = msgpack.packb({"format": "something-else", "version": 1})
    with pytest.raises(EventLogFormatError, match="something-else"):
        list(EventReader(io.BytesIO(MAGIC + frame(header))))
    with pytest.raises(EventLogFormatError, match="'integer' timestamps, but 'Product"):
        list(EventReader(io.BytesIO(log_bytes()), ProductType(INTEGER, INTEGER)))
    with pytest.raises(EventLogTruncated, match="header"):
        list(EventReader(io.BytesIO(b"")))


def test_writer_refuses_after_close_and_accepts_only_logs_targets(tmp_path):
    writer = EventWriter(tmp_path / "x.log")
    writer.close()
    writer.close()
    with pytest.raises(EventLogError, match="is closed"):
        writer.push(Progress([(0, -1)]))
    with pytest.raises(TypeError, match="path, a binary file or a socket"):
        EventWriter(42)
    with pytest.raises(TypeError, match="path, a binary file or a socket"):
        EventReader(42)


# ---------------------------------------------------------------------- sockets


def test_a_failed_write_names_the_log_and_byte_offset_and_the_capture_that_made_it():
    """The writer let OSError through bare: a capture whose reader had gone failed the run with 'BrokenPipeError:
    [Errno 32] Broken pipe' and a full disk with 'OSError: [Errno 28]', naming neither the log nor where
    (found by the debugging audit); the reader already wrapped its own OSErrors."""
    ours, theirs = socket.socketpair()

    def main(worker):
        def build(scope):
            words, stream = scope.new_input("words")
            stream.capture_into(EventWriter(ours))
            return words

        words = worker.dataflow(build)
        theirs.close()  # the replaying side is gone
        for epoch in range(5):
            words.send_batch(list(range(1000)))
            words.advance_to(epoch + 1)
            worker.step()

    with pytest.raises(WorkerFailed) as failure:
        execute(main)
    message = str(failure.value)
    assert "in operator 'Capture'" in message
    assert re.search(
        r"EventLogError: event log socket to an unnamed peer: writing at byte offset \d+ failed: ", message
    )
    full = EventWriter("/dev/full")  # every write to it fails: ENOSPC
    full.push(Progress([(0, -1)]))
    with pytest.raises(
        EventLogError, match=r"^event log /dev/full: writing its first \d+ bytes to the file failed: No space left"
    ):
        full.close()
    assert full.closed
    full.close()  # the file was released: closing again is harmless


def test_a_time_not_of_the_logs_timestamp_type_is_refused_when_written(tmp_path):
    """A stream of a loop's Product times captured into ``EventWriter(path)`` (integer timestamps by default) was
    written without a word, and every reader then refused the log as damaged at its first batch, saying to
    re-capture it, which wrote the same log again (found by the debugging audit)."""

    def main(worker):
        def build(scope):
            numbers, stream = scope.new_input()

            def body(inner):
                entered = stream.enter(inner)
                entered.capture_into(EventWriter(tmp_path / "loop.log"))  # forgot timestamp=inner.timestamp_type
                return entered.leave()

            return numbers, scope.iterative(body).probe()

        numbers, _ = worker.dataflow(build)
        numbers.send(1)

    with pytest.raises(WorkerFailed) as failure:
        execute(main)
    assert "in operator 'Capture'" in str(failure.value)
    assert "holds integer timestamps and cannot hold time Product(0, 0)" in str(failure.value)
    writer = EventWriter(tmp_path / "ints.log")
    with pytest.raises(EventEncodeError, match="cannot hold time -1"):
        writer.push(Progress([(0, -1), (-1, 1)]))
    with pytest.raises(EventEncodeError, match="cannot hold time 'x'"):
        writer.push(Batch("x", [1]))
    writer.push(Batch(3, [1]))
    writer.close()
    assert read_event_log(tmp_path / "ints.log", INTEGER) == [Batch(3, [1])]


def test_a_log_that_cannot_be_created_is_named(tmp_path):
    """``EventWriter(path)`` let FileNotFoundError or IsADirectoryError through bare (the reader names its file)."""
    with pytest.raises(EventLogError, match=r"^event log .*missing/x\.log cannot be created: No such file"):
        EventWriter(tmp_path / "missing" / "x.log")
    with pytest.raises(EventLogError, match=r"cannot be created: Is a directory"):
        EventWriter(tmp_path)


def test_a_socket_reader_never_blocks_and_ends_when_the_peer_closes():
    sender, receiver = socket.socketpair()
    with sender, receiver:
        reader = EventReader(receiver)
        assert next(reader) is None  # nothing yet
        data = log_bytes()
        first_record = frame_offsets(data)[1]
        sender.sendall(data[: first_record + 5])  # header and part of a record
        assert next(reader) is None
        assert reader.header is not None
        sender.sendall(data[first_record + 5 :])
        events = []
        for event in reader:
            if event is None:
                continue
            events.append(event)
            if len(events) == len(EVENTS):
                break
        assert events == EVENTS
        assert next(reader) is None  # the peer is still connected
        sender.shutdown(socket.SHUT_WR)
        with pytest.raises(StopIteration):
            next(reader)


def test_a_socket_closed_in_the_middle_of_a_record_is_a_truncation():
    sender, receiver = socket.socketpair()
    with sender, receiver:
        reader = EventReader(receiver)
        data = log_bytes()
        cut = frame_offsets(data)[2] + 3
        sender.sendall(data[:cut])
        sender.close()
        events = []
        with pytest.raises(EventLogTruncated) as failure:
            for event in reader:
                if event is not None:
                    events.append(event)
        assert events == EVENTS[:1]
        assert failure.value.offset == cut - 3 and "socket" in str(failure.value)


def test_an_event_writer_over_a_socket_closes_it_when_the_captured_stream_completes():
    sender, receiver = socket.socketpair()

    def main(worker):
        def build(scope):
            capture_into(scope.to_stream(range(5)), EventWriter(sender))

        worker.dataflow(build)

    execute(main, workers=1, stall_timeout=5)
    receiver.settimeout(5)
    events = read_event_log(io.BytesIO(_read_all(receiver)))
    receiver.close()
    assert events == [Batch(0, [0, 1, 2, 3, 4]), Progress([(0, -1)])]


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


# ---------------------------------------------------------------------- replaying logs


def capture_to_files(tmp_path, workers: int, epochs: int = 3):
    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()
            capture_into(stream.exchange(lambda x: x), EventWriter(tmp_path / f"s{worker.index}.log"))
            return handle

        handle = worker.dataflow(build)
        for epoch in range(epochs):
            handle.send_batch([(worker.index, epoch, i) for i in range(4)])
            handle.advance_to(epoch + 1)

    execute(main, workers=workers, stall_timeout=5)
    return [tmp_path / f"s{i}.log" for i in range(workers)]


def replay_files(paths, workers: int):
    def main(worker):
        got = []

        def build(scope):
            stream = replay_into([LogFile(p, INTEGER) for p in paths], scope)
            stream.inspect_batch(lambda t, batch: got.extend((t, r) for r in batch))
            return stream.probe()

        probe = worker.dataflow(build)
        worker.step_while(lambda: not probe.done())
        return got

    results = execute(main, workers=workers, stall_timeout=5)
    return sorted(pair for per_worker in results for pair in per_worker)


def test_capture_on_five_workers_into_files_and_replay_on_three(tmp_path):
    paths = capture_to_files(tmp_path, 5)
    expected = sorted((epoch, (w, epoch, i)) for w in range(5) for epoch in range(3) for i in range(4))
    assert replay_files(paths, 3) == expected


def test_replaying_a_damaged_log_applies_nothing_after_the_damage(tmp_path):
    [path] = capture_to_files(tmp_path, 1, epochs=4)
    data = path.read_bytes()
    offsets = frame_offsets(data)
    prefix = read_event_log(path)[:3]  # Batch(0), Progress(0 -> 1), Batch(1)
    damaged = bytearray(data)
    damaged[offsets[4] + 8] ^= 1  # the fourth event: Progress(1 -> 2)
    path.write_bytes(bytes(damaged))
    applied = []

    def slowly(reader):
        """One event per scheduling, so that downstream operators run between events."""
        for event in reader:
            yield event
            yield None

    def main(worker):
        def build(scope):
            stream = replay_into([slowly(EventReader(path))], scope)
            stream.inspect_batch(lambda t, b: applied.append((t, list(b))))

        worker.dataflow(build)

    with pytest.raises(WorkerFailed) as failure:
        execute(main, workers=1, stall_timeout=5)
    error = cause_below_operator(failure.value)
    assert isinstance(error, EventLogCorrupt) and error.offset == offsets[4]
    assert applied == [(e.time, e.data) for e in prefix if isinstance(e, Batch)]


def test_an_error_reading_a_replayed_log_names_the_file_and_its_times_not_time_none(tmp_path):
    [path] = capture_to_files(tmp_path, 1, epochs=4)
    data = bytearray(path.read_bytes())
    data[frame_offsets(bytes(data))[4] + 8] ^= 1  # the fourth event; capabilities still at time 0
    path.write_bytes(bytes(data))
    with pytest.raises(WorkerFailed) as failure:
        replay_files([path], 1)
    for error in (failure.value, failure.value.__cause__):
        message = str(error)
        assert "time None" not in message and "outside any batch" not in message, message
        assert f"while replaying event stream 0 ({str(path)!r}), holding capabilities for times [0]" in message
    assert isinstance(cause_below_operator(failure.value), EventLogCorrupt)


def test_replaying_a_log_cut_at_a_frame_boundary_reports_the_stream_incomplete(tmp_path):
    [path] = capture_to_files(tmp_path, 1)
    data = path.read_bytes()
    path.write_bytes(data[: frame_offsets(data)[-1]])  # drop the final Progress record
    with pytest.raises(WorkerFailed) as failure:
        replay_files([path], 1)
    error = cause_below_operator(failure.value)
    assert isinstance(error, ReplayError)
    assert re.search(r"ended while still holding capabilities for times \[\d+\]", str(error))


def cause_below_operator(failure: BaseException) -> BaseException | None:
    """The error under ``WorkerFailed``: the replay operator reports it as an ``OperatorFailed`` naming itself."""
    wrapped = failure.__cause__
    assert isinstance(wrapped, OperatorFailed) and wrapped.operator == "Replay", wrapped
    return wrapped.__cause__


def test_a_missing_or_unreadable_log_is_an_event_log_error_naming_it(tmp_path: Path) -> None:
    """open() and read() errors were bare FileNotFoundError/OSError; now EventLogError names the log (and offset)."""
    missing = tmp_path / "missing.log"
    with pytest.raises(EventLogError, match="missing.log cannot be opened"):
        EventReader(missing)
    if Path("/proc/self/mem").exists():  # opens, but reading at offset 0 fails with EIO
        with pytest.raises(EventLogError, match="reading failed at byte offset 0"):
            list(EventReader("/proc/self/mem"))


def test_a_header_frame_declaring_more_than_64_kib_is_refused_before_it_is_buffered() -> None:
    """The header is decoded only up to 64 KiB, but a header frame declaring up to 1 GiB was buffered whole
    (from a socket, as it arrived) before being refused; now the declaration alone is refused."""
    from runtime.framing import HEAD

    declared = HEAD.pack(1 << 20, 0)  # a header frame of 1 MiB, of which nothing follows yet
    with pytest.raises(EventLogCorrupt, match="byte offset 8 declares a payload of 1048576 bytes"):
        list(EventReader(io.BytesIO(MAGIC + declared + bytes(100))))
