"""Resume after a crash, differentially: crashed output before the checkpoint plus resumed output equals a clean run.

docs/streaming.md promises that a run resumed from ``store.resume_epoch`` ``E``
produces again the outputs at times from ``E`` on, identical for deterministic
operators; the crashed run had produced every output at the times before ``E``.
Each test draws random epochs of input, a crash after a random epoch and
``every`` in {1, 2, 3}, runs the job once uninterrupted, once crashed and once
resumed from the same store, on 1 worker and 2 threads, and checks that the
crashed run's outputs at times before ``E`` joined with the resumed run's equal
the uninterrupted run's: no time lost, none twice, none different.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.differential import build_observed, joins, user_window_sums
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import execute
from runtime.checkpoints import CheckpointStore
from runtime.errors import WorkerFailed
from scopes import Session, Sliding, Tumbling

FAST = settings(
    max_examples=int(os.environ.get("RESUME_EXAMPLES", "10")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
"""Few examples each: the file runs in seconds (``RESUME_EXAMPLES=300`` for a longer hunt)."""

KEYS = st.sampled_from(["a", "b", "c", None])
EPOCHS = 7
Build = Callable[[Any, dict[str, Any]], dict[str, Any]]
Seen = Counter[tuple[str, int, Any]]


class Crash(Exception):
    """The simulated crash of a run."""


def hashable(record: Any) -> Any:
    """A record as a hashable value (an Arrow row's dict as sorted items)."""
    if isinstance(record, dict):
        return tuple(sorted((key, hashable(value)) for key, value in record.items()))
    if isinstance(record, list | tuple):
        return tuple(hashable(value) for value in record)
    return record


def drive(
    build: Build,
    inputs: dict[str, list[list[Any]]],
    workers: int,
    seen: list[tuple[str, int, Any]],
    store: CheckpointStore | None = None,
    crash_after: int | None = None,
) -> int:
    """Run ``build`` epoch by epoch from the store's resume epoch; worker 0 raises after epoch ``crash_after``.

    ``inputs[name][t]`` is a list of batches for epoch ``t``; batch ``i`` is sent by worker ``i % workers``.
    Every output record goes to ``seen`` as ``(output, time, record)``, also when the run crashes.
    Returns the epoch the run resumed from.
    """
    lock = threading.Lock()
    length = max(len(epochs) for epochs in inputs.values())

    def keep(out: str, time: int, batch: Any) -> None:
        rows = batch.to_pylist() if hasattr(batch, "to_pylist") else list(batch)
        with lock:
            seen.extend((out, time, hashable(row)) for row in rows)

    def main(worker: Any) -> int:
        handles: dict[str, Any] = {}
        probes: list[Any] = []

        worker.dataflow(lambda scope: build_observed(scope, inputs, build, handles, probes, keep), checkpoint=store)
        start = store.resume_epoch if store is not None else 0
        for epoch in range(start, length):
            for name, epochs in inputs.items():
                for index, batch in enumerate(epochs[epoch] if epoch < len(epochs) else []):
                    if index % worker.peers == worker.index:
                        handles[name].send_batch(batch)
                handles[name].advance_to(epoch + 1)
            worker.step_while(lambda epoch=epoch: any(probe.less_than(epoch + 1) for probe in probes))
            if epoch == crash_after and worker.index == 0:
                raise Crash(f"crash after epoch {epoch}")
        for handle in handles.values():
            handle.close()
        worker.step_while(lambda: not all(probe.done() for probe in probes))
        return start

    return int(execute(main, workers=workers)[0])


def check_resume(build: Build, inputs: dict[str, list[list[Any]]], workers: int, crash_after: int, every: int) -> int:
    """Assert the differential property for one crash; returns the epoch the second run resumed from."""
    clean: list[tuple[str, int, Any]] = []
    drive(build, inputs, workers, clean)
    crashed: list[tuple[str, int, Any]] = []
    resumed_seen: list[tuple[str, int, Any]] = []
    with tempfile.TemporaryDirectory(prefix="resume-") as directory:
        with pytest.raises(WorkerFailed, match="crash after epoch"):
            drive(build, inputs, workers, crashed, CheckpointStore(directory, every=every), crash_after)
        resumed = drive(build, inputs, workers, resumed_seen, CheckpointStore(directory, every=every))
    assert resumed % every == 0 and resumed <= crash_after + 1, (resumed, crash_after, every)
    got = Counter([entry for entry in crashed if entry[1] < resumed] + resumed_seen)
    expected = Counter(clean)
    assert got == expected, describe(got, expected, resumed)
    return resumed


def describe(got: Seen, expected: Seen, resumed: int) -> str:
    """The records in one and not the other, for a failing assertion."""
    extra = sorted((got - expected).items(), key=repr)
    missing = sorted((expected - got).items(), key=repr)
    return f"resumed at {resumed}; extra {extra[:10]}; missing {missing[:10]}"


CRASH = st.integers(0, EPOCHS - 1)
EVERY = st.sampled_from([1, 2, 3])
WORKERS = st.sampled_from([1, 2])


def spread(batch: list[Any], pieces: int) -> list[list[Any]]:
    """``batch`` as ``pieces`` batches (some maybe empty), so that both workers send."""
    return [batch[i::pieces] for i in range(pieces)]


def pairs(values: Any) -> Any:
    """Epochs of ``(key, value)`` pairs."""
    return st.lists(st.lists(st.tuples(KEYS, values), max_size=5), min_size=EPOCHS, max_size=EPOCHS)


# ---------------------------------------------------------------------------------------------- keyed state


def keyed_state(scope: Any, streams: dict[str, Any]) -> dict[str, Any]:
    keyed = streams["pairs"].keyed()

    def on_record(context: Any, value: Any) -> None:
        if context.state is None:
            context.state = 0
            context.set_timer(context.time + 2)
        context.state += value

    def on_timer(context: Any) -> None:
        context.emit(context.state)
        context.state = None

    return {
        "fold": keyed.fold(int, lambda total, value: total + value),
        "reduce": keyed.reduce(min),
        # counts a key's records and forgets the key after its third
        "stateful": keyed.stateful_map(lambda: 0, lambda n, value: (None if n == 2 else n + 1, n + 1)),
        "timers": keyed.process(on_record, on_timer),
    }


@FAST
@given(epochs=pairs(st.integers(-3, 3)), crash_after=CRASH, every=EVERY, workers=WORKERS)
def test_keyed_state_resumes_with_the_uninterrupted_output(
    epochs: list[list[Any]], crash_after: int, every: int, workers: int
) -> None:
    check_resume(keyed_state, {"pairs": [spread(batch, 2) for batch in epochs]}, workers, crash_after, every)


# ---------------------------------------------------------------------------------------------- windows

SPECS = st.sampled_from([Tumbling(2), Tumbling(3), Sliding(3, 2, origin=1), Sliding(4, 1), Session(1), Session(2)])


@FAST
@given(
    spec=SPECS,
    lateness=st.integers(0, 2),
    epochs=pairs(st.integers(-3, 2)),
    crash_after=CRASH,
    every=EVERY,
    workers=WORKERS,
)
def test_event_time_windows_with_lateness_resume_with_the_uninterrupted_output(
    spec: Any, lateness: int, epochs: list[list[Any]], crash_after: int, every: int, workers: int
) -> None:
    """Event times behind and ahead of their epoch (late records), colliding and None keys."""
    # the record of epoch t is (key, t + offset): its event time
    timed = [[(key, time + offset) for key, offset in batch] for time, batch in enumerate(epochs)]

    def build(scope: Any, streams: dict[str, Any]) -> dict[str, Any]:
        keyed = streams["events"].keyed()
        counts = keyed.window(spec, event_time=lambda value: value, lateness=lateness).count()
        sums = keyed.window(spec, event_time=lambda value: value, lateness=lateness).fold(0, lambda s, v: s + v)
        collected = keyed.window(spec).collect().down.map(lambda r: (r[0], r[1], sorted(r[2])))
        return {"down": counts.down, "late": counts.late, "sums": sums.down, "by_epoch": collected}

    check_resume(build, {"events": [spread(batch, 2) for batch in timed]}, workers, crash_after, every)


# ---------------------------------------------------------------------------------------------- joins


@FAST
@given(
    left=pairs(st.integers(0, 9)),
    right=pairs(st.integers(0, 9)),
    table=pairs(st.one_of(st.none(), st.integers(0, 3))),
    crash_after=CRASH,
    every=EVERY,
    workers=WORKERS,
)
def test_joins_resume_with_the_uninterrupted_output(
    left: list[list[Any]], right: list[list[Any]], table: list[list[Any]], crash_after: int, every: int, workers: int
) -> None:
    """Per-time joins, and join_latest with deletes (a None value), inner and left."""
    table = [list({key: (key, value) for key, value in batch}.values()) for batch in table]  # one value per key

    build = joins

    inputs = {"left": left, "right": right, "table": table}
    check_resume(build, {k: [spread(b, 2) for b in v] for k, v in inputs.items()}, workers, crash_after, every)


# ---------------------------------------------------------------------------------------------- columnar


@FAST
@given(
    spec=SPECS,
    lateness=st.integers(0, 2),
    epochs=st.lists(
        st.lists(st.tuples(KEYS, st.integers(-3, 2), st.one_of(st.none(), st.integers(-5, 5))), max_size=5),
        min_size=EPOCHS,
        max_size=EPOCHS,
    ),
    crash_after=CRASH,
    every=EVERY,
    workers=WORKERS,
)
def test_columnar_windows_resume_with_the_uninterrupted_output(
    spec: Any, lateness: int, epochs: list[list[Any]], crash_after: int, every: int, workers: int
) -> None:
    """Columnar windows over Arrow tables (null keys and amounts, late rows), and aggregate_batch per time."""
    pa = pytest.importorskip("pyarrow")
    schema = pa.schema([("user", pa.string()), ("event", pa.int64()), ("amount", pa.int64())])
    tables = [
        [
            pa.Table.from_pylist(
                [{"user": user, "event": time + offset, "amount": amount} for user, offset, amount in part],
                schema=schema,
            )
            for part in spread(batch, 2)
        ]
        for time, batch in enumerate(epochs)
    ]

    def build(scope: Any, streams: dict[str, Any]) -> dict[str, Any]:
        windowed = user_window_sums(streams["rows"], spec, lateness)
        per_time = streams["rows"].aggregate_batch("user", [("amount", "sum"), ("event", "max")])
        return {"down": windowed.down, "late": windowed.late, "per_time": per_time}

    check_resume(build, {"rows": tables}, workers, crash_after, every)


@FAST
@given(
    rows=st.lists(
        st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 2)), st.integers(0, 9)), max_size=5),
        min_size=EPOCHS,
        max_size=EPOCHS,
    ),
    updates=st.lists(
        st.lists(
            st.tuples(st.one_of(st.none(), st.integers(0, 2)), st.one_of(st.none(), st.integers(0, 5)), st.booleans()),
            max_size=4,
        ),
        min_size=EPOCHS,
        max_size=EPOCHS,
    ),
    how=st.sampled_from(["inner", "left"]),
    crash_after=CRASH,
    every=EVERY,
    workers=WORKERS,
)
def test_columnar_join_latest_resumes_with_the_uninterrupted_output(
    rows: list[list[Any]], updates: list[list[Any]], how: str, crash_after: int, every: int, workers: int
) -> None:
    """The columnar table with deletes and null keys, as of the checkpoint."""
    pa = pytest.importorskip("pyarrow")
    row_schema = pa.schema([("user", pa.int64()), ("page", pa.int64())])
    plan_schema = pa.schema([("id", pa.int64()), ("plan", pa.int64()), ("gone", pa.bool_())])

    def tables(epochs: list[list[Any]], schema: Any) -> list[list[Any]]:
        return [
            [pa.Table.from_pylist([dict(zip(schema.names, row, strict=True)) for row in part], schema=schema)]
            for part in epochs
        ]

    updates = [list({row[0]: row for row in batch}.values()) for batch in updates]  # one row per key and time

    def build(scope: Any, streams: dict[str, Any]) -> dict[str, Any]:
        clicks = streams["rows"].key_by_columns("user")
        plans = streams["plans"].key_by_columns("id")
        return {"out": clicks.join_latest(plans, how=how, deletes="gone", schema=plan_schema)}

    check_resume(
        build, {"rows": tables(rows, row_schema), "plans": tables(updates, plan_schema)}, workers, crash_after, every
    )


