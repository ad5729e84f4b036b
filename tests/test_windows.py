"""Event-time windows (scopes.windows): closed by the frontier, late records kept, same answer at every worker count."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.errors import WorkerFailed
from runtime.testing import assert_agree, assert_outputs, run_dataflow
from scopes import BuildError, ScopeBoundaryError
from scopes.windows import Session, Sliding, Tumbling

EPOCHS = [[(user, epoch) for user in ("ann", "bob", "cy")[: 1 + epoch % 3]] for epoch in range(9)]


def tumbling_count(scope: Any, clicks: Any) -> Any:
    return clicks.window(Tumbling(3), key=lambda click: click[0]).count().down


def sliding_sum(scope: Any, clicks: Any) -> Any:
    return clicks.key_by(lambda click: click[0]).window(Sliding(4, 2)).fold(0, lambda acc, c: acc + c[1]).down


def sessions(scope: Any, clicks: Any) -> Any:
    windowed = clicks.key_by(lambda click: click[0]).window(Session(2)).collect()
    return windowed.down.map(lambda r: (r[0], r[1], tuple(r[2])))


def late_split(scope: Any, events: Any) -> dict[str, Any]:
    windowed = events.key_by(lambda e: e[0]).window(Tumbling(2), event_time=lambda e: e[1], lateness=1).count()
    return {"down": windowed.down, "late": windowed.late}


def oracle(epochs: list[list[Any]], starts: Any, length: int, fold: Any, initial: Any) -> dict[int, list[Any]]:
    """Window results by close time, computed directly from the records."""
    windows: dict[tuple[Any, int], Any] = {}
    for epoch, records in enumerate(epochs):
        for record in records:
            for start in starts(epoch):
                key = (record[0], start)
                windows[key] = fold(windows.get(key, initial), record)
    expected: dict[int, list[Any]] = defaultdict(list)
    for (key, start), value in windows.items():
        expected[start + length - 1].append((key, (start, start + length), value))
    return expected


def test_tumbling_counts_close_when_the_frontier_passes_their_end() -> None:
    expected = oracle(EPOCHS, lambda e: [e - e % 3], 3, lambda acc, r: acc + 1, 0)
    for run in assert_agree(tumbling_count, EPOCHS):
        assert_outputs(run, expected)


def test_sliding_windows_hold_each_record_in_size_over_step_windows() -> None:
    def starts(e: int) -> list[int]:
        return [s for s in range(e - 4, e + 1) if s % 2 == 0 and s <= e < s + 4]

    expected = oracle(EPOCHS, starts, 4, lambda acc, r: acc + r[1], 0)
    for run in assert_agree(sliding_sum, EPOCHS):
        assert_outputs(run, expected)


def test_sessions_merge_records_closer_than_the_gap() -> None:
    epochs = [[("a", 0)], [("a", 1)], [], [("a", 3), ("b", 3)], [], [], [("a", 6)], [("a", 7), ("b", 7)]]
    expected = {
        1 + 1: [("a", (0, 2), (("a", 0), ("a", 1)))],
        3 + 1: [("a", (3, 4), (("a", 3),)), ("b", (3, 4), (("b", 3),))],
        7 + 1: [("a", (6, 8), (("a", 6), ("a", 7))), ("b", (7, 8), (("b", 7),))],
    }
    for run in assert_agree(sessions, epochs):
        assert_outputs(run, expected)


def test_a_session_bridged_by_a_later_record_merges_both_sides() -> None:
    def bridged(scope: Any, events: Any) -> Any:
        windowed = events.key_by(lambda e: e[0]).window(Session(3), event_time=lambda e: e[1], lateness=4)
        return windowed.collect().down.map(lambda r: (r[0], r[1], tuple(sorted(v[1] for v in r[2]))))

    # epoch 0 carries events 0 and 4 (two sessions); epoch 1 carries event 2, which joins them
    run = run_dataflow(bridged, [[("k", 0), ("k", 4)], [("k", 2)]], workers=2)
    assert_outputs(run, {4 + 3 - 1 + 4: [("k", (0, 5), (0, 2, 4))]})


def test_event_times_ahead_of_epochs_wait_and_late_ones_go_to_the_late_stream() -> None:
    # lateness 1: window [0, 2) closes at epoch 2; a record of event time 1 at epoch 3 is late
    epochs = [[("k", 0)], [("k", 3)], [("k", 1)], [("k", 1), ("k", 2)]]
    for run in assert_agree(late_split, epochs):
        assert_outputs(run, {2: [("k", (0, 2), 2)], 4: [("k", (2, 4), 2)]}, "down")
        assert_outputs(run, {3: [("k", ("k", 1))]}, "late")


def test_without_event_times_nothing_is_late() -> None:
    def counts(scope: Any, events: Any) -> dict[str, Any]:
        windowed = events.window(Tumbling(2), key=lambda e: e).count()
        return {"down": windowed.down, "late": windowed.late}

    run = run_dataflow(counts, [[1], [1, 2], [3]], workers=2)
    assert_outputs(run, {}, "late")
    assert_outputs(run, {1: [(1, (0, 2), 2), (2, (0, 2), 1)], 3: [(3, (2, 4), 1)]}, "down")


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 5)), max_size=6), min_size=1, max_size=8),
    st.integers(1, 4),
)
def test_tumbling_counts_match_a_direct_count(epochs: list[list[Any]], size: int) -> None:
    def build(scope: Any, records: Any) -> Any:
        return records.window(Tumbling(size), key=lambda r: r[0]).count().down

    counts: Counter[Any] = Counter()
    for epoch, records in enumerate(epochs):
        for key, _ in records:
            counts[(key, epoch - epoch % size)] += 1
    expected: dict[int, list[Any]] = defaultdict(list)
    for (key, start), n in counts.items():
        expected[start + size - 1].append((key, (start, start + size), n))
    assert_outputs(run_dataflow(build, epochs, workers=2), expected)


# ---------------------------------------------------------------------- misuse


def refused(build: Any, error: type[Exception], message: str) -> None:
    """``build`` fails when the dataflow is built, with ``error`` saying ``message``, at 1 and 2 workers."""
    for workers in (1, 2):
        with pytest.raises(WorkerFailed) as caught:
            run_dataflow(build, [[1]], workers=workers)
        assert isinstance(caught.value.__cause__, error), caught.value
        assert re.search(message, str(caught.value.__cause__)), caught.value


def test_a_window_without_a_key_is_refused_when_built() -> None:
    refused(lambda scope, s: s.window(Tumbling(2)).count().down, BuildError, "has no key")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Tumbling(0), "size must be a positive integer"),
        (lambda: Sliding(2, 3), "step .3. is longer than its size"),
        (lambda: Session(-1), "gap must be a positive integer"),
    ],
)
def test_bad_window_shapes_are_refused(make: Any, message: str) -> None:
    with pytest.raises(BuildError, match=message):
        make()


def test_lateness_without_event_times_is_refused() -> None:
    refused(lambda scope, s: s.window(Tumbling(2), key=str, lateness=3).count(), BuildError, "without event_time")


def test_windows_inside_a_loop_are_refused() -> None:
    def build(scope: Any, s: Any) -> Any:
        def body(inner: Any) -> Any:
            return s.enter(inner).window(Tumbling(2), key=str).count().down.leave()

        return scope.iterative(body)

    refused(build, BuildError, "windows need integer timestamps")


def test_an_event_time_that_is_not_an_integer_names_the_operator() -> None:
    def build(scope: Any, s: Any) -> Any:
        return s.window(Tumbling(2), key=str, event_time=lambda r: "soon").count().down

    with pytest.raises(WorkerFailed, match="event_time function of operator 'WindowCount'.*not str 'soon'"):
        run_dataflow(build, [[1]])


def test_a_window_reduce_function_that_returns_none_fails_naming_the_operator_and_time() -> None:
    """None is the window's "no value yet": a reduce returning it (list.extend returns None) made the next value
    start the window afresh, dropping those before it, without a word."""

    def build(scope: Any, s: Any) -> Any:
        pairs = s.map(lambda r: [r])
        return pairs.window(Tumbling(4), key=lambda r: "k").reduce(lambda acc, v: acc.extend(v), name="All").down

    for workers in (1, 2):
        with pytest.raises(WorkerFailed, match="'All'.*complete time 0.*window reduce function .*returned None"):
            run_dataflow(build, [[1, 2, 3]], workers=workers)
    good = run_dataflow(lambda scope, s: s.window(Tumbling(4), key=str).reduce(max).down, [[1], [3], [2]])
    assert good.output() == {3: [("1", (0, 4), 1), ("2", (0, 4), 2), ("3", (0, 4), 3)]}


def test_event_times_taken_out_of_a_numpy_array_are_integers() -> None:
    """A record-wise operator takes an array's elements as records, so a field read from one is a NumPy integer:
    the window refused it ("must return an integer, not int64")."""
    np = pytest.importorskip("numpy")

    def build(scope: Any, s: Any) -> Any:
        rows = s.map_batch(lambda batch: np.array(batch, dtype=[("k", "i8"), ("e", "i8")]))
        windowed = rows.window(Tumbling(2), key=lambda r: int(r["k"]), event_time=lambda r: r["e"], lateness=1)
        return windowed.count().down

    for workers in (1, 2):
        run = run_dataflow(build, [[(1, 0), (2, 1)], [(1, 3)], [(1, 1)]], workers=workers)
        assert_outputs(run, {2: [(1, (0, 2), 2), (2, (0, 2), 1)], 4: [(1, (2, 4), 1)]})

    def booleans(scope: Any, s: Any) -> Any:
        return s.window(Tumbling(2), key=str, event_time=lambda r: np.bool_(True)).count().down

    with pytest.raises(WorkerFailed, match="must return an integer.*not bool"):
        run_dataflow(booleans, [[1]])


def far_future(scope: Any, s: Any) -> Any:
    return s.window(Tumbling(4), key=str, event_time=lambda r: r, lateness=2).count(name="Far").down


@pytest.mark.parametrize(("workers", "processes"), [(1, 1), (2, 1), (1, 2)])
def test_an_event_time_whose_window_closes_past_the_last_timestamp_names_the_operator_and_window(
    workers: int, processes: int
) -> None:
    """An event time whose window closes past 2**64 - 1 failed with a CapabilityError about delaying a capability,
    naming neither the event time nor the window."""
    window = r"the window \(18446744073709551612, 18446744073709551616\) of key '18446744073709551613'"
    failed = rf"'Far'.*{window} would close at time 18446744073709551617, past the largest timestamp"
    with pytest.raises(WorkerFailed, match=failed):
        run_dataflow(far_future, [[2**64 - 3]], workers=workers, processes=processes)


def test_a_fold_that_fails_on_a_complete_time_names_that_time() -> None:
    """The fold runs when its record's time is complete, on the frontier, not on a message: a failure there said
    "outside any batch".  It names the time being applied."""

    def fails(total: int, value: int) -> int:
        raise ValueError("the fold failed")

    def build(scope: Any, s: Any) -> Any:
        return s.window(Tumbling(2), key=str).fold(0, fails, name="Sum").down

    with pytest.raises(WorkerFailed, match="'Sum'.* while applying the complete time 0 .*the fold failed"):
        run_dataflow(build, [[1]])


def test_a_join_across_scopes_is_refused() -> None:
    def build(scope: Any, s: Any) -> Any:
        def body(inner: Any) -> Any:
            inside = s.enter(inner).key_by(str)
            return s.key_by(str).join(inside).leave()

        return scope.iterative(body)

    refused(build, ScopeBoundaryError, "joins streams of different scopes")


def test_late_records_are_counted_in_the_metrics_as_the_windows_port_1() -> None:
    pytest.importorskip("prometheus_client")
    from helpers import eventually
    from test_metrics import scrape

    from runtime import execute
    from runtime.metrics import serve_metrics

    server = serve_metrics("127.0.0.1:0")
    try:

        def main(worker: Any) -> None:
            def build(scope: Any) -> Any:
                handle, events = scope.new_input("Events")
                windowed = events.window(Tumbling(2), key=lambda e: e[0], event_time=lambda e: e[1], lateness=1)
                counted = windowed.count(name="Sessions")
                return handle, counted.down.concat(counted.late).probe()

            handle, probe = worker.dataflow(build)
            for epoch, records in enumerate([[("k", 0)], [("k", 3)], [("k", 1)], [("k", 1), ("k", 0)]]):
                if worker.index == 0:
                    handle.send_batch(records)
                handle.advance_to(epoch + 1)
            handle.close()
            worker.step_while(lambda: not probe.done())

        execute(main, workers=2)

        def late() -> float:
            samples = scrape(server.url).get("pytimely_operator_port_records_out_total", [])
            return sum(v for labels, v in samples if labels["operator"] == "Sessions" and labels["port"] == "1")

        # the events reach the endpoint from a writer thread
        eventually(lambda: late() == 2, what="the two late records on the endpoint")
    finally:
        server.close()


class UnhashableMaker:
    """A callable that makes a first value and cannot be hashed (it defines __eq__ alone)."""

    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = None  # type: ignore[assignment]

    def __call__(self) -> int:
        return 0


@pytest.mark.parametrize(
    ("initial", "advice"),
    [
        (int, "pass 0 instead"),
        (list, "pass [] instead"),
        (lambda: 0, "pass the value it makes"),
        (UnhashableMaker(), "pass the value it makes"),  # looked up in a dict of types: a TypeError
    ],
)
def test_a_window_fold_given_a_function_for_its_initial_value_is_refused(initial, advice):
    """Found by the new-user audit: a keyed fold takes a function making the first value (fold(int, f)) and a
    window's fold the value itself; fold(list, lambda acc, r: acc) on a window gave <class 'list'> as each window's
    value, and fold(int, f) failed at run time comparing an int with a type."""

    def build(scope, numbers):
        return numbers.key_by(lambda n: n % 2).window(Tumbling(2)).fold(initial, lambda acc, n: acc, name="Sum").down

    for workers in (1, 2):
        with pytest.raises(WorkerFailed) as failed:
            run_dataflow(build, [[1, 2, 3]], workers=workers)
        cause = failed.value.__cause__
        assert isinstance(cause, BuildError), failed.value
        assert "operator 'Sum'" in str(cause) and "takes the value itself" in str(cause) and advice in str(cause)
