"""Columnar windows and joins (scopes.windows_columnar, scopes.joins_columnar) against pandas.

Each dataflow runs on 1 worker, 2 threads and 2 processes and must give what
pandas computes over the same rows.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pc = pytest.importorskip("pyarrow.compute")
pd = pytest.importorskip("pandas")

from runtime.errors import WorkerFailed  # noqa: E402
from runtime.testing import assert_agree, assert_outputs, run_dataflow  # noqa: E402
from scopes import BuildError, Session, Sliding, Tumbling  # noqa: E402

CONFIGURATIONS = ((1, 1), (2, 1), (1, 2))
"""1 worker, 2 threads, 2 processes."""

USERS = ("ann", "bob", "cy", "dee")
# (user, event time, amount) per epoch; event times run up to 3 behind their epoch, so some rows are late
ROWS = [
    [(USERS[(epoch * 7 + i) % 4], max(0, epoch - (i * 5 + epoch) % 4), (epoch * 13 + i * 7) % 11) for i in range(6)]
    for epoch in range(12)
]
LATENESS = 1


def as_table(rows: Any) -> Any:
    """A batch of ``(user, event, amount)`` rows as an Arrow table."""
    users, events, amounts = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table(
        {"user": pa.array(users, pa.string()), "event": pa.array(events, pa.int64()), "amount": amounts},
        schema=pa.schema([("user", pa.string()), ("event", pa.int64()), ("amount", pa.int64())]),
    )


def frame() -> Any:
    """Every row with its epoch, as pandas sees it."""
    return pd.DataFrame(
        [(epoch, *row) for epoch, rows in enumerate(ROWS) for row in rows], columns=["epoch", "user", "event", "amount"]
    )


def rounded(table: Any) -> list[Any]:
    """The rows of a result table, means rounded (Arrow and pandas may differ in the last bit)."""
    return [{k: round(v, 9) if isinstance(v, float) else v for k, v in row.items()} for row in table.to_pylist()]


# ---------------------------------------------------------------------- the dataflows (top level: 2 processes)


def sliding_sums(scope: Any, rows: Any) -> dict[str, Any]:
    windowed = (
        rows.map_batch(as_table)
        .key_by_columns("user")
        .window(Sliding(4, 2), event_time="event", lateness=LATENESS)
        .aggregate([("amount", "sum"), ("amount", "max"), ("amount", "mean"), ("event", "count", "rows")])
    )
    return {"down": windowed.down.map_batch(rounded), "late": windowed.late}


def tumbling_counts(scope: Any, rows: Any) -> dict[str, Any]:
    windowed = rows.map_batch(as_table).window_batch(Tumbling(3), keys="user", event_time="event", lateness=LATENESS)
    result = windowed.count()
    return {"down": result.down, "late": result.late}


def epoch_sessions(scope: Any, rows: Any) -> Any:
    return rows.map_batch(as_table).window_batch(Session(2), keys=["user"]).aggregate([("amount", "sum")]).down


def late_sessions(scope: Any, rows: Any) -> dict[str, Any]:
    windowed = (
        rows.map_batch(as_table)
        .window_batch(Session(2), keys="user", event_time="event", lateness=LATENESS)
        .aggregate([("amount", "sum"), ("amount", "min")])
    )
    return {"down": windowed.down, "late": windowed.late}


def late_sessions_record_wise(scope: Any, rows: Any) -> dict[str, Any]:
    windowed = rows.key_by(lambda row: row[0]).window(Session(2), event_time=lambda row: row[1], lateness=LATENESS)
    folded = windowed.fold(
        (0, None), lambda acc, row: (acc[0] + row[2], row[2] if acc[1] is None else min(acc[1], row[2]))
    )
    down = folded.down.map(
        lambda r: {
            "user": r[0],
            "window_start": r[1][0],
            "window_end": r[1][1],
            "amount_sum": r[2][0],
            "amount_min": r[2][1],
        }
    )
    late = folded.late.map(lambda pair: {"user": pair[1][0], "event": pair[1][1], "amount": pair[1][2]})
    return {"down": down, "late": late}


# ---------------------------------------------------------------------- pandas


def windows_by_pandas(
    size: int, step: int, aggregations: dict[str, Any], keys: tuple[str, ...] = ("user",)
) -> tuple[dict[int, list[Any]], dict[int, list[Any]]]:
    """(results by close time, late rows by epoch) of sliding windows with event times and LATENESS."""
    rows = frame()
    if "odd" in keys:
        rows["odd"] = rows.amount % 2
    first = rows.event - rows.event % step
    first = first - ((first - rows.event + size - 1) // step) * step
    late = rows[rows.epoch > first + size - 1 + LATENESS]
    exploded = pd.concat(
        [rows.assign(window_start=first + k * step) for k in range(size // step + 1)], ignore_index=True
    )
    exploded = exploded[(exploded.window_start <= exploded.event) & (exploded.event < exploded.window_start + size)]
    exploded = exploded[exploded.epoch <= exploded.window_start + size - 1 + LATENESS]
    grouped = exploded.groupby([*keys, "window_start"]).agg(**aggregations).reset_index()
    grouped["window_end"] = grouped.window_start + size
    expected: dict[int, list[Any]] = defaultdict(list)
    for record in grouped.to_dict("records"):
        close = record["window_start"] + size - 1 + LATENESS
        expected[close].append({k: round(v, 9) if isinstance(v, float) else v for k, v in record.items()})
    lates: dict[int, list[Any]] = defaultdict(list)
    for record in late.to_dict("records"):
        lates[record.pop("epoch")].append(record)
    return expected, lates


def test_sliding_windows_aggregate_as_pandas_does_with_late_rows_apart() -> None:
    expected, late = windows_by_pandas(
        4,
        2,
        {
            "amount_sum": ("amount", "sum"),
            "amount_max": ("amount", "max"),
            "amount_mean": ("amount", "mean"),
            "rows": ("event", "count"),
        },
    )
    assert sum(map(len, late.values())) > 0  # the data has late rows, and rows on time for some windows only
    for run in assert_agree(sliding_sums, ROWS, CONFIGURATIONS):
        assert_outputs(run, expected, "down")
        assert_outputs(run, late, "late")


def test_tumbling_window_counts_as_pandas_does() -> None:
    expected, late = windows_by_pandas(3, 3, {"count": ("amount", "size")})
    for run in assert_agree(tumbling_counts, ROWS, CONFIGURATIONS):
        assert_outputs(run, expected, "down")
        assert_outputs(run, late, "late")


def test_sessions_by_epoch_merge_rows_closer_than_the_gap_as_pandas_does() -> None:
    epochs = [[row for row in rows if (epoch + len(row[0])) % 3] for epoch, rows in enumerate(ROWS)]
    rows = pd.DataFrame(
        [(epoch, user, amount) for epoch, batch in enumerate(epochs) for user, _, amount in batch],
        columns=["epoch", "user", "amount"],
    ).sort_values(["user", "epoch"])
    rows["session"] = (rows.groupby("user").epoch.diff().fillna(99) >= 2).cumsum()
    sessions = rows.groupby(["user", "session"]).agg(
        window_start=("epoch", "min"), last=("epoch", "max"), amount_sum=("amount", "sum")
    )
    expected: dict[int, list[Any]] = defaultdict(list)
    for record in sessions.reset_index().to_dict("records"):
        expected[record["last"] + 1].append(
            {
                "user": record["user"],
                "window_start": record["window_start"],
                "window_end": record["last"] + 1,
                "amount_sum": record["amount_sum"],
            }
        )
    assert any(r["window_end"] - r["window_start"] > 1 for rs in expected.values() for r in rs)
    for run in assert_agree(epoch_sessions, epochs, CONFIGURATIONS):
        assert_outputs(run, expected)


def test_sessions_with_lateness_match_the_record_wise_sessions() -> None:
    reference = run_dataflow(late_sessions_record_wise, ROWS)
    assert reference.output("late")
    for run in assert_agree(late_sessions, ROWS, CONFIGURATIONS):
        assert_outputs(run, reference.output("down"), "down")
        assert_outputs(run, reference.output("late"), "late")


def test_a_row_inside_or_between_open_sessions_merges_them_as_the_record_wise_sessions_do() -> None:
    epochs = [
        [("a", 0, 1), ("a", 4, 2), ("a", 1, 3), ("a", 2, 4), ("a", 3, 5), ("b", 9, 1)],
        [("a", 8, 6), ("b", 5, 7)],
        [("a", 3, 8), ("a", 5, 9), ("a", 6, 2), ("a", 7, 4), ("b", 7, 1)],
        [],
        [("a", 2, 10)],
    ]
    reference = run_dataflow(late_sessions_record_wise, epochs)
    assert any(r["window_end"] - r["window_start"] >= 9 for r in reference.records("down"))  # 0..8 merged
    for run in assert_agree(late_sessions, epochs, CONFIGURATIONS):
        assert_outputs(run, reference.output("down"), "down")
        assert_outputs(run, reference.output("late"), "late")


# ---------------------------------------------------------------------- misuse


def refused(build: Any, error: type[Exception], message: str) -> None:
    """``build`` fails when the dataflow is built, with ``error`` saying ``message``, at 1 and 2 workers."""
    for workers in (1, 2):
        with pytest.raises(WorkerFailed) as caught:
            run_dataflow(build, [[("ann", 0, 1)]], workers=workers)
        assert isinstance(caught.value.__cause__, error), caught.value
        assert re.search(message, str(caught.value.__cause__)), caught.value


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda scope, s: s.window_batch(Tumbling(2)).count(), "'WindowBatch' .*has no key columns"),
        (lambda scope, s: s.window_batch(Tumbling(2), keys=[]).count(), "no key column given"),
        (lambda scope, s: s.key_by_columns(()).window(Tumbling(2)).count(), "no key column given"),
        (lambda scope, s: s.window_batch(Tumbling(2), keys="user", lateness=2).count(), "without event_time="),
        (lambda scope, s: s.window_batch(Tumbling(2), keys="user", event_time=len).count(), "names the column"),
        (lambda scope, s: s.window_batch(Tumbling(2), keys="user").aggregate([("a", "median")]), "unknown aggregation"),
        (
            lambda scope, s: s.window_batch(Tumbling(2), keys="user").count("window_end"),
            "'window_end' names the window",
        ),
    ],
)
def test_a_columnar_window_without_keys_or_with_bad_arguments_is_refused_when_built(build: Any, message: str) -> None:
    refused(build, BuildError, message)


def test_a_columnar_window_inside_a_loop_is_refused() -> None:
    def build(scope: Any, s: Any) -> Any:
        return scope.iterative(lambda inner: s.enter(inner).window_batch(Tumbling(2), keys="user").count().down.leave())

    refused(build, BuildError, "windows need integer timestamps")


def test_a_missing_key_or_event_column_names_the_operator_the_column_and_the_time() -> None:
    def build(scope: Any, s: Any) -> Any:
        return s.map_batch(as_table).window_batch(Tumbling(2), keys="name").count(name="Clicks").down

    with pytest.raises(WorkerFailed, match=r"'Clicks'.*no column 'name'.*at time 0.*\['user', 'event', 'amount'\]"):
        run_dataflow(build, [[("ann", 0, 1)]])

    def floats(scope: Any, s: Any) -> Any:
        tables = s.map_batch(lambda rows: as_table(rows).set_column(1, "event", pa.array([0.5] * len(rows))))
        return tables.window_batch(Tumbling(2), keys="user", event_time="event").count().down

    with pytest.raises(WorkerFailed, match="event-time column 'event' at time 0 must hold integers"):
        run_dataflow(floats, [[("ann", 0, 1)]])


def test_late_rows_are_counted_in_the_metrics_as_the_windows_port_1() -> None:
    pytest.importorskip("prometheus_client")
    from helpers import eventually
    from test_metrics import scrape

    from runtime import execute
    from runtime.metrics import serve_metrics

    server = serve_metrics("127.0.0.1:0")
    try:

        def main(worker: Any) -> None:
            def build(scope: Any) -> Any:
                handle, rows = scope.new_input("Rows")
                windowed = rows.map_batch(as_table).window_batch(Tumbling(2), "user", event_time="event", lateness=1)
                counted = windowed.count(name="Sessions")
                return handle, counted.down.concat(counted.late).probe()

            handle, probe = worker.dataflow(build)
            for epoch, rows in enumerate([[("k", 0, 1)], [("k", 3, 1)], [("k", 1, 1)], [("k", 1, 1), ("k", 0, 1)]]):
                if worker.index == 0:
                    handle.send_batch(rows)
                handle.advance_to(epoch + 1)
            handle.close()
            worker.step_while(lambda: not probe.done())

        execute(main, workers=2)

        def late() -> float:
            samples = scrape(server.url).get("pytimely_operator_port_records_out_total", [])
            return sum(v for labels, v in samples if labels["operator"] == "Sessions" and labels["port"] == "1")

        eventually(lambda: late() == 2)  # the events reach the endpoint from a writer thread
    finally:
        server.close()


# ---------------------------------------------------------------------- checkpoints


class Crash(Exception):
    """The simulated crash of a test run."""


def windows_to_checkpoint(scope: Any, rows: Any) -> Any:
    tables = rows.map_batch(as_table)
    sliding = sliding_sums(scope, rows)
    sessions = tables.window_batch(Session(2), keys="user", event_time="event", lateness=LATENESS)
    summed = sessions.aggregate([("amount", "sum")], name="Sessions")
    out = sliding["down"].map(lambda r: ("sliding", tuple(sorted(r.items()))))
    return out.concat(summed.down.map_batch(lambda t: [("session", tuple(sorted(r.items()))) for r in t.to_pylist()]))


def run_checkpointed(path: Any, seen: list[Any], crash_after: int | None = None) -> int:
    """Run :func:`windows_to_checkpoint` on 2 workers from the store's resume epoch; crash after ``crash_after``."""
    import threading

    from runtime import execute
    from runtime.checkpoints import CheckpointStore

    lock = threading.Lock()

    def main(worker: Any) -> int:
        store = CheckpointStore(path) if path is not None else None

        def build(scope: Any) -> Any:
            handle, rows = scope.new_input("Rows")
            out = windows_to_checkpoint(scope, rows)
            out.inspect_batch(lambda time, batch: _keep(lock, seen, time, batch))
            return handle, out.probe()

        handle, probe = worker.dataflow(build, checkpoint=store)
        start = store.resume_epoch if store is not None else 0
        for epoch in range(start, len(ROWS)):
            handle.send_batch(ROWS[epoch][worker.index :: worker.peers])
            handle.advance_to(epoch + 1)
            worker.step_while(lambda epoch=epoch: probe.less_than(epoch + 1))
            if epoch == crash_after and worker.index == 0:
                raise Crash(f"crash after epoch {epoch}")
        handle.close()
        worker.step_while(lambda: not probe.done())
        return start

    return execute(main, workers=2)[0]


