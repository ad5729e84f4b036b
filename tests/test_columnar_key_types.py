"""Key column types through the columnar keyed operators, at 1 worker, 2 threads and 2 processes.

Every type either gives pandas' answer (``groupby(dropna=False)``, ``merge``) at
every worker count, or is refused with a :class:`~scopes.errors.KeyTypeError`
(or :class:`~scopes.errors.BatchError`) naming the operator, the column and the
type (:mod:`scopes.key_types`).  The operators: ``aggregate_batch``,
``join_batch``, columnar tumbling windows and sessions, ``join_latest`` and
``exchange_batch`` by a column (:mod:`helpers.key_type_mains` runs them).
"""

from __future__ import annotations

import builtins
import datetime as dt
import decimal
from collections import Counter
from functools import partial
from typing import Any

import numpy as np
import pytest
from helpers.columnar_ops_mains import as_rows
from helpers.key_type_mains import ARROW_CASES, EPOCHS, NUMPY_CASES, OPS, epochs, run_ops, table_updates, tokens

from runtime import WorkerFailed, execute
from scopes.errors import BatchError, KeyTypeError, OperatorFailed, TimelyError

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")

STALL = 30.0
CASES = [f"arrow:{name}" for name in ARROW_CASES] + [f"numpy:{name}" for name in NUMPY_CASES]
OBJECT_OPS = ("aggregate", "window", "session", "exchange")
"""The operators that take a NumPy ``object`` key field (the joins refuse them: their rows cross processes)."""


def ops_of(case: str) -> tuple[str, ...]:
    return OBJECT_OPS if case == "numpy:object" else OPS


# ---------------------------------------------------------------------------------------------- the answers


def frame(case: str, seed: int = 0) -> Any:
    """Every input row of ``case`` as ``(t, k, v)``, ``k`` the key's token."""
    rows = []
    for time, batches in zip(EPOCHS, epochs(case, seed), strict=True):
        for batch in batches:
            values = batch["v"] if isinstance(batch, np.ndarray) else batch.column("v").to_numpy()
            rows += [
                (time, key, int(value))
                for key, value in zip(
                    tokens(batch["k"] if isinstance(batch, np.ndarray) else batch.column("k")), values, strict=True
                )
            ]
    return pd.DataFrame(rows, columns=["t", "k", "v"])


def sessions(data: Any) -> Counter[Any]:
    """``Session(2)`` sums per key: epochs less than 2 apart are one session."""
    found: Counter[Any] = Counter()
    for key, rows in data.groupby("k"):
        spans: list[list[int]] = []
        for time in sorted(set(rows.t)):
            if spans and time - spans[-1][-1] < 2:
                spans[-1].append(time)
            else:
                spans.append([time])
        for span in spans:
            found[(key, span[0], span[-1] + 1, int(rows[rows.t.isin(span)].v.sum()))] += 1
    return found


def expected(op: str, case: str) -> Counter[Any]:
    """What pandas computes from the keys' tokens (tokens are equal exactly for keys that are one key)."""
    data = frame(case)
    if op == "aggregate":
        grouped = data.groupby(["t", "k"], dropna=False).v.agg(["sum", "count"]).reset_index()
        return Counter(zip(grouped.t, grouped.k, grouped["sum"], grouped["count"], strict=True))
    if op == "join":
        merged = data.merge(frame(case, 1), on=["t", "k"], suffixes=("", "_right"))
        return Counter(zip(merged.t, merged.k, merged.v, merged.v_right, strict=True))
    if op == "window":
        data["start"] = data.t - data.t % 2
        grouped = data.groupby(["k", "start"]).v.sum().reset_index()
        return Counter(zip(grouped.k, grouped.start, grouped.start + 2, grouped.v, strict=True))
    if op == "session":
        return sessions(data)
    if op == "join_latest":
        table = table_updates(case)[0]
        plans = pd.DataFrame({"k": tokens(table.column("k")), "w": table.column("w").to_pylist()})
        merged = data.merge(plans, on="k")
        return Counter(zip(merged.t, merged.k, merged.v, merged.w, strict=True))
    return Counter(zip(data.t, data.k, data.v, strict=True))


