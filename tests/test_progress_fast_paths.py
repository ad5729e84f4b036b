"""The lean progress path gives the same answers as the general one.

Each fast path of the progress layer is checked against the path it short-cuts:

* :class:`~scopes.antichain.MutableAntichain`: frontiers of at most one element
  (and int times) change without a rebuild; every returned change list is
  checked against brute force, mixing single updates and batches;
* :class:`~scopes.reachability.Tracker`: acyclic graphs propagate in one
  topological pass; frontiers, pushed changes and output capabilities equal
  those of the earliest-first pass on the same graph and updates;
* a single worker applies its progress batches without a broadcast round trip,
  and its probes see the same frontiers as two workers do;
* an operator without frontier interest gets no pushes, yet reads correct
  frontiers as soon as it looks at them, and from then on.
"""

from collections import Counter, defaultdict
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_tracker_reference import INT_FAMILY, PRODUCT_FAMILY, mixed_scenarios, scenarios

from runtime.execute import execute
from scopes.antichain import MutableAntichain
from scopes.channels import Pipeline
from scopes.location import Target
from scopes.order import less_equal, less_than
from scopes.timestamp import Product

LAWS = settings(max_examples=300, deadline=None)
TRACKER_LAWS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)


def minimal(times: Any) -> set[Any]:
    """Brute force: the elements nothing else is strictly below."""
    items = set(times)
    return {x for x in items if not any(less_than(y, x) for y in items)}


# ---------------------------------------------------------------- MutableAntichain

small = st.integers(0, 5)
big = st.sampled_from([0, 1, 2**63, 2**64 - 2, 2**64 - 1])
diffs = st.sampled_from([-2, -1, 1, 1, 2, 3])
int_updates = st.tuples(st.one_of(small, big), diffs)
product_updates = st.tuples(st.builds(Product, small, small), diffs)
# each operation: a single update, or a batch (possibly with repeated times and zero diffs)
int_operations = st.lists(
    st.one_of(
        int_updates.map(lambda u: ("one", u)),
        st.lists(st.one_of(int_updates, st.tuples(small, st.just(0))), max_size=6).map(lambda b: ("batch", b)),
    ),
    max_size=25,
)
product_operations = st.lists(
    st.one_of(
        product_updates.map(lambda u: ("one", u)),
        st.lists(product_updates, max_size=5).map(lambda b: ("batch", b)),
    ),
    max_size=20,
)


def _check_operations(operations: list[tuple[str, Any]]) -> None:
    mutable: MutableAntichain[Any] = MutableAntichain()
    counts: dict[Any, int] = defaultdict(int)
    previous: set[Any] = set()
    for kind, payload in operations:
        batch = [payload] if kind == "one" else payload
        changes = mutable.update(*payload) if kind == "one" else mutable.update_iter(batch)
        for time, diff in batch:
            counts[time] += diff
        expected = minimal(t for t, c in counts.items() if c > 0)
        assert set(mutable.elements) == expected
        assert len(mutable.elements) == len(expected)
        # the changes are exactly the difference between the old and the new frontier
        replay = Counter({t: 1 for t in previous})
        for time, diff in changes:
            replay[time] += diff
        assert all(v in (0, 1) for v in replay.values()), (previous, changes)
        assert {t for t, v in replay.items() if v} == expected, (previous, batch, changes, expected)
        assert len(changes) == len(previous ^ expected), (previous, expected, changes)
        assert mutable.counts() == {t: c for t, c in counts.items() if c}
        for time in {t for t, _ in batch} | previous:
            assert mutable.less_equal(time) == any(less_equal(e, time) for e in expected)
            assert mutable.less_than(time) == any(less_than(e, time) for e in expected)
        previous = expected


@LAWS
@given(int_operations)
def test_int_fast_paths_match_brute_force(operations: list[tuple[str, Any]]) -> None:
    _check_operations(operations)


@LAWS
@given(product_operations)
def test_single_element_fast_paths_match_brute_force(operations: list[tuple[str, Any]]) -> None:
    _check_operations(operations)


def test_retiring_the_only_element_finds_the_next_least() -> None:
    mutable: MutableAntichain[int] = MutableAntichain([(5, 1), (3, 1), (9, 2)])
    assert mutable.elements == (3,)
    assert mutable.update(3, -1) == [(3, -1), (5, 1)]
    assert mutable.update_iter([(5, -1), (7, 1)]) == [(5, -1), (7, 1)]
    assert mutable.update_iter([(7, -1), (9, -2)]) == [(7, -1)]
    assert mutable.is_empty()
    assert mutable.update(4, -1) == []  # negative counts never shape the frontier
    assert mutable.update_iter([(4, 2)]) == [(4, 1)]