def _keep(lock: Any, seen: list[Any], time: int, batch: Any) -> None:
    with lock:
        seen.extend((time, record) for record in batch)


@pytest.mark.parametrize("crash_after", [2, 6])
def test_a_columnar_window_resumes_from_its_checkpoint_with_the_uninterrupted_answer(
    tmp_path: Any, crash_after: int
) -> None:
    from collections import Counter

    expected: list[Any] = []
    run_checkpointed(None, expected)
    assert any(record[0] == "session" for _, record in expected)
    first: list[Any] = []
    with pytest.raises(WorkerFailed, match="crash after epoch"):
        run_checkpointed(tmp_path, first, crash_after)
    assert list(tmp_path.glob("workers-2/worker-0/epoch-*.ckpt"))
    second: list[Any] = []
    resumed = run_checkpointed(tmp_path, second)
    assert 0 < resumed <= crash_after + 1
    assert Counter([r for r in first if r[0] < resumed] + second) == Counter(expected)


def _moved(key: str, state: Any) -> Any:
    buckets, sessions = state
    return [[[2, parts] for _, parts in buckets], sessions]


def _sessions_before(key: str, state: Any) -> Any:
    buckets, sessions = state
    if sessions is None:
        return state
    zeros = pa.array([0] * sessions.num_rows, pa.int64())
    return [buckets, sessions.set_column(1, sessions.field(1), zeros).set_column(2, sessions.field(2), zeros)]


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(_moved, id="close-moved"),
        pytest.param(lambda key, state: [[[close, [5]] for close, _ in state[0]], state[1]], id="not-a-table"),
        pytest.param(_sessions_before, id="sent-before"),
    ],
)
def test_columnar_windows_changed_under_a_right_checksum_are_refused_naming_the_file(
    tmp_path: Any, change: Any
) -> None:
    """Tables of partials moved to another close time (or one before the checkpoint's epoch) were resumed and sent
    at that time, silently; a part that is no table was refused without saying which state (by the check of the
    keys' owners), or on one worker failed the operator when its windows closed, naming no file. They are now
    checked when restored, and their closes against the checkpoint's epoch when settled."""
    from helpers.forged_checkpoints import rewrite_latest

    from runtime.errors import CheckpointCorrupt

    with pytest.raises(WorkerFailed, match="crash after epoch"):
        run_checkpointed(tmp_path, [], 2)
    latest = rewrite_latest(tmp_path, 2, change)
    assert latest == 3
    with pytest.raises(WorkerFailed) as caught:
        run_checkpointed(tmp_path, [])
    cause = caught.value.__cause__
    assert isinstance(cause, CheckpointCorrupt), repr(cause)
    assert f"epoch-{latest:020d}.ckpt" in str(cause) and "do not restore this dataflow's operators" in str(cause)
    assert re.search(r"\(the state at byte \d+ for .[^ ]+", str(cause)), cause


