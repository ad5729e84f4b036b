"""The wire encoding: round trips of records, timestamps and frames; codecs; malformed input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import register_codec
from runtime.communication.wire import (
    BATCH_COLUMNS,
    BATCH_FAST,
    BATCH_GENERAL,
    EncodingError,
    FrameReader,
    WireError,
    decode_batch,
    decode_value,
    encode_batch,
    encode_value,
    frame,
    unregister_codec,
)
from scopes.timestamp import Product

scalars = (
    st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.binary(max_size=8)
    | st.booleans()
    | st.none()
)
keys = scalars | st.tuples(scalars, scalars)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.lists(inner, max_size=4).map(tuple) | st.dictionaries(keys, inner, max_size=4)
    ),
    max_leaves=12,
)
times = st.recursive(
    st.integers(min_value=0, max_value=2**64 - 1),
    lambda inner: st.tuples(inner, inner).map(lambda pair: Product(*pair)),
    max_leaves=4,
)


def same(a: object, b: object) -> bool:
    """Equal, with the same types all the way down (so a tuple never comes back as a list)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


@settings(max_examples=300, deadline=None)
@given(values)
def test_values_round_trip_with_their_types(value: object) -> None:
    assert same(decode_value(encode_value(value)), value)


@settings(max_examples=200, deadline=None)
@given(st.lists(values, max_size=6))
def test_batches_round_trip(batch: list[object]) -> None:
    path, data = encode_batch(batch)
    assert same(decode_batch(path, data), batch)


@settings(max_examples=200, deadline=None)
@given(times)
def test_timestamps_round_trip(time: object) -> None:
    assert same(decode_value(encode_value(time)), time)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(times, st.lists(values, max_size=3)), max_size=5), st.integers(1, 7))
def test_frames_survive_any_split(messages: list[tuple[object, list[object]]], chunk: int) -> None:
    stream = b"".join(frame([0, time], encode_batch(batch)[1]) for time, batch in messages)
    reader = FrameReader()
    received = []
    for start in range(0, len(stream), chunk):
        received.extend(reader.feed(stream[start : start + chunk]))
    assert len(received) == len(messages)
    for (header, payload), (time, batch) in zip(received, messages, strict=True):
        assert same(header[1], time)
        assert same(decode_batch(encode_batch(batch)[0], payload), batch)
    assert reader.pending == 0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.text(max_size=5), scalars), min_size=16, max_size=40)
    | st.lists(st.tuples(st.integers(-(2**70), 2**70), st.floats(allow_nan=False)), min_size=16, max_size=40)
    | st.lists(st.tuples(scalars) | st.tuples(scalars, scalars), min_size=16, max_size=40)
)
def test_batches_of_tuples_round_trip_by_columns(batch: list[tuple[object, ...]]) -> None:
    path, data = encode_batch(batch)
    assert same(decode_batch(path, data), batch)


def test_columns_are_used_only_when_they_fit() -> None:
    pairs = [(f"w{i}", i) for i in range(20)]
    assert encode_batch(pairs)[0] == BATCH_COLUMNS
    assert encode_batch(pairs[:10])[0] == BATCH_FAST
    assert encode_batch([*pairs, ("with\0nul", 1)])[0] == BATCH_FAST
    assert encode_batch([*pairs, ("a", 1, 2)])[0] == BATCH_FAST
    assert encode_batch([*pairs, ("a", (1, 2))])[0] == BATCH_FAST
    for batch in ([*pairs, ("with\0nul", 1)], [*pairs, ("a", 1, 2)], [*pairs, ("", 2**80)]):
        assert same(decode_batch(*encode_batch(batch)), batch)


def test_columns_need_every_record_and_value_of_one_exact_type() -> None:
    # the first record and value name the type tested by list.count: one of another type later must not pass
    from collections import namedtuple

    Pair = namedtuple("Pair", "word count")
    pairs = [(f"w{i}", i) for i in range(40)]
    for position in (1, 20, 40):
        for odd in (("x",), ("x", 1, 2), (1, 1), ("x", 1.5), ("x", True), ("x", None), ("x", b"y")):
            batch = [*pairs[:position], odd, *pairs[position:]]
            assert same(decode_batch(*encode_batch(batch)), batch)
        for unsendable in (Pair("x", 1), (Shouting("x"), 1)):  # subclasses need a codec, in a column or not
            with pytest.raises(EncodingError):
                encode_batch([*pairs[:position], unsendable, *pairs[position:]])


class Shouting(str):
    """A str subclass: never joined into a column of plain strings."""


def test_common_records_take_the_fast_path() -> None:
    assert encode_batch([("word", 1), ("other", 2)])[0] == BATCH_FAST
    assert encode_batch([1, "a", None, (1, (2.5, b"x"))])[0] == BATCH_FAST
    assert encode_batch([[1, 2]])[0] == BATCH_GENERAL
    assert encode_batch([Product(1, 2)])[0] == BATCH_GENERAL
    assert encode_batch([(2**80, 1)])[0] == BATCH_GENERAL


class Point:
    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y


def test_unregistered_type_names_it_and_says_how_to_register() -> None:
    with pytest.raises(EncodingError) as caught:
        encode_batch([Point(1, 2)])
    message = str(caught.value)
    assert "test_wire.Point" in message and "register_codec(Point" in message
    assert caught.value.type_name.endswith("Point")


def test_subclasses_of_builtins_need_a_codec_too() -> None:
    class Label(str):
        pass

    with pytest.raises(EncodingError, match="Label"):
        encode_value([Label("x")])


def test_a_registered_codec_carries_the_type() -> None:
    register_codec(Point, lambda p: (p.x, p.y), lambda data: Point(*data))
    try:
        path, data = encode_batch([("p", Point(3, 4))])
        ((name, point),) = decode_batch(path, data)
        assert name == "p" and isinstance(point, Point) and (point.x, point.y) == (3, 4)
    finally:
        unregister_codec(Point)
    with pytest.raises(WireError, match="not registered"):
        decode_batch(path, data)


def test_codecs_refuse_native_types() -> None:
    with pytest.raises(ValueError):
        register_codec(tuple, lambda v: v, lambda v: v)


def test_malformed_input_is_a_wire_error_never_code() -> None:
    with pytest.raises(WireError):
        decode_value(b"\xc1")
    with pytest.raises(WireError):
        decode_value(b"\xd4\x63\x00")  # an extension type nobody defined
    with pytest.raises(WireError):
        list(FrameReader(max_frame=100).feed(b"\x00\x00\x10\x00\x00\x00\x00\x01"))
