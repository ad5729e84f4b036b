"""aggregate_batch and join_batch: the answers pandas gives (groupby, merge) on 1 worker, 2 threads and
2 processes, partial aggregates before the exchange, and misuse refused with the operator and column named."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pytest
from helpers.columnar_ops_mains import aggregate_main, join_main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import WorkerFailed, execute
from scopes import ScopeBuilder
from scopes.batches import BatchError, KeyColumnError
from scopes.columnar_ops import AggregationPlan, combine_partials, finish, partial_aggregates
from scopes.errors import BuildError

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")

STALL = 20.0
ROW = st.tuples(
    st.integers(0, 5),
    st.sampled_from(["a", "bb", "ccc"]),
    st.integers(-100, 100),
    st.integers(-400, 400).map(lambda n: n / 4),  # quarters: float sums are exact in any order
)
EPOCHS = st.lists(st.lists(st.lists(ROW, max_size=12), max_size=4), min_size=1, max_size=3)
AGGREGATIONS = [("v", "count"), ("v", "sum"), ("f", "min"), ("f", "max"), ("v", "mean"), ("f", "mean", "average")]
DTYPE = np.dtype([("k", np.int32), ("s", "U3"), ("v", np.int64), ("f", np.float64)])


def make(rows: list[tuple[int, str, int, float]], kind: str) -> Any:
    """A batch of ``rows`` of one kind: a structured array, an Arrow record batch or table."""
    array = np.array(rows, dtype=DTYPE)
    if kind == "numpy":
        return array
    table = pa.table({name: array[name] for name in DTYPE.names})
    return table if kind == "table" else table.to_batches()[0] if len(rows) else pa.RecordBatch.from_pylist([])


def batches(epochs: list[list[list[Any]]], kind: str) -> list[list[Any]]:
    return [[make(rows, kind) for rows in epoch if rows] for epoch in epochs]


def frame(rows: list[dict[str, Any]], columns: list[str]) -> Any:
    return pd.DataFrame(rows, columns=columns)


def expected_aggregates(epochs: list[list[list[Any]]], keys: list[str]) -> dict[int, Any]:
    """pandas' groupby per epoch, sorted by the keys."""
    named = {(a[2] if len(a) == 3 else f"{a[0]}_{a[1]}"): (a[0], a[1]) for a in AGGREGATIONS}
    result = {}
    for time, epoch in enumerate(epochs):
        rows = [row for batch in epoch for row in batch]
        if rows:
            data = pd.DataFrame(rows, columns=list(DTYPE.names))
            result[time] = data.groupby(keys).agg(**named).reset_index().sort_values(keys, ignore_index=True)
    return result


def found_aggregates(outputs: list[list[tuple[int, Any]]], keys: list[str]) -> dict[int, Any]:
    """Every worker's output per time, checking that each key is on one worker only, sorted by the keys."""
    per_time: dict[int, list[dict[str, Any]]] = {}
    for worker in outputs:
        for time, rows in worker:
            per_time.setdefault(time, []).extend(rows)
    result = {}
    for time, rows in per_time.items():
        data = pd.DataFrame(rows)
        assert not data.duplicated(keys).any(), "a key was aggregated on two workers"
        result[time] = data.sort_values(keys, ignore_index=True)
    return result


def check_aggregate(epochs: list[list[list[Any]]], kind: str, keys: list[str], **run: Any) -> None:
    main = partial(aggregate_main, epochs=batches(epochs, kind), keys=keys, aggregations=AGGREGATIONS)
    found = found_aggregates(execute(main, stall_timeout=STALL, **run), keys)
    expected = expected_aggregates(epochs, keys)
    assert sorted(found) == sorted(expected)
    for time, table in expected.items():
        pd.testing.assert_frame_equal(found[time][list(table.columns)], table, check_dtype=False)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(epochs=EPOCHS, kind=st.sampled_from(["numpy", "table", "batch"]), workers=st.sampled_from([1, 2]))
