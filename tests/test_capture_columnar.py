"""Captured columnar batches: numpy arrays and Arrow batches in event logs (files and TCP), replayed as themselves."""

from __future__ import annotations

import functools
import io
import socket
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from helpers import columnar_helpers
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as nps

from runtime import execute
from runtime.eventlog import (
    EventEncodeError,
    EventLogCorrupt,
    EventLogError,
    EventReader,
    EventWriter,
    encode_event,
    event_log_bytes,
    header_frame,
    read_event_log,
    write_events,
)
from scopes import INTEGER
from scopes.capture import Batch, CaptureRecorder, Progress
from scopes.hashing import stable_hash

dtypes = st.one_of(
    nps.scalar_dtypes(),
    nps.unicode_string_dtypes(min_len=1, max_len=6),
    nps.byte_string_dtypes(min_len=1, max_len=6),
    nps.nested_dtypes(max_itemsize=48),
)
arrays = nps.arrays(dtypes, nps.array_shapes(min_dims=1, max_dims=1, min_side=0, max_side=8))


def same_batch(a: Any, b: Any) -> bool:
    """Same kind of batch with the same contents (numpy: dtype, shape and bytes; Arrow: equal with metadata)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, pa.RecordBatch | pa.Table):
        return bool(a.equals(b, check_metadata=True))
    return bool(a == b)


def same_events(got: list[Any], expected: list[Any]) -> bool:
    if len(got) != len(expected):
        return False
    for g, e in zip(got, expected, strict=True):
        if type(g) is not type(e):
            return False
        if isinstance(e, Batch):
            if g.time != e.time or not same_batch(g.data, e.data):
                return False
        elif g != e:
            return False
    return True


def columnar_events() -> list[Any]:
    people = np.array([("ada", 36, 1.5), ("bob", 7, -2.0)], dtype=[("name", "U5"), ("age", "i2"), ("x", "f8")])
    batch = pa.record_batch({"word": ["a", None, "c"], "n": pa.array([1, 2, 3], pa.int32())})
    table = pa.Table.from_batches([batch, batch])
    return [
        Batch(0, np.arange(5, dtype=np.int64)),
        Batch(0, people),
        Batch(0, [1, (2, "records still work")]),
        Progress([(0, -1), (1, 1)]),
        Batch(1, batch),
        Batch(1, table),
        Batch(1, np.array([b"raw", b"bytes"])),
        Progress([(1, -1)]),
    ]


def test_numpy_and_arrow_batches_round_trip_through_a_log_file_as_themselves(tmp_path: Any) -> None:
    path = tmp_path / "columnar.log"
    events = columnar_events()
    write_events(path, events)
    back = read_event_log(path)
    assert same_events(back, events)
    assert type(back[0].data) is np.ndarray and back[0].data.flags.writeable
    assert type(back[4].data) is pa.RecordBatch and type(back[5].data) is pa.Table


@settings(max_examples=150, deadline=None)
@given(st.lists(arrays, min_size=1, max_size=4))
def test_any_fixed_width_numpy_batch_round_trips(batches: list[Any]) -> None:
    events = [Batch(time, batch) for time, batch in enumerate(batches)]
    buffer = io.BytesIO()
    writer = EventWriter(buffer, close=False)
    for event in events:
        writer.push(event)
    writer.finish()
    assert same_events([e for e in EventReader(io.BytesIO(buffer.getvalue())) if e is not None], events)


def test_a_columnar_batch_is_written_as_its_memory_not_as_rows() -> None:
    array = np.arange(100_000, dtype=np.int64)
    payload = encode_event(Batch(3, array))
    assert len(payload) - array.nbytes < 64 and array.tobytes() in payload
    table = pa.table({"x": array})
    assert len(encode_event(Batch(3, table))) - array.nbytes < 1024


def test_columnar_batches_travel_over_tcp() -> None:
    events = columnar_events()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    failure: list[BaseException] = []

    def send() -> None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                writer = EventWriter(sock)
                for event in events:
                    writer.push(event)
                writer.finish()
        except BaseException as error:  # noqa: BLE001 - reported by the test
            failure.append(error)

    sender = threading.Thread(target=send)
    sender.start()
    listener.settimeout(10)
    connection, _ = listener.accept()
    listener.close()
    received: list[Any] = []
    reader = EventReader(connection)
    waited = 0
    for event in reader:
        if event is None:
            waited += 1
            assert waited < 100_000, "the TCP reader never finished"
            threading.Event().wait(0.001)
            continue
        received.append(event)
    sender.join(10)
    assert not failure
    assert same_events(received, events)


def test_an_object_array_is_refused_when_written_saying_what_to_do() -> None:
    writer = EventWriter(io.BytesIO(), close=False)
    with pytest.raises(EventEncodeError, match="at time 7.*dtype object.*never pickles.*astype"):
        writer.push(Batch(7, np.array([{"a": 1}, None], dtype=object)))


def test_a_damaged_array_payload_is_reported_as_damage_at_its_offset() -> None:
    good = encode_event(Batch(0, np.arange(4, dtype=np.int32)))
    damaged = good[:-4]  # the array's data one element short, inside a frame with a valid checksum
    header_end = len(header_frame(INTEGER))
    data = event_log_bytes([damaged])
    with pytest.raises(EventLogCorrupt, match=f"byte offset {header_end}.*cannot be decoded") as failure:
        list(EventReader(io.BytesIO(data)))
    assert failure.value.offset == header_end


def test_an_arrow_event_read_without_pyarrow_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = io.BytesIO()
    writer = EventWriter(buffer, close=False)
    for event in (Batch(0, pa.record_batch({"x": [1]})), Progress([(0, -1)])):
        writer.push(event)
    data = buffer.getvalue()
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    reader = EventReader(io.BytesIO(data))
    with pytest.raises(EventLogError, match="pyarrow is not installed in this process.*pip install pyarrow") as caught:
        list(reader)
    assert not isinstance(caught.value, EventLogCorrupt)


def test_the_recorder_lists_batches_as_they_are_and_records_as_rows() -> None:
    recorder = CaptureRecorder()
    structured = np.array([(1, 2.5)], dtype=[("k", "i4"), ("v", "f8")])
    batch = pa.record_batch({"x": [1, 2]})
    for event in (Batch(0, [7]), Batch(0, structured), Batch(1, batch)):
        recorder.push(event)
    assert [(time, type(b)) for time, b in recorder.batches()] == [(0, list), (0, np.ndarray), (1, pa.RecordBatch)]
    assert recorder.messages() == [(0, 7), (0, (1, 2.5)), (1, {"x": 1}), (1, {"x": 2})]


# ---------------------------------------------------------------------- dataflows: capture, then replay


def rows_of(batch: Any) -> list[tuple[Any, ...]]:
    if isinstance(batch, np.ndarray):
        return [tuple(row) for row in batch.tolist()]
    return [tuple(row.values()) for row in batch.to_pylist()]


def expected_rows(kind: str, workers: int) -> Counter[tuple[Any, ...]]:
    return Counter(
        (epoch, *row)
        for worker in range(workers)
        for epoch in range(columnar_helpers.EPOCHS)
        for row in rows_of(columnar_helpers.make_batch(kind, worker, epoch))
    )


def check_capture_and_replay(kind: str, captured: list[list[Any]], paths: list[Path]) -> None:
    """The logs hold exactly the batches each worker captured; replayed on one worker they come back as themselves."""
    batch_type = np.ndarray if kind == "numpy" else pa.RecordBatch
    for index, (path, recorded) in enumerate(zip(paths, captured, strict=True)):
        logged = [(e.time, e.data) for e in read_event_log(path) if isinstance(e, Batch)]
        assert len(logged) == len(recorded) > 0
        for (time, batch), (recorded_time, recorded_batch) in zip(logged, recorded, strict=True):
            assert time == recorded_time and type(batch) is batch_type and same_batch(batch, recorded_batch)
            keys = batch["k"] if kind == "numpy" else batch.column("k").to_numpy()
            assert all(stable_hash(int(key)) % len(paths) == index for key in keys), "exchanged by column k"
    [replayed] = execute(
        functools.partial(columnar_helpers.replay_batches, sources=[EventReader(path) for path in paths]),
        workers=1,
        stall_timeout=10,
    )
    assert {type(batch) for _, batch in replayed} == {batch_type}
    assert Counter((time, *row) for time, batch in replayed for row in rows_of(batch)) == expected_rows(kind, 2)
    template = columnar_helpers.make_batch(kind, 0, 0)
    for _, batch in replayed:
        assert batch.dtype == template.dtype if kind == "numpy" else batch.schema.equals(template.schema)


@pytest.mark.parametrize("kind", ["numpy", "arrow"])
def test_columnar_batches_captured_on_two_threads_into_files_replay_as_themselves(kind: str, tmp_path: Path) -> None:
    captured = execute(
        functools.partial(columnar_helpers.capture_columnar, kind=kind, directory=str(tmp_path)),
        workers=2,
        stall_timeout=10,
    )
    check_capture_and_replay(kind, captured, [tmp_path / f"s{i}.log" for i in range(2)])


@pytest.mark.parametrize("kind", ["numpy", "arrow"])
def test_columnar_batches_captured_in_two_processes_into_files_replay_as_themselves(kind: str, tmp_path: Path) -> None:
    captured = execute(
        functools.partial(columnar_helpers.capture_columnar, kind=kind, directory=str(tmp_path)),
        workers=1,
        processes=2,
        stall_timeout=20,
    )
    check_capture_and_replay(kind, captured, [tmp_path / f"s{i}.log" for i in range(2)])


@pytest.mark.parametrize("kind", ["numpy", "arrow"])
def test_columnar_batches_captured_over_tcp_replay_as_themselves(kind: str) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(30)
    port = listener.getsockname()[1]
    outcome: list[Any] = []

    def capture() -> None:
        try:
            outcome.append(
                execute(
                    functools.partial(columnar_helpers.capture_columnar, kind=kind, port=port),
                    workers=1,
                    processes=2,
                    stall_timeout=20,
                )
            )
        except BaseException as error:  # noqa: BLE001 - reported below
            outcome.append(error)

    capturing = threading.Thread(target=capture)
    capturing.start()
    try:
        connections = [listener.accept()[0] for _ in range(2)]
    finally:
        listener.close()
    [replayed] = execute(
        functools.partial(columnar_helpers.replay_batches, sources=[EventReader(c) for c in connections]),
        workers=1,
        stall_timeout=20,
    )
    capturing.join(60)
    assert not capturing.is_alive() and not isinstance(outcome[0], BaseException), outcome
    batch_type = np.ndarray if kind == "numpy" else pa.RecordBatch
    assert {type(batch) for _, batch in replayed} == {batch_type}
    sent = sorted((time, type(b).__name__, rows_of(b)) for per_worker in outcome[0] for time, b in per_worker)
    assert sorted((time, type(b).__name__, rows_of(b)) for time, b in replayed) == sent
    assert Counter((time, *row) for time, batch in replayed for row in rows_of(batch)) == expected_rows(kind, 2)
