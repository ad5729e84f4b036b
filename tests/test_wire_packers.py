"""The wire's encoders reuse msgpack packers: nested values, failures, large values and threads stay correct."""

from __future__ import annotations

import threading
import timeit
from collections.abc import Callable

import msgpack  # type: ignore[import-untyped]
import pytest

from runtime import codec
from runtime.communication import wire
from runtime.communication.wire import (
    BATCH_FAST,
    EncodingError,
    decode_batch,
    decode_value,
    encode_batch,
    encode_value,
    frame,
    frame_head,
)
from scopes.timestamp import Product


def test_nested_extension_values_round_trip_through_reused_packers() -> None:
    value = [0, 3, (0, (1, 2)), [1, 2], Product(3, (4, 5)), 2**80, {"k": (1,)}]
    for _ in range(3):  # the second and third encodings use pooled packers
        assert decode_value(encode_value(value)) == value
    assert encode_value(value) == encode_value(value)


def test_a_failed_encoding_leaves_no_half_packed_bytes_for_the_next_one() -> None:
    class Opaque:
        pass

    with pytest.raises(EncodingError):
        encode_value([1, 2, (3, Opaque())])
    assert decode_value(encode_value([7, (8,)])) == [7, (8,)]


def test_a_large_value_does_not_keep_its_packer() -> None:
    codec._packers.state = codec._PackState()
    encode_value([b"x" * (2 << 20)])
    assert codec._packers.state.free == []  # its 2 MB buffer is not kept
    encode_value([b"x"])
    assert len(codec._packers.state.free) == 1


def in_four_threads(run: Callable[[int], None]) -> list[BaseException]:
    """Run ``run(seed)`` in 4 threads at once, seeds 0 to 3; what they raised."""
    errors: list[BaseException] = []

    def guarded(seed: int) -> None:
        try:
            run(seed)
        except BaseException as error:  # noqa: BLE001 - reported to the caller
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return errors


def test_threads_encoding_at_once_get_their_own_packers() -> None:
    def run(seed: int) -> None:
        for i in range(2000):
            value = [seed, i, (seed, i), Product(seed, i)]
            assert decode_value(encode_value(value)) == value

    assert not in_four_threads(run)


def test_a_frame_head_costs_a_few_microseconds_not_a_packer_construction() -> None:
    header = [0, 3, (0, 2), [1], 17, 1]
    assert frame_head(header, 3) + b"abc" == frame(header, b"abc")
    per_call = min(timeit.repeat(lambda: frame_head(header, 0), number=2000, repeat=5)) / 2000
    # building two Packers (outer and the tuple's) took ~15 us; reused ones ~2 us
    assert per_call < 8e-6, per_call


def test_a_small_fast_batch_of_a_large_value_does_not_keep_its_packer() -> None:
    assert encode_batch([(0, 1, -1)]) == (BATCH_FAST, msgpack.packb([(0, 1, -1)], use_bin_type=True))
    kept = wire._PACKERS.packer
    assert encode_batch([(0, 2, 1)])[1] == msgpack.packb([(0, 2, 1)], use_bin_type=True)
    assert wire._PACKERS.packer is kept  # reused while what it packs is small
    path, payload = encode_batch(["x" * (2 << 20)])
    assert path == BATCH_FAST and decode_batch(path, payload) == ["x" * (2 << 20)]
    assert getattr(wire._PACKERS, "packer", None) is None  # its 2 MB buffer is not kept
    path, payload = encode_batch([(1, 2), (1, 2**70)])  # the packer fails part-way: the general path carries it
    assert path != BATCH_FAST and decode_batch(path, payload) == [(1, 2), (1, 2**70)]
    assert encode_batch([(3, 4)])[1] == msgpack.packb([(3, 4)], use_bin_type=True)  # nothing half-packed is left


def test_threads_encoding_fast_batches_at_once_get_their_own_packers() -> None:
    def run(seed: int) -> None:
        for i in range(5000):
            batch = [(seed, i, -1), (seed, i + 1, 1), (seed, "w" * (i % 7), 1.5)]
            path, payload = encode_batch(batch)
            assert path == BATCH_FAST and decode_batch(path, payload) == batch

    assert not in_four_threads(run)
