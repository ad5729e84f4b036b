"""Capture logs spliced at frame boundaries: frames dropped, repeated, swapped or cut out are refused.

Every frame of a spliced log still passes a per-frame checksum, so before format
version 3 these logs were read, and replayed to a different result, without a
word.  Version 3 chains the frames; a spliced log is refused at the byte offset
of the first frame out of place, naming the file.  The timestamp type a log
declares must be one the reader can check its times against.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import Any

import msgpack  # type: ignore[import-untyped]
import pytest

from runtime.eventlog import (
    FORMAT_VERSION,
    MAGIC,
    EventLogCorrupt,
    EventLogFormatError,
    EventReader,
    EventWriter,
    encode_event,
    frame,
    read_event_log,
    write_events,
)
from scopes import INTEGER
from scopes.capture import Batch, Progress
from scopes.timestamp import PathSummary, TimestampType

EVENTS = [
    Batch(0, [1, 2]),
    Batch(0, [3]),
    Progress([(0, -1), (1, 1)]),
    Batch(1, [10, 20]),
    Batch(1, [30]),
    Progress([(1, -1), (2, 1)]),
    Batch(2, [100]),
    Progress([(2, -1)]),
]


def frames_of(data: bytes) -> tuple[bytes, list[bytes]]:
    """``(magic + header frame, [event frame, ...])`` of a log, each frame as its bytes."""
    at = len(MAGIC)
    pieces = []
    while at < len(data):
        (length,) = struct.unpack_from(">I", data, at)
        pieces.append(data[at : at + 8 + length])
        at += 8 + length
    return data[: len(MAGIC)] + pieces[0], pieces[1:]


def written(path: Path) -> tuple[bytes, list[bytes]]:
    write_events(path, EVENTS)
    return frames_of(path.read_bytes())


def refused_at(path: Path, head: bytes, frames: list[bytes], position: int) -> EventLogCorrupt:
    """Write the spliced log; check it is refused at the frame now at ``position``, naming the file."""
    path.write_bytes(head + b"".join(frames))
    offset = len(head) + sum(map(len, frames[:position]))
    reader = EventReader(path)
    got = []
    with pytest.raises(EventLogCorrupt) as failure:
        for event in reader:
            got.append(event)
    error = failure.value
    assert error.offset == offset, (error.offset, offset)
    assert str(path) in str(error) and f"byte offset {offset}" in str(error)
    assert "dropped, repeated or reordered" in str(error)
    assert got == EVENTS[:position]  # nothing from the spliced frame on
    return error


@pytest.mark.parametrize("dropped", range(len(EVENTS)))
def test_a_dropped_frame_is_refused_at_its_offset(tmp_path: Path, dropped: int) -> None:
    head, frames = written(tmp_path / "a.log")
    del frames[dropped]
    if dropped == len(EVENTS) - 1:  # the last frame cut away: a log cut at a boundary, which the replay reports
        (tmp_path / "cut.log").write_bytes(head + b"".join(frames))
        assert read_event_log(tmp_path / "cut.log") == EVENTS[:-1]
        return
    refused_at(tmp_path / "spliced.log", head, frames, dropped)


@pytest.mark.parametrize("repeated", range(len(EVENTS)))
def test_a_repeated_frame_is_refused_at_the_copy(tmp_path: Path, repeated: int) -> None:
    head, frames = written(tmp_path / "a.log")
    frames.insert(repeated + 1, frames[repeated])
    refused_at(tmp_path / "spliced.log", head, frames, repeated + 1)


@pytest.mark.parametrize("first", range(len(EVENTS) - 1))
def test_swapped_frames_are_refused_where_the_first_moved(tmp_path: Path, first: int) -> None:
    head, frames = written(tmp_path / "a.log")
    frames[first], frames[first + 1] = frames[first + 1], frames[first]
    refused_at(tmp_path / "spliced.log", head, frames, first)


def test_frames_cut_out_of_the_middle_are_refused(tmp_path: Path) -> None:
    head, frames = written(tmp_path / "a.log")
    refused_at(tmp_path / "spliced.log", head, frames[:2] + frames[5:], 2)


def test_frames_of_another_log_are_refused(tmp_path: Path) -> None:
    head, frames = written(tmp_path / "a.log")
    write_events(tmp_path / "b.log", [Batch(0, [1, 2]), Batch(0, [99]), *EVENTS[2:]])
    _, others = frames_of((tmp_path / "b.log").read_bytes())
    assert others[1] != frames[1]
    spliced = [frames[0], others[1], *frames[2:]]
    path = tmp_path / "spliced.log"
    path.write_bytes(head + b"".join(spliced))
    reader = EventReader(path)
    # the foreign frame follows the same predecessor as in its own log, so the chain breaks at the next frame
    assert [next(reader), next(reader)] == [EVENTS[0], Batch(0, [99])]
    with pytest.raises(EventLogCorrupt, match=f"byte offset {len(head) + len(spliced[0]) + len(spliced[1])}"):
        next(reader)


def test_an_unchained_log_cannot_pass_as_the_current_version(tmp_path: Path) -> None:
    header = msgpack.packb({"format": "pytimely-events", "version": FORMAT_VERSION, "timestamp": "integer"})
    frames = [frame(encode_event(event)) for event in EVENTS]
    error = refused_at(tmp_path / "unchained.log", MAGIC + frame(header), frames, 0)
    assert "frame 1 of the chain" in str(error)


@pytest.mark.parametrize("version", [1, 2])
def test_older_versions_are_read_frame_by_frame_as_they_always_were(tmp_path: Path, version: int) -> None:
    header = msgpack.packb({"format": "pytimely-events", "version": version, "timestamp": "integer"})
    frames = [frame(encode_event(event)) for event in EVENTS]
    path = tmp_path / "old.log"
    path.write_bytes(MAGIC + frame(header) + b"".join(frames))
    assert read_event_log(path) == EVENTS


# ---------------------------------------------------------------------- timestamp types


class Ticks(TimestampType):
    """A user-defined timestamp type: non-negative integers under another name."""

    name = "ticks"

    def minimum(self) -> Any:
        return 0

    def identity(self) -> PathSummary:
        return INTEGER.identity()

    def contains(self, value: Any) -> bool:
        return value.__class__ is int and value >= 0


def log_declaring(timestamp: Any, events: list[bytes]) -> bytes:
    header = msgpack.packb({"format": "pytimely-events", "version": 2, "timestamp": timestamp})
    return MAGIC + frame(header) + b"".join(frame(payload) for payload in events)


@pytest.mark.parametrize("declared", ["mystery", "Product[integer, mystery]", 7, None])
def test_an_unknown_timestamp_type_is_refused_naming_it_and_the_offset(tmp_path: Path, declared: Any) -> None:
    path = tmp_path / "unknown.log"
    path.write_bytes(log_declaring(declared, [msgpack.packb([1, "not a time", [1]])]))
    with pytest.raises(EventLogFormatError) as failure:
        read_event_log(path)
    message = str(failure.value)
    assert str(path) in message and f"byte offset {len(MAGIC)}" in message
    assert repr(declared) in message if isinstance(declared, str) else "timestamp type" in message
    assert "EventReader(path, timestamp=" in message


def test_a_user_timestamp_type_is_read_when_the_reader_is_given_it_and_its_times_are_checked(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ticks.log"
    events = [Batch(0, ["a"]), Progress([(0, -1)])]
    with EventWriter(path, Ticks()) as writer:
        for event in events:
            writer.push(event)
    with pytest.raises(EventLogFormatError, match="'ticks'"):
        read_event_log(path)
    assert read_event_log(path, Ticks()) == events
    bad = log_declaring("ticks", [msgpack.packb([1, -5, [1]])])
    with pytest.raises(EventLogCorrupt, match=f"byte offset {len(bad) - len(frame(msgpack.packb([1, -5, [1]])))}"):
        list(EventReader(io.BytesIO(bad), Ticks()))


def test_a_timestamp_name_nested_too_deep_is_refused_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "deep.log"
    name = "Product[integer, " * 3000 + "integer" + "]" * 3000
    path.write_bytes(log_declaring(name, []))
    with pytest.raises(EventLogFormatError, match=f"byte offset {len(MAGIC)}.*not a built-in one"):
        read_event_log(path)
    nested = "integer"
    for _ in range(5):
        nested = f"Product[{nested}, integer]"
    write_events(path, [], ProductTypeOf(nested))
    assert read_event_log(path) == []


def ProductTypeOf(name: str) -> TimestampType:  # noqa: N802 - reads as a type
    from runtime.eventlog import timestamp_type_named

    found = timestamp_type_named(name)
    assert found is not None and found.name == name
    return found
