"""A ring reader decodes a header that keeps coming back once, and keeps what it caches small and bounded."""

from __future__ import annotations

from typing import Any

import pytest
from test_shm_transport import Bell, make_ring

from runtime.communication import shm_ring
from runtime.communication.shm_ring import HEADER_CACHE, HEADER_CACHE_BYTES, RingReader, RingWriter
from runtime.communication.shm_transport import shared_memory_supported
from runtime.communication.wire import frame

pytestmark = pytest.mark.skipif(not shared_memory_supported(), reason="needs Linux memfds and eventfds")


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    count = [0]
    decode_value = shm_ring.decode_value

    def counted(encoded: Any) -> Any:
        count[0] += 1
        return decode_value(encoded)

    monkeypatch.setattr(shm_ring, "decode_value", counted)
    return count


def test_a_repeated_header_is_decoded_once_and_each_reader_gets_its_own_list(decodes: list[int]) -> None:
    written, read = make_ring(1 << 20)
    writer, reader = RingWriter(written, Bell()), RingReader(read, Bell())
    for step in range(3):
        writer.send([frame([0, 3, (0, 1), [1], None, 0], b"step %d" % step)])
    got = list(reader.frames())
    assert [(header, bytes(payload)) for header, payload in got] == [
        ([0, 3, (0, 1), [1], None, 0], b"step %d" % step) for step in range(3)
    ]
    assert decodes[0] == 1
    got[0][0][1] = "changed by a reader"
    writer.send([frame([0, 3, (0, 1), [1], None, 0], b"again")])
    assert [header for header, _ in reader.frames()] == [[0, 3, (0, 1), [1], None, 0]]


def test_long_headers_are_not_kept_and_the_cache_stays_bounded(decodes: list[int]) -> None:
    written, read = make_ring(1 << 20)
    writer, reader = RingWriter(written, Bell()), RingReader(read, Bell())
    long = [0, "x" * HEADER_CACHE_BYTES]
    for _ in range(2):
        writer.send([frame(long, b"")])
    assert [header for header, _ in reader.frames()] == [long, long]
    assert decodes[0] == 2
    for index in range(HEADER_CACHE + 10):
        writer.send([frame([1, index], b"")])
        assert [header for header, _ in reader.frames()] == [[1, index]]
    assert len(reader._headers) <= HEADER_CACHE


def test_a_reader_that_changes_a_list_inside_a_header_changes_no_later_header(decodes: list[int]) -> None:
    written, read = make_ring(1 << 20)
    writer, reader = RingWriter(written, Bell()), RingReader(read, Bell())
    header = [0, 3, (0, 1), [1, [2]], {"k": [3]}, 0]
    writer.send([frame(header, b"first")])
    (got,) = list(reader.frames())
    got[0][3].append("changed")
    got[0][3][1].append("deeper")
    got[0][4]["k"].append("in a map")
    writer.send([frame(header, b"second")])
    assert [h for h, _ in reader.frames()] == [[0, 3, (0, 1), [1, [2]], {"k": [3]}, 0]]
    assert decodes[0] == 1


def test_a_reader_that_changes_a_flat_list_or_map_in_a_header_changes_no_later_header(decodes: list[int]) -> None:
    written, read = make_ring(1 << 20)
    writer, reader = RingWriter(written, Bell()), RingReader(read, Bell())
    header = [0, 3, (0, 1), [4, 5], {"k": 1}, 0]
    for _ in range(2):
        writer.send([frame(header, b"payload")])
    first, second = (h for h, _ in reader.frames())
    first[3].append("changed")
    first[4]["k"] = "changed"
    first[0] = "changed"
    assert second == header and second[3] is not first[3] and second[4] is not first[4]
    writer.send([frame(header, b"third")])
    assert [h for h, _ in reader.frames()] == [header]
    assert decodes[0] == 1
