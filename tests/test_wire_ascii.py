"""NumPy ``str`` arrays of ASCII text cross between processes at one byte a character, and come back the same."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.communication.arraycodec import ASCII_PACK_MIN, ascii_packed, encode_ndarray
from runtime.communication.wire import (
    BATCH_NDARRAY,
    BATCH_NDARRAY_ASCII,
    FrameReader,
    WireError,
    copy_decoded,
    decode_batch,
    encode_batch,
    frame,
)

ascii_text = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=9)


def through_frames(array: Any) -> tuple[int, Any]:
    """Encode ``array``, frame it, split the frame at an odd place and decode it, as a receiving process does."""
    path, payload = encode_batch(array)
    data = frame([0, path], payload)
    reader = FrameReader()
    ((header, body),) = list(reader.feed(data[:333])) + list(reader.feed(data[333:]))
    return path, decode_batch(header[1], body)


def same(a: Any, b: Any) -> bool:
    return type(a) is type(b) is np.ndarray and a.dtype == b.dtype and a.shape == b.shape and (a == b).all()


@settings(max_examples=60, deadline=None)
@given(st.lists(ascii_text, min_size=1, max_size=20), st.integers(0, 3))
def test_ascii_string_arrays_travel_packed_and_arrive_equal_with_their_dtype(words: list[str], shape: int) -> None:
    array = np.array(words * (ASCII_PACK_MIN // len(words) + 1))
    if shape == 1:
        array = array[: len(array) // 2 * 2].reshape(-1, 2)
    elif shape == 2:
        array = array.astype(f"U{array.dtype.itemsize // 4 + 3}")  # wider than any word: trailing NULs
    path, received = through_frames(array)
    if array.dtype.itemsize:
        assert path == BATCH_NDARRAY_ASCII
    assert same(received, array)
    assert received.flags.writeable


def test_the_packed_payload_is_a_quarter_of_the_array() -> None:
    array = np.array([f"word{i % 5000}" for i in range(100_000)])
    path, payload = encode_batch(array)
    assert path == BATCH_NDARRAY_ASCII
    assert len(payload) < array.nbytes // 4 + 64


@pytest.mark.parametrize(
    "array",
    [
        np.array(["caf\u00e9"] * ASCII_PACK_MIN),  # beyond ASCII
        np.array(["word"] * (ASCII_PACK_MIN - 1)),  # too small to be worth a pass
        np.array(["word"] * ASCII_PACK_MIN * 2)[::2],  # not contiguous
        np.array(["word"] * ASCII_PACK_MIN, dtype=">U4"),  # not native
        np.asfortranarray(np.array(["word"] * ASCII_PACK_MIN).reshape(-1, 2)),  # Fortran order
    ],
    ids=["non-ascii", "small", "strided", "big-endian", "fortran"],
)
def test_other_string_arrays_travel_as_they_are(array: Any) -> None:
    assert ascii_packed(array) is None
    path, received = through_frames(array)
    assert path == BATCH_NDARRAY
    assert same(received, array)


def test_a_non_ascii_character_anywhere_keeps_the_whole_array_unpacked() -> None:
    array = np.array(["word"] * (ASCII_PACK_MIN * 2))
    array[-1] = "w\u00f6rd"
    path, received = through_frames(array)
    assert path == BATCH_NDARRAY
    assert received[-1] == "w\u00f6rd"


def test_each_receiver_gets_its_own_copy_of_an_unpacked_array() -> None:
    array = decode_batch(*encode_batch(np.array(["word"] * ASCII_PACK_MIN)))
    copy = copy_decoded(BATCH_NDARRAY_ASCII, array)
    copy[0] = "other"
    assert array[0] == "word"


@pytest.mark.parametrize(
    ("payload", "complaint"),
    [
        (encode_ndarray(np.frombuffer(bytes([200]) * 16, dtype="S4")), "beyond ASCII"),
        (encode_ndarray(np.arange(8, dtype=np.int32)), "bytes array"),
        (encode_ndarray(np.array(["word"])), "bytes array"),
        (encode_ndarray(np.array(b"word")), "bytes array"),
    ],
    ids=["high-bytes", "ints", "unicode", "0-d"],
)
def test_a_peer_that_sends_something_else_under_the_packed_name_is_refused(payload: bytes, complaint: str) -> None:
    with pytest.raises(WireError, match=complaint):
        decode_batch(BATCH_NDARRAY_ASCII, payload)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_under_the_packed_name_decode_to_a_str_array_or_a_wire_error(data: bytes) -> None:
    try:
        array = decode_batch(BATCH_NDARRAY_ASCII, data)
    except WireError:
        return
    assert array.dtype.kind == "U" and array.flags.writeable


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 200), st.binary(min_size=1, max_size=8))
def test_a_packed_payload_damaged_anywhere_decodes_to_a_str_array_or_a_wire_error(at: int, junk: bytes) -> None:
    payload = bytearray(bytes(encode_batch(np.array(["word", "other"] * (ASCII_PACK_MIN // 2)))[1]))
    at %= len(payload)
    payload[at : at + len(junk)] = junk
    try:
        array = decode_batch(BATCH_NDARRAY_ASCII, bytes(payload))
    except WireError:
        return
    assert array.dtype.kind == "U"
