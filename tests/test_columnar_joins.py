"""Columnar joins by key columns (KeyedBatches.join, join_latest) against pandas: 1 worker, 2 threads, 2 processes."""

from __future__ import annotations

import re
import threading
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")

from helpers.epoch_feed import feed_epochs  # noqa: E402

from runtime import execute  # noqa: E402
from runtime.checkpoints import CheckpointStore  # noqa: E402
from runtime.errors import WorkerFailed  # noqa: E402
from runtime.testing import assert_agree, assert_outputs, run_dataflow  # noqa: E402
from scopes import BuildError, ConflictingUpdates, ScopeBoundaryError  # noqa: E402

CONFIGURATIONS = ((1, 1), (2, 1), (1, 2))
"""1 worker, 2 threads, 2 processes."""

USERS = ("ann", "bob", "cy", "dee", "eve")
CLICKS = [[(USERS[(epoch * 3 + i) % 5], f"page{(epoch + i) % 4}") for i in range(4)] for epoch in range(10)]
ORDERS = [[(USERS[(epoch + 2 * i) % 5], epoch * 10 + i) for i in range(epoch % 3)] for epoch in range(10)]
# at most one update per user and epoch; every fourth one deletes the user's plan
PLANS = [
    [(USERS[(epoch * 2 + i) % 5], f"plan{epoch}", (epoch + i) % 4 == 3) for i in range(2 if epoch % 2 else 3)]
    for epoch in range(10)
]
PLAN_SCHEMA = pa.schema([("user", pa.string()), ("plan", pa.string()), ("gone", pa.bool_())])


def clicks_table(rows: Any) -> Any:
    users, pages = zip(*rows, strict=True) if rows else ((), ())
    return pa.table({"user": pa.array(users, pa.string()), "page": pa.array(pages, pa.string())})


def orders_table(rows: Any) -> Any:
    users, amounts = zip(*rows, strict=True) if rows else ((), ())
    return pa.table({"customer": pa.array(users, pa.string()), "amount": pa.array(amounts, pa.int64())})


def plans_table(rows: Any) -> Any:
    users, plans, gone = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table(
        [pa.array(users, pa.string()), pa.array(plans, pa.string()), pa.array(gone, pa.bool_())], schema=PLAN_SCHEMA
    )


# ---------------------------------------------------------------------- the dataflows (top level: 2 processes)


def join_per_epoch(scope: Any, streams: dict[str, Any]) -> Any:
    clicks = streams["clicks"].map_batch(clicks_table).key_by_columns("user")
    orders = streams["orders"].map_batch(orders_table).key_by_columns("customer")
    return clicks.join(orders)


def join_plans(scope: Any, streams: dict[str, Any]) -> dict[str, Any]:
    clicks = streams["clicks"].map_batch(clicks_table).key_by_columns("user")
    plans = streams["plans"].map_batch(plans_table).key_by_columns("user")
    inner = clicks.join_latest(plans, deletes="gone", name="Inner")
    left = clicks.join_latest(plans, how="left", deletes="gone", schema=PLAN_SCHEMA, name="Left")
    return {"inner": inner, "left": left}


# ---------------------------------------------------------------------- pandas


def test_a_join_per_epoch_matches_rows_of_one_key_and_epoch_as_pandas_merge_does() -> None:
    clicks = pd.DataFrame([(e, *r) for e, rs in enumerate(CLICKS) for r in rs], columns=["epoch", "user", "page"])
    orders = pd.DataFrame([(e, *r) for e, rs in enumerate(ORDERS) for r in rs], columns=["epoch", "customer", "amount"])
    merged = clicks.merge(orders, left_on=["epoch", "user"], right_on=["epoch", "customer"]).drop(columns="customer")
    expected: dict[int, list[Any]] = defaultdict(list)
    for record in merged.to_dict("records"):
        expected[record.pop("epoch")].append(record)
    assert len(expected) > 3
    for run in assert_agree(join_per_epoch, {"clicks": CLICKS, "orders": ORDERS}, CONFIGURATIONS):
        assert_outputs(run, expected)


def plans_by_pandas() -> tuple[dict[int, list[Any]], dict[int, list[Any]]]:
    """(inner, left) join of each click with its user's latest plan as of the click's epoch."""
    clicks = pd.DataFrame([(e, *r) for e, rs in enumerate(CLICKS) for r in rs], columns=["epoch", "user", "page"])
    plans = pd.DataFrame([(e, *r) for e, rs in enumerate(PLANS) for r in rs], columns=["epoch", "user", "plan", "gone"])
    joined = pd.merge_asof(clicks.sort_values("epoch"), plans.sort_values("epoch"), on="epoch", by="user")
    inner: dict[int, list[Any]] = defaultdict(list)
    left: dict[int, list[Any]] = defaultdict(list)
    for record in joined.to_dict("records"):
        plan = record["plan"] if pd.notna(record["gone"]) and not record["gone"] else None  # no update yet, or deleted
        row = {"user": record["user"], "page": record["page"], "plan": plan}
        left[record["epoch"]].append(row)
        if row["plan"] is not None:
            inner[record["epoch"]].append(row)
    return inner, left


