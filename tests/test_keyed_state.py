"""Keyed state (scopes.keyed) and joins (scopes.joins): state per key on its owner, applied in time order."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.errors import WorkerFailed
from runtime.testing import assert_agree, assert_outputs, run_dataflow
from scopes import ConflictingUpdates

WORDS = [["a", "b", "a"], ["b"], [], ["a", "c"]]


def running_counts(scope: Any, words: Any) -> Any:
    return words.key_by(lambda w: w).stateful_map(lambda: 0, lambda n, w: (n + 1, n + 1))


def folded(scope: Any, words: Any) -> Any:
    return words.key_by(lambda w: w).fold(list, lambda acc, w: [*acc, w]).map(lambda kv: (kv[0], len(kv[1])))


def reduced(scope: Any, pairs: Any) -> Any:
    return pairs.keyed().reduce(max)


def test_stateful_map_sees_the_state_of_the_times_before() -> None:
    expected = {0: [("a", 1), ("b", 1), ("a", 2)], 1: [("b", 2)], 3: [("a", 3), ("c", 1)]}
    for run in assert_agree(running_counts, WORDS):
        assert_outputs(run, expected)


def test_fold_emits_each_changed_key_once_per_complete_time() -> None:
    expected = {0: [("a", 2), ("b", 1)], 1: [("b", 2)], 3: [("a", 3), ("c", 1)]}
    for run in assert_agree(folded, WORDS):
        assert_outputs(run, expected)


def test_reduce_starts_from_each_keys_first_value() -> None:
    pairs = [[("x", 3), ("y", 1)], [("x", 2), ("y", 5)]]
    for run in assert_agree(reduced, pairs):
        assert_outputs(run, {0: [("x", 3), ("y", 1)], 1: [("x", 3), ("y", 5)]})


def test_stateful_map_forgets_a_key_whose_state_is_none() -> None:
    def build(scope: Any, words: Any) -> Any:
        return words.key_by(lambda w: w).stateful_map(lambda: 0, lambda n, w: (None if n == 1 else n + 1, n))

    assert_outputs(run_dataflow(build, [["a"], ["a"], ["a"]], workers=2), {0: [("a", 0)], 1: [("a", 1)], 2: [("a", 0)]})


def timers(scope: Any, events: Any) -> Any:
    """Per key: count records, and report the count 2 epochs after the key's first record."""

    def on_record(context: Any, value: Any) -> None:
        if context.state is None:
            context.state = 0
            context.set_timer(context.time + 2)
        context.state += 1

    def on_timer(context: Any) -> None:
        context.emit(("after 2", context.state))
        context.state = None

    return events.key_by(lambda e: e).process(on_record, on_timer)


def test_per_key_timers_fire_once_the_frontier_passes_them() -> None:
    events = [["a"], ["a", "b"], ["b"], ["a"], [], []]
    expected = {2: [("a", ("after 2", 2))], 3: [("b", ("after 2", 2))], 5: [("a", ("after 2", 1))]}
    for run in assert_agree(timers, events):
        assert_outputs(run, expected)


def test_a_timer_before_the_current_time_names_the_operator() -> None:
    def build(scope: Any, events: Any) -> Any:
        return events.key_by(str).process(lambda context, value: context.set_timer(context.time - 1))

    with pytest.raises(WorkerFailed, match="operator 'Process'.*timer for key '1' at time 0 is not at or after"):
        run_dataflow(build, [[], [1]])


def test_stateful_map_must_return_a_pair() -> None:
    def build(scope: Any, words: Any) -> Any:
        return words.key_by(str).stateful_map(lambda: 0, lambda n, w: n)

    with pytest.raises(
        WorkerFailed, match="stateful_map function of operator 'StatefulMap' in scope 'dataflow 0' must return"
    ):
        run_dataflow(build, [["a"]])


def test_keyed_needs_pairs() -> None:
    with pytest.raises(WorkerFailed, match="needs \\(key, value\\) pairs, got int 5; use key_by"):
        run_dataflow(lambda scope, s: s.keyed().fold(int, max), [[5]])