def found(op: str, results: list[dict[str, list[Any]]]) -> tuple[Counter[Any], set[str]]:
    """Every worker's output rows of ``op`` (as :func:`expected` has them) and the key column types seen.

    Fails when one key (and window) is in the output of two workers: routing
    must send equal keys to one worker.
    """
    rows: Counter[Any] = Counter()
    kinds: set[str] = set()
    owners: dict[Any, set[int]] = {}
    columns = {
        "aggregate": ("v_sum", "v_count"),
        "join": ("v", "v_right"),
        "window": ("window_start", "window_end", "v_sum"),
        "session": ("window_start", "window_end", "v_sum"),
        "join_latest": ("v", "w"),
        "exchange": ("v",),
    }[op]
    for worker, result in enumerate(results):
        for time, keys, others, kind in result[op]:
            kinds.add(kind)
            for row, key in enumerate(keys):
                values = tuple(others[name][row] for name in columns)
                if op in ("window", "session"):
                    rows[(key, *values)] += 1
                    owners.setdefault((key, values[0]), set()).add(worker)
                else:
                    rows[(time, key, *values)] += 1
                    owners.setdefault((time, key) if op == "aggregate" else key, set()).add(worker)
    split = [
        owned
        for owned, workers in owners.items()
        if len(workers) > 1 and op in ("aggregate", "exchange", "window", "session")
    ]
    assert not split, f"{op}: keys on two workers: {split[:3]}"
    return rows, kinds


def check(case: str, ops: tuple[str, ...], **run: Any) -> dict[str, set[str]]:
    """Run ``ops`` over ``case`` and compare each with pandas; return the key column types of each output."""
    results = execute(partial(run_ops, case=case, ops=ops), stall_timeout=STALL, **run)
    kinds = {}
    for op in ops:
        rows, kinds[op] = found(op, results)
        want = expected(op, case)
        assert rows == want, (
            f"{case} {op} {run}: missing {list((want - rows).items())[:3]}, extra {list((rows - want).items())[:3]}"
        )
    return kinds


# ---------------------------------------------------------------------------------------------- types that work


@pytest.mark.parametrize("case", CASES)
def test_every_taken_key_type_gives_pandas_answer_on_one_worker_and_two_threads(case: str) -> None:
    for workers in (1, 2):
        check(case, ops_of(case), workers=workers)


@pytest.mark.parametrize(
    "case",
    [
        "arrow:float16",
        "arrow:string+dictionary",
        "arrow:int32+int64",
        "arrow:timestamp_ms+ns",
        "arrow:int64_nulls",
        "arrow:decimal128",
        "numpy:datetime64[ns]",
        "numpy:object",
    ],
)
def test_key_types_give_pandas_answer_on_two_processes(case: str) -> None:
    check(case, OBJECT_OPS[:3] if case == "numpy:object" else OPS, workers=1, processes=2)


def test_output_key_columns_keep_their_type_and_dictionaries_give_their_values() -> None:
    kinds = check("arrow:float16", OPS, workers=2)
    assert all(found == {"halffloat"} for found in kinds.values()), kinds
    assert check("numpy:float16", ("aggregate",), workers=2)["aggregate"] == {"numpy float16"}
    kinds = check("arrow:dictionary", ("aggregate", "join", "window", "session", "join_latest"), workers=2)
    assert all(found == {"string"} for found in kinds.values()), kinds


# ---------------------------------------------------------------------------------------------- types refused


def _field(dtype: str) -> Any:
    return np.zeros(4, dtype=[("k", dtype), ("v", np.int64)])


REFUSED = {
    "list": pa.table({"k": pa.array([[1], [2], [1], []]), "v": range(4)}),
    "struct": pa.table({"k": pa.array([{"a": 1}, {"a": 2}] * 2), "v": range(4)}),
    "map": pa.table({"k": pa.array([[("a", 1)]] * 4, pa.map_(pa.string(), pa.int64())), "v": range(4)}),
    "string_view": pa.table({"k": pa.array(["a", "b"] * 2, pa.string_view()), "v": range(4)}),
    "interval": pa.table(
        {"k": pa.array([pa.MonthDayNano([1, 2, 3])] * 4, pa.month_day_nano_interval()), "v": range(4)}
    ),
    "complex": _field("c16"),
    "datetime64[h]": _field("M8[h]"),
    "longdouble": _field("g"),
    "sub-array": np.zeros(4, dtype=[("k", "i8", (2,)), ("v", np.int64)]),
}
"""Key columns no operator takes; each is refused naming the operator, the column and the type."""


