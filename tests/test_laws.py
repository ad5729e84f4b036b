"""Algebraic laws of the progress model's building blocks, checked with hypothesis.

Covers :class:`~scopes.antichain.Antichain` and :class:`~scopes.antichain.MutableAntichain`
against brute-force minimal elements, the path summary laws (``results_in`` never moves
time backwards, ``followed_by`` is sequential application, the summary order is sound),
:class:`~scopes.change_batch.ChangeBatch` compaction, the checking wrapper for
user-defined summaries, and the :class:`~scopes.timestamp.ProductType` refinement.
"""

import re
from collections import Counter, defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scopes.antichain import Antichain, MutableAntichain
from scopes.change_batch import ChangeBatch
from scopes.errors import SummaryError, TimestampError
from scopes.order import less_equal, less_than
from scopes.timestamp import (
    INTEGER,
    UINT64_MAX,
    CheckedSummary,
    IntegerSummary,
    PathSummary,
    Product,
    ProductSummary,
    ProductType,
    checked,
)

LAWS = settings(max_examples=200, deadline=None)

# ---------------------------------------------------------------- strategies

small = st.integers(0, 6)
ints = small
products = st.builds(Product, small, small)
nested = st.builds(Product, st.builds(Product, small, small), small)
# each strategy yields lists of times of a single type
time_lists = st.one_of(
    st.lists(ints, max_size=12),
    st.lists(products, max_size=12),
    st.lists(nested, max_size=12),
)

SAMPLE_TIMES = list(range(0, 31)) + [UINT64_MAX - k for k in range(0, 12)]

limits = st.one_of(st.just(UINT64_MAX), st.integers(0, 20), st.integers(UINT64_MAX - 8, UINT64_MAX))
integer_summaries = st.builds(IntegerSummary, st.integers(0, 4), limits)
product_summaries = st.builds(ProductSummary, integer_summaries, integer_summaries)
PRODUCT_SAMPLE_TIMES = [Product(a, b) for a in (0, 1, 3, 7, 15, UINT64_MAX - 1) for b in (0, 2, 5, 20, UINT64_MAX)]


def minimal(elements):
    """Brute force: the set of elements that nothing else in ``elements`` is strictly below."""
    items = set(elements)
    return {x for x in items if not any(less_than(y, x) for y in items)}


def apply_all(summaries, time):
    """Apply summaries one after the other; ``None`` once a time cannot pass."""
    for summary in summaries:
        if time is None:
            return None
        time = summary.results_in(time)
    return time


# ---------------------------------------------------------------- Antichain


@LAWS
@given(time_lists)
def test_antichain_elements_mutually_incomparable(times):
    chain = Antichain()
    for t in times:
        chain.insert(t)
    elements = chain.elements
    for i, x in enumerate(elements):
        for j, y in enumerate(elements):
            if i != j:
                assert not less_equal(x, y), (x, y, elements)


@LAWS
@given(time_lists)
def test_antichain_covers_every_inserted_element(times):
    chain = Antichain(times)
    for t in times:
        assert any(less_equal(e, t) for e in chain.elements), (t, chain)
        assert chain.less_equal(t)


@LAWS
@given(time_lists)
def test_antichain_is_brute_force_minimal_set(times):
    chain = Antichain()
    added = []
    for t in times:
        added.append(chain.insert(t))
    assert set(chain.elements) == minimal(times)
    assert len(chain) == len(minimal(times))
    # the return value of insert: False exactly when something present was <= t
    replay = Antichain()
    for t, was_added in zip(times, added, strict=True):
        expected = not any(less_equal(e, t) for e in replay.elements)
        assert was_added == expected
        replay.insert(t)


@LAWS
@given(st.data(), time_lists)
def test_antichain_insertion_order_does_not_matter(data, times):
    shuffled = data.draw(st.permutations(times))
    a, b = Antichain(times), Antichain()
    for t in shuffled:
        b.insert(t)
    assert a == b
    assert b == a
    assert set(a.elements) == set(b.elements)


@LAWS
@given(st.data())
def test_antichain_dominates_matches_definition(data):
    kind = data.draw(st.sampled_from([ints, products, nested]))
    xs = data.draw(st.lists(kind, max_size=6))
    ys = data.draw(st.lists(kind, max_size=6))
    a, b = Antichain(xs), Antichain(ys)
    expected = all(any(less_equal(x, y) for x in a.elements) for y in b.elements)
    assert a.dominates(b) == expected
    assert a.dominates(a)
    # dominance against the inserted elements, not just the minimal ones
    assert a.dominates(Antichain(xs + ys)) == all(a.less_equal(y) for y in minimal(xs + ys))


