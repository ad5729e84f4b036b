"""Whatever bytes a peer puts in a ring, wherever they lie (a frame's prefix split across the ring's end included),
the reader yields well-formed frames or raises :class:`WireError`, and never anything else."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_shm_transport import Bell, make_ring

from runtime.communication.shm_ring import _HEAD, _TAIL, MIN_CAPACITY, Ring, RingReader
from runtime.communication.shm_transport import shared_memory_supported
from runtime.communication.wire import frame
from runtime.errors import WireError

pytestmark = pytest.mark.skipif(not shared_memory_supported(), reason="needs Linux memfds and eventfds")


def put(ring: Ring, start: int, data: bytes) -> None:
    """``data`` in the ring as a writer at stream offset ``start`` would have left it: head at ``start``, tail after
    it, the bytes wrapped around the ring's end."""
    capacity = ring.capacity
    for offset, byte in enumerate(data):
        ring.data[(start + offset) % capacity] = byte
    ring.counters[_HEAD] = start
    ring.counters[_TAIL] = start + len(data)


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(max_size=200),
    back=st.integers(0, 16),  # how far before the ring's end the bytes begin: a prefix or header split there
    laps=st.integers(0, 3),
)
def test_any_bytes_anywhere_in_a_ring_give_frames_or_a_wire_error(data: bytes, back: int, laps: int) -> None:
    written, read = make_ring()
    put(written, laps * MIN_CAPACITY + MIN_CAPACITY - back, data)
    reader = RingReader(read, Bell(), max_frame=1 << 16)
    try:
        for header, payload in reader.frames():
            assert header.__class__ is list and header
            assert len(payload) <= len(data)
    except WireError:
        pass


@settings(max_examples=100, deadline=None)
@given(
    headers=st.lists(
        st.lists(
            st.one_of(st.integers(-5, 5), st.text(max_size=3), st.lists(st.integers(0, 3), max_size=2)),
            min_size=1,
            max_size=4,
        ),
        min_size=1,
        max_size=4,
    ),
    payload=st.binary(max_size=20),
    back=st.integers(0, 16),
)
def test_frames_split_across_the_rings_end_read_back_whole(
    headers: list[list[object]], payload: bytes, back: int
) -> None:
    written, read = make_ring()
    put(written, MIN_CAPACITY - back, b"".join(frame(header, payload) for header in headers))
    got = [(header, bytes(body)) for header, body in RingReader(read, Bell()).frames()]
    assert got == [(header, payload) for header in headers]