def _refused_main(worker: Any, op: str, name: str) -> None:
    from scopes import Session, Tumbling

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Left")
        other = stream.map_batch(lambda batch: batch, name="Same")
        made = {
            "aggregate": lambda: stream.aggregate_batch("k", [("v", "sum")], name="Agg"),
            "join": lambda: stream.join_batch(other, "k", name="Join"),
            "window": lambda: stream.window_batch(Tumbling(2), keys="k").count(name="Win").down,
            "session": lambda: stream.window_batch(Session(2), keys="k").count(name="Ses").down,
            "join_latest": lambda: stream.key_by_columns("k").join_latest(other.key_by_columns("k"), name="Latest"),
            "exchange": lambda: stream.exchange_batch("k", name="Route"),
        }
        return handle, made[op]().probe()

    handle, probe = worker.dataflow(build)
    if worker.index == 0:
        handle.send_batch(REFUSED[name])
    handle.close()
    worker.step_while(lambda: not probe.done())


NAMES = {
    "aggregate": "Agg",
    "join": "Join",
    "window": "Win",
    "session": "Ses",
    "join_latest": "Latest",
    "exchange": "Route",
}


def root_error(failure: WorkerFailed) -> BaseException:
    """The first error in ``failure``'s chain that is not a wrapper (a worker's or an operator's failure)."""
    error: BaseException = failure
    while isinstance(error, WorkerFailed | OperatorFailed) and error.__cause__ is not None:
        error = error.__cause__
    return error


@pytest.mark.parametrize("name", list(REFUSED))
@pytest.mark.parametrize("op", OPS)
def test_key_types_no_operator_takes_are_refused_naming_operator_column_and_type(op: str, name: str) -> None:
    kind = (
        str(REFUSED[name].schema.field("k").type)
        if name in ("list", "struct", "map", "string_view", "interval")
        else None
    )
    for workers in (1, 2):
        with pytest.raises(WorkerFailed) as failed:
            execute(partial(_refused_main, op=op, name=name), workers=workers, stall_timeout=STALL)
        error = root_error(failed.value)
        assert isinstance(error, KeyTypeError) and isinstance(error, TimelyError), repr(error)
        message = str(error)
        assert f"operator '{NAMES[op]}'" in message and error.column == "k" and "'k'" in message, message
        assert (kind or "numpy dtype") in message and (
            "cast" in message
            or "convert" in message
            or "make" in message
            or "split" in message
            or "key by its fields" in message
        ), message


def test_a_refused_key_type_is_refused_on_two_processes_too() -> None:
    with pytest.raises(WorkerFailed, match=r"KeyTypeError.*operator 'Join'.*'k'.*list<item: int64>"):
        execute(partial(_refused_main, op="join", name="list"), workers=1, processes=2, stall_timeout=STALL)


def test_numpy_batches_with_object_fields_are_refused_by_the_joins_on_every_worker_count() -> None:
    """Their rows cross processes whole, and objects cannot: refused on threads too, not only on processes."""
    batch = np.array([("a", 1), ("b", 2)], dtype=[("k", object), ("v", np.int64)])

    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            return handle, stream.join_batch(stream.map_batch(lambda b: b), "k", name="Join").probe()

        handle, probe = worker.dataflow(build)
        handle.send_batch(batch)
        handle.close()
        worker.step_while(lambda: not probe.done())

    for workers in (1, 2):
        with pytest.raises(WorkerFailed) as failed:
            execute(main, workers=workers, stall_timeout=STALL)
        error = root_error(failed.value)
        assert isinstance(error, BatchError) and "operator 'Join'" in str(error) and "(k)" in str(error), error


# ---------------------------------------------------------------------------------------------- the fixes, one by one


def run_dataflow_rows(build: Any, sends: list[tuple[int, int, Any]], workers: int) -> list[Any]:
    """Every worker's output rows of ``build(stream)``; ``sends`` is ``(worker, time, batch)`` (worker modulo peers)."""

    def main(worker: Any) -> list[Any]:
        seen: list[Any] = []

        def dataflow(scope: Any) -> Any:
            handle, stream = scope.new_input()
            out = build(stream)
            return handle, out.inspect_batch(lambda time, batch: seen.extend(as_rows(batch))).probe()

        handle, probe = worker.dataflow(dataflow)
        for sender, time, batch in sends:
            handle.advance_to(time)
            if sender % worker.peers == worker.index:
                handle.send_batch(batch)
        handle.close()
        worker.step_while(lambda: not probe.done())
        return seen

    return [row for rows in execute(main, workers=workers, stall_timeout=STALL) for row in rows]


