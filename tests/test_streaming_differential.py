"""Windows, keyed state, joins and columnar aggregations against small pure-Python models of their docs.

Each hypothesis test draws inputs (colliding keys, empty epochs, late records,
duplicate join keys, NaN, nulls and negative values, one-row and empty batches),
runs the operator on 1 worker and on 2 threads, and compares what it sends, time
by time, with a reference written from docs/streaming.md and docs/columnar.md.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from helpers.differential import build_observed, joins, user_window_sums
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import execute
from runtime.testing import run_dataflow
from scopes import Session, Sliding, Tumbling

pa = pytest.importorskip("pyarrow")
np = pytest.importorskip("numpy")

FAST = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""Few examples each: the whole file runs in seconds."""

Outputs = dict[str, dict[int, list[Any]]]
"""Records (rows as dicts for Arrow) per output name and time, sorted."""


def drive(
    build: Callable[[Any, dict[str, Any]], dict[str, Any]], epochs: dict[str, list[list[Any]]], workers: int
) -> Outputs:
    """Run ``build`` with one input per name; ``epochs[name][t]`` is a list of batches sent at time ``t``.

    Batch ``i`` of an epoch is sent by worker ``i % workers``, each as one message.
    """

    def main(worker: Any) -> list[tuple[str, int, list[Any]]]:
        seen: list[tuple[str, int, list[Any]]] = []
        handles: dict[str, Any] = {}
        probes: list[Any] = []

        def keep(out: str, time: Any, batch: Any) -> None:
            seen.append((out, time, as_rows(batch)))

        worker.dataflow(lambda scope: build_observed(scope, epochs, build, handles, probes, keep))
        length = max(len(batches) for batches in epochs.values())
        for time in range(length):
            for name, batches in epochs.items():
                handles[name].advance_to(time)
                for index, batch in enumerate(batches[time] if time < len(batches) else []):
                    if index % worker.peers == worker.index:
                        handles[name].send_batch(batch)
        for handle in handles.values():
            handle.close()
        worker.step_while(lambda: not all(probe.done() for probe in probes))
        return seen

    outputs: Outputs = {}
    for seen in execute(main, workers=workers):
        for out, time, rows in seen:
            if rows:
                outputs.setdefault(out, {}).setdefault(time, []).extend(rows)
    return {out: {time: canonical(rows) for time, rows in by_time.items()} for out, by_time in outputs.items()}


def as_rows(batch: Any) -> list[Any]:
    """A batch as a list: records, Arrow rows as dicts, structured array rows as dicts."""
    if isinstance(batch, list):
        return list(batch)
    if hasattr(batch, "to_pylist"):
        return list(batch.to_pylist())
    names = batch.dtype.names
    return [{name: row[name].item() for name in names} for row in batch]


def canonical(rows: list[Any]) -> list[Any]:
    """Rows sorted by their repr, NaN spelled the same everywhere."""
    return sorted((_nan_free(row) for row in rows), key=repr)


