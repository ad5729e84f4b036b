"""Sets, frozensets and maps whose keys were crafted to share one hash value: refused, never decoded quadratically.

Python's ``hash`` of ints and tuples is not randomized: ints ``2**61 - 1``
apart hash alike, and a pair ``(a, b)`` can be given any hash value by
solving for ``b``.  Building a set or dict of ``k`` keys of one hash value
compares each key with all before it, so a capture log holding a set of
20,000 such pairs (327 KB) took 6 s to decode, and the inputs here (100,000
keys) take minutes.  Each test runs under a timeout far below that, so a
regression fails it rather than passing slowly: the set or dict is built in one
call of C code holding the interpreter, which no timeout can interrupt, so the
test fails when that call returns.  With the bound, each is refused as damage,
naming the file and byte offset, in about a second at most.
"""

from __future__ import annotations

import hashlib
import struct
import sys
from pathlib import Path
from typing import Any

import msgpack  # type: ignore[import-untyped]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import codec
from runtime.checkpoints import MAGIC as CHECKPOINT_MAGIC
from runtime.checkpoints import VERSION as CHECKPOINT_VERSION
from runtime.checkpoints import CheckpointStore
from runtime.collisions import MAX_SHARED_HASH, check_keys
from runtime.communication.wire import BATCH_FAST, BATCH_GENERAL, decode_batch, encode_value
from runtime.errors import CheckpointCorrupt, DecodeError, EventLogCorrupt, RecordingCorrupt, RecordingError, WireError
from runtime.eventlog import event_log_bytes, header_frame, read_event_log
from runtime.framing import frame
from runtime.instrument import END_FRAME, encode_header, read_recording
from scopes import INTEGER

MODULUS = sys.hash_info.modulus
"""``2**61 - 1``: an int's hash is the int modulo this (sign kept)."""
MANY = 100_000
"""Crafted keys per value: quadratic decoding of this many takes minutes, so a regression hits the timeout."""
TIMEOUT = 60
"""Seconds each refusal may take before pytest-timeout ends the run (it takes a second at most)."""
TARGET = 987_654_321
"""The hash value every crafted key has."""

_WORD = 1 << 64
_PRIME_1 = 0x9E3779B185EBCA87  # the xxHash primes CPython's tuple hash mixes items with
_PRIME_2 = 0xC2B2AE3D27D4EB4F
_PRIME_5 = 0x27D4EB2F165667C5


def _rotate_left(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) % _WORD


def colliding_pairs(count: int, target: int = TARGET) -> list[tuple[int, int]]:
    """``count`` distinct pairs of 64-bit ints whose ``hash`` is ``target``.

    CPython hashes a pair by folding each item's hash into an accumulator
    (add ``h * P2``, rotate left 31, multiply by ``P1``, all modulo ``2**64``),
    then adding the length mixed with a constant; every step inverts, so for
    each first item the second item's hash is solved for (and it is an int
    whose hash is itself when it lies strictly within ``2**61 - 1`` of 0, and is not -1).
    """
    final = (target - (2 ^ _PRIME_5 ^ 3527539)) % _WORD
    mixed = final * pow(_PRIME_1, -1, _WORD) % _WORD
    before_rotation = _rotate_left(mixed, 64 - 31)
    inverse_2 = pow(_PRIME_2, -1, _WORD)
    pairs: list[tuple[int, int]] = []
    first = 0
    while len(pairs) < count:
        after_first = _rotate_left((_PRIME_5 + first * _PRIME_2) % _WORD, 31) * _PRIME_1 % _WORD
        lane = (before_rotation - after_first) * inverse_2 % _WORD
        second = lane - _WORD if lane >= 1 << 63 else lane
        if -MODULUS < second < MODULUS and second != -1:
            pairs.append((first, second))
        first += 1
    return pairs


def colliding_ints(count: int, target: int = TARGET) -> list[int]:
    """``count`` distinct ints (beyond 64 bits but for the first) whose ``hash`` is ``target``."""
    return [target + step * MODULUS for step in range(count)]


@pytest.fixture(scope="module")
def pairs() -> list[tuple[int, int]]:
    """:data:`MANY` crafted pairs, made once."""
    crafted = colliding_pairs(MANY)
    assert {hash(pair) for pair in crafted[:1000]} == {TARGET} and len(set(crafted[:1000])) == 1000
    return crafted