def test_incomparable_time_joins_a_single_element_frontier() -> None:
    mutable: MutableAntichain[Product] = MutableAntichain([(Product(1, 2), 1)])
    assert mutable.update(Product(2, 1), 1) == [(Product(2, 1), 1)]
    assert set(mutable.elements) == {Product(1, 2), Product(2, 1)}
    mutable = MutableAntichain([(Product(1, 2), 1)])
    assert mutable.update(Product(0, 0), 1) == [(Product(1, 2), -1), (Product(0, 0), 1)]
    assert mutable.update(Product(3, 3), 1) == []


# ---------------------------------------------------------------- Tracker


def _run_both(graph: Any, batches: list[list[tuple[Any, Any, int]]]) -> None:
    fast = graph.builder().build()
    general = graph.builder().build()
    assert (fast._rank is None) == graph.has_cycle(), graph
    general._rank = None  # force the earliest-first pass
    for batch in batches:
        for tracker in (fast, general):
            tracker.update_batch([(tracker.index_of(loc), t, d) for loc, t, d in batch])
            tracker.propagate_all()
        pushed_fast = Counter({(loc, t): d for loc, t, d in fast.drain_pushed()})
        pushed_general = Counter({(loc, t): d for loc, t, d in general.drain_pushed()})
        assert pushed_fast == pushed_general, graph
        assert fast.drain_output_changes() == general.drain_output_changes(), graph
        for loc in graph.locations:
            assert set(fast.frontier(loc).elements) == set(general.frontier(loc).elements), (loc, graph)
            assert fast.pointstamps(loc) == general.pointstamps(loc)
        assert fast.tracking_anything() == general.tracking_anything()


@TRACKER_LAWS
@given(scenarios(INT_FAMILY))
def test_acyclic_pass_matches_earliest_first_integer(scenario: Any) -> None:
    _run_both(*scenario)


@TRACKER_LAWS
@given(scenarios(PRODUCT_FAMILY, max_ops=4))
def test_acyclic_pass_matches_earliest_first_product(scenario: Any) -> None:
    _run_both(*scenario)


@TRACKER_LAWS
@given(mixed_scenarios(INT_FAMILY))
def test_acyclic_pass_matches_earliest_first_with_negative_counts(scenario: Any) -> None:
    _run_both(*scenario)


@TRACKER_LAWS
@given(scenarios(INT_FAMILY), st.data())
def test_reporting_fewer_locations_changes_no_frontier(scenario: Any, data: Any) -> None:
    """``report_only`` drains changes at the chosen locations only; every frontier stays exact."""
    graph, batches = scenario
    full = graph.builder().build()
    lean = graph.builder().build()
    chosen = data.draw(st.sets(st.sampled_from(range(len(graph.locations)))))
    lean.report_only(chosen)
    for batch in batches:
        for tracker in (full, lean):
            tracker.update_batch([(tracker.index_of(loc), t, d) for loc, t, d in batch])
            tracker.propagate_all()
        everything = full.drain_pushed_indexed()
        assert lean.drain_pushed_indexed() == [change for change in everything if change[0] in chosen]
        for loc in graph.locations:
            assert set(full.frontier(loc).elements) == set(lean.frontier(loc).elements)


# ---------------------------------------------------------------- single worker, no broadcast


def _probe_frontiers(workers: int, epochs: int = 12) -> list[list[Any]]:
    """Per worker: the probe frontier once each epoch is complete, and the counts seen."""

    def main(worker: Any) -> Any:
        seen: list[tuple[int, int]] = []

        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            counted = stream.map(lambda x: x * 2).exchange(lambda x: x).count()
            return handle, counted.inspect_batch(lambda time, batch: seen.extend((time, n) for n in batch)).probe()

        handle, probe = worker.dataflow(build)
        root = worker.dataflows[0].root
        frontiers = []
        for epoch in range(epochs):
            for record in range(epoch % 3 + worker.index):
                handle.send(record)
            handle.advance_to(epoch + 1)
            while probe.less_than(epoch + 1):
                worker.step()
                assert not root._progcaster.local, "a single worker's progress took the broadcast path"
            frontiers.append(list(probe.frontier().elements))
        handle.close()
        worker.step_while(lambda: not probe.done())
        frontiers.append(list(probe.frontier().elements))
        return frontiers, sorted(seen)

    return execute(main, workers=workers, stall_timeout=10)


