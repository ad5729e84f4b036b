"""A bounded single-producer, single-consumer byte ring in shared memory, carrying frames.

One ring carries the frames (:mod:`runtime.communication.wire`) that one
process sends to another on the same host.  Its memory is a ``memfd`` (an
anonymous file that has no name in ``/dev/shm`` or anywhere else) mapped by both
processes: the kernel frees it when the last mapping goes, so a process killed
by SIGKILL leaves nothing behind.

Layout (all counters little-endian ``u64``, each on its own cache line)::

    0    tail      bytes written since the ring was made (the writer's)
    64   head      bytes consumed since the ring was made (the reader's)
    128  sleeping  0 while the reader is awake, else the number of its current sleep (the reader's)
    192  waiting   1 while the writer waits for room (the writer's)
    4096 data      ``capacity`` bytes, written and read modulo ``capacity``

Each field has one writer.  The writer copies bytes in, then publishes the new
``tail``; the reader reads below ``tail`` and publishes ``head``.  Each side
reads the other's cache lines no more than it must, as every read of a line the
other core has just written is a miss: the writer reads ``head`` only when a
frame would pass the room it saw last time, and writes ``waiting`` only when it
changes (the reader reads it after every read).  A
store-load fence (:func:`fence`) separates publishing a counter from reading the
other side's flag, so a doorbell is never slept through.  The stream is
a plain byte stream, like a socket: a frame larger than the ring passes in
pieces, and :class:`RingReader` gathers such a frame into a buffer of its own.

What the peer writes is hostile: the reader checks the counters and every
frame's lengths before using them (:class:`~runtime.errors.WireError`).
"""

from __future__ import annotations

import _thread
import contextlib
import ctypes
import mmap
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from runtime.communication.arraycodec import DATA_ALIGNMENT
from runtime.communication.wire import FRAME_PREFIX, LARGE_FRAME, MAX_FRAME, decode_value, frame_refused
from runtime.errors import WireError

HEADER_BYTES = 4096
"""Bytes before a ring's data: the counters, one cache line each."""
_TAIL, _HEAD, _SLEEPING, _WAITING = 0, 8, 16, 24
"""Indexes of the counters in the ``u64`` view of the header."""
MIN_CAPACITY = 1 << 16
"""The smallest ring accepted (a peer offering a smaller one is refused)."""
MAX_CAPACITY = 1 << 30
"""The largest ring accepted."""

HEADER_CACHE = 256
"""Decoded frame headers a reader keeps (then it forgets them all and starts again)."""
HEADER_CACHE_BYTES = 64
"""Encoded headers longer than this are decoded every time (so what the cache holds stays small)."""

_FENCE = _thread.allocate_lock()


def fence() -> None:
    """A full memory barrier: a lock's acquire and release are atomic read-modify-writes."""
    _FENCE.acquire()
    _FENCE.release()


def ring_bytes(capacity: int) -> int:
    """The size of the shared memory that holds a ring of ``capacity`` data bytes."""
    return HEADER_BYTES + capacity


class Ring:
    """One ring's shared memory, mapped from the file descriptor ``fd`` (a memfd of :func:`ring_bytes`)."""

    def __init__(self, fd: int, capacity: int) -> None:
        """Map ``fd``; the descriptor may be closed afterwards (the mapping keeps the memory)."""
        if not MIN_CAPACITY <= capacity <= MAX_CAPACITY:
            raise WireError(f"a ring of {capacity} bytes is outside {MIN_CAPACITY}..{MAX_CAPACITY}")
        self.capacity = capacity
        self._map = mmap.mmap(fd, ring_bytes(capacity))
        whole = memoryview(self._map)
        self.counters = whole[:HEADER_BYTES].cast("Q")
        self.data = whole[HEADER_BYTES:]

    def close(self) -> None:
        """Unmap the ring (views handed out must have been released or copied)."""
        self.counters.release()
        self.data.release()
        with contextlib.suppress(BufferError):  # a view still alive somewhere: the mapping goes with it
            self._map.close()


