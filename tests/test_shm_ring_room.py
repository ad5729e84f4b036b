"""A ring writer's view of the room left: read from the reader's head only when a frame would not fit, and never
more room than the reader made; its ``waiting`` flag is set while bytes wait and cleared once they have gone."""

from __future__ import annotations

import pytest
from test_shm_transport import Bell, make_ring

from runtime.communication.shm_ring import _HEAD, _WAITING, MIN_CAPACITY, RingReader, RingWriter
from runtime.communication.shm_transport import shared_memory_supported
from runtime.communication.wire import frame

pytestmark = pytest.mark.skipif(not shared_memory_supported(), reason="needs Linux memfds and eventfds")

SIZE = 1000


def small(number: int) -> bytes:
    return frame([number], bytes([number % 256]) * SIZE)


def read_all(reader: RingReader) -> list[tuple[int, bytes]]:
    return [(header[0], bytes(payload)) for header, payload in reader.frames()]


def test_frames_go_straight_into_the_room_the_reader_made_since_the_writer_last_looked() -> None:
    written, read = make_ring()
    writer, reader = RingWriter(written, Bell()), RingReader(read, Bell())
    fits = MIN_CAPACITY // len(small(0))
    for number in range(fits):
        writer.send([small(number)])
    assert writer.pending_bytes == 0
    assert read_all(reader) == [(n, bytes([n % 256]) * SIZE) for n in range(fits)]
    # the writer's last look at the head was before any read: these fit only in the room the reads made
    for number in range(fits, 2 * fits):
        writer.send([small(number)])
        assert writer.pending_bytes == 0
    assert read_all(reader) == [(n, bytes([n % 256]) * SIZE) for n in range(fits, 2 * fits)]


def test_a_writer_never_writes_over_bytes_the_reader_has_not_read() -> None:
    written, read = make_ring()
    writer, reader = RingWriter(written, Bell()), RingReader(read, Bell())
    sent = 3 * MIN_CAPACITY // len(small(0))
    for number in range(sent):
        writer.send([small(number)])
    assert writer.pending_bytes > 0  # the rest waits in order
    assert writer.written - read.counters[_HEAD] <= MIN_CAPACITY
    got: list[tuple[int, bytes]] = []
    for _ in range(10):
        got += read_all(reader)
        writer.retry()
        assert writer.written - read.counters[_HEAD] <= MIN_CAPACITY
    assert got == [(n, bytes([n % 256]) * SIZE) for n in range(sent)]


def test_the_waiting_flag_is_cleared_once_nothing_waits_so_reads_ring_the_writer_no_more() -> None:
    written, read = make_ring()
    writer_bell = Bell()
    writer, reader = RingWriter(written, Bell()), RingReader(read, writer_bell)
    for number in range(2 * MIN_CAPACITY // len(small(0))):
        writer.send([small(number)])
    assert written.counters[_WAITING] == 1
    while writer.pending_bytes:
        read_all(reader)
        writer.retry()
    assert written.counters[_WAITING] == 0
    read_all(reader)  # the ring is empty: the frames below fit
    rung = writer_bell.rung
    assert rung > 0
    for number in range(5):
        writer.send([small(number)])
        read_all(reader)
    assert writer_bell.rung == rung
