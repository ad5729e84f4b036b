"""The reachability :class:`~scopes.reachability.Tracker` against a brute-force reference.

Hypothesis generates random dataflow graphs, loops included: operators with zero to two
inputs and outputs, random internal connectivity, random edges, and sometimes scope
inputs and outputs on the boundary (node 0).  The reference knows nothing of antichains
or incremental propagation: it explores every ``(location, time)`` reachable from the
positive pointstamps along paths of bounded length and takes minimal elements.  Paths of
at most ``3 * number_of_locations`` edges suffice because a cycle can only add to a time
(cycles whose summaries do not advance are rejected by the builder, and the test checks
that the builder rejects exactly those).
"""

from collections import Counter, defaultdict

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from scopes.antichain import Antichain
from scopes.errors import CycleError, GraphError, SummaryError
from scopes.location import Source, Target
from scopes.order import less_equal, less_than
from scopes.reachability import TrackerBuilder
from scopes.timestamp import (
    INTEGER,
    IntegerSummary,
    PathSummary,
    Product,
    ProductSummary,
    ProductType,
)

PRODUCT = ProductType(INTEGER)


def PS(a, b):  # noqa: N802 - reads like a constructor
    return ProductSummary(IntegerSummary(a), IntegerSummary(b))


class Family:
    """A timestamp family: its type, the summaries operators may use, and sample times."""

    def __init__(self, name, ttype, choices, times, is_zero, max_step):
        self.name = name
        self.ttype = ttype
        self.choices = choices  # each choice: a list of summaries for one (input, output) cell
        self.times = times
        self.is_zero = is_zero
        self.max_step = max_step


INT_FAMILY = Family(
    "integer",
    INTEGER,
    [[], [IntegerSummary(0)], [IntegerSummary(1)], [IntegerSummary(2)]],
    st.integers(0, 5),
    lambda s: s.step == 0,
    2,
)
PRODUCT_FAMILY = Family(
    "product",
    PRODUCT,
    [[], [PS(0, 0)], [PS(0, 1)], [PS(1, 0)], [PS(0, 1), PS(1, 0)], [PS(1, 1)]],
    st.builds(Product, st.integers(0, 3), st.integers(0, 3)),
    lambda s: s.outer.step == 0 and s.inner.step == 0,
    1,
)


class Graph:
    """A generated graph: operators, edges, and the reference's adjacency."""

    def __init__(self, family, scope_inputs, scope_outputs, ops, edges, mapping_form):
        self.family = family
        self.scope_inputs = scope_inputs
        self.scope_outputs = scope_outputs
        self.ops = ops  # list of (index, inputs, outputs, {(i, o): [summaries]})
        self.edges = edges
        self.mapping_form = mapping_form
        self.locations = [Source(0, i) for i in range(scope_inputs)]
        self.locations += [Target(0, o) for o in range(scope_outputs)]
        for index, ins, outs, _ in ops:
            self.locations += [Target(index, i) for i in range(ins)]
            self.locations += [Source(index, o) for o in range(outs)]
        # successor lists: (location, summary or None for a plain edge)
        self.succ = defaultdict(list)
        for source, target in edges:
            self.succ[source].append((target, None))
        for index, _ins, _outs, conn in ops:
            for (i, o), summaries in conn.items():
                for s in summaries:
                    self.succ[Target(index, i)].append((Source(index, o), s))
        self.depth = 3 * len(self.locations)
        # beyond this, a time or summary coordinate cannot be minimal (it took a cycle)
        self.cap = 8 + family.max_step * (len(self.locations) + 1)

    def builder(self):
        b = TrackerBuilder(self.family.ttype, inputs=self.scope_inputs, outputs=self.scope_outputs)
        for index, ins, outs, conn in self.ops:
            if self.mapping_form:
                spec = {key: list(value) for key, value in conn.items() if value}
            else:
                spec = [[list(conn.get((i, o), [])) for o in range(outs)] for i in range(ins)]
            b.add_node(index, ins, outs, spec, name=f"op{index}")
        for source, target in self.edges:
            b.add_edge(source, target)
        return b

    def __repr__(self):
        return (
            f"Graph(inputs={self.scope_inputs}, outputs={self.scope_outputs}, ops={self.ops!r}, edges={self.edges!r})"
        )

    # ------------------------------------------------------------ reference computations

    def has_stalling_cycle(self):
        """Whether some location reaches itself along edges and zero-step summaries only."""
        zero = defaultdict(list)
        for loc, succs in self.succ.items():
            for nxt, s in succs:
                if s is None or self.family.is_zero(s):
                    zero[loc].append(nxt)
        for start in self.locations:
            seen, stack = set(), list(zero[start])
            while stack:
                loc = stack.pop()
                if loc == start:
                    return True
                if loc in seen:
                    continue
                seen.add(loc)
                stack.extend(zero[loc])
        return False

    def has_cycle(self):
        """Whether some location reaches itself at all."""
        for start in self.locations:
            seen, stack = set(), [n for n, _ in self.succ[start]]
            while stack:
                loc = stack.pop()
                if loc == start:
                    return True
                if loc not in seen:
                    seen.add(loc)
                    stack.extend(n for n, _ in self.succ[loc])
        return False

    def _too_big(self, value):
        if isinstance(value, int):
            return value > self.cap
        return any(self._too_big(v) for v in value)

    def reachable_times(self, pointstamps):
        """Every (location, time) reachable from ``pointstamps`` in at most ``depth`` edges."""
        seen = set(pointstamps)
        layer = list(seen)
        for _ in range(self.depth):
            nxt = []
            for loc, t in layer:
                for succ, s in self.succ[loc]:
                    r = t if s is None else s.results_in(t)
                    if r is None or (succ, r) in seen or self._too_big(r):
                        continue
                    seen.add((succ, r))
                    nxt.append((succ, r))
            if not nxt:
                break
            layer = nxt
        reached = defaultdict(set)
        for loc, t in seen:
            reached[loc].add(t)
        return reached

    def path_summaries(self, start):
        """Every summary of a path from ``start`` of at most ``depth`` edges, per location."""
        identity = self.family.ttype.identity()
        seen = {(start, identity)}
        layer = [(start, identity)]
        for _ in range(self.depth):
            nxt = []
            for loc, path in layer:
                for succ, s in self.succ[loc]:
                    composed = path if s is None else path.followed_by(s)
                    if composed is None or (succ, composed) in seen:
                        continue
                    if self._too_big(_steps(composed)):
                        continue
                    seen.add((succ, composed))
                    nxt.append((succ, composed))
            if not nxt:
                break
            layer = nxt
        found = defaultdict(set)
        for loc, path in seen:
            found[loc].add(path)
        return found