def test_aggregate_batch_equals_pandas_groupby(epochs: Any, kind: str, workers: int) -> None:
    check_aggregate(epochs, kind, ["k"], workers=workers)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(epochs=EPOCHS, kind=st.sampled_from(["numpy", "table"]))
def test_aggregate_batch_by_two_key_columns_equals_pandas_on_two_threads(epochs: Any, kind: str) -> None:
    check_aggregate(epochs, kind, ["s", "k"], workers=2)


@pytest.mark.parametrize("kind", ["numpy", "table"])
def test_aggregate_batch_on_two_processes_equals_pandas(kind: str) -> None:
    rng = np.random.default_rng(28)
    epochs = [
        [
            [(int(k), "a" if k % 2 else "bb", int(v), float(v) / 4) for k, v in rng.integers(0, 50, (300, 2))]
            for _ in range(3)
        ]
        for _ in range(2)
    ]
    check_aggregate(epochs, kind, ["k"], workers=1, processes=2)
    check_aggregate(epochs, kind, ["s", "k"], workers=1, processes=2)


def test_only_partial_aggregates_cross_the_exchange() -> None:
    """The batch that leaves the local step has one row per distinct key; combining partials is exact."""
    plan = AggregationPlan("operator 'A'", ("k",), (("v", "mean", "m"), ("v", "count", "n")))
    array = np.array([(k % 3, "a", k, 0.0) for k in range(30)], dtype=DTYPE)
    for batch in (array, pa.table({name: array[name] for name in DTYPE.names})):
        first, second = partial_aggregates(plan, batch[:10]), partial_aggregates(plan, batch[10:])
        assert len(first) == 3 and len(second) == 3
        result = finish(plan, combine_partials(plan, [first, second]))
        rows = result.tolist() if isinstance(result, np.ndarray) else [tuple(r.values()) for r in result.to_pylist()]
        assert sorted(rows) == [(0, 13.5, 10), (1, 14.5, 10), (2, 15.5, 10)]


def test_partials_of_numpy_and_arrow_batches_combine_into_an_arrow_table() -> None:
    plan = AggregationPlan("operator 'A'", ("k",), (("v", "sum", "total"),))
    array = np.array([(1, "a", 2, 0.0), (2, "a", 3, 0.0)], dtype=DTYPE)
    arrow = pa.table({name: array[name] for name in DTYPE.names})
    result = finish(plan, combine_partials(plan, [partial_aggregates(plan, array), partial_aggregates(plan, arrow)]))
    assert sorted(result.to_pylist(), key=lambda row: row["k"]) == [{"k": 1, "total": 4}, {"k": 2, "total": 6}]


def test_a_sum_of_booleans_is_int64_for_arrays_arrow_and_columnar_windows_as_in_pandas() -> None:
    """Arrow sums booleans as ``uint64``; a NumPy batch's sum, and pandas', is ``int64``: every form gives ``int64``."""
    from scopes import Tumbling

    plan = AggregationPlan("operator 'A'", ("k",), (("b", "sum", "n"), ("b", "max", "any")))
    array = np.array([(1, True), (1, True), (2, False)], dtype=[("k", "i8"), ("b", "?")])
    arrow = pa.table({"k": array["k"], "b": array["b"]})
    want = pd.DataFrame({"k": array["k"], "b": array["b"]}).groupby("k").b.sum()
    assert want.dtype == np.int64
    for batch in (array, arrow, pa.record_batch([arrow["k"].chunk(0), arrow["b"].chunk(0)], ["k", "b"])):
        partial = partial_aggregates(plan, batch)
        result = finish(plan, combine_partials(plan, [partial, partial]))
        sums = result["n"] if isinstance(result, np.ndarray) else result.column("n")
        kinds = result.dtype["any"] if isinstance(result, np.ndarray) else result.schema.field("any").type
        assert str(sums.dtype if isinstance(sums, np.ndarray) else sums.type) == "int64", type(batch)
        assert str(kinds) in ("bool", "bool_") and sorted(np.asarray(sums).tolist()) == [0, 4]

    def windows(scope: ScopeBuilder) -> Any:
        handle, stream = scope.new_input()
        down = stream.window_batch(Tumbling(2), keys="k").aggregate([("b", "sum", "n")]).down
        return handle, down.inspect_batch(lambda time, table: seen.append(table)).probe()

    seen: list[Any] = []

    def main(worker: Any) -> None:
        handle, probe = worker.dataflow(windows)
        handle.send_batch(arrow)
        handle.close()
        worker.step_while(lambda: not probe.done())

    execute(main, workers=1, stall_timeout=STALL)
    assert [str(table.schema.field("n").type) for table in seen] == ["int64"]
    assert sorted(seen[0].column("n").to_pylist()) == [0, 2]


