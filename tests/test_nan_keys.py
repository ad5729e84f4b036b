"""All NaN keys are one key (scopes.key_equality), at 1 worker, 2 threads and 2 processes.

The answer with NaN keys must be the answer with every NaN replaced by one
ordinary key (:data:`~helpers.nan_key_mains.SENTINEL`): routing, the
record-wise keyed operators (fold, reduce, stateful_map, process and its
timers, windows, join, join_latest), checkpoint restore, and the columnar
operators over NumPy and Arrow batches.
"""

from __future__ import annotations

import functools
import struct
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import numpy as np
import pytest
from helpers.columnar_ops_mains import aggregate_main, join_main
from helpers.keyed_timers import count_records, emit_count
from helpers.nan_key_mains import (
    SENTINEL,
    checkpointed_main,
    join_latest_main,
    nan_makers,
    plain,
    window_main,
)
from helpers.resumed_runs import assert_resume_repeats_the_plain_run
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import WorkerFailed, execute
from runtime.testing import DataflowRun, run_dataflow
from scopes import Session, Tumbling
from scopes.destinations import CACHE_LIMIT, KeyRouter
from scopes.hashing import stable_hash, stable_hash_array, stable_hash_arrow
from scopes.key_equality import NAN, canonical_key

pa = pytest.importorskip("pyarrow")

CONFIGS = [
    pytest.param(1, 1, id="1-worker"),
    pytest.param(2, 1, id="2-threads"),
    pytest.param(1, 2, id="2-processes"),
]
NAN_HASH = stable_hash(float("nan"))
STALL = 30.0


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


# ---------------------------------------------------------------------------------------------- record-wise operators


def record_inputs(sentinel: bool) -> dict[str, list[list[Any]]]:
    """The streams' records per epoch, with NaN keys of every kind (or all of them :data:`SENTINEL`)."""
    nan, negative, payload, shared = nan_makers(sentinel)
    return {
        "records": [
            [
                (shared, 1),
                (shared, 2),
                (nan(), 3),
                (1.0, 4),
                (negative(), 5),
                ((nan(), ("x", nan())), 6),
                ((shared, ("x", payload())), 7),
            ],
            [(payload(), 8), (nan(), 9), (1.0, 10), ((nan(), ("x", nan())), 11)],
            [],
            [(nan(), 12), ((negative(), ("x", shared)), 13)],
        ],
        "left": [[(nan(), "l1"), (shared, "l2"), (2.0, "l3"), ((nan(), 1), "l4")], [(payload(), "l5")], [], []],
        "right": [[(negative(), "r1"), (nan(), "r2"), (2.0, "r3"), ((shared, 1), "r4")], [(nan(), "r5")], [], []],
        "table": [[(nan(), "t0"), (1.0, "one")], [], [(payload(), "t2")], []],
    }


def record_wise(scope: Any, streams: Any) -> dict[str, Any]:
    """Every record-wise keyed operator over the NaN-keyed streams."""
    records = streams["records"].keyed()
    return {
        "fold": records.fold(int, lambda total, value: total + value),
        "reduce": records.reduce(max),
        "stateful_map": records.stateful_map(lambda: 0, lambda count, value: (count + 1, count + 1)),
        "process": records.process(count_records, emit_count),
        "tumbling": records.window(Tumbling(2)).count().down,
        "session": records.window(Session(2)).count().down,
        "join": streams["left"].keyed().join(streams["right"].keyed()),
        "join_latest": records.join_latest(streams["table"].keyed(), how="left"),
    }


@functools.cache
def record_run(workers: int, processes: int, sentinel: bool) -> DataflowRun:
    return run_dataflow(record_wise, record_inputs(sentinel), workers=workers, processes=processes)


def outputs(run: DataflowRun, name: str) -> dict[Any, Counter[Any]]:
    return {time: Counter(map(plain, records)) for time, records in run.output(name).items()}


@pytest.mark.parametrize(("workers", "processes"), CONFIGS)
@pytest.mark.parametrize(
    "name", ["fold", "reduce", "stateful_map", "process", "tumbling", "session", "join", "join_latest"]
)
def test_record_wise_operators_treat_every_nan_key_as_one_key(workers: int, processes: int, name: str) -> None:
    found = outputs(record_run(workers, processes, False), name)
    assert found == outputs(record_run(1, 1, True), name)