@LAWS
@given(st.data())
def test_antichain_less_equal_and_less_than_match_definition(data):
    kind = data.draw(st.sampled_from([ints, products, nested]))
    xs = data.draw(st.lists(kind, max_size=8))
    t = data.draw(kind)
    chain = Antichain(xs)
    assert chain.less_equal(t) == any(less_equal(x, t) for x in xs)
    assert chain.less_than(t) == any(less_than(x, t) for x in xs)


# ---------------------------------------------------------------- MutableAntichain

diffs = st.integers(-2, 3).filter(lambda d: d != 0)
int_batches = st.lists(st.lists(st.tuples(ints, diffs), max_size=6), max_size=10)
product_batches = st.lists(st.lists(st.tuples(products, diffs), max_size=6), max_size=10)
nested_batches = st.lists(st.lists(st.tuples(nested, diffs), max_size=6), max_size=8)


@LAWS
@given(st.one_of(int_batches, product_batches, nested_batches))
def test_mutable_antichain_against_brute_force(batches):
    mutable = MutableAntichain()
    counts = defaultdict(int)
    previous = Counter()
    for batch in batches:
        changes = mutable.update_iter(batch)
        for t, d in batch:
            counts[t] += d
        positive = [t for t, c in counts.items() if c > 0]
        expected = minimal(positive)
        assert set(mutable.elements) == expected
        assert mutable.frontier() == Antichain(expected)
        assert mutable.is_empty() == (not expected)
        # the reported changes, applied to the previous frontier, give the new one exactly
        replay = Counter(previous)
        for t, d in changes:
            replay[t] += d
        assert all(v in (0, 1) for v in replay.values()), (previous, changes)
        replay = Counter({t: v for t, v in replay.items() if v})
        assert replay == Counter(expected), (previous, batch, changes, expected)
        previous = replay
        # counts are tracked exactly, negatives included
        assert mutable.counts() == {t: c for t, c in counts.items() if c}
        for t in list(counts)[:3]:
            assert mutable.count_for(t) == counts[t]
        for t in {t for t, _ in batch}:
            assert mutable.less_equal(t) == any(less_equal(e, t) for e in expected)
            assert mutable.less_than(t) == any(less_than(e, t) for e in expected)


@LAWS
@given(st.one_of(int_batches, product_batches))
def test_mutable_antichain_single_updates_match_batches(batches):
    batched, single = MutableAntichain(), MutableAntichain()
    single_frontier = Counter()
    for batch in batches:
        batched.update_iter(batch)
        for t, d in batch:
            for changed, change in single.update(t, d):
                single_frontier[changed] += change
        single_frontier = Counter({t: v for t, v in single_frontier.items() if v})
        assert set(batched.elements) == set(single.elements)
        assert single_frontier == Counter(single.elements)


# ---------------------------------------------------------------- path summaries


@LAWS
@given(integer_summaries)
def test_integer_results_in_never_moves_backwards(summary):
    for t in SAMPLE_TIMES:
        result = summary.results_in(t)
        if result is not None:
            assert less_equal(t, result)
            assert result == t + summary.step
            assert result <= UINT64_MAX
            assert INTEGER.contains(result)
        else:
            assert t + summary.step > summary.limit


@LAWS
@given(product_summaries)
def test_product_results_in_never_moves_backwards(summary):
    for t in PRODUCT_SAMPLE_TIMES:
        result = summary.results_in(t)
        if result is not None:
            assert t.less_equal(result)
            assert result == Product(summary.outer.results_in(t[0]), summary.inner.results_in(t[1]))
        else:
            assert summary.outer.results_in(t[0]) is None or summary.inner.results_in(t[1]) is None


def _check_composition(a, b, times):
    composed = a.followed_by(b)
    for t in times:
        sequential = apply_all([a, b], t)
        if composed is None:
            assert sequential is None, (a, b, t, sequential)
        else:
            assert composed.results_in(t) == sequential, (a, b, composed, t)


@LAWS
@given(integer_summaries, integer_summaries)
def test_integer_followed_by_is_sequential_application(a, b):
    _check_composition(a, b, SAMPLE_TIMES)