class RingWriter:
    """The sending side of a ring: frames in, whatever does not fit kept in order until there is room.

    Thread-safe (the worker threads of one process share it).  ``ring_doorbell``
    wakes the reader when it sleeps.
    """

    def __init__(self, ring: Ring, ring_doorbell: Callable[[], None]) -> None:
        """Write into ``ring``; call ``ring_doorbell()`` when the reader sleeps and data arrived."""
        self._ring = ring
        self._doorbell = ring_doorbell
        self._lock = _thread.allocate_lock()
        self._pending: deque[memoryview] = deque()
        self.pending_bytes = 0
        """Bytes waiting for room in the ring."""
        self.written = 0
        """Bytes written into the ring so far."""
        self._rung = 0
        self._room_until = 0
        """The stream offset the ring had room up to when the reader's head was last read: the writer reads the
        head (a cache line the reader keeps changing, so a miss on another core) only when a write would pass it."""

    def send(self, pieces: list[bytes | memoryview]) -> None:
        """Append ``pieces`` to the stream: into the ring what fits, the rest kept (in order) for :meth:`retry`."""
        with self._lock:
            pending = self._pending
            if not pending and self._copy_whole(pieces):
                return
            for piece in pieces:
                if len(piece):
                    view = memoryview(piece).cast("B")
                    pending.append(view)
                    self.pending_bytes += len(view)
            self._write()

    def retry(self) -> bool:
        """Write what waits for room; whether nothing waits any more."""
        if not self.pending_bytes:
            return True
        with self._lock:
            self._write()
            return not self.pending_bytes

    def _copy_whole(self, pieces: list[bytes | memoryview]) -> bool:
        """Copy ``pieces`` into the ring at once if they are all ``bytes`` (a frame's head, a progress batch) and
        fit before its end; whether they did (else :meth:`_write` takes them, in pieces and around the end)."""
        ring = self._ring
        counters = ring.counters
        capacity = ring.capacity
        start = counters[_TAIL]
        at = start % capacity
        size = 0
        for piece in pieces:
            if piece.__class__ is not bytes:
                return False
            size += len(piece)
        if not size or at + size > capacity:
            return False
        if start + size > self._room_until:
            self._room_until = counters[_HEAD] + capacity
            if start + size > self._room_until:
                return False
        data = ring.data
        for piece in pieces:
            end = at + len(piece)
            data[at:end] = piece
            at = end
        self._publish(start, start + size, False)
        return True

    def _write(self) -> None:
        ring = self._ring
        counters = ring.counters
        capacity = ring.capacity
        data = ring.data
        tail = counters[_TAIL]
        self._room_until = counters[_HEAD] + capacity
        room = self._room_until - tail
        pending = self._pending
        start = tail
        while pending and room:
            view = pending[0]
            take = min(len(view), room)
            at = tail % capacity
            first = min(take, capacity - at)
            data[at : at + first] = view[:first]
            if first < take:
                data[: take - first] = view[first:take]
            tail += take
            room -= take
            if take == len(view):
                pending.popleft()
            else:
                pending[0] = view[take:]
        self.pending_bytes -= tail - start
        self._publish(start, tail, bool(pending))

    def _publish(self, start: int, tail: int, waiting: bool) -> None:
        """Publish the bytes written from ``start`` to ``tail`` and whether more wait; ring the reader if it sleeps."""
        counters = self._ring.counters
        if tail != start:
            self.written += tail - start
            fence()  # the bytes before the tail that says they are there
            counters[_TAIL] = tail
        flag = 1 if waiting else 0
        if counters[_WAITING] != flag:  # written only when it changes: the reader reads it after every read
            counters[_WAITING] = flag
        fence()  # publish the tail (and waiting) before reading whether the reader sleeps
        if tail != start:
            sleep = counters[_SLEEPING]
            if sleep and sleep != self._rung:  # one ring per sleep: the reader reads everything when it wakes
                self._rung = sleep
                self._doorbell()