# ---------------------------------------------------------------------------------------------- join

PAIR = st.tuples(st.integers(0, 6), st.integers(-9, 9))
SIDE = st.lists(st.lists(st.lists(PAIR, max_size=8), max_size=3), max_size=3)


def side(epochs: list[list[list[tuple[int, int]]]], names: tuple[str, str], kind: str, dtype: Any) -> list[list[Any]]:
    result = []
    for epoch in epochs:
        parts = []
        for rows in epoch:
            if not rows:
                continue
            array = np.array(rows, dtype=[(names[0], dtype), (names[1], np.int64)])
            parts.append(array if kind == "numpy" else pa.table({name: array[name] for name in names}))
        result.append(parts)
    return result


def check_join(left: Any, right: Any, join_type: str, kinds: tuple[str, str], **run: Any) -> None:
    epochs = max(len(left), len(right))
    left = left + [[]] * (epochs - len(left))
    right = right + [[]] * (epochs - len(right))
    main = partial(
        join_main,
        left=side(left, ("k", "x"), kinds[0], np.int32),
        right=side(right, ("key", "x"), kinds[1], np.int64),
        keys="k",
        right_keys="key",
        join_type=join_type,
    )
    outputs = execute(main, stall_timeout=STALL, **run)
    found: dict[int, list[tuple[Any, ...]]] = {}
    for worker in outputs:
        for time, rows in worker:
            found.setdefault(time, []).extend(tuple(row.values()) for row in rows)
    expected: dict[int, list[tuple[Any, ...]]] = {}
    for time, (lefts, rights) in enumerate(zip(left, right, strict=True)):
        ldata = pd.DataFrame([r for rows in lefts for r in rows], columns=["k", "x"])
        rdata = pd.DataFrame([r for rows in rights for r in rows], columns=["key", "x"])
        if join_type == "inner":
            data = ldata.merge(rdata, left_on="k", right_on="key", suffixes=("", "_right")).drop(columns="key")
        else:
            inside = ldata["k"].isin(rdata["key"])
            data = ldata[inside if join_type == "left semi" else ~inside]
        if len(data):
            expected[time] = sorted(map(tuple, data.astype(int).values.tolist()))
    assert {time: sorted(rows) for time, rows in found.items()} == expected


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    left=SIDE,
    right=SIDE,
    join_type=st.sampled_from(["inner", "left semi", "left anti"]),
    kinds=st.sampled_from([("numpy", "numpy"), ("numpy", "table"), ("table", "table")]),
    workers=st.sampled_from([1, 2]),
)
def test_join_batch_equals_pandas_merge(left: Any, right: Any, join_type: str, kinds: Any, workers: int) -> None:
    check_join(left, right, join_type, kinds, workers=workers)


def test_join_batch_on_two_processes_equals_pandas_merge() -> None:
    rng = np.random.default_rng(7)
    left = [[[tuple(map(int, row)) for row in rng.integers(0, 40, (200, 2))] for _ in range(3)] for _ in range(2)]
    right = [[[tuple(map(int, row)) for row in rng.integers(0, 40, (150, 2))] for _ in range(2)] for _ in range(2)]
    check_join(left, right, "inner", ("numpy", "table"), workers=1, processes=2)
    check_join(left, right, "left anti", ("table", "numpy"), workers=1, processes=2)


# ---------------------------------------------------------------------------------------------- misuse