def test_join_batch_carries_columns_arrow_cannot_join_and_joins_keys_of_two_widths() -> None:
    """Lists, structs and null-typed columns come out as they went in; an int32 key joins int64 keys past its range."""
    left = pa.table({"k": pa.array([1, 2, None], pa.int32()), "tags": [[1], [2, 3], []], "gone": pa.nulls(3)})
    right = pa.table({"k": pa.array([2, 2**40, None], pa.int64()), "info": [{"a": 1}, {"a": 2}, {"a": 3}]})

    def build(stream: Any) -> Any:
        lefts = stream.map_batch(lambda batch: batch if "tags" in batch.column_names else batch.slice(0, 0))
        rights = stream.map_batch(lambda batch: batch if "info" in batch.column_names else batch.slice(0, 0))
        return lefts.join_batch(rights, "k")

    for workers in (1, 2):
        rows = run_dataflow_rows(build, [(0, 0, left), (1, 0, right)], workers)
        assert sorted(rows, key=lambda row: row["k"] is None) == [
            {"k": 2, "tags": [2, 3], "gone": None, "info": {"a": 1}},
            {"k": None, "tags": [], "gone": None, "info": {"a": 3}},  # a null key joins a null key
        ]


@pytest.mark.parametrize("join_type", ["left semi", "left anti"])
def test_semi_and_anti_joins_give_the_left_key_type_whether_or_not_a_worker_has_right_rows(join_type: str) -> None:
    """An ``int32`` left key against ``int64`` right keys comes out ``int32``: on a worker whose right side has
    no rows at the time, as on one that joined them, so the output type does not depend on the worker count."""
    left = pa.table({"k": pa.array([1, 2, 3, 4], pa.int32())})
    right = pa.table({"k": pa.array([1], pa.int64())})

    def build(stream: Any) -> Any:
        lefts = stream.map_batch(lambda batch: batch if batch.schema.field("k").type == pa.int32() else batch[:0])
        rights = stream.map_batch(lambda batch: batch if batch.schema.field("k").type == pa.int64() else batch[:0])
        joined = lefts.join_batch(rights, "k", join_type=join_type)
        return joined.map_batch(
            lambda table: pa.table({"type": [str(table.schema.field("k").type)] * table.num_rows, "k": table["k"]})
        )

    kept = [1] if join_type == "left semi" else [2, 3, 4]
    for workers in (1, 2):
        rows = run_dataflow_rows(build, [(0, 0, left), (1, 0, right)], workers)
        assert sorted((row["type"], row["k"]) for row in rows) == [("int32", k) for k in kept], workers


def test_join_latest_takes_table_rows_of_columns_arrow_cannot_group_and_refuses_two_different_ones() -> None:
    """A key sent twice at one time with one row is taken; with two different rows it is a conflict."""
    from scopes.errors import ConflictingUpdates

    def rows(same: bool, workers: int) -> list[Any]:
        table = pa.table({"k": [1, 1], "tags": [[1], [1] if same else [2]], "row": [False, False]})

        def build(stream: Any) -> Any:
            updates = stream.map_batch(lambda batch: batch if "tags" in batch.column_names else batch.slice(0, 0))
            rows = stream.map_batch(lambda batch: batch if "tags" not in batch.column_names else batch.slice(0, 0))
            return rows.key_by_columns("k").join_latest(updates.key_by_columns("k"), name="Latest")

        return run_dataflow_rows(build, [(0, 0, table), (0, 1, pa.table({"k": [1, 2]}))], workers)

    for workers in (1, 2):
        assert rows(True, workers) == [{"k": 1, "tags": [1], "row": False}]
        with pytest.raises(WorkerFailed) as failed:
            rows(False, workers)
        assert isinstance(root_error(failed.value), ConflictingUpdates)


VALUES = {
    "float16": pa.array(np.array([1.5, -2.0, np.nan, 4.0, 0.25, 8.0], np.float16)),
    "decimal": pa.array([decimal.Decimal(x) for x in ("1.5", "2", "-3.25", "4", "0", "1")], pa.decimal128(8, 2)),
    "bool": pa.array([True, False, True, None, True, True]),
    "timestamp": pa.array(range(6), pa.timestamp("s")),
    "string": pa.array(["b", "a", None, "c", "b", "a"]),
    "dictionary": pa.array(["b", "a", "z", "c", "b", "a"]).dictionary_encode(),
}
"""Value columns and the functions they take: every one takes ``count``; numbers ``sum`` and ``mean`` too."""
ADDS = {"float16", "decimal", "bool"}