def test_a_columnar_window_resumes_on_2_processes(tmp_path: Any) -> None:
    from functools import partial

    from helpers.columnar_window_mains import checkpointed_main
    from helpers.resumed_runs import assert_resume_repeats_the_plain_run

    from runtime import execute

    def run(tag: str, crash_after: int) -> int:
        main = partial(checkpointed_main, root=str(tmp_path), tag=tag, epochs=ROWS, crash_after=crash_after)
        return execute(main, workers=1, processes=2)[0]

    assert_resume_repeats_the_plain_run(tmp_path, run, 4)


def as_array(rows: Any) -> Any:
    """A batch of ``(user, event, amount)`` rows as a NumPy structured array."""
    import numpy as np

    return np.array(rows, dtype=[("user", "U8"), ("event", "i8"), ("amount", "i4")])


def tumbling_counts_of_arrays(scope: Any, rows: Any) -> dict[str, Any]:
    windowed = rows.map_batch(as_array).window_batch(Tumbling(3), keys="user", event_time="event", lateness=LATENESS)
    result = windowed.count()
    return {"down": result.down, "late": result.late}


def test_structured_arrays_window_as_arrow_tables_do_and_late_rows_stay_arrays() -> None:
    expected, late = windows_by_pandas(3, 3, {"count": ("amount", "size")})
    late = {time: [(r["user"], r["event"], r["amount"]) for r in rows] for time, rows in late.items()}
    for run in assert_agree(tumbling_counts_of_arrays, ROWS, ((1, 1), (2, 1))):
        assert_outputs(run, expected, "down")
        assert_outputs(run, late, "late")