def _nan_free(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {k: _nan_free(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_nan_free(v) for v in value)
    return value


def expected_outputs(outputs: dict[str, dict[int, list[Any]]]) -> Outputs:
    """``outputs`` without empty times, each time's rows canonical, as :func:`drive` gives them."""
    return {
        out: {time: canonical(rows) for time, rows in by_time.items() if rows}
        for out, by_time in outputs.items()
        if any(by_time.values())
    }


KEYS = st.sampled_from(["a", "b", "c", None])
WORKERS = st.sampled_from([1, 2])


def spread(records: list[Any], pieces: int) -> list[list[Any]]:
    """``records`` in ``pieces`` batches (some maybe empty): batch ``i`` gets records ``i``, ``i + pieces``, ..."""
    return [records[index::pieces] for index in range(pieces)]


# ---------------------------------------------------------------------------------------------- record-wise windows


def window_starts(spec: Any, event: int) -> list[int]:
    """Every window start whose window holds ``event``, by brute force over the definition."""
    size, step = (spec.size, spec.size) if isinstance(spec, Tumbling) else (spec.size, spec.step)
    first = event - size - step
    first -= (first - spec.origin) % step
    return [s for s in range(first, event + 1, step) if s <= event < s + size and (s - spec.origin) % step == 0]


def reference_windows(spec: Any, lateness: int, records: list[tuple[int, str, int]]) -> dict[str, dict[int, list[Any]]]:
    """``(key, (start, end), count)`` per close time and late ``(key, record)`` per epoch, from the docs.

    ``records`` are ``(epoch, key, event time)``; a record is ``(key, event)``.
    """
    down: dict[int, list[Any]] = defaultdict(list)
    late: dict[int, list[Any]] = defaultdict(list)
    if isinstance(spec, Session):
        return reference_sessions(spec.gap, lateness, records)
    counts: Counter[tuple[str, int]] = Counter()
    for epoch, key, event in records:
        starts = window_starts(spec, event)
        closes = {start: start + spec.size - 1 + lateness for start in starts}
        if any(epoch > close for close in closes.values()):
            late[epoch].append((key, (key, event)))
        for start in starts:
            if epoch <= closes[start]:
                counts[(key, start)] += 1
    for (key, start), count in counts.items():
        down[start + spec.size - 1 + lateness].append((key, (start, start + spec.size), count))
    return {"down": down, "late": late}


def reference_sessions(gap: int, lateness: int, records: list[tuple[int, str, int]]) -> dict[str, dict[int, list[Any]]]:
    """Sessions per key, merged while records are closer than ``gap``, applied one epoch after another.

    A session spanning ``[first, last]`` closes at ``last + gap - 1 + lateness``; a
    record is late when its epoch is after the close of the session it would start
    alone, and joins no session that has closed before its epoch.
    """
    down: dict[int, list[Any]] = defaultdict(list)
    late: dict[int, list[Any]] = defaultdict(list)
    open_sessions: dict[str, list[tuple[int, int, list[int]]]] = defaultdict(list)
    last_time = max([epoch for epoch, _, _ in records] + [0])
    horizon = last_time + max([event for _, _, event in records] + [0]) + gap + lateness + 2
    for time in range(horizon):
        for epoch, key, event in records:
            if epoch != time:
                continue
            if time > event + gap - 1 + lateness:
                late[time].append((key, (key, event)))
                continue
            first, last, events = event, event, [event]
            kept = []
            for session in open_sessions[key]:
                if abs(event - session[0]) < gap or abs(event - session[1]) < gap or session[0] <= event <= session[1]:
                    first, last, events = min(first, session[0]), max(last, session[1]), events + session[2]
                else:
                    kept.append(session)
            open_sessions[key] = [*kept, (first, last, events)]
        for key, sessions in open_sessions.items():
            closing = [s for s in sessions if s[1] + gap - 1 + lateness == time]
            for first, last, events in closing:
                down[time].append((key, (first, last + 1), len(events)))
            open_sessions[key] = [s for s in sessions if s not in closing]
    return {"down": down, "late": late}


SPECS = st.one_of(
    st.builds(Tumbling, st.integers(1, 4), st.integers(-2, 2)),
    st.integers(1, 4).flatmap(lambda step: st.builds(Sliding, st.integers(step, 6), st.just(step), st.integers(-2, 2))),
    st.builds(Session, st.integers(1, 3)),
)
# (epoch, key, event time): event times from 3 before their epoch to 2 after it, negative ones too
WINDOW_RECORDS = st.lists(
    st.tuples(st.integers(0, 6), KEYS, st.integers(-3, 2)).map(lambda r: (r[0], r[1], r[0] + r[2])), max_size=25
)


@FAST
@given(spec=SPECS, lateness=st.integers(0, 2), records=WINDOW_RECORDS, pieces=st.integers(1, 3), workers=WORKERS)
def test_windows_with_event_times_and_lateness_match_the_reference(
    spec: Any, lateness: int, records: list[tuple[int, str, int]], pieces: int, workers: int
) -> None:
    by_epoch: list[list[Any]] = [[] for _ in range(7)]
    for epoch, key, event in records:
        by_epoch[epoch].append((key, event))

    def build(scope: Any, streams: dict[str, Any]) -> dict[str, Any]:
        windowed = (
            streams["events"].key_by(lambda e: e[0]).window(spec, event_time=lambda e: e[1], lateness=lateness).count()
        )
        return {"down": windowed.down, "late": windowed.late}

    got = drive(build, {"events": [spread(batch, pieces) for batch in by_epoch]}, workers)
    assert got == expected_outputs(reference_windows(spec, lateness, records))


@FAST
@given(
    spec=SPECS, epochs=st.lists(st.lists(st.tuples(KEYS, st.integers(-5, 5)), max_size=5), max_size=6), workers=WORKERS
)
def test_windows_by_epoch_collect_every_record_on_time(spec: Any, epochs: list[list[Any]], workers: int) -> None:
    """Without ``event_time``, a record's event time is its epoch and nothing is late."""

    def build(scope: Any, streams: dict[str, Any]) -> dict[str, Any]:
        windowed = streams["pairs"].keyed().window(spec).collect()
        return {"down": windowed.down.map(lambda r: (r[0], r[1], sorted(r[2]))), "late": windowed.late}

    got = drive(build, {"pairs": [spread(batch, 2) for batch in epochs]}, workers)
    records = [(epoch, key, epoch) for epoch, batch in enumerate(epochs) for key, _ in batch]
    reference = reference_windows(spec, 0, records)
    assert not reference["late"]
    # the reference counts; the values come from each window's records, collected
    values: dict[tuple[str, int], list[int]] = defaultdict(list)
    for epoch, batch in enumerate(epochs):
        for key, value in batch:
            values[(key, epoch)].append(value)
    expected: dict[int, list[Any]] = defaultdict(list)
    for close, results in reference["down"].items():
        for key, (start, end), count in results:
            collected = sorted(v for t in range(start, end) for v in values.get((key, t), []))
            assert len(collected) == count
            expected[close].append((key, (start, end), collected))
    assert got == expected_outputs({"down": expected})


# ---------------------------------------------------------------------------------------------- keyed state


@FAST
@given(epochs=st.lists(st.lists(st.tuples(KEYS, st.integers(-3, 3)), max_size=6), max_size=6), workers=WORKERS)
def test_fold_reduce_and_stateful_map_match_running_values_per_complete_time(
    epochs: list[list[Any]], workers: int
) -> None:
    def build(scope: Any, streams: dict[str, Any]) -> dict[str, Any]:
        keyed = streams["pairs"].keyed()
        return {
            "fold": keyed.fold(int, lambda total, value: total + value),
            "reduce": keyed.reduce(min),
            # the state counts a key's records and forgets the key after its third
            "stateful": keyed.stateful_map(lambda: 0, lambda n, value: (None if n == 2 else n + 1, n + 1)),
        }

    got = drive(build, {"pairs": [spread(batch, 3) for batch in epochs]}, workers)
    sums: dict[str, int] = {}
    mins: dict[str, int] = {}
    counts: dict[str, int] = {}
    expected: dict[str, dict[int, list[Any]]] = {"fold": {}, "reduce": {}, "stateful": {}}
    for time, batch in enumerate(epochs):
        stateful = []
        for key, value in batch:
            sums[key] = sums.get(key, 0) + value
            mins[key] = min(mins.get(key, value), value)
            counts[key] = counts.get(key, 0) % 3 + 1
            stateful.append((key, counts[key]))
        changed = list(dict.fromkeys(key for key, _ in batch))
        expected["fold"][time] = [(key, sums[key]) for key in changed]
        expected["reduce"][time] = [(key, mins[key]) for key in changed]
        expected["stateful"][time] = stateful
    assert got == expected_outputs(expected)


# ---------------------------------------------------------------------------------------------- record-wise joins

UPDATES = st.lists(st.tuples(KEYS, st.one_of(st.none(), st.integers(0, 3))), max_size=4).map(
    lambda updates: list({key: (key, value) for key, value in updates}.values()) * 2  # one value per key, twice
)


@FAST
@given(
    left=st.lists(st.lists(st.tuples(KEYS, st.integers(0, 9)), max_size=5), max_size=5),
    right=st.lists(st.lists(st.tuples(KEYS, st.integers(0, 9)), max_size=5), max_size=5),
    table=st.lists(UPDATES, max_size=5),
    workers=WORKERS,
)
def test_joins_per_time_and_against_the_latest_table_match_the_reference(
    left: list[list[Any]], right: list[list[Any]], table: list[list[Any]], workers: int
) -> None:
    build = joins

    inputs = {
        name: [spread(batch, 2) for batch in epochs]
        for name, epochs in (("left", left), ("right", right), ("table", table))
    }
    got = drive(build, inputs, workers)
    expected: dict[str, dict[int, list[Any]]] = {"join": {}, "inner": {}, "left": {}}
    current: dict[str, int] = {}
    for time in range(max(len(left), len(right), len(table))):
        lefts = left[time] if time < len(left) else []
        rights = right[time] if time < len(right) else []
        for key, value in table[time] if time < len(table) else []:
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value
        expected["join"][time] = [(k, (lv, rv)) for k, lv in lefts for k2, rv in rights if k == k2]
        expected["inner"][time] = [(k, (v, current[k])) for k, v in lefts if k in current]
        expected["left"][time] = [(k, (v, current.get(k))) for k, v in lefts]
    assert got == expected_outputs(expected)


# ---------------------------------------------------------------------------------------------- aggregate_batch

FUNCTIONS = ("count", "sum", "min", "max", "mean")
NAN = float("nan")


def arrow_aggregate(function: str, values: list[Any]) -> Any:
    """What Arrow's hash aggregation gives for one group: nulls skipped, NaN skipped by min and max."""
    valid = [v for v in values if v is not None]
    if function == "count":
        return len(valid)
    if not valid:
        return None
    if function in ("min", "max"):
        numbers = [v for v in valid if not (isinstance(v, float) and math.isnan(v))]
        return (min if function == "min" else max)(numbers) if numbers else NAN
    total = sum(valid)
    return total if function == "sum" else total / len(valid)


def numpy_aggregate(function: str, values: list[Any]) -> Any:
    """What NumPy gives for one group: every row counts; NaN is skipped by min and max, else propagates."""
    if function == "count":
        return len(values)
    if function in ("min", "max"):
        numbers = [v for v in values if not (isinstance(v, float) and math.isnan(v))]
        return (min if function == "min" else max)(numbers) if numbers else NAN
    if any(isinstance(v, float) and math.isnan(v) for v in values):
        return NAN
    total = sum(values)
    return total if function == "sum" else total / len(values)


def reference_aggregates(epochs: list[list[list[tuple[Any, Any]]]], model: Callable[[str, list[Any]], Any]) -> Any:
    """One row per key and time: ``k`` and ``v_<function>`` for every function."""
    expected: dict[int, list[Any]] = {}
    for time, batches in enumerate(epochs):
        groups: dict[Any, list[Any]] = defaultdict(list)
        for batch in batches:
            for key, value in batch:
                groups[key].append(value)
        expected[time] = [
            {"k": key, **{f"v_{f}": model(f, values) for f in FUNCTIONS}} for key, values in groups.items()
        ]
    return expected


# small integers and halves: every sum is exact, whatever the order partials combine in
FLOATS = st.one_of(st.integers(-8, 8).map(lambda n: n / 2), st.just(NAN))
BATCHES = st.lists(st.lists(st.tuples(st.integers(-1, 2), FLOATS), max_size=4), max_size=3)


@FAST
@given(
    epochs=st.lists(BATCHES, max_size=4),
    floats=st.booleans(),
    nulls=st.booleans(),
    workers=WORKERS,
)
def test_aggregate_batch_on_arrow_tables_matches_arrow_per_group(
    epochs: list[list[list[tuple[int, Any]]]], floats: bool, nulls: bool, workers: int
) -> None:
    """Nulls, NaN, negatives, int and float columns, empty and one-row tables, several per epoch."""

    def value(v: Any, i: int) -> Any:
        if nulls and i % 3 == 2:
            return None
        if floats:
            return v
        return None if math.isnan(v) else int(v * 2)

    epochs = [[[(k, value(v, i)) for i, (k, v) in enumerate(batch)] for batch in batches] for batches in epochs]
    schema = pa.schema([("k", pa.int64()), ("v", pa.float64() if floats else pa.int64())])
    tables = [
        [pa.Table.from_pylist([{"k": k, "v": v} for k, v in batch], schema=schema) for batch in batches]
        for batches in epochs
    ]

    def build(scope: Any, streams: dict[str, Any]) -> dict[str, Any]:
        return {"out": streams["rows"].aggregate_batch("k", [("v", f) for f in FUNCTIONS])}

    got = drive(build, {"rows": tables}, workers)
    assert got == expected_outputs({"out": reference_aggregates(epochs, arrow_aggregate)})


@FAST
@given(epochs=st.lists(BATCHES, max_size=4), floats=st.booleans(), arrow=st.integers(0, 3), workers=WORKERS)
def test_aggregate_batch_on_structured_arrays_matches_numpy_per_group(
    epochs: list[list[list[tuple[int, float]]]], floats: bool, arrow: int, workers: int
) -> None:
    """Structured arrays, with every ``arrow``-th batch an Arrow table instead (none when 0): without nulls
    both kinds count every row, and the partials of both combine into one answer."""
    if not floats:
        epochs = [[[(k, 0 if math.isnan(v) else int(v * 2)) for k, v in batch] for batch in b] for b in epochs]
    dtype = [("k", "i8"), ("v", "f8" if floats else "i8")]
    arrays = [[np.array(batch, dtype=dtype) for batch in batches] for batches in epochs]
    if arrow:
        arrays = [
            [pa.table({name: a[name] for name in a.dtype.names}) if i % arrow == 0 else a for i, a in enumerate(b)]
            for b in arrays
        ]

    def build(scope: Any, streams: dict[str, Any]) -> dict[str, Any]:
        return {"out": streams["rows"].aggregate_batch("k", [("v", f) for f in FUNCTIONS])}

    got = drive(build, {"rows": arrays}, workers)
    assert got == expected_outputs({"out": reference_aggregates(epochs, numpy_aggregate)})


# ---------------------------------------------------------------------------------------------- join_batch

JOIN_ROWS = st.lists(
    st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 2)), st.integers(0, 9)), max_size=4), max_size=3
)