def _steps(summary):
    if isinstance(summary, IntegerSummary):
        return summary.step
    return (_steps(summary.outer), _steps(summary.inner))


def minimal(times):
    return {x for x in times if not any(less_than(y, x) for y in times)}


def minimal_summaries(summaries):
    return {x for x in summaries if not any(y != x and y.less_equal(x) for y in summaries)}


@st.composite
def graphs(draw, family, max_ops=6, min_boundary=0):
    n = draw(st.integers(1, max_ops))
    scope_inputs = draw(st.integers(min_boundary, max(1, min_boundary)))
    scope_outputs = draw(st.integers(min_boundary, max(1, min_boundary)))
    ops = []
    for index in range(1, n + 1):
        ins = draw(st.integers(0, 2))
        outs = draw(st.integers(0, 2))
        conn = {}
        for i in range(ins):
            for o in range(outs):
                choice = draw(st.sampled_from(family.choices))
                if choice:
                    conn[(i, o)] = choice
        ops.append((index, ins, outs, conn))
    sources = [Source(0, i) for i in range(scope_inputs)]
    targets = [Target(0, o) for o in range(scope_outputs)]
    for index, ins, outs, _ in ops:
        sources += [Source(index, o) for o in range(outs)]
        targets += [Target(index, i) for i in range(ins)]
    edges = []
    if sources and targets:
        edges = draw(
            st.lists(
                st.tuples(st.sampled_from(sources), st.sampled_from(targets)),
                min_size=min(n, len(sources) * len(targets)),
                max_size=3 * n + 2,
                unique=True,
            )
        )
    return Graph(family, scope_inputs, scope_outputs, ops, edges, draw(st.booleans()))


@st.composite
def scenarios(draw, family, max_ops=6):
    """A graph the builder accepts, plus batches of pointstamp updates."""
    graph = draw(graphs(family, max_ops))
    stalls = graph.has_stalling_cycle()
    try:
        graph.builder().build()
    except CycleError:
        assert stalls, f"CycleError without a stalling cycle in {graph!r}"
        assume(False)
    assert not stalls, f"no CycleError for a stalling cycle in {graph!r}"
    assume(graph.locations)
    locs = st.sampled_from(graph.locations)
    additions = draw(st.lists(st.tuples(locs, family.times, st.integers(1, 2)), min_size=1, max_size=10))
    cuts = sorted(draw(st.lists(st.integers(0, len(additions)), max_size=3)))
    batches = _split(additions, cuts)
    # second phase: retract some of the additions, fully or in part
    retract = draw(st.lists(st.sampled_from(range(len(additions))), unique=True))
    retractions = []
    for k in retract:
        loc, t, count = additions[k]
        retractions.append((loc, t, -draw(st.integers(1, count))))
    cuts = sorted(draw(st.lists(st.integers(0, len(retractions)), max_size=3)))
    batches += _split(retractions, cuts)
    return graph, batches