def test_sessions_with_lateness_give_one_answer_under_many_message_orders() -> None:
    from runtime.testing import check_interleavings

    check_interleavings(late_sessions, ROWS, seeds=range(8))


@pytest.mark.parametrize("spec", [Session(3), Tumbling(3)])
def test_batches_whose_column_types_differ_fail_naming_the_operator(spec: Any) -> None:
    """Types of no common type (integers, strings) fail; widths of one kind combine (tests/test_columnar_key_types)."""

    def mixed(rows: Any) -> Any:
        table = as_table(rows)
        return table.set_column(2, "amount", table.column("amount").cast(pa.string())) if rows[0][2] % 2 else table

    def build(scope: Any, s: Any) -> Any:
        return s.map_batch(mixed).window_batch(spec, keys="user").aggregate([("amount", "min")], name="Spend").down

    failed = r"'SpendClose'.* while applying the complete time \d .*do not have one type"
    with pytest.raises(WorkerFailed, match=failed):
        run_dataflow(build, [[("ann", 0, 1)], [("ann", 0, 2)], [("ann", 0, 2)]])


def with_odd(rows: Any) -> Any:
    table = as_table(rows)
    return table.append_column("odd", pc.bit_wise_and(table.column("amount"), 1))


def two_key_sums(scope: Any, rows: Any) -> dict[str, Any]:
    keyed = rows.map_batch(with_odd).key_by_columns(["user", "odd"])
    windowed = keyed.window(Tumbling(3), event_time="event", lateness=LATENESS).aggregate([("amount", "sum")])
    return {"down": windowed.down, "late": windowed.late}