@FAST
@given(
    left=st.lists(JOIN_ROWS, max_size=4),
    right=st.lists(JOIN_ROWS, max_size=4),
    join_type=st.sampled_from(["inner", "left semi", "left anti"]),
    workers=WORKERS,
)
def test_join_batch_matches_a_per_time_equi_join(
    left: list[list[list[tuple[Any, int]]]], right: list[list[list[tuple[Any, int]]]], join_type: str, workers: int
) -> None:
    """Duplicate keys on both sides, null keys (a null joins a null, as None does in the record-wise join), empty
    and one-row tables."""
    lschema = pa.schema([("k", pa.int64()), ("a", pa.int64())])
    rschema = pa.schema([("key", pa.int32()), ("b", pa.int64())])

    def tables(epochs: Any, schema: Any, names: tuple[str, str]) -> Any:
        return [
            [pa.Table.from_pylist([dict(zip(names, row, strict=True)) for row in batch], schema=schema) for batch in b]
            for b in epochs
        ]

    def build(scope: Any, streams: dict[str, Any]) -> dict[str, Any]:
        return {"out": streams["left"].join_batch(streams["right"], "k", right_keys="key", join_type=join_type)}

    got = drive(
        build, {"left": tables(left, lschema, ("k", "a")), "right": tables(right, rschema, ("key", "b"))}, workers
    )
    expected: dict[int, list[Any]] = {}
    for time in range(max(len(left), len(right))):
        lefts = [row for batch in (left[time] if time < len(left) else []) for row in batch]
        rights = [row for batch in (right[time] if time < len(right) else []) for row in batch]
        rows = []
        for k, a in lefts:
            matches = [b for key, b in rights if key == k]
            if join_type == "inner":
                rows += [{"k": k, "a": a, "b": b} for b in matches]
            elif (join_type == "left semi") == bool(matches):
                rows.append({"k": k, "a": a})
        expected[time] = rows
    assert got == expected_outputs({"out": expected})