def _split(items, cuts):
    out, start = [], 0
    for cut in cuts + [len(items)]:
        if cut > start:
            out.append(items[start:cut])
            start = cut
    return out


def check_against_reference(graph, batches, mode="typed"):
    """Apply ``batches`` through the API named by ``mode``; compare with the reference."""
    tracker = graph.builder().build()
    counts = defaultdict(int)
    replay = defaultdict(Counter)
    implied = 0
    tracked = set(tracker.locations())
    assert tracked == set(graph.locations)
    for batch in batches:
        for loc, t, d in batch:
            counts[(loc, t)] += d
        if mode == "batch":
            tracker.update_batch([(tracker.index_of(loc), t, d) for loc, t, d in batch])
        for loc, t, d in batch:
            if mode == "index":
                tracker.update_index(tracker.index_of(loc), t, d)
            elif mode == "location":
                tracker.update(loc, t, d)
            elif mode == "typed" and isinstance(loc, Source):
                tracker.update_source(loc, t, d)
            elif mode == "typed":
                tracker.update_target(loc, t, d)
        tracker.propagate_all()
        positive = [key for key, c in counts.items() if c > 0]
        reached = graph.reachable_times(positive)
        for loc, t, d in tracker.drain_pushed():
            replay[loc][t] += d
        for loc in graph.locations:
            expected = minimal(reached.get(loc, set()))
            frontier = tracker.frontier(loc)
            assert frontier == Antichain(expected), (loc, frontier, expected, dict(counts), graph)
            assert set(frontier.elements) == expected
            replayed = {t: v for t, v in replay[loc].items() if v}
            assert all(v == 1 for v in replayed.values()), (loc, replayed)
            assert set(replayed) == expected, (loc, replayed, expected)
            # accumulated pointstamps, negative counts included
            exact = {t: c for (l2, t), c in counts.items() if l2 == loc and c}
            assert tracker.pointstamps(loc) == exact
        # the capabilities reported at scope outputs come from inner pointstamps only
        inner = [(loc, t) for (loc, t) in positive if loc.node != 0]
        inner_reached = graph.reachable_times(inner)
        tracker.drain_output_changes()
        for o in range(graph.scope_outputs):
            expected = minimal(inner_reached.get(Target(0, o), set()))
            assert tracker.output_capabilities(o) == Antichain(expected), (o, expected, graph)
        assert tracker.tracking_anything() == bool(positive)
        direct = {loc for loc, _ in positive}
        implied = max(implied, sum(1 for loc in reached if reached[loc] and loc not in direct))
    event(f"most locations with implied (not direct) frontiers: {min(implied, 5)}")
    event(f"graph has an advancing cycle: {graph.has_cycle()}")
    return tracker


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(scenarios(INT_FAMILY), st.sampled_from(["typed", "location", "index", "batch"]))
def test_tracker_matches_reference_integer(scenario, mode):
    graph, batches = scenario
    check_against_reference(graph, batches, mode)


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(scenarios(PRODUCT_FAMILY, max_ops=4))
def test_tracker_matches_reference_product(scenario):
    graph, batches = scenario
    check_against_reference(graph, batches)


@st.composite
def mixed_scenarios(draw, family):
    """Arbitrary updates, including retractions that arrive before what they retract."""
    graph, _ = draw(scenarios(family, max_ops=5))
    locs = st.sampled_from(graph.locations)
    update = st.tuples(locs, family.times, st.sampled_from([-1, 1, 1, 2]))
    batches = draw(st.lists(st.lists(update, min_size=1, max_size=5), min_size=1, max_size=6))
    return graph, batches


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(mixed_scenarios(INT_FAMILY))
def test_tracker_matches_reference_with_transient_negative_counts(scenario):
    graph, batches = scenario
    check_against_reference(graph, batches, "batch")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(INT_FAMILY))