def build_error(build: Any, workers: int) -> BuildError:
    def main(worker: Any) -> None:
        def dataflow(scope: ScopeBuilder) -> Any:
            _, stream = scope.new_input("In")
            _, other = scope.new_input("Other")
            build(stream, other)

        worker.dataflow(dataflow)

    with pytest.raises(WorkerFailed) as excinfo:
        execute(main, workers=workers)
    error: BaseException | None = excinfo.value
    while error is not None and not isinstance(error, BuildError):
        error = error.__cause__
    assert isinstance(error, BuildError), excinfo.value
    return error


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda s, o: s.aggregate_batch("k", [("v", "median")], name="Agg"), ["'median'", "'v'", "count, sum"]),
        (lambda s, o: s.aggregate_batch([], [("v", "sum")], name="Agg"), ["no key column"]),
        (lambda s, o: s.aggregate_batch("k", [], name="Agg"), ["non-empty"]),
        (lambda s, o: s.aggregate_batch("k", [("v", "sum", "k")], name="Agg"), ["'k'", "twice"]),
        (lambda s, o: s.aggregate_batch("k", ["v"], name="Agg"), ["(column, function)"]),
        # found by the new-user audit: pandas' agg({column: function}) and one pair without its list were told
        # "an aggregation must be (column, function) ..., got 'v'", naming a column as if it were the aggregation
        (lambda s, o: s.aggregate_batch("k", {"v": "sum"}, name="Agg"), ["not a dict", "write [('v', 'sum')]"]),
        (lambda s, o: s.aggregate_batch("k", ("v", "sum"), name="Agg"), ["put it in a list: [('v', 'sum')]"]),
        (lambda s, o: s.aggregate_batch("k", ["v", "max", "top"], name="Agg"), ["[('v', 'max', 'top')]"]),
        (lambda s, o: s.join_batch(o, "k", join_type="left outer", name="Join"), ["'left outer'", "inner"]),
        (lambda s, o: s.join_batch(o, ["k", "j"], right_keys="k", name="Join"), ["2 left key", "1 right"]),
        (lambda s, o: s.join_batch(o, "k", suffixes=("_a", "_a"), name="Join"), ["suffixes"]),
    ],
)
def test_misuse_is_refused_at_build_time_on_every_worker_count(build: Any, words: list[str]) -> None:
    for workers in (1, 2):
        message = str(build_error(build, workers))
        assert "operator 'Agg'" in message or "operator 'Join'" in message, message
        for word in words:
            assert word in message, message