def test_single_worker_sees_the_frontiers_of_two_workers() -> None:
    ((alone, alone_counts),) = _probe_frontiers(1)
    both = _probe_frontiers(2)
    expected = [[epoch + 1] for epoch in range(12)] + [[]]
    assert alone == expected
    for frontiers, _ in both:
        assert frontiers == expected
    # worker 1 sends one more record per epoch than worker 0
    assert sum(count for _, count in alone_counts) == sum(epoch % 3 for epoch in range(12))
    assert sum(count for _, count in both[0][1] + both[1][1]) == sum(2 * (epoch % 3) + 1 for epoch in range(12))


# ---------------------------------------------------------------- frontier interest


def test_operator_without_interest_reads_correct_frontiers_later() -> None:
    """A unary operator (no notify) looks at its frontier only from epoch 4 on; it must be current."""

    def main(worker: Any) -> Any:
        observed: list[tuple[int, tuple[Any, ...], tuple[Any, ...]]] = []
        state: dict[str, Any] = {}

        def constructor(capability: Any, info: Any) -> Any:
            capability.drop()

            def logic(input: Any, output: Any) -> None:
                for ref, batch in input:
                    output.session(ref).give_batch(batch)
                    if ref.time >= 4:
                        seen = input.frontier.elements
                        truth = state["root"].frontier_at(Target(state["index"], 0)).elements
                        observed.append((ref.time, seen, truth))

            return logic

        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            peeked = stream.unary(Pipeline, "Peek", constructor)
            return handle, peeked.probe()

        handle, probe = worker.dataflow(build)
        root = worker.dataflows[0].root
        index = next(i for i, name in enumerate(root.child_names) if name == "Peek")
        operator = root.children[index]
        state.update(root=root, index=index)
        port = operator.input_ports[0]
        interest = []
        for epoch in range(8):
            handle.send(epoch)
            handle.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(handle.time))
            interest.append(operator.frontier_interest)
            if epoch == 2:
                # no pushes so far: the port's own frontier is the initial one
                assert port._frontier.elements == (0,)
        handle.close()
        worker.step_while(lambda: not probe.done())
        assert operator.input_ports[0].frontier.elements == ()
        return interest, observed

    for workers in (1, 2):
        for interest, observed in execute(main, workers=workers, stall_timeout=10):
            assert interest == [False] * 4 + [True] * 4
            assert [time for time, _, _ in observed] == [4, 5, 6, 7]
            for time, seen, truth in observed:
                assert seen == truth, (time, seen, truth)
                assert all(less_equal(element, time) for element in seen)


def test_operators_that_look_at_frontiers_keep_their_interest() -> None:
    def main(worker: Any) -> Any:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            return handle, stream.map(lambda x: x).count().probe()

        handle, probe = worker.dataflow(build)
        root = worker.dataflows[0].root
        interests = {root.child_names[i]: child.frontier_interest for i, child in enumerate(root.children) if i}
        handle.close()
        worker.step_while(lambda: not probe.done())
        return interests

    (interests,) = execute(main, workers=1, stall_timeout=10)
    # map reads no frontier; count (notify) does; the probe, its handle's only one, lets the handle read the
    # frontier the tracker implies at its input, so it needs none pushed either
    assert interests["Map"] is False
    assert interests["Probe"] is False
    assert all(value for name, value in interests.items() if name not in ("Map", "Input", "Probe")), interests


def test_retiring_the_only_element_with_one_time_left_needs_no_rebuild(monkeypatch: Any) -> None:
    """A loop's frontier moving from one round to the next: the retired time leaves at most one other behind."""

    def no_rebuild(self: Any) -> Any:
        raise AssertionError("rebuilt")

    ints: MutableAntichain[int] = MutableAntichain([(3, 1), (4, 1)])
    products: MutableAntichain[Product] = MutableAntichain([(Product(0, 3), 1)])
    monkeypatch.setattr(MutableAntichain, "_rebuild", no_rebuild)
    assert ints.update(3, -1) == [(3, -1), (4, 1)]
    assert ints.update(4, -2) == [(4, -1)]  # a negative count left behind shapes nothing
    assert ints.elements == () and ints.counts() == {4: -1}
    assert products.update(Product(0, 3), -1) == [(Product(0, 3), -1)]
    assert products.update(Product(0, 4), 1) == [(Product(0, 4), 1)]
    assert products.update(Product(0, 5), -1) == []
    assert products.update(Product(0, 4), -1) == [(Product(0, 4), -1)]
    assert products.elements == ()