def packed_map(keys: list[Any], pack: Any) -> bytes:
    """A msgpack map of ``keys`` (each to ``0``) packed with ``pack`` (never built as a dict)."""
    zero = msgpack.packb(0)
    return b"\xdf" + struct.pack(">I", len(keys)) + b"".join(pack(key) + zero for key in keys)


def packed_ext(code: int, items: list[Any]) -> bytes:
    """A capture-log extension value (set or frozenset) holding ``items``."""
    return msgpack.packb(msgpack.ExtType(code, codec.pack_capture(items)))


def refused(error: BaseException) -> bool:
    """Whether ``error`` says it refused keys sharing one hash value."""
    return f"more than {MAX_SHARED_HASH} distinct keys with one hash value ({TARGET})" in str(error)


# ---------------------------------------------------------------------- capture logs


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("kind", ["set", "frozenset", "map"])
def test_a_capture_log_holding_colliding_tuples_is_refused_at_the_events_offset(
    tmp_path: Path, pairs: list[tuple[int, int]], kind: str
) -> None:
    value = {
        "set": lambda: packed_ext(codec.EXT_SET, pairs),
        "frozenset": lambda: packed_ext(codec.EXT_FROZENSET, pairs),
        "map": lambda: packed_map(pairs, codec.pack_capture),
    }[kind]()
    path = tmp_path / "flood.log"
    path.write_bytes(event_log_bytes([b"\x93\x01\x00\x91" + value]))  # messages at time 0: [value]
    with pytest.raises(EventLogCorrupt) as caught:
        read_event_log(path)
    assert caught.value.offset == len(header_frame(INTEGER))
    assert str(path) in str(caught.value) and f"byte offset {caught.value.offset}" in str(caught.value)
    assert refused(caught.value) and f"a {kind} in a capture log" in str(caught.value)


# ---------------------------------------------------------------------- recordings


@pytest.mark.timeout(TIMEOUT)
def test_a_recording_holding_a_map_of_colliding_tuples_is_refused_at_the_frames_offset(
    tmp_path: Path, pairs: list[tuple[int, int]]
) -> None:
    start = encode_header(0)
    path = tmp_path / "flood.msgpack"
    path.write_bytes(start + frame(b"\x91" + packed_map(pairs, codec.pack_recording)) + END_FRAME)
    with pytest.raises(RecordingCorrupt) as caught:
        read_recording(path)
    assert caught.value.offset == len(start) and f"byte offset {len(start)}" in str(caught.value)
    assert str(path) in str(caught.value) and refused(caught.value)


@pytest.mark.timeout(TIMEOUT)
def test_a_recording_of_format_1_holding_a_map_of_colliding_tuples_is_refused_at_its_offset(
    tmp_path: Path, pairs: list[tuple[int, int]]
) -> None:
    header = msgpack.packb({"format": "pytimely-events", "version": 1, "process": 0})
    path = tmp_path / "flood-v1.msgpack"
    path.write_bytes(header + packed_map(pairs, codec.pack_recording))
    with pytest.raises(RecordingError) as caught:
        read_recording(path, allow_format_1=True)
    assert f"at byte offset {len(header)}" in str(caught.value) and str(path) in str(caught.value)
    assert refused(caught.value)


# ---------------------------------------------------------------------- checkpoints


def forge_checkpoint(path: Path, header: bytes, body: bytes) -> None:
    """A checkpoint at ``path`` holding ``header`` and ``body`` as they are, its BLAKE2b right."""
    data = CHECKPOINT_MAGIC + struct.pack(">HI", CHECKPOINT_VERSION, len(header)) + header
    data += struct.pack(">Q", len(body)) + body
    path.write_bytes(data + hashlib.blake2b(data, digest_size=32).digest())


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("keys", ["ints", "tuples"])
def test_a_checkpoint_whose_body_maps_colliding_keys_is_refused_naming_the_body(
    tmp_path: Path, pairs: list[tuple[int, int]], keys: str
) -> None:
    store = CheckpointStore(tmp_path)
    path = store.write(0, 1, "shape", 5, {})
    header = encode_value({"shape": "shape", "workers": 1, "worker": 0, "epoch": 5})
    crafted = colliding_ints(MANY) if keys == "ints" else pairs
    forge_checkpoint(path, header, packed_map(crafted, encode_value))
    with pytest.raises(CheckpointCorrupt) as caught:
        store.read(path, 1, 0, "shape")
    assert str(path) in str(caught.value) and f"the body at byte {14 + len(header) + 8}" in str(caught.value)
    assert refused(caught.value) and "a map in the wire" in str(caught.value)