def run_one(build: Any, batch: Any, workers: int) -> BaseException:
    def main(worker: Any) -> None:
        def dataflow(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input("In")
            _, other = scope.new_input("Other")
            return handle, build(stream, other).probe()

        handle, probe = worker.dataflow(dataflow)
        handle.send_batch(batch)
        handle.close()
        worker.step_while(lambda: not probe.done())

    with pytest.raises(WorkerFailed) as excinfo:
        execute(main, workers=workers, stall_timeout=STALL)
    error: BaseException = excinfo.value
    while error.__cause__ is not None:
        error = error.__cause__
    return error


@pytest.mark.parametrize("workers", [1, 2])
def test_a_missing_column_names_the_operator_column_time_and_columns(workers: int) -> None:
    array = np.zeros(3, DTYPE)
    for batch in (array, pa.table({name: array[name] for name in DTYPE.names})):
        error = run_one(lambda s, o: s.aggregate_batch("k", [("w", "sum")], name="Agg"), batch, workers)
        assert isinstance(error, KeyColumnError), error
        message = str(error)
        assert "operator 'Agg'" in message and "'w'" in message and "at time 0" in message and "'f'" in message


@pytest.mark.parametrize("window", [False, True])
@pytest.mark.parametrize(("workers", "senders"), [(1, (0, 0)), (2, (0, 0)), (2, (0, 1))])
def test_partials_of_one_time_that_do_not_combine_name_the_time(window: bool, workers: int, senders: Any) -> None:
    """Two batches whose key columns have no common type (``int64`` -1 and ``uint64`` 2**64 - 1, which route
    alike) fail where their partials meet: on the sender, or on the key's owner. Both said "outside any batch"."""
    from scopes import Tumbling

    batches = [pa.table({"k": pa.array([-1], pa.int64()), "v": [1]})]
    batches.append(pa.table({"k": pa.array([2**64 - 1], pa.uint64()), "v": [1]}))

    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()
            if window:
                out = stream.window_batch(Tumbling(8), keys="k").aggregate([("v", "sum")], name="Agg").down
            else:
                out = stream.aggregate_batch("k", [("v", "sum")], name="Agg")
            return handle, out.probe()

        handle, probe = worker.dataflow(build)
        handle.advance_to(3)
        for sender, batch in zip(senders, batches, strict=True):
            if sender == worker.index:
                handle.send_batch(batch)
        handle.close()
        worker.step_while(lambda: not probe.done())

    with pytest.raises(WorkerFailed) as failed:
        execute(main, workers=workers, stall_timeout=STALL)
    message = str(failed.value)
    assert "'Agg" in message and "do not have one type" in message and "time 3" in message, message
    assert "outside any batch" not in message, message


def test_a_missing_join_key_and_a_batch_without_columns_are_named() -> None:
    error = run_one(lambda s, o: s.join_batch(o, "kk", name="Join"), np.zeros(3, DTYPE), 2)
    assert isinstance(error, KeyColumnError) and "'kk'" in str(error) and "operator 'Join'" in str(error)
    error = run_one(lambda s, o: s.aggregate_batch("k", [("v", "sum")], name="Agg"), np.arange(3), 1)
    assert isinstance(error, BatchError) and "operator 'Agg'" in str(error) and "named columns" in str(error)


def test_join_keys_of_types_that_do_not_convert_are_refused_with_both_columns_named() -> None:
    from scopes.columnar_ops import _Join

    join = _Join("operator 'Join'", ("k",), ("k",), "inner", ("", "_right"))
    with pytest.raises(BatchError, match="'k' is int64 but the right key column 'k' is string"):
        join.join([pa.table({"k": [1]})], [pa.table({"k": ["x"]})])


# ---------------------------------------------------------------------------------------------- the columnar wordcount


def test_the_columnar_wordcount_counts_in_c_with_or_without_pyarrow(monkeypatch: pytest.MonkeyPatch) -> None:
    from helpers.example_loader import load_example

    columnar = load_example("wordcount_columnar")
    records = load_example("wordcount")
    lines = np.array(["", "  a  b ", "a\tb c", "é a"], dtype=str)
    expected = sorted(" ".join(lines.tolist()).split())
    assert sorted(columnar.split_lines_arrow(lines).column("word").to_pylist()) == expected
    assert sorted(columnar.split_lines_numpy(lines)["word"].tolist()) == expected
    text = records.random_text(3, 40, 11)
    assert columnar.run(text, workers=2) == records.reference(text)
    monkeypatch.setattr(columnar, "ARROW", False)
    assert isinstance(columnar.split_lines(lines), np.ndarray)
    assert columnar.run(text, workers=2) == records.reference(text)


def test_the_columnar_wordcount_cuts_ascii_lines_as_str_split_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """The NumPy cut of ASCII lines: every whitespace str.split knows, full-width lines, chunks; others refused."""
    pytest.importorskip("pyarrow")
    from helpers.example_loader import load_example

    columnar = load_example("wordcount_columnar")
    lines = ["", " a", "b ", "  ", "ab\tc", "x\x1cy\x1fz\x0b\x0c\r\nq", "full width", "full width"]
    expected = " ".join(lines).split()
    assert columnar.split_ascii(np.array(lines, dtype=str)).to_pylist() == expected
    monkeypatch.setattr(columnar, "CHUNK_BYTES", 12)  # a chunk of one line: words never run over a cut
    assert columnar.split_lines_arrow(np.array(lines * 3, dtype=str)).column("word").to_pylist() == expected * 3
    for other in (["é a"], ["a\x01b"], ["a\x00b c"], ["a\x1bb"]):  # not ASCII, or a control that is not whitespace
        assert columnar.split_ascii(np.array(other, dtype=str)) is None
    assert columnar.split_lines_arrow(np.array(["é a", "b"], dtype=str)).column("word").to_pylist() == ["é", "a", "b"]


def test_the_ascii_cut_reuses_its_buffers_per_thread_without_mixing_batches() -> None:
    """Batches of other sizes after one another, and on two threads at once, each get exactly their own words."""
    pytest.importorskip("pyarrow")
    from concurrent.futures import ThreadPoolExecutor

    from helpers.example_loader import load_example

    columnar = load_example("wordcount_columnar")
    batches = [[f"w{n} x{n % 7}  y" * (n % 5) for n in range(rows)] for rows in (300, 20, 1, 300, 77)]

    def cut(lines: list[str]) -> list[str]:
        return columnar.split_ascii(np.array(lines, dtype=str)).to_pylist()

    for lines in batches:
        assert cut(lines) == " ".join(lines).split()
    assert columnar.scratch("text", 10, np.uint8).base is columnar.scratch("text", 5, np.uint8).base
    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(cut, batches * 20)) == [" ".join(lines).split() for lines in batches * 20]


