"""A user-defined timestamp type that implements only the documented protocol.

The protocol is ``less_equal`` and ``less_than`` (a partial order), equality and
hashing.  Nothing may depend on Python's ``<``, which such a type does not have.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import test_tracker_reference as ref
from hypothesis import HealthCheck, given, settings

from runtime import execute
from scopes import (
    INTEGER,
    Antichain,
    MutableAntichain,
    PathSummary,
    Product,
    ProductType,
    ScopeBuilder,
    TimestampType,
)
from scopes.channels import Pipeline
from scopes.location import Source, Target
from scopes.reachability import TrackerBuilder
from scopes.timestamp import natural_order


class Version:
    """A pair ordered coordinate-wise, with no ``<``: (1, 2) and (2, 1) are incomparable."""

    __slots__ = ("major", "minor")

    def __init__(self, major: int, minor: int) -> None:
        self.major = major
        self.minor = minor

    def less_equal(self, other: Version) -> bool:
        return self.major <= other.major and self.minor <= other.minor

    def less_than(self, other: Version) -> bool:
        return self.less_equal(other) and self != other

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and (self.major, self.minor) == (other.major, other.minor)

    def __hash__(self) -> int:
        return hash((self.major, self.minor))

    def __repr__(self) -> str:
        return f"Version({self.major}, {self.minor})"


class VersionSummary(PathSummary):
    """Advance each coordinate by a fixed amount."""

    __slots__ = ("major", "minor")

    def __init__(self, major: int = 0, minor: int = 0) -> None:
        self.major = major
        self.minor = minor

    def results_in(self, time: Version) -> Version:
        return Version(time.major + self.major, time.minor + self.minor)

    def followed_by(self, other: PathSummary) -> VersionSummary:
        assert isinstance(other, VersionSummary)
        return VersionSummary(self.major + other.major, self.minor + other.minor)

    def less_equal(self, other: PathSummary) -> bool:
        return isinstance(other, VersionSummary) and self.major <= other.major and self.minor <= other.minor

    def advances(self) -> bool:
        return self.major > 0 or self.minor > 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VersionSummary) and (self.major, self.minor) == (other.major, other.minor)

    def __hash__(self) -> int:
        return hash((self.major, self.minor))


class VersionType(TimestampType):
    name = "version"

    def minimum(self) -> Version:
        return Version(0, 0)

    def identity(self) -> VersionSummary:
        return VersionSummary()

    def contains(self, value: Any) -> bool:
        return isinstance(value, Version)


VERSION = VersionType()


def test_version_really_has_no_less_than() -> None:
    with pytest.raises(TypeError):
        _ = Version(0, 0) < Version(1, 1)  # type: ignore[operator]


def test_mutable_antichain_and_antichain_with_incomparable_times() -> None:
    counts: MutableAntichain[Version] = MutableAntichain()
    counts.update_iter([(Version(1, 2), 1), (Version(2, 1), 1), (Version(3, 3), 1)])
    assert set(counts.elements) == {Version(1, 2), Version(2, 1)}
    counts.update_iter([(Version(1, 2), -1), (Version(2, 1), -1)])
    assert counts.elements == (Version(3, 3),)
    assert repr(Antichain([Version(1, 2), Version(2, 1)]))


def test_tracker_propagates_incomparable_times() -> None:
    builder = TrackerBuilder(VERSION)
    builder.add_node(1, 0, 1, name="source")
    builder.add_node(2, 2, 1, name="join")
    builder.add_node(3, 1, 0, name="sink")
    builder.add_edge(Source(1, 0), Target(2, 0))
    builder.add_edge(Source(1, 0), Target(2, 1))
    builder.add_edge(Source(2, 0), Target(3, 0))
    tracker = builder.build()
    for time in (Version(1, 2), Version(2, 1), Version(0, 5), Version(5, 0)):
        tracker.update_source(Source(1, 0), time, 1)
    tracker.propagate_all()
    frontier = tracker.frontier(Target(3, 0))
    assert set(frontier.elements) == {Version(1, 2), Version(2, 1), Version(0, 5), Version(5, 0)}
    tracker.update_source(Source(1, 0), Version(1, 2), -1)
    tracker.update_source(Source(1, 0), Version(0, 5), -1)
    tracker.propagate_all()
    assert set(tracker.frontier(Target(3, 0)).elements) == {Version(2, 1), Version(5, 0)}


@pytest.mark.parametrize("workers", [1, 2])
def test_dataflow_with_a_user_timestamp_runs_end_to_end(workers: int) -> None:
    lock = threading.Lock()
    received: list[tuple[Version, int]] = []

    def record(time: Version, batch: list[int]) -> None:
        with lock:
            received.extend((time, x) for x in batch)

    def main(worker: Any) -> list[Version]:
        def build(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()
            probe = stream.map(lambda x: x * 10).exchange(lambda x: x).inspect_batch(record).probe()
            return handle, probe

        handle, probe = worker.dataflow(build, timestamp=VERSION)
        completed = []
        for epoch in range(1, 4):
            handle.send(epoch + 100 * worker.index)
            handle.advance_to(Version(epoch, epoch))
            worker.step_while(lambda: probe.less_than(handle.time))
            completed.append(handle.time)
        return completed

    results = execute(main, workers=workers, stall_timeout=10)
    assert results == [[Version(1, 1), Version(2, 2), Version(3, 3)]] * workers
    expected = sorted((epoch - 1, (epoch + 100 * w) * 10) for w in range(workers) for epoch in range(1, 4))
    got = sorted(((t.major, x) for t, x in received), key=lambda p: (p[0], p[1]))
    assert got == expected


class _PartialOnlyProduct(ProductType):
    """Products handled as if they had no ``<``: the tracker picks minimal times itself."""

    def sort_key(self) -> Any:
        return None


class _SumKeyedProduct(ProductType):
    """Products ordered for the tracker by the sum of their coordinates (a linear extension)."""

    def sort_key(self) -> Any:
        return lambda time: time[0] + time[1]


def _family(ttype: ProductType) -> Any:
    base = ref.PRODUCT_FAMILY
    return ref.Family(ttype.name, ttype, base.choices, base.times, base.is_zero, base.max_step)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(ref.scenarios(_family(_PartialOnlyProduct(INTEGER)), max_ops=4))
def test_tracker_picking_minimal_times_matches_reference(scenario: Any) -> None:
    graph, batches = scenario
    tracker = ref.check_against_reference(graph, batches)
    assert tracker._sort_key is None


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(ref.scenarios(_family(_SumKeyedProduct(INTEGER)), max_ops=4))
def test_tracker_ordered_by_a_user_key_matches_reference(scenario: Any) -> None:
    graph, batches = scenario
    tracker = ref.check_against_reference(graph, batches)
    assert tracker._sort_key is not None and tracker._sort_key is not natural_order


def test_sort_keys_of_builtin_and_user_types() -> None:
    assert INTEGER.sort_key() is natural_order
    assert ProductType(INTEGER).sort_key() is natural_order
    assert VERSION.sort_key() is None
    assert ProductType(VERSION).sort_key() is None
    key = ProductType(_SumKeyedProduct(INTEGER)).sort_key()
    assert key is not None and key(Product(Product(1, 2), 3)) == (3, 3)


def test_notifications_for_a_user_timestamp_come_in_time_order_without_less_than() -> None:
    delivered: list[Version] = []

    def logic(input: Any, output: Any, notificator: Any) -> None:
        for message, batch in input:
            # two incomparable times and one after both: all become ready when the input closes
            for time in (Version(2, 2), Version(1, 0), Version(0, 1)):
                notificator.notify_at(message.delayed(time))
            output.session(message).give_batch(batch)
        for capability in notificator:
            delivered.append(capability.time)

    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()
            stream.unary_notify(Pipeline, "Notify", logic)
            return handle

        handle = worker.dataflow(build, timestamp=VERSION)
        handle.send(1)
        handle.close()

    execute(main, workers=1, stall_timeout=10)
    assert len(delivered) == 3 and delivered[-1] == Version(2, 2)
    assert set(delivered[:2]) == {Version(1, 0), Version(0, 1)}


class PartialVersion(Version):
    """A :class:`Version` whose ``<`` is the partial order itself, not an order that extends it."""

    __slots__ = ()

    def __lt__(self, other: PartialVersion) -> bool:
        return self.less_than(other)


class PartialVersionSummary(VersionSummary):
    def results_in(self, time: Version) -> PartialVersion:
        return PartialVersion(time.major + self.major, time.minor + self.minor)


class PartialVersionType(VersionType):
    """Its times have a ``<`` that does not extend the partial order, so its sort key says: the partial order only."""

    name = "partial version"

    def minimum(self) -> PartialVersion:
        return PartialVersion(0, 0)

    def identity(self) -> PartialVersionSummary:
        return PartialVersionSummary()

    def contains(self, value: Any) -> bool:
        return isinstance(value, PartialVersion)

    def sort_key(self) -> Any:
        return None


def test_notifications_follow_the_types_sort_key_not_its_own_less_than() -> None:
    # sorted() with this `<` puts (1, 1) before (1, 0): (0, 2) is incomparable to both
    assert sorted([PartialVersion(1, 1), PartialVersion(0, 2), PartialVersion(1, 0)])[0] == PartialVersion(1, 1)
    delivered: list[PartialVersion] = []

    def logic(input: Any, output: Any, notificator: Any) -> None:
        for message, _ in input:
            for time in (PartialVersion(1, 1), PartialVersion(0, 2), PartialVersion(1, 0)):
                notificator.notify_at(message.delayed(time))
        for capability in notificator:
            delivered.append(capability.time)

    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()
            stream.unary_notify(Pipeline, "Notify", logic)
            return handle

        handle = worker.dataflow(build, timestamp=PartialVersionType())
        handle.send(1)
        handle.close()

    execute(main, workers=1, stall_timeout=10)
    assert sorted(delivered, key=repr) == sorted(
        [PartialVersion(1, 1), PartialVersion(0, 2), PartialVersion(1, 0)], key=repr
    )
    assert delivered.index(PartialVersion(1, 0)) < delivered.index(PartialVersion(1, 1))


def test_count_emits_times_that_complete_together_without_less_than() -> None:
    emitted: list[tuple[Version, list[int]]] = []

    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()
            stream.count().inspect_batch(lambda time, counts: emitted.append((time, list(counts))))
            return handle

        handle = worker.dataflow(build, timestamp=VERSION)
        for time in (Version(1, 0), Version(0, 1), Version(2, 2)):  # three times, all complete at the close
            handle.send("record")
            handle.advance_to(Version(max(time.major, handle.time.major), max(time.minor, handle.time.minor)))
        handle.send("record")
        handle.close()

    execute(main, workers=1, stall_timeout=10)
    times = [time for time, _ in emitted]
    assert times == [Version(0, 0), Version(1, 0), Version(1, 1), Version(2, 2)]
    assert [counts for _, counts in emitted] == [[1], [1], [1], [1]]


def test_a_keyed_fold_applies_times_that_complete_together_without_less_than() -> None:
    emitted: list[tuple[Version, list[Any]]] = []

    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()
            folded = stream.key_by(lambda word: word).fold(lambda: 0, lambda total, word: total + 1)
            folded.inspect_batch(lambda time, batch: emitted.append((time, list(batch))))
            return handle

        handle = worker.dataflow(build, timestamp=VERSION)
        handle.send("a")
        handle.advance_to(Version(1, 0))
        handle.send("a")
        handle.advance_to(Version(1, 1))
        handle.send("b")
        handle.close()  # all three times complete at once

    execute(main, workers=1, stall_timeout=10)
    assert emitted == [(Version(0, 0), [("a", 1)]), (Version(1, 0), [("a", 2)]), (Version(1, 1), [("b", 1)])]


def test_keyed_process_runs_times_and_timers_without_less_than() -> None:
    fired: list[tuple[Version, Any]] = []

    def on_record(context: Any, value: Any) -> None:
        context.set_timer(Version(context.time.major + 1, context.time.minor + 1))

    def on_timer(context: Any) -> None:
        fired.append((context.time, context.key))

    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()
            stream.key_by(lambda word: word).process(on_record, on_timer)
            return handle

        handle = worker.dataflow(build, timestamp=VERSION)
        handle.send("a")
        handle.advance_to(Version(1, 0))
        handle.send("b")
        handle.close()  # both times, and the timers at (1, 1) and (2, 1), complete at once

    execute(main, workers=1, stall_timeout=10)
    assert fired == [(Version(1, 1), "a"), (Version(2, 1), "b")]


def test_columnar_aggregate_and_join_handle_times_that_complete_together_without_less_than() -> None:
    np = pytest.importorskip("numpy")
    pytest.importorskip("pyarrow")
    emitted: list[tuple[str, Version, int]] = []

    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            left, lefts = scope.new_input()
            right, rights = scope.new_input()
            totals = lefts.aggregate_batch("k", [("v", "sum")])
            totals.inspect_batch(lambda time, batch: emitted.append(("sum", time, len(batch))))
            joined = lefts.join_batch(rights, "k")
            joined.inspect_batch(lambda time, batch: emitted.append(("join", time, len(batch))))
            return left, right

        left, right = worker.dataflow(build, timestamp=VERSION)
        rows = np.array([(1, 2.0), (1, 3.0)], dtype=[("k", "i8"), ("v", "f8")])
        for handle in (left, right):
            handle.send_batch(rows)
            handle.advance_to(Version(1, 0))
            handle.send_batch(rows)
            handle.close()  # both times complete at once

    execute(main, workers=1, stall_timeout=10)
    assert sorted(emitted, key=repr) == sorted(
        [("sum", Version(0, 0), 1), ("sum", Version(1, 0), 1), ("join", Version(0, 0), 4), ("join", Version(1, 0), 4)],
        key=repr,
    )