# ---------------------------------------------------------------------------------------------- columnar windows


def reference_window_aggregates(spec: Any, lateness: int, rows: list[tuple[int, str, int, Any]]) -> Any:
    """Columnar window results and late rows, from :func:`reference_windows`'s windows with sums and mins.

    ``rows`` are ``(epoch, user, event, amount)``.
    """
    by_window = reference_windows(spec, lateness, [(epoch, user, event) for epoch, user, event, _ in rows])
    late_rows: dict[int, list[Any]] = defaultdict(list)
    for epoch, user, event, amount in rows:
        if any((user, (user, event)) == r for r in by_window["late"].get(epoch, [])):
            late_rows[epoch].append({"user": user, "event": event, "amount": amount})
    down: dict[int, list[Any]] = defaultdict(list)
    for close, results in by_window["down"].items():
        for user, (start, end), count in results:
            members = [
                amount
                for epoch, u, event, amount in rows
                if u == user
                and start <= event < end
                and epoch <= close
                and in_window(spec, lateness, epoch, event, start, end)
            ]
            assert len(members) == count, (user, start, end, members, count)
            down[close].append(
                {
                    "user": user,
                    "window_start": start,
                    "window_end": end,
                    "amount_sum": arrow_aggregate("sum", members),
                    "amount_min": arrow_aggregate("min", members),
                    "rows": count,
                }
            )
    return {"down": down, "late": late_rows}