def test_windows_keyed_by_two_columns_aggregate_as_pandas_does() -> None:
    expected, late = windows_by_pandas(3, 3, {"amount_sum": ("amount", "sum")}, keys=("user", "odd"))
    for run in assert_agree(two_key_sums, ROWS, CONFIGURATIONS):
        assert_outputs(run, expected, "down")
        assert_outputs(run, late, "late")


def test_a_key_sent_in_two_batches_of_one_time_by_one_worker_is_one_window_row() -> None:
    """The exchange joins the messages that one invocation sends to one worker, and the owner takes one message
    as combined partials: the partials of one time are combined before they leave, or the window came out twice."""
    from runtime import execute

    def main(worker: Any) -> list[Any]:
        seen: list[Any] = []

        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            out = stream.window_batch(Tumbling(2), keys="user").aggregate([("amount", "sum")]).down
            return handle, out.inspect_batch(lambda time, batch: seen.extend(batch.to_pylist())).probe()

        handle, probe = worker.dataflow(build)
        if worker.index == 0:  # both before the worker steps: one invocation of the splitting operator
            handle.send_batch(as_table([("ann", 0, 1), ("ann", 1, 2)]))
            handle.send_batch(as_table([("ann", 0, 4)]))
        handle.close()
        worker.step_while(lambda: not probe.done())
        return seen

    rows = [row for seen in execute(main, workers=2) for row in seen]
    assert rows == [{"user": "ann", "window_start": 0, "window_end": 2, "amount_sum": 7}]