# ---------------------------------------------------------------------- joins


def per_time_join(scope: Any, streams: Any) -> Any:
    return streams["orders"].keyed().join(streams["users"].keyed())


def test_join_pairs_records_of_the_same_key_and_time() -> None:
    inputs = {
        "orders": [[("u1", "o1"), ("u2", "o2")], [("u1", "o3")]],
        "users": [[("u1", "ann"), ("u1", "ann2")], [("u2", "bob")]],
    }
    expected = {0: [("u1", ("o1", "ann")), ("u1", ("o1", "ann2"))]}
    for run in assert_agree(per_time_join, inputs):
        assert_outputs(run, expected)


def latest_join(scope: Any, streams: Any) -> Any:
    return streams["clicks"].keyed().join_latest(streams["names"].keyed(), how="left")


def test_join_latest_sees_the_table_as_of_each_records_time() -> None:
    inputs = {
        "clicks": [[("u1", 1)], [("u1", 2), ("u2", 3)], [], [("u1", 4), ("u2", 5)]],
        "names": [[("u1", "ann")], [("u2", "bob")], [("u1", "anne"), ("u2", None)], []],
    }
    expected = {
        0: [("u1", (1, "ann"))],
        1: [("u1", (2, "ann")), ("u2", (3, "bob"))],
        3: [("u1", (4, "anne")), ("u2", (5, None))],
    }
    for run in assert_agree(latest_join, inputs):
        assert_outputs(run, expected)


def test_an_inner_join_latest_drops_records_without_a_table_value() -> None:
    def build(scope: Any, streams: Any) -> Any:
        return streams["clicks"].keyed().join_latest(streams["names"].keyed())

    inputs = {"clicks": [[("u1", 1), ("u9", 2)]], "names": [[("u1", "ann")]]}
    assert_outputs(run_dataflow(build, inputs, workers=2), {0: [("u1", (1, "ann"))]})


def test_join_latest_refuses_an_unknown_kind() -> None:
    def build(scope: Any, streams: Any) -> Any:
        return streams["a"].keyed().join_latest(streams["b"].keyed(), how="outer")

    with pytest.raises(WorkerFailed, match="how='outer' is not one of inner, left"):
        run_dataflow(build, {"a": [[]], "b": [[]]})


def test_join_latest_refuses_two_values_for_one_key_at_one_time_at_every_worker_count() -> None:
    inputs = {"clicks": [[("u1", 1)]], "names": [[("u1", "ann"), ("u1", "anne")]]}
    for workers in (1, 2):
        with pytest.raises(WorkerFailed) as caught:
            run_dataflow(latest_join, inputs, workers=workers)
        assert isinstance(caught.value.__cause__.__cause__, ConflictingUpdates), caught.value
        assert "two different values for key 'u1' at time 0" in str(caught.value)


def test_join_latest_accepts_the_same_value_twice_for_one_key_and_time() -> None:
    inputs = {"clicks": [[("u1", 1)]], "names": [[("u1", "ann"), ("u1", "ann")]]}
    for run in assert_agree(latest_join, inputs):
        assert_outputs(run, {0: [("u1", (1, "ann"))]})


def _fails(*args: Any) -> Any:
    raise ValueError("the function failed")


def _on_timer_only(context: Any, value: Any) -> None:
    context.set_timer(context.time + 1)


KEYED_FAILURES = {
    "Fold": lambda keyed: keyed.fold(int, _fails, name="Fold"),
    "Reduce": lambda keyed: keyed.reduce(_fails, name="Reduce"),
    "StatefulMap": lambda keyed: keyed.stateful_map(int, _fails, name="StatefulMap"),
    "Process": lambda keyed: keyed.process(_fails, name="Process"),
    "Timer": lambda keyed: keyed.process(_on_timer_only, _fails, name="Timer"),
}


