"""All NaN keys are one key (scopes.key_equality): every NaN, of any sign and payload, routes alike."""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scopes.destinations import CACHE_LIMIT, KeyRouter
from scopes.hashing import stable_hash, stable_hash_array, stable_hash_arrow
from scopes.key_equality import NAN, canonical_key

pa = pytest.importorskip("pyarrow")

NAN_HASH = stable_hash(float("nan"))


def bits_to_float(bits: int) -> float:
    """The float64 with IEEE-754 bits ``bits``."""
    value: float = struct.unpack("<d", struct.pack("<Q", bits))[0]
    return value


def nan_bits(width: int) -> st.SearchStrategy[int]:
    """The bit patterns of every NaN of a float of ``width`` bits: either sign, any non-zero mantissa."""
    exponent, mantissa = {16: (5, 10), 32: (8, 23), 64: (11, 52)}[width]
    return st.builds(
        lambda sign, low: sign << (width - 1) | ((1 << exponent) - 1) << mantissa | low,
        st.integers(0, 1),
        st.integers(1, (1 << mantissa) - 1),
    )


# ---------------------------------------------------------------------------------------------- routing


@given(nan_bits(64))
@settings(max_examples=200, deadline=None)
def test_every_nan_bit_pattern_hashes_to_one_constant(bits: int) -> None:
    value = bits_to_float(bits)
    assert value != value
    assert stable_hash(value) == NAN_HASH
    assert stable_hash((value, "a")) == stable_hash((float("nan"), "a"))
    assert stable_hash(("x", (1, value))) == stable_hash(("x", (1, NAN)))


def test_nan_of_every_kind_hashes_as_the_one_constant() -> None:
    payload = struct.unpack("<d", bytes.fromhex("010000000000f87f"))[0]
    for value in (float("nan"), -float("nan"), payload, np.float64("nan"), np.float32("nan"), np.float16("nan")):
        assert stable_hash(value) == NAN_HASH, value
    assert NAN_HASH not in {stable_hash(value) for value in (0.5, float("inf"), -float("inf"), None, "nan")}


@pytest.mark.parametrize("width", [16, 32, 64])
@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_stable_hash_array_and_arrow_equal_stable_hash_on_floats_with_nan(width: int, data: st.DataObject) -> None:
    bits = data.draw(st.lists(nan_bits(width) | st.integers(0, (1 << width) - 1), max_size=40))
    keys = np.array(bits, dtype=f"uint{width}").view(f"float{width}")
    expected = [stable_hash(value) for value in keys.tolist()]
    assert stable_hash_array(keys).tolist() == expected
    assert stable_hash_arrow(pa.array(keys)).tolist() == expected
    assert all(hashed == NAN_HASH for hashed, value in zip(expected, keys.tolist(), strict=True) if value != value)


def test_stable_hash_arrow_hashes_nan_next_to_nulls_as_the_constant() -> None:
    values = pa.array([float("nan"), None, -float("nan"), 1.5, None], pa.float64())
    none = stable_hash(None)
    assert stable_hash_arrow(values).tolist() == [NAN_HASH, none, NAN_HASH, stable_hash(1.5), none]


def test_a_router_sends_every_nan_key_to_one_worker_and_keeps_one_cache_entry_for_them() -> None:
    router = KeyRouter(3)
    for round in range(20):
        flat = [float("nan") for _ in range(300)] + [-float("nan"), bits_to_float(0x7FF8000000000001), f"k{round}"]
        assert list(router.destinations(flat)) == [stable_hash(key) % 3 for key in flat]
    assert len(router._cache) <= 1 + 20  # the canonical NaN, and the strings
    router = KeyRouter(3)
    for _ in range(20):
        pairs = [(float("nan"), number % 2) for number in range(300)] + [(-float("nan"), 0), ("a", 1)]
        assert list(router.destinations(pairs)) == [stable_hash(key) % 3 for key in pairs]
    assert len(router._cache) <= 3
    assert len(router._cache) < CACHE_LIMIT


class Point(NamedTuple):
    x: float
    y: Any


def test_canonical_key_replaces_every_nan_at_any_depth_and_keeps_other_keys() -> None:
    assert canonical_key(float("nan")) is NAN
    assert canonical_key(np.float32("nan")) is NAN
    key = (float("nan"), ("a", (-float("nan"), 1)), 2.5)
    assert canonical_key(key) == (NAN, ("a", (NAN, 1)), 2.5)
    assert canonical_key(Point(float("nan"), 1)) == Point(NAN, 1)
    assert type(canonical_key(Point(float("nan"), 1))) is Point
    for plain_key in (1, "a", 1.5, None, (1, ("a", b"b")), (), True):
        assert canonical_key(plain_key) is plain_key