def test_join_latest_sees_the_table_as_of_each_rows_epoch_as_pandas_merge_asof_does() -> None:
    inner, left = plans_by_pandas()
    assert sum(map(len, inner.values())) < sum(map(len, left.values()))  # some clicks have no plan (deleted or none)
    for run in assert_agree(join_plans, {"clicks": CLICKS, "plans": PLANS}, CONFIGURATIONS):
        assert_outputs(run, inner, "inner")
        assert_outputs(run, left, "left")


# ---------------------------------------------------------------------- misuse


def refused(build: Any, error: type[Exception], message: str) -> None:
    """``build`` fails when the dataflow is built, with ``error`` saying ``message``, at 1 and 2 workers."""
    for workers in (1, 2):
        with pytest.raises(WorkerFailed) as caught:
            run_dataflow(build, {"clicks": [[("ann", "home")]], "plans": [[]]}, workers=workers)
        assert isinstance(caught.value.__cause__, error), caught.value
        assert re.search(message, str(caught.value.__cause__)), caught.value


def across_scopes(method: str) -> Any:
    def build(scope: Any, streams: dict[str, Any]) -> Any:
        def body(inner: Any) -> Any:
            inside = streams["plans"].enter(inner).key_by_columns("user")
            return getattr(streams["clicks"].key_by_columns("user"), method)(inside).leave()

        return scope.iterative(body)

    return build


@pytest.mark.parametrize("method", ["join", "join_latest"])
def test_a_columnar_join_across_scopes_is_refused(method: str) -> None:
    refused(across_scopes(method), ScopeBoundaryError, "joins streams of different scopes")


def test_join_batch_across_scopes_is_refused_as_a_scope_boundary() -> None:
    def build(scope: Any, streams: dict[str, Any]) -> Any:
        return scope.iterative(
            lambda inner: streams["clicks"].join_batch(streams["plans"].enter(inner), "user").leave()
        )

    refused(build, ScopeBoundaryError, "'JoinBatch' .*joins streams of different scopes")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda s, t: s.join_latest(t, how="left"), "how='left' needs the table's schema="),
        (lambda s, t: s.join_latest(t, how="outer"), "how='outer' is not one of inner, left"),
        (lambda s, t: s.join_latest(t, deletes="user"), "deletes= names the table's boolean column"),
        (lambda s, t: s.join_latest(t, how="left", schema=PLAN_SCHEMA, deletes="dead"), "schema has no column 'dead'"),
        (lambda s, t: s.join(t.stream), "joins columnar keyed streams, not Stream"),
    ],
)
def test_bad_join_arguments_are_refused_when_built(build: Any, message: str) -> None:
    def dataflow(scope: Any, streams: dict[str, Any]) -> Any:
        return build(streams["clicks"].key_by_columns("user"), streams["plans"].key_by_columns("user"))

    refused(dataflow, BuildError, message)


# ---------------------------------------------------------------------- checkpoints


def run_plans(path: Path | None, seen: list[Any], crash_after: int | None = None) -> int:
    """Run :func:`join_plans` on 2 workers, epoch by epoch, from the store's resume epoch."""
    lock = threading.Lock()

    def main(worker: Any) -> int:
        store = CheckpointStore(path) if path is not None else None

        def build(scope: Any) -> Any:
            clicks_in, clicks = scope.new_input("Clicks")
            plans_in, plans = scope.new_input("Plans")
            outputs = join_plans(scope, {"clicks": clicks, "plans": plans})
            both = outputs["inner"].map_batch(
                lambda t: [("inner", r["user"], r["page"], r["plan"]) for r in t.to_pylist()]
            )
            both = both.concat(outputs["left"].map_batch(lambda t: [("left", *r.values()) for r in t.to_pylist()]))
            both.inspect_batch(lambda time, batch: _keep(lock, seen, time, batch))
            return clicks_in, plans_in, both.probe()

        clicks_in, plans_in, probe = worker.dataflow(build, checkpoint=store)
        start = store.resume_epoch if store is not None else 0
        shares = slice(worker.index, None, worker.peers)
        batches = lambda epoch: (CLICKS[epoch][shares], PLANS[epoch][shares])  # noqa: E731
        feed_epochs(worker, (clicks_in, plans_in), batches, probe, range(start, len(CLICKS)), crash_after)
        return start

    return execute(main, workers=2)[0]


def _keep(lock: threading.Lock, seen: list[Any], time: int, batch: list[Any]) -> None:
    with lock:
        seen.extend((time, record) for record in batch)


def test_a_columnar_join_latest_resumes_with_the_table_as_of_the_checkpoint(tmp_path: Path) -> None:
    expected: list[Any] = []
    run_plans(None, expected)
    first: list[Any] = []
    with pytest.raises(WorkerFailed, match="crash after epoch 5"):
        run_plans(tmp_path, first, 5)
    second: list[Any] = []
    resumed = run_plans(tmp_path, second)
    assert 0 < resumed <= 6
    assert Counter([r for r in first if r[0] < resumed] + second) == Counter(expected)