def in_window(spec: Any, lateness: int, epoch: int, event: int, start: int, end: int) -> bool:
    """Whether a row on time counts in ``[start, end)``: a window's rows, or a session's on-time rows."""
    if isinstance(spec, Session):
        return epoch <= event + spec.gap - 1 + lateness
    return epoch <= start + spec.size - 1 + lateness


@FAST
@given(
    spec=SPECS,
    lateness=st.integers(0, 2),
    records=st.lists(
        st.tuples(st.integers(0, 5), KEYS, st.integers(-3, 2), st.one_of(st.none(), st.integers(-5, 5))), max_size=20
    ),
    pieces=st.integers(1, 3),
    workers=WORKERS,
)
def test_columnar_windows_match_the_record_wise_reference(
    spec: Any, lateness: int, records: list[tuple[int, str, int, Any]], pieces: int, workers: int
) -> None:
    rows = [(epoch, user, epoch + offset, amount) for epoch, user, offset, amount in records]
    schema = pa.schema([("user", pa.string()), ("event", pa.int64()), ("amount", pa.int64())])
    epochs: list[list[Any]] = [[] for _ in range(6)]
    for epoch, user, event, amount in rows:
        epochs[epoch].append({"user": user, "event": event, "amount": amount})
    batches = [[pa.Table.from_pylist(part, schema=schema) for part in spread(epoch, pieces)] for epoch in epochs]

    def build(scope: Any, streams: dict[str, Any]) -> dict[str, Any]:
        windowed = user_window_sums(streams["rows"], spec, lateness)
        return {"down": windowed.down, "late": windowed.late}

    got = drive(build, {"rows": batches}, workers)
    assert got == expected_outputs(reference_window_aggregates(spec, lateness, rows))