@pytest.mark.parametrize("name", list(KEYED_FAILURES))
@pytest.mark.parametrize("workers", [1, 2])
def test_a_keyed_function_that_fails_on_a_complete_time_names_that_time(name: str, workers: int) -> None:
    """The keyed operators apply a time's records (and timers) once it is complete, on the frontier, not on a
    message: a failure there said "outside any batch", naming no time."""

    def build(scope: Any, numbers: Any) -> Any:
        return KEYED_FAILURES[name](numbers.key_by(lambda n: n % 2))

    with pytest.raises(WorkerFailed) as failed:
        run_dataflow(build, [[], [1, 2, 3, 4]], workers=workers)
    message = str(failed.value)
    when = "time 2" if name == "Timer" else "time 1"
    assert f"'{name}'" in message and f"complete time {when[5:]}" in message and "the function failed" in message
    assert "outside any batch" not in message, message


def test_a_columnar_join_latest_that_fails_joining_a_time_names_that_time() -> None:
    """A row key of no common type with the table's fails when the time's rows are joined: it named no time."""
    pa = pytest.importorskip("pyarrow")
    schema = pa.schema([("k", pa.string()), ("w", pa.int64())])

    def build(scope: Any, streams: Any) -> Any:
        rows = streams["rows"].map_batch(lambda keys: pa.table({"k": pa.array(keys, pa.int64())})).key_by_columns("k")
        table = streams["table"].map_batch(lambda rows: pa.Table.from_pylist(rows, schema=schema))
        return rows.join_latest(table.key_by_columns("k"), how="left", schema=schema, name="Plans")

    with pytest.raises(WorkerFailed) as failed:
        run_dataflow(build, {"rows": [[], [], [7]], "table": [[{"k": "7", "w": 1}], [], []]})
    message = str(failed.value)
    assert "'Plans'" in message and "records of time 2" in message and "outside any batch" not in message, message


def _timer_of_type(kind: Any) -> Any:
    def on_record(context: Any, value: Any) -> None:
        context.set_timer(kind(context.time + 1))

    def on_timer(context: Any) -> None:
        context.emit(("timer", context.time))

    def build(scope: Any, numbers: Any) -> Any:
        return numbers.key_by(lambda n: n).process(on_record, on_timer, name="Timers")

    return build


def test_a_timer_at_a_numpy_integer_is_taken_and_one_at_a_float_refused_at_every_worker_count() -> None:
    """A timer time equal to a time the operator held (np.int64(1), 1.0) was taken; at any other it failed in
    Capability.delayed. Which happened depended on the records each worker had, so on the worker count."""
    np = pytest.importorskip("numpy")
    inputs = [[1, 2], [3]]
    want = {1: [(1, ("timer", 1)), (2, ("timer", 1))], 2: [(3, ("timer", 2))]}
    for workers in (1, 2):
        assert_outputs(run_dataflow(_timer_of_type(np.int64), inputs, workers=workers), want)
        for kind in (float, bool):
            refused = f"'Timers'.*the times of this scope are integers, not {kind.__name__}"
            with pytest.raises(WorkerFailed, match=refused):
                run_dataflow(_timer_of_type(kind), inputs, workers=workers)


@pytest.mark.parametrize(
    ("build", "operator", "advice"),
    [
        (lambda scope, words: words.key_by(len).fold(0, lambda total, word: total + 1), "Fold", "lambda: 0"),
        (lambda scope, words: words.key_by(len).stateful_map([], lambda s, w: (s, w)), "StatefulMap", "lambda: []"),
        (lambda scope, words: words.key_by(len).process(lambda c, w: None, initial=5), "Process", "lambda: 5"),
    ],
)
def test_an_initial_value_given_for_its_function_is_refused_with_the_lambda_to_write(build, operator, advice):
    """Found by the new-user audit: fold(0, ...), as accumulate(0, ...) is written, was told 'the initial-value
    function must be a function taking 0 arguments (); got 0'."""
    from scopes import BuildError

    for workers in (1, 2):
        with pytest.raises(WorkerFailed) as failed:
            run_dataflow(build, [["a", "bb"]], workers=workers)
        cause = failed.value.__cause__
        assert isinstance(cause, BuildError), failed.value
        assert f"operator '{operator}'" in str(cause) and f"pass {advice} (or a type" in str(cause), str(cause)
        assert "called once per key" in str(cause)