def test_the_expected_answers_do_group_the_nan_keys() -> None:
    """The reference is not vacuous: the NaN key's running sum and its joins are there."""
    reference = record_run(1, 1, True)
    assert outputs(reference, "fold")[3] == Counter({(SENTINEL, 40): 1, ((SENTINEL, ("x", SENTINEL)), 37): 1})
    assert outputs(reference, "join")[0][(SENTINEL, ("l1", "r2"))] == 1
    assert len(outputs(reference, "join")[0]) == 4 + 1 + 1  # 2 x 2 NaN pairs, 2.0, the tuple key


def test_a_nan_key_read_from_the_input_as_it_is_is_grouped_too() -> None:
    """Keys from key_by (not keyed()), among them NumPy scalars holding NaN."""

    def build(scope: Any, words: Any) -> Any:
        return words.key_by(lambda record: record[0]).fold(int, lambda count, record: count + 1)

    inputs = [[(float("nan"), 1), (np.float64("nan"), 2), (np.float32("nan"), 3), (1.0, 4)]]
    for workers in (1, 2):
        found = Counter(map(plain, run_dataflow(build, inputs, workers=workers).output("output")[0]))
        assert found == Counter({(SENTINEL, 3): 1, (1.0, 1): 1})


def table_lookup(scope: Any, streams: Any) -> Any:
    """The records joined with the table (``join_latest``, left)."""
    return streams["records"].keyed().join_latest(streams["table"].keyed(), how="left")


@pytest.mark.parametrize(("workers", "processes"), CONFIGS)
def test_two_updates_of_a_key_at_one_time_with_nan_values_are_one_value_not_a_conflict(
    workers: int, processes: int
) -> None:
    """Each NaN value below is an object of its own, as every value decoded from another process is."""
    nan = functools.partial(float, "nan")
    inputs = {
        "table": [[("k", nan()), ("k", nan()), ("t", (1, nan())), ("t", (1, nan())), ("x", 1.0)], []],
        "records": [[], [("k", "a"), ("t", "b"), ("x", "c")]],
    }
    found = run_dataflow(table_lookup, inputs, workers=workers, processes=processes).output("output")[1]
    assert Counter(map(plain, found)) == Counter(
        {("k", ("a", SENTINEL)): 1, ("t", ("b", (1, SENTINEL))): 1, ("x", ("c", 1.0)): 1}
    )


def test_two_different_values_of_a_key_at_one_time_still_conflict() -> None:
    inputs = {"table": [[("k", float("nan")), ("k", 2.0)], []], "records": [[], [("k", "a")]]}
    with pytest.raises(WorkerFailed, match="two different values for key 'k'"):
        run_dataflow(table_lookup, inputs)


@pytest.mark.parametrize(
    "values", [(0.0, -0.0), (1, 1.0), (1, True), ((1, 0.0), (1, -0.0)), ([1], [1.0]), ({"a": 0.0}, {"a": -0.0})]
)
def test_two_values_of_a_key_at_one_time_that_only_compare_equal_conflict(values: Any) -> None:
    """``0.0 == -0.0`` and ``1 == 1.0``, but the table kept whichever came last: -0.0 on one worker and 0.0 on two.
    They are two values, refused as any two are, at every worker count."""
    inputs = {"table": [[("k", values[0]), ("k", values[1])], []], "records": [[], [("k", "a")]]}
    for workers in (1, 2):
        with pytest.raises(WorkerFailed, match="two different values for key 'k'"):
            run_dataflow(table_lookup, inputs, workers=workers)
    again = {"table": [[("k", values[0]), ("k", values[0])], []], "records": [[], [("k", "a")]]}
    assert run_dataflow(table_lookup, again, workers=2).output()[1] == [("k", ("a", values[0]))]


# ---------------------------------------------------------------------------------------------- checkpoints


@pytest.mark.parametrize(("workers", "processes"), CONFIGS)
def test_a_restored_nan_key_meets_the_nan_keys_of_the_records_after_the_checkpoint(
    tmp_path: Any, workers: int, processes: int
) -> None:
    def run(tag: str, crash_after: int) -> int:
        main = partial(checkpointed_main, root=str(tmp_path), tag=tag, crash_after=crash_after)
        return execute(main, workers=workers, processes=processes, stall_timeout=STALL)[0]

    assert_resume_repeats_the_plain_run(tmp_path, run, 3)


