"""The whole-batch routing of record-wise exchanges sends every record exactly where stable_hash sends it."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scopes import destinations
from scopes.channels import ROUTE_WHOLE_BATCH, ExchangePusher
from scopes.destinations import KeyRouter
from scopes.hashing import KeyHashError, stable_hash

scalars = (
    st.integers()  # negative and huge ints included
    | st.integers(-(2**70), 2**70)
    | st.booleans()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(-(2**64), 2**64).map(float)
    | st.text()  # non-ASCII and lone surrogates included
    | st.binary()
    | st.none()
)
keys_strategy = scalars | st.tuples(scalars, scalars) | st.tuples(st.tuples(scalars), scalars)
peers_strategy = st.sampled_from([1, 2, 3, 4, 5, 7, 8, 16, 17, 300])


def by_stable_hash(records: list[Any], keys: list[Any], peers: int) -> list[list[Any]]:
    """The reference: one stable_hash per record."""
    parts: list[list[Any]] = [[] for _ in range(peers)]
    for record, key in zip(records, keys, strict=True):
        parts[stable_hash(key) % peers].append(record)
    return parts


def check(keys: list[Any], peers: int, router: KeyRouter | None = None) -> None:
    router = router or KeyRouter(peers)
    records = list(range(len(keys)))  # record i has key i: the split names which keys went where
    assert router.split(records, keys) == by_stable_hash(records, keys, peers)
    assert list(router.destinations(keys)) == [stable_hash(key) % peers for key in keys]


@given(st.lists(keys_strategy, max_size=80), peers_strategy)
@settings(max_examples=300, deadline=None)
def test_mixed_keys_route_as_stable_hash(keys: list[Any], peers: int) -> None:
    check(keys, peers)


@given(st.lists(st.integers() | st.booleans(), max_size=80), peers_strategy)
@settings(max_examples=200, deadline=None)
def test_int_keys_route_as_stable_hash(keys: list[Any], peers: int) -> None:
    check(keys, peers)


@given(st.lists(st.text(max_size=4), max_size=80), peers_strategy)
@settings(max_examples=200, deadline=None)
def test_str_keys_route_as_stable_hash(keys: list[str], peers: int) -> None:
    check(keys, peers)


@given(
    st.lists(st.tuples(st.integers(-5, 5) | st.text(max_size=2), st.binary(max_size=2)), max_size=80), peers_strategy
)
@settings(max_examples=150, deadline=None)
def test_flat_tuple_keys_route_as_stable_hash(keys: list[tuple[Any, ...]], peers: int) -> None:
    check(keys, peers)


@given(st.lists(st.lists(keys_strategy, max_size=40), max_size=6), peers_strategy)
@settings(max_examples=100, deadline=None)
def test_one_router_over_many_batches_keeps_routing_as_stable_hash(batches: list[list[Any]], peers: int) -> None:
    router = KeyRouter(peers)  # the cache carries over from batch to batch
    for keys in batches:
        check(keys, peers, router)


def test_ints_through_numpy_route_as_stable_hash() -> None:
    pytest.importorskip("numpy")
    keys = [(-1) ** i * i * 7919 for i in range(destinations.NUMPY_MIN_INTS * 2)] + [2**63 - 1, -(2**63), True]
    for peers in (2, 3, 5, 300):
        assert list(KeyRouter(peers).destinations(keys)) == [stable_hash(key) % peers for key in keys]
    huge = keys + [2**64 + 5, -(2**80)]  # beyond int64: the exact arithmetic
    assert list(KeyRouter(3).destinations(huge)) == [stable_hash(key) % 3 for key in huge]


def test_equal_keys_of_different_types_share_a_cache_entry_correctly() -> None:
    keys = [1, 1.0, True, (1, "a"), (1.0, "a"), (True, "a"), 0.0, -0.0, False, "é", b"\xff"]
    for peers in (2, 3, 7):
        check(keys * 5, peers)
        check(list(reversed(keys)) * 5, peers)


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(destinations, "CACHE_LIMIT", 10)
    router = KeyRouter(3)
    for start in range(0, 100, 7):
        check([f"k{i}" for i in range(start, start + 7)], 3, router)
        assert len(router._cache) <= 10
    check([f"many{i}" for i in range(50)], 3, router)  # more new keys than the cache holds: routed uncached
    assert len(router._cache) <= 10


class Shouting(str):
    """A str subclass whose str() is not its value: stable_hash hashes str(key)."""

    def __str__(self) -> str:
        return self.upper()


def test_subclass_keys_route_as_stable_hash_not_as_their_equal_cached_value() -> None:
    keys = ["red", Shouting("red")] * 10
    for peers in (2, 3, 5):
        check(keys, peers)


@pytest.mark.parametrize("other", [Shouting("red"), 1, 2.5, None, b"red", ("red",)])
def test_str_keys_with_one_of_another_type_after_the_first_route_as_stable_hash(other: Any) -> None:
    # all-str batches skip the set of types (list.count of str): one key of another type, anywhere, must not
    keys = [f"w{i}" for i in range(300)]
    for position in (1, 150, 299):
        for peers in (2, 3):
            check([*keys[:position], other, *keys[position:]], peers)


class Folded(str):
    """A str subclass with an equality of its own, which stable_hash refuses."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and self.casefold() == other.casefold()

    __hash__ = str.__hash__


def test_a_str_subclass_equal_to_a_cached_str_is_refused_in_a_batch_of_str() -> None:
    keys = [f"w{i}" for i in range(300)]
    router = KeyRouter(2)
    router.split(keys, keys)  # every key cached
    for position in (1, 299):
        batch = [*keys[:position], Folded("w7"), *keys[position:]]
        with pytest.raises(KeyHashError):
            router.split(batch, batch)


@pytest.mark.parametrize("bad", [Fraction(1, 1), [1], object(), 1j])
def test_unsupported_keys_are_refused_as_before_even_when_an_equal_key_is_cached(bad: Any) -> None:
    router = KeyRouter(2)
    check([1, "a", 1.0], 2, router)
    with pytest.raises(KeyHashError):
        router.split([0, 1, 2], [1, bad, "a"])
    with pytest.raises(KeyHashError):
        router.split([0, 1], [(1, "a"), (bad, "a")])


class Collect:
    """A pusher that keeps what it receives."""

    def __init__(self) -> None:
        self.messages: list[tuple[Any, list[Any]]] = []

    def push(self, time: Any, batch: list[Any]) -> None:
        self.messages.append((time, batch))


@given(st.lists(st.lists(keys_strategy, max_size=3 * ROUTE_WHOLE_BATCH), max_size=5), st.sampled_from([2, 3, 4]))
@settings(max_examples=100, deadline=None)
def test_exchange_pusher_sends_each_record_where_stable_hash_does(batches: list[list[Any]], peers: int) -> None:
    pushers = [Collect() for _ in range(peers)]
    exchange = ExchangePusher(lambda record: record[1], pushers)
    sent: list[tuple[int, Any]] = []
    for time, keys in enumerate(batches):
        batch = [(len(sent) + i, key) for i, key in enumerate(keys)]
        sent.extend(batch)
        exchange.push(time % 2, batch)
    exchange.flush()
    for worker, pusher in enumerate(pushers):
        got = [record for _, batch in pusher.messages for record in batch]
        assert sorted(record[0] for record in got) == [
            number for number, key in sent if stable_hash(key) % peers == worker
        ]
        for _, batch in pusher.messages:  # the records of one message keep the order they were sent in
            assert [record[0] for record in batch] == sorted(record[0] for record in batch)
