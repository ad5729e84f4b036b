"""Gathered sends: many buffers, partial writes and empty pieces arrive whole and in order."""

from __future__ import annotations

import socket
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.communication.tcp import _send_all


def _received_after_sending(pieces: list[bytes]) -> bytes:
    left, right = socket.socketpair()
    left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # forces partial writes
    chunks: list[bytes] = []

    def read() -> None:
        while data := right.recv(1 << 16):
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        _send_all(left, [memoryview(piece) if index % 2 else piece for index, piece in enumerate(pieces)])
        left.shutdown(socket.SHUT_WR)
        reader.join(timeout=30)
        assert not reader.is_alive()
    finally:
        left.close()
        right.close()
    return b"".join(chunks)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=200_000), max_size=12), st.integers(0, 255))
def test_gathered_sends_deliver_every_byte_in_order(sizes: list[int], seed: int) -> None:
    pieces = [
        bytes((seed + index + offset) % 256 for offset in range(min(size, 7))) * (size // 7 + 1)
        for index, size in enumerate(sizes)
    ]
    pieces = [piece[:size] for piece, size in zip(pieces, sizes, strict=True)]
    assert _received_after_sending(pieces) == b"".join(pieces)


def test_more_buffers_than_one_sendmsg_takes() -> None:
    pieces = [bytes([index % 256]) * (index % 300 + 100) for index in range(1500)]
    assert _received_after_sending(pieces) == b"".join(pieces)