def test_cycle_error_exactly_for_stalling_cycles(graph):
    stalls = graph.has_stalling_cycle()
    try:
        graph.builder().build()
    except CycleError as error:
        assert stalls, graph
        names = {f"op{index}" for index, *_ in graph.ops}
        assert error.operators and set(error.operators) <= names
        for name in error.operators:
            assert name in str(error)
    else:
        assert not stalls, graph


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(PRODUCT_FAMILY, max_ops=4))
def test_cycle_error_exactly_for_stalling_cycles_product(graph):
    stalls = graph.has_stalling_cycle()
    try:
        graph.builder().build()
    except CycleError:
        assert stalls, graph
    else:
        assert not stalls, graph


def _check_summaries(graph):
    builder = graph.builder()
    try:
        tracker = builder.build()
    except CycleError:
        tracker = None
    for start in graph.locations:
        compiled = builder.summaries_from(start)
        found = graph.path_summaries(start)
        assert set(compiled) == set(found), (start, set(compiled), set(found), graph)
        for loc, summaries in found.items():
            expected = minimal_summaries(summaries)
            assert compiled[loc] == Antichain(expected), (start, loc, compiled[loc], expected)
        if tracker is not None:
            assert tracker.summaries_from(start) == compiled


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(INT_FAMILY))
def test_summaries_from_matches_reference_integer(graph):
    _check_summaries(graph)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(PRODUCT_FAMILY, max_ops=3))
def test_summaries_from_matches_reference_product(graph):
    _check_summaries(graph)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(graphs(INT_FAMILY, min_boundary=1))
def test_scope_summary_matches_reference(graph):
    assume(not graph.has_stalling_cycle())
    tracker = graph.builder().build()
    table = tracker.scope_summary()
    for i in range(graph.scope_inputs):
        found = graph.path_summaries(Source(0, i))
        for o in range(graph.scope_outputs):
            expected = minimal_summaries(found.get(Target(0, o), set()))
            assert table[i].get(o, Antichain()) == Antichain(expected), (i, o, table[i], expected, graph)
            assert all(len(cell) for cell in table[i].values()), "sparse rows hold no empty cells"


def test_scope_summary_includes_direct_pass_through():
    """Regression: an edge straight from a scope input to a scope output is a path."""
    b = TrackerBuilder(INTEGER, inputs=1, outputs=1)
    b.add_edge(Source(0, 0), Target(0, 0))
    assert b.summaries_from(Source(0, 0))[Target(0, 0)] == Antichain([IntegerSummary(0)])
    assert b.build().scope_summary() == [{0: Antichain([IntegerSummary(0)])}]


# ---------------------------------------------------------------- hand-built graphs


def loop_builder(feedback_step):
    """alpha -> beta -> gamma -> alpha, with gamma's summary ``feedback_step``; delta hangs off."""
    b = TrackerBuilder(INTEGER)
    b.add_node(1, 1, 1, name="alpha")
    b.add_node(2, 1, 1, name="beta")
    b.add_node(3, 1, 1, [[[IntegerSummary(feedback_step)]]], name="gamma")
    b.add_node(4, 1, 0, name="delta")
    b.add_edge(Source(1, 0), Target(2, 0))
    b.add_edge(Source(2, 0), Target(3, 0))
    b.add_edge(Source(3, 0), Target(1, 0))
    b.add_edge(Source(2, 0), Target(4, 0))
    return b


def test_cycle_error_names_the_operators():
    with pytest.raises(CycleError) as info:
        loop_builder(0).build()
    error = info.value
    assert isinstance(error, GraphError)
    assert set(error.operators) == {"alpha", "beta", "gamma"}
    assert "delta" not in error.operators
    for name in ("alpha", "beta", "gamma"):
        assert name in str(error)
    assert "delta" not in str(error)


def test_advancing_loop_builds_and_tracks():
    tracker = loop_builder(1).build()
    tracker.update_source(Source(1, 0), 3, 1)
    tracker.propagate_all()
    assert tracker.frontier(Target(2, 0)).elements == (3,)
    assert tracker.frontier(Target(1, 0)).elements == (4,)
    assert tracker.frontier(Target(4, 0)).elements == (3,)
    tracker.update_source(Source(1, 0), 3, -1)
    tracker.propagate_all()
    for loc in tracker.locations():
        assert tracker.frontier(loc).is_empty()
    assert not tracker.tracking_anything()


def test_self_loop_without_advance_is_a_cycle():
    b = TrackerBuilder(INTEGER)
    b.add_node(1, 1, 1, name="spin")
    b.add_edge(Source(1, 0), Target(1, 0))
    with pytest.raises(CycleError) as info:
        b.build()
    assert info.value.operators == ["spin"]
    assert "spin" in str(info.value)


