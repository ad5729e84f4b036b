"""stable_hash_array and stable_hash_arrow agree element-wise with stable_hash, for every supported dtype."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from scopes.hashing import KeyHashError, stable_hash, stable_hash_array, stable_hash_arrow

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOAT_DTYPES = ["float16", "float32", "float64"]


def expected(keys: Any) -> list[int]:
    """The record-wise hashes of the array's elements as Python values."""
    return [stable_hash(key) for key in (keys.tolist() if isinstance(keys, np.ndarray) else keys)]


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every key :mod:`scopes.hashing` calls ``stable_hash`` on from now on, with its string cache emptied."""
    import scopes.hashing as hashing

    calls: list[Any] = []

    def counting(key: Any) -> int:
        calls.append(key)
        return stable_hash(key)

    monkeypatch.setattr(hashing, "stable_hash", counting)
    monkeypatch.setattr(hashing, "_string_hashes", {})
    return calls


def check(keys: Any) -> None:
    hashes = stable_hash_array(keys)
    assert hashes.dtype == np.uint64
    assert hashes.tolist() == expected(keys)


@pytest.mark.parametrize("dtype", INT_DTYPES + ["bool"])
@given(data=st.data())
@settings(max_examples=40, deadline=None)
def test_integers_and_booleans(dtype: str, data: st.DataObject) -> None:
    check(data.draw(hnp.arrays(np.dtype(dtype), st.integers(0, 60))))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_floats_including_integral_huge_and_special_values(dtype: str, data: st.DataObject) -> None:
    check(data.draw(hnp.arrays(np.dtype(dtype), st.integers(0, 60))))


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**63), 2**63).map(float)))
@settings(max_examples=100, deadline=None)
def test_float64_values_from_python(values: list[float]) -> None:
    check(np.array(values, dtype=np.float64))


def test_integral_floats_hash_as_the_equal_ints() -> None:
    floats = np.array([0.0, -0.0, 1.0, -1.0, 2.0**62, -(2.0**63), 2.0**64, 1e300, 3.0])
    assert stable_hash_array(floats).tolist() == [stable_hash(int(f)) for f in floats.tolist()]
    assert stable_hash_array(np.array([1, 2, 3])).tolist() == stable_hash_array(np.array([1.0, 2.0, 3.0])).tolist()


@given(st.lists(st.text(), max_size=40))
@settings(max_examples=80, deadline=None)
def test_unicode_arrays(words: list[str]) -> None:
    words = [word.rstrip("\0") for word in words]  # NumPy's U dtype drops trailing NULs
    check(np.array(words, dtype=str) if words else np.array([], dtype="U1"))
    check(np.array(words, dtype=object))


@given(st.lists(st.binary(), max_size=40))
@settings(max_examples=80, deadline=None)
def test_bytes_arrays(values: list[bytes]) -> None:
    values = [value.rstrip(b"\0") for value in values]
    check(np.array(values, dtype=bytes) if values else np.array([], dtype="S1"))
    check(np.array(values, dtype=object))


SCALARS = st.integers() | st.text() | st.binary() | st.booleans() | st.none() | st.floats()
KEYS = st.recursive(SCALARS, lambda inner: st.tuples(inner) | st.tuples(inner, inner), max_leaves=4)


@given(st.lists(KEYS, max_size=40))
@settings(max_examples=100, deadline=None)
def test_object_arrays_and_sequences_of_mixed_keys(keys: list[Any]) -> None:
    hashes = stable_hash_array(keys)  # a sequence: converted element by element (tuples stay tuples)
    assert hashes.tolist() == [stable_hash(key) for key in keys]
    array = np.empty(len(keys), dtype=object)
    for index, key in enumerate(keys):
        array[index] = key
    assert stable_hash_array(array).tolist() == [stable_hash(key) for key in keys]


@given(
    st.lists(st.integers(-(2**63), 2**64 - 1) | st.booleans(), max_size=60),
    st.sampled_from([list, tuple]),
    st.sampled_from([None, 2**64, -(2**63) - 1, 2**200, 1.5, 2.0, "7", None]),
)
@settings(max_examples=200, deadline=None)
def test_sequences_of_ints_hash_in_one_conversion_and_any_other_key_falls_back(
    values: list[int], kind: type, extra: Any
) -> None:
    keys = values + [extra] if extra is not None else values
    hashes = stable_hash_array(kind(keys))
    assert hashes.dtype == np.uint64
    assert hashes.tolist() == [stable_hash(key) for key in keys]


def test_a_list_of_ints_is_hashed_without_a_call_per_key(monkeypatch: pytest.MonkeyPatch) -> None:
    import scopes.hashing as hashing

    monkeypatch.setattr(hashing, "stable_hash", lambda key: pytest.fail(f"stable_hash({key!r}) called"))
    keys = [-1, 0, 1, 2**63 - 1, -(2**63), True, False] * 100
    assert hashing.stable_hash_array(keys).tolist() == [key & (2**64 - 1) for key in keys]


def test_an_int_subclass_among_ints_is_hashed_as_its_value_by_the_general_path() -> None:
    import enum

    class Size(enum.IntEnum):
        BIG = 7

    keys = [1, Size.BIG, 3]
    assert stable_hash_array(keys).tolist() == [1, 7, 3]


@given(st.lists(st.text(max_size=6), max_size=40), st.sampled_from([list, tuple]))
@settings(max_examples=100, deadline=None)
def test_sequences_of_strings_hash_like_stable_hash(words: list[str], kind: type) -> None:
    assert stable_hash_array(kind(words)).tolist() == [stable_hash(word) for word in words]


def test_a_list_of_strings_is_hashed_once_per_process_while_the_cache_holds(hashed: list[Any]) -> None:
    words = ["apple", "pear", "apple", "fig"] * 50
    assert stable_hash_array(words).tolist() == [stable_hash(word) for word in words]
    assert sorted(hashed) == ["apple", "fig", "pear"]
    hashed.clear()
    assert stable_hash_array(words[::-1]).tolist() == [stable_hash(word) for word in words[::-1]]
    assert hashed == []  # the next batch's words were all remembered


def test_a_cache_restarted_by_another_thread_meanwhile_falls_back_to_hashing_the_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import scopes.hashing as hashing

    monkeypatch.setattr(hashing, "_string_hashes", {})
    monkeypatch.setattr(hashing, "remember", lambda cache, keys, value_of, limit: True)  # says yes, adds nothing
    words = ["a", "b", "a"]
    assert hashing.stable_hash_array(words).tolist() == [stable_hash(word) for word in words]


def test_str_subclasses_take_the_general_path_and_hash_as_their_value(monkeypatch: pytest.MonkeyPatch) -> None:
    import enum

    import scopes.hashing as hashing

    class Colour(enum.StrEnum):
        RED = "red"

    monkeypatch.setattr(hashing, "_string_hashes", {})
    assert stable_hash_array(["red", Colour.RED]).tolist() == [stable_hash("red")] * 2
    assert hashing._string_hashes == {}  # only exact str enter the cache


def test_repeated_keys_are_hashed_once_per_distinct_value(hashed: list[Any]) -> None:
    keys = np.array(["a", "b", "a", "c", "b", "a"] * 1000, dtype=object)
    hashes = stable_hash_array(keys)
    assert sorted(hashed) == ["a", "b", "c"]
    assert hashes.tolist() == [stable_hash(key) for key in keys.tolist()]


@given(st.lists(st.none() | st.text(max_size=5), max_size=40))
@settings(max_examples=60, deadline=None)
def test_arrow_strings_with_nulls(values: list[str | None]) -> None:
    array = pa.array(values, type=pa.string())
    assert stable_hash_arrow(array).tolist() == [stable_hash(value) for value in values]
    chunked = pa.chunked_array([array, array], type=pa.string())
    assert stable_hash_arrow(chunked).tolist() == [stable_hash(value) for value in values + values]


@given(st.lists(st.none() | st.integers(-(2**63), 2**63 - 1), max_size=40))
@settings(max_examples=60, deadline=None)
def test_arrow_integers_with_nulls(values: list[int | None]) -> None:
    array = pa.array(values, type=pa.int64())
    assert stable_hash_arrow(array).tolist() == [stable_hash(value) for value in values]


def test_arrow_binary_float_and_dictionary_columns() -> None:
    binary = [b"x", None, b"", b"x"]
    assert stable_hash_arrow(pa.array(binary)).tolist() == [stable_hash(v) for v in binary]
    floats = [1.0, 1.5, None, -2.0]
    assert stable_hash_arrow(pa.array(floats)).tolist() == [stable_hash(v) for v in floats]
    words = ["a", "b", None, "a"]
    encoded = pa.array(words).dictionary_encode()
    assert stable_hash_arrow(encoded).tolist() == [stable_hash(v) for v in words]


def test_numpy_scalars_hash_as_their_python_values() -> None:
    for scalar in (
        np.int64(-5),
        np.uint8(7),
        np.float32(1.5),
        np.float64(2.0),
        np.bool_(True),
        np.str_("w"),
        np.bytes_(b"b"),
    ):
        assert stable_hash(scalar) == stable_hash(scalar.item())


@pytest.mark.parametrize(
    "keys",
    [
        np.array(["2024-01"], dtype="datetime64[M]"),
        np.array([1 + 2j]),
        np.zeros(3, dtype=[("a", "i8")]),
        np.zeros((2, 2), dtype=np.int64),
        np.array([[1], {2}, object()], dtype=object),
    ],
    ids=["datetime-months", "complex", "structured", "two-dimensional", "unhashable-objects"],
)
def test_unsupported_keys_are_refused(keys: np.ndarray) -> None:
    with pytest.raises(KeyHashError):
        stable_hash_array(keys)


def test_dates_and_durations_hash_as_their_nanoseconds_in_any_unit() -> None:
    """An instant reaches one worker whatever unit a batch writes it in; NaT goes where None does."""
    day = np.array(["2024-01-01", "NaT"], dtype="datetime64[D]")
    expected = [stable_hash(1_704_067_200 * 10**9), stable_hash(None)]
    for unit in ("D", "h", "s", "ms", "us", "ns"):
        assert stable_hash_array(day.astype(f"datetime64[{unit}]")).tolist() == expected
    assert stable_hash_array(np.array([-1], dtype="timedelta64[s]")).tolist() == [stable_hash(-(10**9))]


def test_unhashable_object_keys_name_the_problem() -> None:
    with pytest.raises(KeyHashError, match="unhashable"):
        stable_hash_array(np.array([[1], [2, 3]], dtype=object))
    with pytest.raises(KeyHashError, match="object"):
        stable_hash_array(np.array([object()], dtype=object))


ASCII = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=12)


@given(st.lists(ASCII, max_size=60), st.sampled_from(["<", ">"]), st.booleans())
@settings(max_examples=120, deadline=None)
def test_ascii_unicode_arrays_of_either_byte_order_and_any_stride(words: list[str], order: str, strided: bool) -> None:
    """ASCII arrays take the vectorised CRC-32: it must agree with stable_hash on every row, inner NULs included."""
    words = [word.rstrip("\0") for word in words]
    width = max([len(word) for word in words] + [1])
    array = np.array(words, dtype=f"{order}U{width}")
    check(array[::2] if strided else array)


@given(st.lists(st.binary(max_size=12), max_size=60), st.booleans())
@settings(max_examples=80, deadline=None)
def test_byte_string_arrays_with_high_bytes_and_strides(values: list[bytes], strided: bool) -> None:
    values = [value.rstrip(b"\0") for value in values]
    array = np.array(values, dtype=bytes) if values else np.array([], dtype="S1")
    check(array[::3] if strided else array)


def test_zero_width_string_arrays_hash_as_empty_strings() -> None:
    for dtype, empty in (("U0", ""), ("S0", b"")):
        assert stable_hash_array(np.zeros(3, dtype=dtype)).tolist() == [stable_hash(empty)] * 3


def test_non_ascii_strings_are_hashed_once_per_process_while_the_cache_holds(hashed: list[Any]) -> None:
    batch = np.array(["é", "ü", "é", "ascii"] * 100)
    first = stable_hash_array(batch)
    second = stable_hash_array(batch[::-1])
    assert sorted(hashed) == ["ascii", "é", "ü"]  # the second batch hit the cache
    assert first.tolist() == [stable_hash(word) for word in batch.tolist()]
    assert second.tolist() == first.tolist()[::-1]


def test_the_string_cache_restarts_rather_than_grow_past_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    import scopes.hashing as hashing

    monkeypatch.setattr(hashing, "_string_hashes", {})
    monkeypatch.setattr(hashing, "STRING_HASH_CACHE_LIMIT", 8)
    for start in range(0, 40, 5):
        batch = np.array([f"ü{number}" for number in range(start, start + 5)])
        assert hashing.stable_hash_array(batch).tolist() == [stable_hash(word) for word in batch.tolist()]
        assert len(hashing._string_hashes) <= 8
    many = np.array([f"ü{number}" for number in range(20)])  # more new keys than the cache holds at all
    assert hashing.stable_hash_array(many).tolist() == [stable_hash(word) for word in many.tolist()]
    assert len(hashing._string_hashes) <= 8


def test_arrow_string_dictionaries_hash_as_numpy_strings_but_keep_trailing_nuls() -> None:
    """Distinct strings are hashed as a NumPy ``U`` array when none has a NUL (the array would drop it)."""
    values = ["word1", "word2", "é", "word1", "", "tab\there"]
    assert stable_hash_arrow(pa.array(values)).tolist() == [stable_hash(value) for value in values]
    with_nul = ["a\x00", "a", "\x00", "b"]
    assert stable_hash_arrow(pa.array(with_nul)).tolist() == [stable_hash(value) for value in with_nul]
    assert stable_hash(with_nul[0]) != stable_hash(with_nul[1])
    dictionary = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0]), pa.array(["x", None]))
    assert stable_hash_arrow(dictionary).tolist() == [stable_hash("x"), stable_hash(None), stable_hash("x")]


def test_ascii_arrow_strings_are_hashed_without_a_python_call_per_distinct_value(hashed: list[Any]) -> None:
    words = [f"word{number}" for number in range(5_000)] * 2
    hashes = stable_hash_arrow(pa.array(words))
    assert hashed == []
    assert hashes.tolist() == [stable_hash(word) for word in words]


def test_an_arrow_table_exchanged_by_a_string_column_hashes_it_in_arrow(hashed: list[Any]) -> None:
    """The key column of a table is a chunked array: it is hashed as Arrow, not converted to Python objects."""
    from scopes.channels import BatchKeys

    words = [f"word{number}" for number in range(3_000)]
    table = pa.table({"word": words, "count": list(range(3_000))})
    keys = BatchKeys("word", "operator 'ByWord'")
    assert keys.destinations(table, 0, 3).tolist() == [stable_hash(word) % 3 for word in words]
    assert hashed == []


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.text(max_size=12), max_size=40),
    offset=st.integers(0, 5),
    large=st.booleans(),
)
def test_few_arrow_strings_hash_from_their_bytes_like_stable_hash(values: list[str], offset: int, large: bool) -> None:
    """Up to DIRECT_ROWS strings are hashed from Arrow's UTF-8 buffer: any text, NULs, slices, large offsets."""
    import scopes.hashing as hashing

    array = pa.array(["pad"] * offset + values, pa.large_string() if large else pa.string()).slice(offset)
    assert len(array) <= hashing.DIRECT_ROWS
    assert stable_hash_arrow(array).tolist() == [stable_hash(value) for value in values]
    encoded = [value.encode("utf-8", "surrogatepass") for value in values]
    assert stable_hash_arrow(pa.array(encoded, pa.binary())).tolist() == [stable_hash(value) for value in encoded]


def test_few_arrow_strings_skip_the_dictionary_and_one_very_long_string_falls_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The direct path hashes without dictionary-encoding; padding to one huge value is refused (same answer)."""
    import scopes.hashing as hashing

    encoded: list[Any] = []
    real = pa.compute.dictionary_encode
    monkeypatch.setattr(pa.compute, "dictionary_encode", lambda values: encoded.append(1) or real(values))
    words = [f"word{number}" for number in range(1_000)]
    assert stable_hash_arrow(pa.array(words)).tolist() == [stable_hash(word) for word in words]
    assert encoded == []
    skewed = [*words, "x" * 100_000]
    assert hashing._crc32_arrow_bytes(pa.array(skewed)) is None
    assert stable_hash_arrow(pa.array(skewed)).tolist() == [stable_hash(word) for word in skewed]
    assert encoded == [1]