# ---------------------------------------------------------------------------------------------- columnar join_latest

PLAN_UPDATES = st.lists(
    st.tuples(st.one_of(st.none(), st.integers(0, 2)), st.one_of(st.none(), st.integers(0, 5)), st.booleans()),
    max_size=4,
).map(lambda rows: list({row[0]: row for row in rows}.values()) * 2)  # one row per key and time, sent twice


@FAST
@given(
    rows=st.lists(
        st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 2)), st.integers(0, 9)), max_size=5), max_size=5
    ),
    updates=st.lists(PLAN_UPDATES, max_size=5),
    how=st.sampled_from(["inner", "left"]),
    pieces=st.integers(1, 3),
    workers=WORKERS,
)
def test_columnar_join_latest_matches_the_table_as_of_each_rows_time(
    rows: list[list[tuple[Any, int]]], updates: list[list[tuple[Any, Any, bool]]], how: str, pieces: int, workers: int
) -> None:
    """Deletes, null plans, null keys (a null key has the table's row of the null key, as None does in the
    record-wise join_latest), empty and one-row batches."""
    row_schema = pa.schema([("user", pa.int64()), ("page", pa.int64())])
    plan_schema = pa.schema([("id", pa.int64()), ("plan", pa.int64()), ("gone", pa.bool_())])

    def tables(epochs: Any, schema: Any) -> Any:
        names = schema.names
        return [
            [
                pa.Table.from_pylist([dict(zip(names, row, strict=True)) for row in part], schema=schema)
                for part in spread(epoch, pieces)
            ]
            for epoch in epochs
        ]

    def build(scope: Any, streams: dict[str, Any]) -> dict[str, Any]:
        clicks = streams["rows"].key_by_columns("user")
        plans = streams["plans"].key_by_columns("id")
        return {"out": clicks.join_latest(plans, how=how, deletes="gone", schema=plan_schema)}

    got = drive(build, {"rows": tables(rows, row_schema), "plans": tables(updates, plan_schema)}, workers)
    table: dict[Any, Any] = {}
    expected: dict[int, list[Any]] = {}
    for time in range(max(len(rows), len(updates))):
        for key, plan, gone in updates[time] if time < len(updates) else []:
            if gone:
                table.pop(key, None)
            else:
                table[key] = plan
        out = []
        for user, page in rows[time] if time < len(rows) else []:
            if user in table:
                out.append({"user": user, "page": page, "plan": table[user]})
            elif how == "left":
                out.append({"user": user, "page": page, "plan": None})
        expected[time] = out
    assert got == expected_outputs({"out": expected})