@LAWS
@given(product_summaries, product_summaries)
def test_product_followed_by_is_sequential_application(a, b):
    _check_composition(a, b, PRODUCT_SAMPLE_TIMES)


@LAWS
@given(integer_summaries, integer_summaries, integer_summaries)
def test_integer_followed_by_is_associative_in_effect(a, b, c):
    ab = a.followed_by(b)
    bc = b.followed_by(c)
    left = None if ab is None else ab.followed_by(c)
    right = None if bc is None else a.followed_by(bc)
    for t in SAMPLE_TIMES:
        expected = apply_all([a, b, c], t)
        assert (None if left is None else left.results_in(t)) == expected
        assert (None if right is None else right.results_in(t)) == expected


def _check_order_sound(s, u, times):
    if s.less_equal(u):
        for t in times:
            ut = u.results_in(t)
            if ut is not None:
                st_ = s.results_in(t)
                assert st_ is not None, (s, u, t)
                assert less_equal(st_, ut), (s, u, t, st_, ut)


@LAWS
@given(integer_summaries, integer_summaries)
def test_integer_summary_order_is_sound(s, u):
    extra = [t for t in (u.limit - u.step, s.limit - s.step) if 0 <= t <= UINT64_MAX]
    _check_order_sound(s, u, SAMPLE_TIMES + extra)


@LAWS
@given(integer_summaries, integer_summaries)
def test_integer_summary_order_is_complete(s, u):
    """If ``s`` is not <= ``u``, some time shows it: ``u`` passes it and ``s`` does worse."""
    if s.less_equal(u):
        return
    witnesses = [t for t in SAMPLE_TIMES + [u.limit - u.step, 0] if 0 <= t <= UINT64_MAX]
    found = False
    for t in witnesses:
        ut = u.results_in(t)
        if ut is None:
            continue
        st_ = s.results_in(t)
        if st_ is None or not less_equal(st_, ut):
            found = True
            break
    assert found, (s, u)


@LAWS
@given(product_summaries, product_summaries)
def test_product_summary_order_is_sound(s, u):
    _check_order_sound(s, u, PRODUCT_SAMPLE_TIMES)


@LAWS
@given(st.one_of(st.lists(integer_summaries, max_size=6), st.lists(product_summaries, max_size=6)))
def test_summary_order_reflexive_and_transitive(summaries):
    for s in summaries:
        assert s.less_equal(s)
        assert not s.less_than(s)
    for a in summaries:
        for b in summaries:
            for c in summaries:
                if a.less_equal(b) and b.less_equal(c):
                    assert a.less_equal(c), (a, b, c)


@LAWS
@given(st.lists(st.builds(IntegerSummary, st.integers(0, 3), st.integers(0, 8)), max_size=8))
def test_bounded_summary_order_transitive_on_small_values(summaries):
    # small limits make the premises of transitivity hold often
    for a in summaries:
        for b in summaries:
            for c in summaries:
                if a.less_equal(b) and b.less_equal(c):
                    assert a.less_equal(c), (a, b, c)


@LAWS
@given(product_summaries, product_summaries)
def test_product_summary_order_is_coordinatewise(s, u):
    assert s.less_equal(u) == (s.outer.less_equal(u.outer) and s.inner.less_equal(u.inner))
    assert not s.less_equal(IntegerSummary(0))


def test_overflow_and_bounded_loop():
    assert IntegerSummary(1).results_in(UINT64_MAX) is None
    assert IntegerSummary(1).results_in(UINT64_MAX - 1) == UINT64_MAX
    assert IntegerSummary(0).results_in(UINT64_MAX) == UINT64_MAX
    assert IntegerSummary(1, limit=5).results_in(5) is None
    assert IntegerSummary(1, limit=5).results_in(4) == 5
    assert IntegerSummary(2**63).followed_by(IntegerSummary(2**63)) is None
    assert IntegerSummary(1, limit=5).followed_by(IntegerSummary(1, limit=5)).results_in(3) == 5
    assert IntegerSummary(1, limit=5).followed_by(IntegerSummary(1, limit=5)).results_in(4) is None
    big = ProductSummary(IntegerSummary(0), IntegerSummary(1))
    assert big.results_in(Product(3, UINT64_MAX)) is None
    assert (
        ProductSummary(IntegerSummary(2**63), IntegerSummary(0)).followed_by(
            ProductSummary(IntegerSummary(2**63), IntegerSummary(0))
        )
        is None
    )
    assert IntegerSummary(1).advances() and not IntegerSummary(0).advances()
    assert ProductSummary(IntegerSummary(0), IntegerSummary(1)).advances()
    assert not ProductSummary(IntegerSummary(0), IntegerSummary(0)).advances()