# ---------------------------------------------------------------------------------------------- changed dataflow


def windows_of(spec: Any, lateness: int = 0, columnar: bool = False) -> Build:
    """A job counting each key's records per window of ``spec`` by event time (columnar: Arrow rows)."""

    def build(scope: Any, streams: dict[str, Any]) -> dict[str, Any]:
        if columnar:
            keyed = streams["events"].key_by_columns("key")
            return {"down": keyed.window(spec, event_time="event", lateness=lateness).count().down}
        return {"down": streams["events"].keyed().window(spec, event_time=lambda v: v, lateness=lateness).count().down}

    return build


@pytest.mark.parametrize("columnar", [False, True], ids=["records", "columnar"])
@pytest.mark.parametrize(
    ("first", "then"),
    [
        ((Tumbling(2), 0), (Tumbling(3), 0)),
        ((Tumbling(2), 0), (Session(2), 0)),
        ((Session(2), 0), (Tumbling(2), 0)),
        ((Tumbling(2), 0), (Tumbling(2), 2)),
    ],
    ids=["size", "tumbling-to-session", "session-to-tumbling", "lateness"],
)
def test_a_checkpoint_of_windows_of_another_spec_is_refused_with_a_message_that_says_so(
    tmp_path: Path, columnar: bool, first: tuple[Any, int], then: tuple[Any, int]
) -> None:
    """docs/streaming.md: checkpoints written by another dataflow are refused with a message that says so.

    A window's spec and lateness are the dataflow's as much as its shape is: resumed under Tumbling(3)
    the windows of Tumbling(2) were restored and closed as [0, 2), [2, 4), ... silently, and resumed
    under Session(2) from Tumbling(2) state the operator failed with ``list.remove(x): x not in list``.
    """
    rows = [[("a", 0), ("b", 1)], [("a", 1)], [("a", 2), ("b", 2)], [("b", 3)], [("a", 4)], [("a", 6)]]
    if columnar:
        pa = pytest.importorskip("pyarrow")
        schema = pa.schema([("key", pa.string()), ("event", pa.int64())])
        inputs = {
            "events": [[pa.Table.from_pylist([{"key": k, "event": e} for k, e in b], schema=schema)] for b in rows]
        }
    else:
        inputs = {"events": [[batch] for batch in rows]}
    with pytest.raises(WorkerFailed, match="crash after epoch"):
        drive(windows_of(*first, columnar=columnar), inputs, 2, [], CheckpointStore(tmp_path), 3)
    with pytest.raises(WorkerFailed) as caught:
        drive(windows_of(*then, columnar=columnar), inputs, 2, [], CheckpointStore(tmp_path))
    assert "does not fit this dataflow" in str(caught.value.__cause__)
    assert re.search(r"epoch-\d{20}\.ckpt \(its body at byte \d+\)", str(caught.value.__cause__))  # the file, where
    assert repr(first[0]) in str(caught.value.__cause__) and repr(then[0]) in str(caught.value.__cause__)