def test_min_and_max_of_numpy_and_arrow_batches_do_not_depend_on_the_worker_count() -> None:
    """A NumPy batch's NaN made its partial minimum NaN, and combined with an Arrow partial (which skips NaN)
    it hid the batch's other values: min(NaN, 2.0, 5.0) was 2.0 on 1 worker but 5.0 on 2, where the NaN and
    the 2.0 met in one NumPy partial.  Min and max skip NaN in both kinds, so the answer is 2.0 everywhere."""
    nan_row = np.array([(1, NAN)], dtype=[("k", "i8"), ("v", "f8")])
    two = np.array([(1, 2.0), (2, NAN)], dtype=[("k", "i8"), ("v", "f8")])
    five = pa.table({"k": pa.array([1, 2], pa.int64()), "v": pa.array([5.0, NAN])})

    def build(scope: Any, streams: dict[str, Any]) -> dict[str, Any]:
        return {"out": streams["rows"].aggregate_batch("k", [("v", "min"), ("v", "max")])}

    expected = {"out": {0: [{"k": 1, "v_min": 2.0, "v_max": 5.0}, {"k": 2, "v_min": "NaN", "v_max": "NaN"}]}}
    for workers in (1, 2):  # on 2 workers, worker 0 sends the two NumPy batches and worker 1 the Arrow one
        assert drive(build, {"rows": [[nan_row, five, two]]}, workers) == expected
        assert drive(build, {"rows": [[nan_row, two]]}, workers) == {
            "out": {0: [{"k": 1, "v_min": 2.0, "v_max": 2.0}, {"k": 2, "v_min": "NaN", "v_max": "NaN"}]}
        }


def test_columnar_sessions_of_a_null_key_merge_as_any_key_s_do() -> None:
    """Merging sessions compared neighbouring keys with ``!=``, which is null for two nulls and was taken as
    a new key: a null key's rows 1 apart (gap 2) gave a session per event time, where the record-wise
    window (key None) and the tumbling columnar windows (and aggregate_batch) treat the null key as one key."""
    schema = pa.schema([("user", pa.string()), ("event", pa.int64())])
    rows = pa.Table.from_pylist(
        [{"user": None, "event": 0}, {"user": None, "event": 1}, {"user": "a", "event": 1}], schema=schema
    )

    def build(scope: Any, streams: dict[str, Any]) -> dict[str, Any]:
        return {"out": streams["rows"].key_by_columns("user").window(Session(2), event_time="event").count().down}

    expected = {
        "out": {
            2: [
                {"user": "a", "window_start": 1, "window_end": 2, "count": 1},
                {"user": None, "window_start": 0, "window_end": 2, "count": 2},
            ]
        }
    }
    for workers in (1, 2):
        assert drive(build, {"rows": [[rows]]}, workers) == expected
        assert drive(build, {"rows": [[rows.slice(0, 1), rows.slice(1)]]}, workers) == expected


# ---------------------------------------------------------------------------------------------- two processes

PROCESS_RECORDS = [(e, k, e + d) for e in range(6) for k, d in (("a", -2), ("b", 0), ("a", 1), (None, -3), ("b", -1))]
"""(epoch, key, event time): late records, keys that collide on a worker, a None key."""


def sessions_and_slides(scope: Any, events: Any) -> dict[str, Any]:
    """Session and sliding counts with lateness, at the top level so that processes can import it."""
    keyed = events.key_by(lambda e: e[0])
    sessions = keyed.window(Session(2), event_time=lambda e: e[1], lateness=1).count()
    slides = keyed.window(Sliding(3, 2, origin=1), event_time=lambda e: e[1], lateness=1).count()
    return {
        "sessions": sessions.down,
        "sessions_late": sessions.late,
        "slides": slides.down,
        "slides_late": slides.late,
    }


def test_windows_on_two_processes_match_the_reference() -> None:
    epochs: list[list[Any]] = [[] for _ in range(6)]
    for epoch, key, event in PROCESS_RECORDS:
        epochs[epoch].append((key, event))
    run = run_dataflow(sessions_and_slides, epochs, workers=1, processes=2)
    for name, spec in (("sessions", Session(2)), ("slides", Sliding(3, 2, origin=1))):
        reference = expected_outputs(reference_windows(spec, 1, PROCESS_RECORDS))
        assert {t: canonical(r) for t, r in run.output(name).items()} == reference["down"]
        assert {t: canonical(r) for t, r in run.output(f"{name}_late").items()} == reference["late"]