def _reference(function: str, values: list[Any]) -> Any:
    """``function`` of one key's values as the operators define it: nulls skipped; a NaN makes a sum or a mean NaN,
    and ``min`` and ``max`` skip it unless every value is NaN."""
    present = [value for value in values if value is not None]
    if function == "count":
        return len(present)
    if function in ("sum", "mean"):
        total = float(sum(present)) if present and not isinstance(present[0], bool) else sum(present)
        return total if function == "sum" else float(total) / len(present)
    numbers = [value for value in present if value == value] or present
    return getattr(builtins, function)(numbers)


@pytest.mark.parametrize("name", list(VALUES))
@pytest.mark.parametrize("function", ["count", "sum", "min", "max", "mean"])
def test_aggregations_of_value_types_equal_pandas_or_are_refused_naming_the_column(name: str, function: str) -> None:
    table = pa.table({"k": [1, 1, 2, 2, 3, 3], "x": VALUES[name]})
    sends = [(0, 0, table.slice(0, 3)), (1, 0, table.slice(3))]

    def build(stream: Any) -> Any:
        return stream.aggregate_batch("k", [("x", function, "out")], name="Agg")

    if function in ("sum", "mean") and name not in ADDS:
        for workers in (1, 2):
            with pytest.raises(WorkerFailed) as failed:
                run_dataflow_rows(build, sends, workers)
            error = root_error(failed.value)
            assert isinstance(error, BatchError) and "operator 'Agg'" in str(error) and "'x'" in str(error), error
        return
    values = VALUES[name].cast(VALUES[name].type.value_type) if name == "dictionary" else VALUES[name]
    data = pd.DataFrame({"k": [1, 1, 2, 2, 3, 3], "x": pd.Series(values.to_pylist(), dtype=object)})
    want = data.groupby("k").x.agg(lambda values: _reference(function, list(values))).to_dict()
    for workers in (1, 2):
        got = {row["k"]: row["out"] for row in run_dataflow_rows(build, sends, workers)}
        assert got.keys() == want.keys()
        for key, value in want.items():
            assert got[key] == value or (value != value and got[key] != got[key]), (key, got[key], value)


def test_numpy_aggregations_of_strings_and_complex_numbers() -> None:
    """``min`` of strings is taken (by Arrow); a mean of complex numbers is refused (it lost the imaginary part)."""
    words = np.array([(1, "b"), (1, "a"), (2, "c")], dtype=[("k", "i8"), ("x", "U1")])
    rows = run_dataflow_rows(lambda s: s.aggregate_batch("k", [("x", "min"), ("x", "max")]), [(0, 0, words)], 2)
    assert sorted(rows, key=lambda row: row["k"]) == [
        {"k": 1, "x_min": "a", "x_max": "b"},
        {"k": 2, "x_min": "c", "x_max": "c"},
    ]
    numbers = np.array([(1, 1 + 2j)], dtype=[("k", "i8"), ("x", "c16")])
    with pytest.raises(WorkerFailed, match=r"cannot compute mean of the column 'x'.*complex128"):
        run_dataflow_rows(lambda s: s.aggregate_batch("k", [("x", "mean")]), [(0, 0, numbers)], 1)


def test_equal_instants_and_decimals_hash_alike_whatever_their_unit_or_scale() -> None:
    from scopes.hashing import stable_hash, stable_hash_array, stable_hash_arrow

    day = pa.array([dt.date(2024, 1, 1), None], pa.date32())
    expected = [stable_hash(1_704_067_200 * 10**9), stable_hash(None)]
    for kind in (pa.date64(), pa.timestamp("s"), pa.timestamp("ms", "UTC"), pa.timestamp("ns", "Asia/Tokyo")):
        assert stable_hash_arrow(day.cast(kind)).tolist() == expected, kind
    assert stable_hash_arrow(day).tolist() == expected
    assert stable_hash_array(np.array(["2024-01-01", "NaT"], "M8[us]")).tolist() == expected
    amounts = pa.array([decimal.Decimal("1.00"), decimal.Decimal("2.50")], pa.decimal128(5, 2))
    assert stable_hash_arrow(amounts).tolist() == stable_hash_arrow(amounts.cast(pa.decimal128(12, 5))).tolist()
    assert stable_hash_arrow(amounts).tolist() == [stable_hash(1), stable_hash(2.5)]