# ---------------------------------------------------------------------- the wire


@pytest.mark.timeout(TIMEOUT)
def test_a_general_batch_holding_a_map_of_colliding_ints_is_refused(pairs: list[tuple[int, int]]) -> None:
    for crafted in (colliding_ints(MANY), pairs):
        with pytest.raises(WireError) as caught:
            decode_batch(BATCH_GENERAL, b"\x91" + packed_map(crafted, encode_value))
        assert "malformed value on the wire" in str(caught.value) and refused(caught.value)


@pytest.mark.timeout(TIMEOUT)
def test_a_fast_batch_holding_a_map_of_colliding_arrays_is_refused(pairs: list[tuple[int, int]]) -> None:
    """The fast path reads arrays as tuples, so a map keyed by arrays of two ints collides like tuples."""
    with pytest.raises(WireError) as caught:
        decode_batch(BATCH_FAST, b"\x91" + packed_map(pairs, msgpack.packb))
    assert "malformed batch on the wire" in str(caught.value) and refused(caught.value)


# ---------------------------------------------------------------------- the bound, and ordinary values


def test_the_bound_counts_distinct_keys_not_repeats() -> None:
    """Repeats of a key share its hash but cost nothing to insert; only more than the bound of distinct ones fail."""
    crafted = colliding_ints(MAX_SHARED_HASH + 1)
    check_keys(crafted[:MAX_SHARED_HASH] * 1000, "a set")
    check_keys(crafted[:MAX_SHARED_HASH] + list(range(10_000)), "a set")
    with pytest.raises(DecodeError, match=r"a set holds more than 64 distinct keys with one hash value"):
        check_keys(crafted + crafted, "a set")
    with pytest.raises(TypeError):
        check_keys([[]] * 100, "a set")


def test_keys_at_the_bound_decode_and_one_more_is_refused(pairs: list[tuple[int, int]]) -> None:
    at_bound = pairs[:MAX_SHARED_HASH]
    assert codec.decode(packed_ext(codec.EXT_SET, at_bound), codec.CAPTURE) == set(at_bound)
    assert codec.decode(packed_map(at_bound + [(1, 2)], codec.pack_capture), codec.CAPTURE) == dict.fromkeys(
        at_bound + [(1, 2)], 0
    )
    with pytest.raises(DecodeError, match="a set in a capture log holds more than 64"):
        codec.decode(packed_ext(codec.EXT_SET, pairs[: MAX_SHARED_HASH + 1]), codec.CAPTURE)


def test_genuine_collisions_round_trip() -> None:
    """``hash(-1) == hash(-2)``, ints ``2**61 - 1`` apart and 1 == 1.0 collide in genuine data: a few do."""
    few = [-1, -2, 5, 5 + MODULUS, 1.5, 2**61, 2**122]
    values: list[Any] = [{-1, -2}, frozenset({-1, -2, 3}), set(few[:4]) | set(range(100))]
    values.append({key: str(key) for key in few[:4] + list(range(100))})
    for value in values:
        assert codec.decode(codec.pack_capture(value), codec.CAPTURE) == value
    wire = {key: [key] for key in few + list(range(100))}
    assert codec.decode(codec.pack_wire(wire), codec.WIRE) == wire
    assert codec.decode(codec.pack_recording({(i, -i): i for i in range(-100, 100)}), codec.RECORDING) == {
        (i, -i): i for i in range(-100, 100)
    }


KEYS = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.text(max_size=5),
    st.tuples(st.integers(min_value=-3, max_value=3), st.integers(min_value=-(2**63), max_value=2**63 - 1)),
)


@settings(max_examples=60, deadline=None)
@given(st.sets(KEYS, max_size=300), st.dictionaries(KEYS, st.integers(-(2**63), 2**63 - 1), max_size=300))
def test_ordinary_sets_and_maps_round_trip(members: set[Any], mapping: dict[Any, int]) -> None:
    assert codec.decode(codec.pack_capture(members), codec.CAPTURE) == members
    assert codec.decode(codec.pack_capture(frozenset(members)), codec.CAPTURE) == frozenset(members)
    assert codec.decode(codec.pack_capture(mapping), codec.CAPTURE) == mapping
    assert codec.decode(codec.pack_wire(mapping), codec.WIRE) == mapping
    assert codec.decode(codec.pack_wire([mapping, {"nested": mapping}]), codec.WIRE) == [mapping, {"nested": mapping}]