# ---------------------------------------------------------------------------------------------- columnar operators

KEY_VALUES = [
    float("nan"),
    -float("nan"),
    bits_to_float(0x7FF8000000000002),  # its bytes' CRC-32 is even, float('nan')'s odd: another worker of two
    bits_to_float(0xFFF0000000000001),  # a signalling NaN's bits, negative
    1.5,
    -0.0,
    0.0,
    float("nan"),
]
STAND_IN = 12345.5
"""What NaN becomes in the reference run (and ``-0.0`` becomes ``0.0``): an ordinary float key."""


def stand_in(value: float) -> float:
    return STAND_IN if value != value else value + 0.0


def rows_of(key_values: list[float], count: int, sentinel: bool) -> list[tuple[float, str, int]]:
    """``count`` rows ``(k, s, v)`` cycling through ``key_values``."""
    keys = [key_values[i % len(key_values)] for i in range(count)]
    return [(stand_in(k) if sentinel else k, "ab"[i % 2], i) for i, k in enumerate(keys)]


def columnar(rows: list[tuple[float, str, int]], kind: str, names: tuple[str, ...] = ("k", "s", "v")) -> Any:
    """A NumPy structured array or an Arrow table of ``rows``, NaN bits kept."""
    array = np.array(rows, dtype=[(names[0], np.float64), (names[1], "U2"), (names[2], np.int64)])
    if kind == "numpy":
        return array
    return pa.table({name: array[name] for name in names})


def epochs_of(kind: str, sentinel: bool) -> list[list[Any]]:
    """Two epochs of three batches; the second (worker 1's of two) holds only a NaN that hashed apart before."""
    lone = [bits_to_float(0x7FF8000000000002), 1.5]
    mixed = [columnar(rows_of(KEY_VALUES[shift:] + KEY_VALUES[:shift], 9, sentinel), kind) for shift in (0, 5)]
    return [[mixed[0], columnar(rows_of(lone, 4, sentinel), kind), mixed[1]] for _ in range(2)]


def found_rows(outputs: list[list[tuple[int, list[Any]]]], rows: Callable[[Any], list[Any]]) -> dict[int, Counter[Any]]:
    """Every worker's rows per time, NaN as the stand-in's value."""
    per_time: dict[int, Counter[Any]] = {}
    for worker in outputs:
        for time, batch in worker:
            per_time.setdefault(time, Counter()).update(rows(batch))
    return per_time


def dict_rows(batch: list[dict[str, Any]]) -> list[Any]:
    """The rows of :func:`~helpers.columnar_ops_mains.as_rows`, NaN as the stand-in, ``-0.0`` as ``0.0``."""
    return [tuple(stand_in(value) if isinstance(value, float) else value for value in row.values()) for row in batch]


def sentinel_rows(batch: list[Any]) -> list[Any]:
    """Rows from :mod:`helpers.nan_key_mains`' mains: NaN as :data:`SENTINEL`, made the stand-in's value."""
    return [tuple(STAND_IN if value == SENTINEL else value for value in row) for row in batch]


@pytest.mark.parametrize("kind", ["numpy", "table"])
@pytest.mark.parametrize("keys", [["k"], ["s", "k"]], ids=["float-key", "two-keys"])
@pytest.mark.parametrize(("workers", "processes"), CONFIGS)
def test_aggregate_batch_makes_one_group_of_every_nan_key(
    kind: str, keys: list[str], workers: int, processes: int
) -> None:
    aggregations = [("v", "count"), ("v", "sum")]

    def run(sentinel: bool, workers: int, processes: int) -> dict[int, Counter[Any]]:
        main = partial(aggregate_main, epochs=epochs_of(kind, sentinel), keys=keys, aggregations=aggregations)
        return found_rows(execute(main, workers=workers, processes=processes, stall_timeout=STALL), dict_rows)

    found = run(False, workers, processes)
    expected = run(True, 1, 1)
    assert found == expected
    nan_groups = sum(row[keys.index("k")] == STAND_IN for row in expected[0])
    assert nan_groups == (1 if keys == ["k"] else 2)  # one NaN group (per value of s)