def test_join_latest_refuses_two_different_rows_for_one_key_at_one_time_at_every_worker_count() -> None:
    plans = [[("ann", "gold", False), ("ann", "free", False), ("bob", "free", False), ("bob", "free", False)]]
    for workers in (1, 2):
        with pytest.raises(WorkerFailed) as caught:
            run_dataflow(join_plans, {"clicks": [[("ann", "home")]], "plans": plans}, workers=workers)
        assert isinstance(caught.value.__cause__.__cause__, ConflictingUpdates), caught.value
        assert "different rows for key {'user': 'ann'} at time 0" in str(caught.value)


def test_join_latest_accepts_the_same_row_twice_for_one_key_and_time() -> None:
    plans = [[("ann", "gold", False), ("ann", "gold", False)]]
    run = run_dataflow(join_plans, {"clicks": [[("ann", "home")]], "plans": plans}, workers=2)
    assert [row["plan"] for row in run.outputs["inner"].get(0, [])] == ["gold"]


def nan_updates(scope: Any, streams: Any) -> Any:
    """Rows joined with a table of a float and a list of floats (Arrow cannot group by lists), and of a float."""
    joins = {}
    for name, schema in (
        ("lists", pa.schema([("k", pa.string()), ("w", pa.float64()), ("ws", pa.list_(pa.float64()))])),
        ("floats", pa.schema([("k", pa.string()), ("w", pa.float64())])),
    ):
        rows = streams["rows"].map_batch(lambda keys: pa.table({"k": keys})).key_by_columns("k")
        table = streams["table"].map_batch(
            lambda rows, schema=schema: pa.Table.from_pylist(rows, schema=schema).select(schema.names)
        )
        joins[name] = rows.join_latest(table.key_by_columns("k"), schema=schema, name=f"Join {name}")
    return joins


@pytest.mark.parametrize("workers", [1, 2])
def test_join_latest_takes_two_rows_differing_only_in_a_nans_bits_as_one_row_as_the_record_wise_form(
    workers: int,
) -> None:
    """NaN and -NaN (a value, or in a list) were two rows, a conflict, where the record-wise join_latest takes two
    NaN values as one; ``0.0`` and ``-0.0`` are two rows in both."""
    nan = float("nan")
    same = [{"k": "a", "w": nan, "ws": [nan]}, {"k": "a", "w": -nan, "ws": [-nan]}]
    run = run_dataflow(nan_updates, {"rows": [[], ["a"]], "table": [same, []]}, workers=workers)
    [row] = run.output("lists")[1]
    assert row["k"] == "a" and row["w"] != row["w"] and row["ws"][0] != row["ws"][0]
    [row] = run.output("floats")[1]
    assert row["k"] == "a" and row["w"] != row["w"]
    for w, ws in ((0.0, -0.0), (-0.0, 0.0)):
        zeros = [{"k": "a", "w": 1.0, "ws": [w]}, {"k": "a", "w": 1.0, "ws": [ws]}]
        with pytest.raises(WorkerFailed, match="different rows for key"):
            run_dataflow(nan_updates, {"rows": [[], ["a"]], "table": [zeros, []]}, workers=workers)
    with pytest.raises(WorkerFailed, match="different rows for key"):
        zeros = [{"k": "a", "w": 0.0, "ws": None}, {"k": "a", "w": -0.0, "ws": None}]
        run_dataflow(nan_updates, {"rows": [[], ["a"]], "table": [zeros, []]}, workers=workers)


def test_a_join_that_fails_on_a_complete_time_names_that_time() -> None:
    """A failure while a complete time's rows are joined said "outside any batch": the join runs on its frontier,
    not on a message.  It names the time it was joining."""

    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            left_in, left = scope.new_input("Left")
            right_in, right = scope.new_input("Right")
            return left_in, right_in, left.join_batch(right, "k", name="Pairs").probe()

        left_in, right_in, _ = worker.dataflow(build)
        left_in.advance_to(3)
        right_in.advance_to(3)
        left_in.send_batch(pa.record_batch({"k": pa.array([1, 2]), "x": pa.array([1, 2])}))
        right_in.send_batch(pa.record_batch({"k": pa.array(["1", "2"]), "y": pa.array([1, 2])}))

    with pytest.raises(WorkerFailed, match="'Pairs'.* while joining the rows of the complete time 3: .*one type"):
        execute(main)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_key_column_missing_from_a_join_by_two_columns_is_named_with_the_time(workers: int) -> None:
    """Routing by two key columns checked the batch without its time: the error said "at time None"."""

    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            left_in, left = scope.new_input("Left")
            right_in, right = scope.new_input("Right")
            return left_in, right_in, left.join_batch(right, ["k", "j"], name="Pairs").probe()

        left_in, _, _ = worker.dataflow(build)
        left_in.advance_to(5)
        left_in.send_batch(pa.record_batch({"k": pa.array([1, 2]), "x": pa.array([1, 2])}))

    with pytest.raises(WorkerFailed, match=r"'Pairs'.*: no column 'j' in the RecordBatch at time 5; its columns are"):
        execute(main, workers=workers)