class RingReader:
    """The receiving side of a ring: yields ``(header, payload)`` for every whole frame, each payload copied once.

    A payload lies in the ring only until the reader moves on, so it is copied
    out once: into ``bytes``, or for a frame of at least
    :data:`~runtime.communication.wire.LARGE_FRAME` bytes into a buffer of its
    own whose payload is aligned, so that an array decoded from it uses that
    memory.  A frame that is not whole yet is gathered into its buffer as it
    arrives (so a frame may be larger than the ring).  ``writer_doorbell`` wakes
    the writer when it waits for room and room was made.
    """

    def __init__(self, ring: Ring, writer_doorbell: Callable[[], None], max_frame: int = MAX_FRAME) -> None:
        """Read ``ring``; frames larger than ``max_frame`` bytes are refused."""
        self._ring = ring
        self._doorbell = writer_doorbell
        self._max = max_frame
        self._partial: memoryview | None = None
        self._filled = 0
        self._head_length = 0
        self._whole: memoryview = memoryview(b"")
        self._sleeps = 0
        self._headers: dict[bytes, tuple[list[Any], tuple[int, ...] | None]] = {}
        self.read = 0
        """Bytes consumed from the ring so far."""

    def has_data(self) -> bool:
        """Whether bytes wait in the ring."""
        counters = self._ring.counters
        return bool(counters[_TAIL] != counters[_HEAD])

    def sleep(self, sleeping: bool) -> bool:
        """Say whether the reader is about to sleep; when going to sleep, whether data arrived meanwhile."""
        counters = self._ring.counters
        if not sleeping:
            counters[_SLEEPING] = 0
            return False
        self._sleeps += 1
        counters[_SLEEPING] = self._sleeps
        fence()  # publish ``sleeping`` before reading the tail: a writer that missed it rang the doorbell
        return bool(counters[_TAIL] != counters[_HEAD])

    def frames(self) -> Iterator[tuple[list[Any], bytes | memoryview]]:
        """Every frame now whole, in order; raises :class:`WireError` on malformed bytes or counters."""
        ring = self._ring
        counters = ring.counters
        capacity = ring.capacity
        data = ring.data
        head = counters[_HEAD]
        tail = counters[_TAIL]
        fence()  # read the tail before the bytes it covers
        if not 0 <= tail - head <= capacity:
            raise WireError(f"a shared-memory ring's counters are inconsistent (head {head}, tail {tail})")
        try:
            while head != tail:
                if self._partial is not None:
                    head = self._gather(data, head, tail)
                    if self._partial is not None:
                        break
                    yield self._split(memoryview(self._whole), self._head_length)
                    continue
                if tail - head < 8:
                    break
                at = head % capacity
                if at + 8 <= capacity:
                    body, head_length = FRAME_PREFIX.unpack_from(data, at)
                else:  # the prefix wraps
                    body, head_length = FRAME_PREFIX.unpack(_take(data, head, 8, capacity))
                if body > self._max or head_length > body or head_length == 0:
                    raise frame_refused(body, head_length, self._max)
                if tail - head - 8 >= body and body < LARGE_FRAME:
                    at = (head + 8) % capacity
                    whole = _take(data, head + 8, body, capacity)
                    head += 8 + body
                    header = self._header(whole[:head_length])
                    # a frame that wraps was copied whole by _take: its payload is that copy
                    yield header, bytes(whole[head_length:]) if at + body <= capacity else whole[head_length:]
                    continue
                self._whole = _aligned(body, head_length)
                self._partial = self._whole
                self._filled = 0
                self._head_length = head_length
                head += 8
        finally:
            if head != counters[_HEAD]:
                counters[_HEAD] = head
                self.read = head
                fence()  # publish the room before reading whether the writer waits for it
                if counters[_WAITING]:
                    self._doorbell()

    def _gather(self, data: memoryview, head: int, tail: int) -> int:
        """Copy what has arrived of the frame being gathered; the new head."""
        partial = self._partial
        assert partial is not None
        capacity = self._ring.capacity
        take = min(tail - head, len(partial) - self._filled)
        at = head % capacity
        first = min(take, capacity - at)
        partial[self._filled : self._filled + first] = data[at : at + first]
        if first < take:
            partial[self._filled + first : self._filled + take] = data[: take - first]
        self._filled += take
        if self._filled == len(partial):
            self._partial = None
        return head + take

    def _split(self, body: memoryview, head_length: int) -> tuple[list[Any], memoryview]:
        return self._header(body[:head_length]), body[head_length:]

    def _header(self, encoded: memoryview) -> list[Any]:
        """The header encoded in ``encoded``: decoded once while it keeps coming back (a progress frame's header
        is the same at every step), and copied (every list and map in it) so that no reader changes the one kept."""
        if len(encoded) > HEADER_CACHE_BYTES:
            return _header(encoded)
        key = bytes(encoded)
        kept = self._headers.get(key)
        if kept is None:
            header = _header(encoded)
            if len(self._headers) >= HEADER_CACHE:
                self._headers.clear()
            kept = self._headers[key] = (header, _containers(header))
        header, containers = kept
        if containers is None:
            return _fresh(header)
        fresh = header.copy()
        for index in containers:
            fresh[index] = header[index].copy()
        return fresh


def _take(data: memoryview, start: int, size: int, capacity: int) -> memoryview:
    """``size`` bytes of the ring from stream offset ``start``: a view where they lie whole, else a copy."""
    at = start % capacity
    if at + size <= capacity:
        return data[at : at + size]
    first = capacity - at
    copy = bytearray(size)
    copy[:first] = data[at:]
    copy[first:] = data[: size - first]
    return memoryview(copy)


def _fresh(value: Any) -> Any:
    """``value`` with each list and map in it copied (the immutable rest shared): a reader may change what it got."""
    if value.__class__ is list:
        return [_fresh(item) if item.__class__ is list or item.__class__ is dict else item for item in value]
    if value.__class__ is dict:
        return {key: _fresh(item) for key, item in value.items()}
    return value


def _containers(header: list[Any]) -> tuple[int, ...] | None:
    """The indexes of the lists and maps in ``header``, if none of them holds a list or map (then a copy of each
    is all that a fresh copy of the header needs: a data header's receivers); else ``None`` (:func:`_fresh`)."""
    found = []
    for index, item in enumerate(header):
        if item.__class__ is list or item.__class__ is dict:
            inner = item.values() if item.__class__ is dict else item
            if any(value.__class__ is list or value.__class__ is dict for value in inner):
                return None
            found.append(index)
    return tuple(found)


def _header(encoded: memoryview) -> list[Any]:
    header = decode_value(encoded)
    if header.__class__ is not list or not header:
        raise WireError("a frame header must be a non-empty array")
    return header


def _aligned(size: int, head: int) -> memoryview:
    """A writable buffer of ``size`` bytes whose byte ``head`` (the payload) lies at an aligned address."""
    storage = bytearray(size + DATA_ALIGNMENT)
    address = ctypes.addressof(ctypes.c_char.from_buffer(storage))
    offset = -(address + head) % DATA_ALIGNMENT
    return memoryview(storage)[offset : offset + size]