@pytest.mark.parametrize("join_type", ["inner", "left semi", "left anti"])
@pytest.mark.parametrize("kinds", [("numpy", "numpy"), ("table", "numpy"), ("table", "table")])
@pytest.mark.parametrize(("workers", "processes"), CONFIGS)
def test_join_batch_joins_nan_keys_with_nan_keys(join_type: str, kinds: Any, workers: int, processes: int) -> None:
    def run(sentinel: bool, workers: int, processes: int) -> dict[int, Counter[Any]]:
        left = [[columnar(rows_of(KEY_VALUES, 8, sentinel), kinds[0])]]
        right_values = [-float("nan"), 0.0, 2.0, bits_to_float(0x7FF0000000000002)]
        right = [[columnar(rows_of(right_values, 4, sentinel), kinds[1], ("key", "t", "w"))]]
        main = partial(join_main, left=left, right=right, keys="k", right_keys="key", join_type=join_type)
        return found_rows(execute(main, workers=workers, processes=processes, stall_timeout=STALL), dict_rows)

    found = run(False, workers, processes)
    expected = run(True, 1, 1)
    assert found == expected
    if join_type == "inner":  # five NaN rows on the left, two on the right; two zeros on the left, one on the right
        assert sum(expected[0].values()) == 5 * 2 + 2 * 1


def record_join(scope: Any, streams: Any) -> Any:
    """The record-wise join of ``(k, v)`` and ``(key, w)`` pairs, as ``(k, v, w)``."""
    joined = streams["left"].keyed().join(streams["right"].keyed())
    return joined.map(lambda pair: (pair[0], pair[1][0], pair[1][1]))


@pytest.mark.parametrize("kind", ["numpy", "table"])
def test_join_batch_agrees_with_the_record_wise_join_on_nan_keys(kind: str) -> None:
    left_rows = rows_of(KEY_VALUES, 8, False)
    right_rows = rows_of([-float("nan"), 0.0, 2.0], 3, False)
    pairs = {
        "left": [[(k, v) for k, _, v in left_rows]],
        "right": [[(k, v) for k, _, v in right_rows]],
    }
    records = Counter(map(plain, run_dataflow(record_join, pairs, workers=2).output("output")[0]))
    left = [[columnar(left_rows, kind)]]
    right = [[columnar(right_rows, kind, ("key", "t", "w"))]]
    main = partial(join_main, left=left, right=right, keys="k", right_keys="key", join_type="inner")
    rows = Counter()
    for worker in execute(main, workers=2, stall_timeout=STALL):
        for _, batch in worker:
            rows.update((plain(row["k"]), row["v"], row["w"]) for row in batch)
    assert rows == records and sum(rows.values()) == 5 + 2


@pytest.mark.parametrize("session", [False, True], ids=["tumbling", "session"])
@pytest.mark.parametrize("kind", ["numpy", "table"])
@pytest.mark.parametrize(("workers", "processes"), CONFIGS)
def test_window_batch_keeps_one_window_for_every_nan_key(
    session: bool, kind: str, workers: int, processes: int
) -> None:
    def run(sentinel: bool, workers: int, processes: int) -> dict[int, Counter[Any]]:
        main = partial(window_main, epochs=epochs_of(kind, sentinel), keys=["k"], session=session)
        return found_rows(execute(main, workers=workers, processes=processes, stall_timeout=STALL), sentinel_rows)

    found = run(False, workers, processes)
    expected = run(True, 1, 1)
    assert found == expected
    assert sum(row[0] == STAND_IN for rows in expected.values() for row in rows) == 1


@pytest.mark.parametrize("kind", ["numpy", "table"])
@pytest.mark.parametrize(("workers", "processes"), CONFIGS)
def test_columnar_join_latest_finds_the_table_row_of_a_nan_key(kind: str, workers: int, processes: int) -> None:
    def run(sentinel: bool, workers: int, processes: int) -> dict[int, Counter[Any]]:
        rows = [[columnar(rows_of(KEY_VALUES, 8, sentinel), kind)] for _ in range(2)]
        table = [[columnar(rows_of([-float("nan"), 0.0], 2, sentinel), kind, ("k", "t", "w"))], []]
        main = partial(join_latest_main, rows=rows, table=table, keys=["k"])
        return found_rows(execute(main, workers=workers, processes=processes, stall_timeout=STALL), sentinel_rows)

    found = run(False, workers, processes)
    expected = run(True, 1, 1)
    assert found == expected
    assert sum(expected[1].values()) == 5 + 2  # the NaN rows and the zeros of the second epoch