def test_a_program_using_pyarrow_imports_arrows_query_engine_while_it_builds() -> None:
    """group_by and join import pyarrow.acero on first use: done at build time, not in the first time with data."""
    import subprocess
    import sys

    program = (
        "import sys, pyarrow\n"
        "from runtime import execute\n"
        "def main(worker):\n"
        "    def build(scope):\n"
        "        handle, stream = scope.new_input()\n"
        "        stream.aggregate_batch('k', [('v', 'sum')]).probe()\n"
        "        return handle\n"
        "    worker.dataflow(build).close()\n"
        "execute(main)\n"
        "print('pyarrow.acero' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "True"


def test_numpy_int64_and_uint64_keys_of_one_time_combine_as_int64_or_are_refused_as_arrow_does() -> None:
    """NumPy's common type of ``int64`` and ``uint64`` is ``float64``: two batches of one time keyed 5 (``int64``)
    and 5 (``uint64``) gave the key 5.0, and ``2**63 - 1`` and ``2**63`` were summed as the one key 9.2e18
    (found by a random agreement campaign). They now combine as ``int64``, as Arrow batches do, and a ``uint64``
    key past ``2**63 - 1`` is refused, as Arrow refuses it."""

    def keyed(keys: list[int], dtype: str, value: int) -> Any:
        array = np.zeros(len(keys), [("k", dtype), ("v", np.int64)])
        array["k"], array["v"] = keys, value
        return array

    def aggregate(batches: list[Any]) -> list[Any]:
        def main(worker: Any) -> list[Any]:
            seen: list[Any] = []

            def build(scope: ScopeBuilder) -> Any:
                handle, stream = scope.new_input()
                sums = stream.aggregate_batch("k", [("v", "sum")], name="Agg")
                sums.inspect_batch(lambda time, batch: seen.append(batch))
                return handle, sums.probe()

            handle, probe = worker.dataflow(build)
            for batch in batches:
                handle.send_batch(batch)
            handle.close()
            worker.step_while(lambda: not probe.done())
            return seen

        return execute(main, workers=1, stall_timeout=STALL)[0]

    [sums] = aggregate([keyed([5], "i8", 1), keyed([5], "u8", 10)])
    assert sums["k"].dtype == np.int64 and sums.tolist() == [(5, 11)]
    with pytest.raises(WorkerFailed, match="'Agg'.*do not have one type"):
        aggregate([keyed([2**63 - 1], "i8", 1), keyed([2**63], "u8", 10)])


@pytest.mark.parametrize("workers", [1, 2])
def test_numpy_float_keys_come_out_as_arrow_s_do_zero_for_minus_zero_and_one_nan(workers: int) -> None:
    """A NumPy batch's group took the key of its first row, so rows keyed ``-0.0`` (or ``-nan``) came out keyed
    ``-0.0`` where an Arrow batch of the same rows gives ``0.0`` (docs/columnar.md: ``-0.0`` is the key ``0.0``),
    and the answer changed with the forms the workers' shares came in (found by a random agreement campaign)."""
    from runtime.testing import run_dataflow

    array = np.array([(-0.0, 1), (-0.0, 2), (-float("nan"), 4)], dtype=[("k", "f8"), ("v", "i8")])
    for batch in (array, pa.table({"k": array["k"], "v": array["v"]})):
        run = run_dataflow(lambda scope, rows: rows.aggregate_batch("k", [("v", "sum")]), [batch], workers=workers)
        rows = sorted(run.output()[0], key=lambda row: row["v_sum"] if isinstance(row, dict) else row[1])
        keys = [row["k"] if isinstance(row, dict) else row[0] for row in rows]
        assert [np.signbit(key) for key in keys] == [False, False] and keys[0] == 0.0 and np.isnan(keys[1])


REPEATED_COLUMNS = {
    "the key twice": (["k", "k", "v"], "'k'"),
    "a value twice": (["k", "v", "v"], "'v'"),
    "another column twice": (["k", "v", "x", "x"], "'x'"),
}
"""Arrow tables whose column names repeat (Arrow allows it), and the name the refusal must give."""

COLUMNAR_OPERATORS = {
    "aggregate_batch": lambda scope, rows: rows.aggregate_batch("k", [("v", "sum")]),
    "join_batch": lambda scope, rows: rows.join_batch(rows, "k"),
}


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("operator", sorted(COLUMNAR_OPERATORS))
@pytest.mark.parametrize("shape", sorted(REPEATED_COLUMNS))
def test_arrow_batches_with_a_column_name_twice_are_refused_naming_it(shape: str, operator: str, workers: int) -> None:
    """Columnar operators find columns by name; with a name twice pyarrow raised a bare KeyError ("exists 2 times",
    or "does not exist" at one worker), or, for a column the operator does not use, failed deep inside a join."""
    from runtime.testing import run_dataflow

    names, named = REPEATED_COLUMNS[shape]
    table = pa.Table.from_arrays([pa.array([1, 2, 1]) for _ in names], names=names)
    with pytest.raises(WorkerFailed) as failure:
        run_dataflow(COLUMNAR_OPERATORS[operator], [table], workers=workers)
    refusal = _cause_of_type(failure.value, BatchError)
    assert refusal is not None, failure.value
    message = str(refusal)
    assert f"more than one column named {named}" in message and "rename" in message and "at time 0" in message


def _cause_of_type(error: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first error of type ``kind`` in ``error``'s chain of causes (``error`` included)."""
    found: BaseException | None = error
    while found is not None and not isinstance(found, kind):
        found = found.__cause__
    return found


@pytest.mark.parametrize("workers", [1, 2])
def test_exchange_batch_refuses_a_repeated_key_column_and_passes_other_repeated_names(workers: int) -> None:
    """exchange_batch reads only its key column: a key named twice is refused the same way at every worker count (it
    was a bare KeyError, saying "does not exist" at one worker); a batch with another name twice is routed whole."""
    from runtime.testing import run_dataflow

    route = lambda scope, rows: rows.exchange_batch("k")  # noqa: E731
    twice = pa.Table.from_arrays([pa.array([1, 2]), pa.array([1, 2]), pa.array([3, 4])], names=["k", "k", "v"])
    with pytest.raises(WorkerFailed) as failure:
        run_dataflow(route, [twice], workers=workers)
    assert "more than one column named 'k'" in str(_cause_of_type(failure.value, BatchError))
    other = pa.Table.from_arrays([pa.array([1, 2]), pa.array([3, 4]), pa.array([5, 6])], names=["k", "v", "v"])
    as_rows = lambda scope, rows: route(scope, rows).map_batch(  # noqa: E731 - every column, the names aside
        lambda batch: list(zip(*(column.to_pylist() for column in batch.columns), strict=True))
    )
    assert sorted(run_dataflow(as_rows, [other], workers=workers).output()[0]) == [(1, 3, 5), (2, 4, 6)]