def test_composition_with_a_different_summary_type_is_an_error():
    with pytest.raises(SummaryError):
        IntegerSummary(1).followed_by(ProductSummary(IntegerSummary(0), IntegerSummary(0)))
    with pytest.raises(SummaryError):
        ProductSummary(IntegerSummary(0), IntegerSummary(0)).followed_by(IntegerSummary(1))


# ---------------------------------------------------------------- ChangeBatch

keys = st.one_of(small, products)
updates = st.lists(st.tuples(keys, st.integers(-3, 3)), max_size=30)


def brute_accumulate(items):
    acc = defaultdict(int)
    for k, d in items:
        acc[k] += d
    return {k: v for k, v in acc.items() if v != 0}


@LAWS
@given(updates)
def test_change_batch_compacts_like_brute_force(items):
    batch = ChangeBatch()
    for k, d in items:
        batch.update(k, d)
    expected = brute_accumulate(items)
    assert dict(batch.items()) == expected
    assert len(batch) == len(expected)
    assert batch.is_empty() == (not expected)
    assert all(d != 0 for _, d in batch.items())
    for k, _ in items:
        assert batch.get(k) == expected.get(k, 0)
    assert ChangeBatch(items) == batch
    extended = ChangeBatch()
    extended.extend(items)
    assert extended == batch
    assert dict(iter(batch)) == expected


@LAWS
@given(updates)
def test_change_batch_drain_empties(items):
    batch = ChangeBatch(items)
    drained = batch.drain()
    assert dict(drained) == brute_accumulate(items)
    assert len(drained) == len(dict(drained))
    assert batch.is_empty() and len(batch) == 0 and batch.items() == []
    assert batch.drain() == []
    assert batch == ChangeBatch()


@LAWS
@given(updates, updates)
def test_change_batch_drain_into_adds(first, second):
    a, b = ChangeBatch(first), ChangeBatch(second)
    a.drain_into(b)
    assert a.is_empty()
    assert dict(b.items()) == brute_accumulate(first + second)


@LAWS
@given(updates, st.integers(-3, 3), st.integers(-3, 3))
def test_change_batch_shift_moves_one_unit(items, old, new):
    batch = ChangeBatch(items)
    batch.shift(old, new)
    assert batch == ChangeBatch([*items, (old, -1), (new, 1)])


@LAWS
@given(st.data(), updates)
def test_change_batch_order_does_not_matter(data, items):
    shuffled = data.draw(st.permutations(items))
    assert ChangeBatch(items) == ChangeBatch(shuffled)
    assert dict(ChangeBatch(shuffled).items()) == brute_accumulate(items)


# ---------------------------------------------------------------- checked summaries


class Backwards(PathSummary):
    """A user-defined summary that (wrongly) subtracts one."""

    def results_in(self, time):
        if isinstance(time, Product):
            return Product(time[0], time[1] - 1)
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
        return 7

    def __repr__(self):
        return "Backwards()"


class PlusTwo(PathSummary):
    """A well-behaved user-defined summary."""

    def results_in(self, time):
        return time + 2

    def followed_by(self, other):
        return PlusTwo()

    def less_equal(self, other):
        return isinstance(other, PlusTwo)

    def advances(self):
        return True

    def __eq__(self, other):
        return isinstance(other, PlusTwo)

    def __hash__(self):
        return 2

    def __repr__(self):
        return "PlusTwo()"


def test_backwards_user_summary_is_wrapped_and_rejected():
    wrapped = checked(Backwards(), "operator 3 (bad) input 0 -> output 0")
    assert isinstance(wrapped, CheckedSummary)
    with pytest.raises(SummaryError) as info:
        wrapped.results_in(5)
    message = str(info.value)
    assert re.search(r"\b5\b", message) and re.search(r"\b4\b", message), message
    assert "Backwards()" in message
    assert "operator 3 (bad)" in message
    with pytest.raises(SummaryError) as info:
        wrapped.results_in(Product(3, 7))
    message = str(info.value)
    assert repr(Product(3, 7)) in message and repr(Product(3, 6)) in message, message
    # composition keeps the check
    composed = wrapped.followed_by(checked(Backwards()))
    with pytest.raises(SummaryError):
        composed.results_in(9)