def test_an_integral_decimal_key_meets_the_equal_integer_past_two_to_the_53() -> None:
    """Decimals hashed as floats: 2**53 + 1 as a decimal went where 2**53 goes, not where the equal int64 goes,
    so an aggregation of both was one group on 1 worker and two on 2 or 3."""
    from scopes.hashing import stable_hash, stable_hash_arrow

    big = 2**53 + 1
    for kind, half in ((pa.decimal128(38, 0), "3"), (pa.decimal128(30, 4), "2.5"), (pa.decimal256(60, 2), "2.5")):
        amounts = pa.array([decimal.Decimal(big), decimal.Decimal("-7.00"), decimal.Decimal(half), None], kind)
        hashes = [stable_hash(big), stable_hash(-7), stable_hash(float(half)), stable_hash(None)]
        assert stable_hash_arrow(amounts).tolist() == hashes, kind
    ints = pa.table({"k": pa.array([big, 2, 3, 4, 5, 6], pa.int64()), "v": [1] * 6})
    decimals = pa.table({"k": pa.array([decimal.Decimal(big)], pa.decimal128(38, 0)), "v": [1]})
    sends = [(0, 0, ints), (1, 0, decimals)]
    want = [(2, 1), (3, 1), (4, 1), (5, 1), (6, 1), (big, 2)]
    for workers in (1, 2, 3):
        rows = run_dataflow_rows(lambda s: s.aggregate_batch("k", [("v", "sum")]), sends, workers)
        assert sorted((int(row["k"]), row["v_sum"]) for row in rows) == want, workers


def test_two_key_columns_of_mixed_types_group_and_join_as_pandas_does() -> None:
    """Routing by several columns hashes each (float16 with NaN, a dictionary, nulls, NaT), as one column does."""
    keys = pa.table(
        {
            "k": pa.array(np.array([1.5, np.nan, -0.0, 0.0, np.nan, 1.5], np.float16)),
            "g": pa.array(["a", None, "b", "b", None, "a"]).dictionary_encode(),
            "v": range(6),
        }
    )
    plain = keys.set_column(1, "g", keys.column("g").cast(pa.string()))  # the same keys, another batch type
    days = np.array(
        [("2024-01-01", 1, 0), ("NaT", 1, 1), ("NaT", 1, 2), ("2024-01-01", 2, 3)],
        dtype=[("k", "M8[D]"), ("g", "i8"), ("v", "i8")],
    )
    for batches in ([keys, plain], [days, days]):
        sends = [(0, 0, batches[0]), (1, 0, batches[1])]
        data = pd.concat([frame_of(batch) for batch in batches], ignore_index=True)
        want = data.groupby(["k", "g"], dropna=False).v.agg(["sum", "count"]).reset_index()
        merged = data.merge(data, on=["k", "g"])
        for workers in (1, 2):
            rows = run_dataflow_rows(
                lambda s: s.aggregate_batch(["k", "g"], [("v", "sum"), ("v", "count")]), sends, workers
            )
            got = Counter((key_token(row["k"]), key_token(row["g"]), row["v_sum"], row["v_count"]) for row in rows)
            assert got == Counter(zip(want.k, want.g, want["sum"], want["count"], strict=True)), workers

            def join(stream: Any) -> Any:
                return stream.join_batch(stream.map_batch(lambda same: same), ["k", "g"])

            rows = run_dataflow_rows(join, sends, workers)
            got = Counter((key_token(row["k"]), key_token(row["g"]), row["v"], row["v_right"]) for row in rows)
            assert got == Counter(zip(merged.k, merged.g, merged.v_x, merged.v_y, strict=True)), workers


def key_token(value: Any) -> str:
    """The token of one output key value (a float, a string, a date, None) as :func:`tokens` gives it."""
    if isinstance(value, dt.date):
        return tokens(pa.array([value], pa.date32()))[0]
    return tokens(pa.array([value]))[0]


def frame_of(batch: Any) -> Any:
    """The rows of a batch with key tokens in ``k`` and ``g``, for pandas."""
    columns = {name: tokens(batch[name] if isinstance(batch, np.ndarray) else batch.column(name)) for name in "kg"}
    values = batch["v"] if isinstance(batch, np.ndarray) else batch.column("v").to_numpy()
    return pd.DataFrame({**columns, "v": list(values)})
