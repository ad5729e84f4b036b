"""Copy once, decode once: a received payload is copied at most once, a frame for several workers decoded once."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from runtime.communication import process_channels
from runtime.communication.process_fabric import DATA, ProcessFabric
from runtime.communication.shared_decode import SharedPayload
from runtime.communication.wire import (
    FrameReader,
    Parts,
    WireError,
    decode_batch,
    encode_batch,
    frame,
    frame_head,
    payload_pieces,
)


class QuietMesh:
    endpoints = ["a:1", "b:2"]

    def send(self, process: int, data: bytes) -> None:
        pass

    def send_pieces(self, process: int, pieces: list[Any]) -> None:
        pass


def test_a_frame_for_every_worker_of_a_process_is_decoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    fabric = ProcessFabric(1, 2, 3, QuietMesh())  # type: ignore[arg-type]
    pullers = [communicator.allocate(5, (0, 1))[1] for communicator in fabric.communicators()]
    decoded: list[int] = []
    real = process_channels.decode_batch

    def counting(path: int, payload: Any) -> Any:
        decoded.append(path)
        return real(path, payload)

    monkeypatch.setattr("runtime.communication.shared_decode.decode_batch", counting)
    monkeypatch.setattr(process_channels, "decode_batch", counting)
    batch = [((0, 1), 3, -1), ((2,), 4, 1)]  # a progress batch: (location, time, change)
    path, payload = encode_batch(batch)
    fabric.on_frame(0, [DATA, 5, (0, 1), [3, 4, 5], None, path], bytes(payload))
    received = [puller.pull() for puller in pullers]
    assert received == [(None, batch)] * 3
    assert len(decoded) == 1
    batches = [message[1] for message in received if message is not None]
    assert len({id(batch) for batch in batches}) == 3  # each worker owns its batch: one may change it
    assert not any(fabric.remote_mailbox(5, local) for local in range(3))


@pytest.mark.parametrize("receiver", [2, 6, -1])
def test_a_data_frame_for_a_worker_not_of_this_process_is_malformed(receiver: int) -> None:
    """A negative worker index (here 2 - base 3) reached the last worker's mailbox, where no puller of the sender's
    channel waits, and its credit was never returned; one past the last failed with a bare IndexError."""
    fabric = ProcessFabric(1, 2, 3, QuietMesh())  # type: ignore[arg-type]
    path, payload = encode_batch([1, 2])
    with pytest.raises(WireError, match=r"not one of this process's workers \(3 to 5\)"):
        fabric.on_frame(0, [DATA, 5, (0, 1), [receiver], None, path], bytes(payload))
    assert not any(fabric.remote_mailbox(5, local) for local in range(3))


def test_a_shared_payload_that_does_not_decode_fails_every_receiver() -> None:
    shared = SharedPayload(0, b"\xc1", 2)
    for _ in range(2):
        with pytest.raises(WireError):
            shared.take()


def test_the_frame_reader_copies_each_payload_once() -> None:
    """Frames fed in one chunk are split where they lie: the payloads are the only copy made."""
    payloads = [bytes([n % 251]) * 1000 for n in range(4000)]
    stream = b"".join(frame([n], payload) for n, payload in enumerate(payloads))
    reader = FrameReader()
    tracemalloc.start()
    try:
        kept = [payload for _, payload in reader.feed(stream)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [bytes(payload) for payload in kept] == payloads
    assert peak < 1.5 * len(stream)  # the payloads (4 MB) and no second copy of the stream


def test_a_frame_fed_in_pieces_is_gathered_into_its_own_buffer() -> None:
    payload = bytes(range(256)) * 1000
    data = frame_head(["big"], len(payload)) + payload + frame(["small"], b"xyz")
    reader = FrameReader()
    received: list[Any] = []
    chunk = bytearray(999)
    for start in range(0, len(data), 999):
        piece = data[start : start + 999]
        chunk[: len(piece)] = piece
        received += [(header, bytes(body)) for header, body in reader.feed(memoryview(chunk)[: len(piece)])]
        chunk[:] = b"\xff" * 999  # the caller reuses its buffer: nothing of it may be kept
    assert received == [(["big"], payload), (["small"], b"xyz")]
    assert reader.pending == 0


def test_an_array_is_sent_from_its_own_memory_not_from_a_joined_copy() -> None:
    np = pytest.importorskip("numpy")
    array = np.arange(100_000, dtype=np.int64)
    path, payload = encode_batch(array)
    assert isinstance(payload, Parts) and len(payload) == len(bytes(payload)) > array.nbytes
    assert np.shares_memory(np.frombuffer(payload.buffers[-1], dtype=np.int64), array)
    pieces: list[Any] = []
    payload_pieces(pieces, payload)
    assert pieces == list(payload.buffers)  # the sender writes them one after the other into the socket or ring
    assert (decode_batch(path, payload) == array).all()