@pytest.mark.parametrize(
    "edge",
    [
        (Source(9, 0), Target(1, 0)),  # unknown source node
        (Source(1, 0), Target(9, 0)),  # unknown target node
        (Source(1, 5), Target(2, 0)),  # output port out of range
        (Source(1, 0), Target(2, 3)),  # input port out of range
        (Source(0, 0), Target(1, 0)),  # the boundary has no scope inputs
        (Source(1, 0), Target(0, 0)),  # ... and no scope outputs
    ],
)
def test_bad_edges_are_graph_errors(edge):
    b = TrackerBuilder(INTEGER)
    b.add_node(1, 1, 1, name="first")
    b.add_node(2, 1, 1, name="second")
    b.add_edge(*edge)
    with pytest.raises(GraphError) as info:
        b.build()
    assert not isinstance(info.value, CycleError)
    with pytest.raises(GraphError):
        b.summaries_from(Source(1, 0))


def test_edges_must_go_from_source_to_target():
    b = TrackerBuilder(INTEGER)
    b.add_node(1, 1, 1)
    with pytest.raises(GraphError):
        b.add_edge(Target(1, 0), Source(1, 0))  # type: ignore[arg-type]
    with pytest.raises(GraphError):
        b.add_edge((1, 0), Target(1, 0))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "summary",
    [
        [[[IntegerSummary(0)], [IntegerSummary(0)]]],  # one input, but a row of two outputs
        [[[IntegerSummary(0)]], [[IntegerSummary(0)]]],  # two rows for one input
        [],  # no rows
        {(0, 1): [IntegerSummary(0)]},  # output out of range
        {(1, 0): [IntegerSummary(0)]},  # input out of range
        {0: [IntegerSummary(0)]},  # key is not a pair
    ],
)
def test_bad_summary_shapes_are_graph_errors(summary):
    b = TrackerBuilder(INTEGER)
    with pytest.raises(GraphError) as info:
        b.add_node(1, 1, 1, summary, name="shapely")
    assert "shapely" in str(info.value)


@pytest.mark.parametrize("index", [0, -1])
def test_bad_operator_index(index):
    with pytest.raises(GraphError):
        TrackerBuilder(INTEGER).add_node(index, 1, 1)


def test_duplicate_operator_and_bad_port_counts():
    b = TrackerBuilder(INTEGER)
    b.add_node(1, 1, 1, name="once")
    with pytest.raises(GraphError) as info:
        b.add_node(1, 1, 1)
    assert "once" in str(info.value)
    with pytest.raises(GraphError):
        b.add_node(2, -1, 1)


class Backwards(PathSummary):
    def results_in(self, time):
        return time - 1

    def followed_by(self, other):
        return Backwards()

    def less_equal(self, other):
        return True

    def advances(self):
        return False

    def __eq__(self, other):
        return isinstance(other, Backwards)

    def __hash__(self):
        return 11

    def __repr__(self):
        return "Backwards()"


def test_backwards_user_summary_fails_during_propagation_naming_the_operator():
    b = TrackerBuilder(INTEGER)
    b.add_node(1, 1, 1, [[[Backwards()]]], name="rewinder")
    tracker = b.build()
    tracker.update_target(Target(1, 0), 5, 1)
    with pytest.raises(SummaryError) as info:
        tracker.propagate_all()
    message = str(info.value)
    assert "rewinder" in message and "5" in message and "4" in message, message


def test_multiple_incomparable_frontier_elements():
    """Two paths into a join, one advancing each coordinate: the frontier has two elements."""
    b = TrackerBuilder(PRODUCT)
    b.add_node(1, 0, 1, name="src")
    b.add_node(2, 1, 2, [[[PS(1, 0)], [PS(0, 1)]]], name="split")
    b.add_node(3, 2, 0, name="join")
    b.add_edge(Source(1, 0), Target(2, 0))
    b.add_edge(Source(2, 0), Target(3, 0))
    b.add_edge(Source(2, 1), Target(3, 1))
    b.add_node(4, 2, 1, {(0, 0): [PS(1, 0)], (1, 0): [PS(0, 1)]}, name="merge")
    b.add_edge(Source(2, 0), Target(4, 0))
    b.add_edge(Source(2, 1), Target(4, 1))
    tracker = b.build()
    tracker.update_target(Target(2, 0), Product(0, 0), 1)
    tracker.propagate_all()
    assert tracker.frontier(Source(4, 0)) == Antichain([Product(2, 0), Product(0, 2)])
    assert len(tracker.frontier(Source(4, 0))) == 2
    assert less_equal(Product(0, 0), Product(2, 0))