INT64_MAX = 2**63 - 1


def far_events(rows: Any) -> Any:
    """Rows whose event column holds ``amount`` itself, as ``uint64`` when it is past ``int64``."""
    users, _, amounts = zip(*rows, strict=True)
    kind = pa.uint64() if max(amounts) > INT64_MAX else pa.int64()
    return pa.table({"user": list(users), "event": pa.array(amounts, kind)})


def far_sessions(scope: Any, rows: Any) -> dict[str, Any]:
    windowed = rows.map_batch(far_events).window_batch(Session(3), keys="user", event_time="event").count("n", "Far")
    return {"down": windowed.down, "late": windowed.late}


def far_tumbling(scope: Any, rows: Any) -> dict[str, Any]:
    windowed = rows.map_batch(far_events).window_batch(Tumbling(4), keys="user", event_time="event", lateness=2)
    counted = windowed.count("n", "Far")
    return {"down": counted.down, "late": counted.late}


@pytest.mark.parametrize("build", [far_sessions, far_tumbling])
@pytest.mark.parametrize("event", [2**64 - 1, INT64_MAX - 3, 2**62, -(2**62) - 1])
@pytest.mark.parametrize(("workers", "processes"), CONFIGURATIONS)
def test_an_event_time_whose_window_ends_past_int64_is_refused_not_taken_as_late(
    build: Any, event: int, workers: int, processes: int
) -> None:
    """Event times near the top of ``uint64`` wrapped around in the ``int64`` window arithmetic: their rows came out on
    the late stream (a window far in the future taken as one long closed), at every worker count, with no error."""
    failed = rf"'Far'.*the event-time column 'event' at time 0 holds {event}, .*64-bit"
    with pytest.raises(WorkerFailed, match=failed):
        run_dataflow(build, [[("ann", 0, event)]], workers=workers, processes=processes)


def by_epoch(spec: Any) -> Any:
    def build(scope: Any, keys: Any) -> Any:
        tables = keys.map_batch(lambda batch: pa.table({"k": batch}))
        return tables.window_batch(spec, keys="k").count(name="Epochs").down

    return build


@pytest.mark.parametrize("spec", [Tumbling(2**60), Tumbling(4), Session(2)])
@pytest.mark.parametrize("epoch", [2**63 - 10, 2**63 + 5, 2**62])
def test_rows_windowed_by_an_epoch_past_the_event_time_range_are_refused(spec: Any, epoch: int) -> None:
    """An epoch is the rows' event time, but was not checked as one: at 2**63 - 10 a window of 2**60 came out
    with a window_end wrapped to -2**63, and past 2**63 the window failed with a bare OverflowError."""
    for workers in (1, 2):
        failed = rf"'Epochs'.*the rows at time {epoch} are windowed by their epoch, which is past the event times"
        with pytest.raises(WorkerFailed, match=failed):
            run_dataflow(by_epoch(spec), {epoch: [1, 2]}, workers=workers)
    [rows] = run_dataflow(by_epoch(spec), {2**62 - 1: [1]}).output().values()
    assert rows[0]["window_start"] <= 2**62 - 1 < rows[0]["window_end"]


@pytest.mark.parametrize("build", [far_sessions, far_tumbling])
def test_event_times_at_the_ends_of_the_range_are_windowed(build: Any) -> None:
    run = run_dataflow(build, [[("ann", 0, 2**62 - 1), ("bob", 0, -(2**62))]])
    assert run.output("late") == {0: [{"user": "bob", "event": -(2**62)}]}  # its windows closed long before epoch 0
    [rows] = run.output("down").values()
    assert len(rows) == 1 and rows[0]["n"] == 1 and rows[0]["window_start"] <= 2**62 - 1 < rows[0]["window_end"]


def test_a_columnar_window_longer_than_2_to_the_60_is_refused_when_built() -> None:
    def build(scope: Any, s: Any) -> Any:
        return s.map_batch(as_table).window_batch(Tumbling(2**61), keys="user", event_time="event").count().down

    refused(build, BuildError, r"a columnar window's size is at most 2\*\*60")