@LAWS
@given(st.integers(0, 1000))
def test_checked_user_summary_is_transparent_when_correct(t):
    wrapped = checked(PlusTwo())
    assert isinstance(wrapped, CheckedSummary)
    assert wrapped.results_in(t) == t + 2
    assert wrapped == PlusTwo() and wrapped.less_equal(PlusTwo()) and wrapped.advances()
    assert wrapped.followed_by(wrapped).results_in(t) == t + 2


def test_checked_leaves_builtins_alone_and_rejects_non_summaries():
    s = IntegerSummary(3)
    p = ProductSummary(IntegerSummary(0), IntegerSummary(1))
    assert checked(s) is s
    assert checked(p) is p
    with pytest.raises(SummaryError):
        checked(lambda t: t)  # type: ignore[arg-type]


@pytest.mark.parametrize("step", [-1, -5, 1.0, True, "1", None])
def test_integer_summary_rejects_bad_steps(step):
    with pytest.raises(SummaryError):
        IntegerSummary(step)


@pytest.mark.parametrize("limit", [-1, UINT64_MAX + 1, 2.0])
def test_integer_summary_rejects_bad_limits(limit):
    with pytest.raises(SummaryError):
        IntegerSummary(0, limit)


# ---------------------------------------------------------------- ProductType refinement

ONE = ProductType(INTEGER)
TWO = ProductType(ONE)


@LAWS
@given(st.integers(0, UINT64_MAX))
def test_product_type_round_trip(t):
    inner = ONE.to_inner(t)
    assert inner == Product(t, 0)
    assert ONE.contains(inner)
    assert ONE.to_outer(inner) == t


@LAWS
@given(nested)
def test_nested_product_type_round_trip_and_minimum(time):
    outer = time[0]
    entered = TWO.to_inner(outer)
    assert entered == Product(outer, 0)
    assert TWO.to_outer(entered) == outer
    assert TWO.to_outer(time) == outer
    assert less_equal(entered, Product(outer, time[1]))
    assert TWO.contains(time)
    assert less_equal(TWO.minimum(), time)
    assert less_equal(ONE.minimum(), outer)
    # lexicographic order extends the partial order
    assert TWO.minimum() <= time


def test_product_type_shapes():
    assert ONE.minimum() == Product(0, 0)
    assert TWO.minimum() == Product(Product(0, 0), 0)
    assert TWO.depth() == 2 and ONE.depth() == 1 and INTEGER.depth() == 0
    assert TWO.identity() == ProductSummary(ONE.identity(), IntegerSummary(0))
    assert ONE.feedback() == ProductSummary(IntegerSummary(0), IntegerSummary(1))
    assert ONE.feedback(2, 9) == ProductSummary(IntegerSummary(0), IntegerSummary(2, 9))
    assert not ONE.contains((0, 0))
    assert not ONE.contains(Product(-1, 0))
    assert not ONE.contains(Product(True, 0))
    assert not TWO.contains(Product(0, 0))
    with pytest.raises(TimestampError):
        ONE.validate(Product(0, -1))
    with pytest.raises(TimestampError):
        INTEGER.validate(2**64)
    assert ONE.validate(Product(1, 2)) == Product(1, 2)


@LAWS
@given(integer_summaries, integer_summaries, integer_summaries)
def test_summarize_keeps_the_outer_summary(a, b, c):
    assert ONE.summarize(ProductSummary(a, b)) == a
    nested_summary = ProductSummary(ProductSummary(a, b), c)
    assert TWO.summarize(nested_summary) == ProductSummary(a, b)
    assert ONE.summarize(TWO.summarize(nested_summary)) == a


def test_summarize_rejects_non_product_summaries():
    with pytest.raises(SummaryError):
        ONE.summarize(IntegerSummary(1))


@LAWS
@given(st.lists(nested, min_size=2, max_size=2))
def test_lexicographic_order_extends_partial_order(pair):
    a, b = pair
    if less_equal(a, b):
        assert a <= b
    if less_than(a, b):
        assert a < b
    assert less_equal(a, b) == (less_equal(a[0], b[0]) and a[1] <= b[1])
