"""The safety property of progress tracking, checked by simulating workers.

From the specification (seed 000, "A Safety Property"): for any collection of counts
resulting from the accumulation of arbitrary prefixes of progress update batches, if
no positive pointstamp could result in ``(l1, t1)``, then no message will ever arrive
at location ``l1`` bearing timestamp ``t1``.

The simulation runs ``W`` workers over one small dataflow graph::

    input ──> map ──> loop head ──> feedback (+1, bounded) ──┐
                ^            │  ^                            │
    diagnostic ─┘ (reaches   │  └────────────────────────────┘
    input         nothing)   └──> sink

Every worker holds one capability per operator output at time 0, and every worker's
tracker starts with count ``W`` there.  A worker may consume a message addressed to it
(acquiring capabilities at the operator's outputs through its summaries), send a message
at a capability it holds, downgrade a capability, or drop one.  Each action appends ONE
atomic progress batch to the worker's outgoing FIFO log.  Each worker is also an
observer with its own tracker, and has applied a prefix of every worker's log; hypothesis
chooses the interleaving of actions and deliveries.

Whenever an observer's frontier at ``l`` does not include ``t`` (``not
frontier(l).less_equal(t)``), ``(observer, l, t)`` is *declared complete*.  From then on
the ground truth may hold no message at ``l`` with a time ``<= t`` (nor a capability:
capabilities are pointstamps too, and the same argument covers them).
"""

from collections import Counter

from hypothesis import event, given, settings
from hypothesis import strategies as st

from scopes.location import Source, Target
from scopes.order import less_equal
from scopes.reachability import TrackerBuilder
from scopes.timestamp import INTEGER, IntegerSummary

MAX_TIME = 6
CHECK_TIMES = list(range(MAX_TIME + 2))

I0 = IntegerSummary(0)
FEEDBACK = IntegerSummary(1, limit=MAX_TIME)

# node -> (name, inputs, outputs, {(input, output): [summaries]})
OPERATORS = {
    1: ("input", 0, 1, {}),
    2: ("map", 2, 1, {(0, 0): [I0]}),  # input 1 is diagnostic: it reaches no output
    3: ("loop head", 2, 1, {(0, 0): [I0], (1, 0): [I0]}),
    4: ("feedback", 1, 1, {(0, 0): [FEEDBACK]}),
    5: ("sink", 1, 0, {}),
    6: ("diagnostic input", 0, 1, {}),
}
EDGES = [
    (Source(1, 0), Target(2, 0)),
    (Source(6, 0), Target(2, 1)),
    (Source(2, 0), Target(3, 0)),
    (Source(3, 0), Target(4, 0)),
    (Source(3, 0), Target(5, 0)),
    (Source(4, 0), Target(3, 1)),
]
SOURCES = [Source(n, o) for n, (_, _, outs, _) in OPERATORS.items() for o in range(outs)]
TARGETS = [Target(n, i) for n, (_, ins, _, _) in OPERATORS.items() for i in range(ins)]
LOCATIONS = SOURCES + TARGETS


def build_tracker():
    builder = TrackerBuilder(INTEGER)
    for node, (name, ins, outs, summary) in OPERATORS.items():
        builder.add_node(node, ins, outs, summary, name=name)
    for source, target in EDGES:
        builder.add_edge(source, target)
    return builder.build()


def acquired_by_consuming(target, time):
    """The capabilities an operator acquires by consuming a message at ``target``."""
    _, _, _, summary = OPERATORS[target.node]
    result = []
    for (i, o), summaries in sorted(summary.items()):
        if i != target.port:
            continue
        for s in summaries:
            advanced = s.results_in(time)
            if advanced is not None:
                result.append((Source(target.node, o), advanced))
    return result


class Simulation:
    """Ground truth (capabilities held, messages in flight or unconsumed) and observers."""

    def __init__(self, workers, split_consume=False):
        self.workers = workers
        self.split_consume = split_consume
        self.trackers = [build_tracker() for _ in range(workers)]
        for tracker in self.trackers:
            for source in SOURCES:
                tracker.update_source(source, 0, workers)
            tracker.propagate_all()
        self.caps = [Counter({(source, 0): 1 for source in SOURCES}) for _ in range(workers)]
        self.inbox = [Counter() for _ in range(workers)]  # messages addressed to each worker
        self.logs = [[] for _ in range(workers)]
        self.seen = [[0] * workers for _ in range(workers)]  # seen[observer][worker]
        self.declared = {loc: {} for loc in LOCATIONS}  # loc -> {time: first observer}
        self.declarations_with_activity = 0
        for observer in range(workers):
            self._observe(observer)

    # ------------------------------------------------------------ actions (ground truth)

    def _emit(self, worker, batch):
        self.logs[worker].append(batch)

    def consume(self, worker, target, time):
        assert self.inbox[worker][(target, time)] > 0
        self.inbox[worker][(target, time)] -= 1
        acquired = acquired_by_consuming(target, time)
        for cap in acquired:
            self.caps[worker][cap] += 1
        retire = [(target, time, -1)]
        acquire = [(source, t, 1) for source, t in acquired]
        if self.split_consume and acquire:
            self._emit(worker, retire)
            self._emit(worker, acquire)
        else:
            self._emit(worker, retire + acquire)

    def send(self, worker, source, time, target, destination):
        assert self.caps[worker][(source, time)] > 0
        assert (source, target) in EDGES
        self.inbox[destination][(target, time)] += 1
        self._emit(worker, [(target, time, 1)])

    def downgrade(self, worker, source, time, new_time):
        assert self.caps[worker][(source, time)] > 0 and time < new_time
        self.caps[worker][(source, time)] -= 1
        self.caps[worker][(source, new_time)] += 1
        self._emit(worker, [(source, time, -1), (source, new_time, 1)])

    def drop(self, worker, source, time):
        assert self.caps[worker][(source, time)] > 0
        self.caps[worker][(source, time)] -= 1
        self._emit(worker, [(source, time, -1)])

    # ------------------------------------------------------------ progress (observers)

    def pending(self, observer, worker):
        return self.seen[observer][worker] < len(self.logs[worker])

    def deliver(self, observer, worker):
        """Apply the next batch of ``worker``'s log at ``observer``, then look at its frontiers."""
        batch = self.logs[worker][self.seen[observer][worker]]
        self.seen[observer][worker] += 1
        tracker = self.trackers[observer]
        for loc, time, diff in batch:
            tracker.update(loc, time, diff)
        tracker.propagate_all()
        self._observe(observer)

    def deliver_all(self):
        progress = True
        while progress:
            progress = False
            for observer in range(self.workers):
                for worker in range(self.workers):
                    if self.pending(observer, worker):
                        self.deliver(observer, worker)
                        progress = True

    def _observe(self, observer):
        tracker = self.trackers[observer]
        truth = self.truth()
        for loc in LOCATIONS:
            frontier = tracker.frontier(loc)
            for t in CHECK_TIMES:
                if not frontier.less_equal(t) and t not in self.declared[loc]:
                    self.declared[loc][t] = observer
                    if any(n > 0 and l2 == loc for (l2, _), n in truth.items()):
                        self.declarations_with_activity += 1

    # ------------------------------------------------------------ the safety check

    def truth(self):
        """Every pointstamp that exists: capabilities held and messages not yet consumed."""
        total = Counter()
        for worker in range(self.workers):
            for (source, t), n in self.caps[worker].items():
                if n:
                    total[(source, t)] += n
            for (target, t), n in self.inbox[worker].items():
                if n:
                    total[(target, t)] += n
        return total

    def violations(self):
        found = []
        for (loc, t), n in self.truth().items():
            assert n >= 0
            for declared, observer in self.declared[loc].items():
                if less_equal(t, declared):
                    kind = "message" if isinstance(loc, Target) else "capability"
                    found.append(
                        f"{kind} at {loc!r} time {t} (x{n}) although observer {observer} "
                        f"declared time {declared} complete there"
                    )
        return found

    # ------------------------------------------------------------ choosing actions

    def act(self, worker, kind, a, b):
        """Perform action ``kind`` (0 consume, 1 send, 2 downgrade, 3 drop) or the next possible."""
        return any(self._try(worker, (kind + k) % 4, a, b) for k in range(4))

    def _try(self, worker, kind, a, b):
        caps = sorted(key for key, n in self.caps[worker].items() if n > 0)
        if kind == 0:
            inbox = sorted(key for key, n in self.inbox[worker].items() if n > 0)
            if not inbox:
                return False
            self.consume(worker, *inbox[a % len(inbox)])
            return True
        if not caps:
            return False
        source, time = caps[a % len(caps)]
        if kind == 1:
            targets = sorted(t for s, t in EDGES if s == source)
            target = targets[b % len(targets)]
            self.send(worker, source, time, target, (b // len(targets)) % self.workers)
            return True
        if kind == 2:
            if time >= MAX_TIME:
                return False
            self.downgrade(worker, source, time, min(MAX_TIME, time + 1 + b % 2))
            return True
        self.drop(worker, source, time)
        return True


steps = st.lists(
    st.tuples(st.integers(0, 6), st.integers(0, 255), st.integers(0, 255), st.integers(0, 255)),
    min_size=40,
    max_size=100,
)


@settings(max_examples=250, deadline=None)
@given(st.integers(1, 3), steps)
def test_no_message_arrives_where_an_observer_declared_completion(workers, schedule):
    sim = Simulation(workers)
    actions = 0
    for kind, a, b, c in schedule:
        if kind <= 3 and actions < 40:
            if sim.act(a % workers, kind, b, c):
                actions += 1
        else:
            observer, worker = a % workers, b % workers
            if sim.pending(observer, worker):
                sim.deliver(observer, worker)
        assert not sim.violations(), sim.violations()
    event(f"actions: {min(actions // 10 * 10, 40)}+")
    event(f"declarations while the location was active: {min(sim.declarations_with_activity, 3)}")
    # let every batch circulate: every observer now sees exactly the ground truth
    sim.deliver_all()
    assert not sim.violations(), sim.violations()
    truth = sim.truth()
    for tracker in sim.trackers:
        for loc in LOCATIONS:
            exact = {t: n for (l2, t), n in truth.items() if l2 == loc and n}
            assert tracker.pointstamps(loc) == exact, (loc, exact)


# ---------------------------------------------------------------- the checker can fail


def _split_scenario(split):
    """One worker: a message goes input -> map, is consumed, and map sends on to the loop."""
    sim = Simulation(1, split_consume=split)
    for source in SOURCES:
        if source != Source(1, 0):
            sim.drop(0, source, 0)
    sim.send(0, Source(1, 0), 0, Target(2, 0), 0)
    sim.drop(0, Source(1, 0), 0)
    sim.consume(0, Target(2, 0), 0)  # acquires a capability at map's output, time 0
    # the observer receives everything so far, except (when split) the acquisition half
    available = len(sim.logs[0]) - (1 if split else 0)
    for _ in range(available):
        sim.deliver(0, 0)
    sim.send(0, Source(2, 0), 0, Target(3, 0), 0)
    return sim


def test_split_batches_are_detected_as_unsafe():
    sim = _split_scenario(split=True)
    found = sim.violations()
    assert any("message at Target(3, 0) time 0" in v for v in found), found
    assert 0 in sim.declared[Target(3, 0)]


def test_the_same_scenario_with_atomic_batches_is_safe():
    sim = _split_scenario(split=False)
    assert not sim.violations()
    assert 0 not in sim.declared[Target(3, 0)]
    # the diagnostic input reaches nothing the loop depends on: its port is already complete
    assert set(sim.declared[Target(2, 1)]) == set(CHECK_TIMES)
    sim.consume(0, Target(3, 0), 0)  # loop head: capability at its output, time 0
    sim.send(0, Source(3, 0), 0, Target(4, 0), 0)
    sim.drop(0, Source(3, 0), 0)
    sim.consume(0, Target(4, 0), 0)  # feedback: capability at time 1
    sim.send(0, Source(4, 0), 1, Target(3, 1), 0)
    sim.drop(0, Source(4, 0), 1)
    sim.drop(0, Source(2, 0), 0)
    sim.deliver_all()
    assert not sim.violations()
    # the message circulating at time 1 holds time 1 back at the loop head but not time 0
    assert 0 in sim.declared[Target(3, 1)] and 1 not in sim.declared[Target(3, 1)]
    sim.consume(0, Target(3, 1), 1)
    sim.drop(0, Source(3, 0), 1)
    sim.deliver_all()
    assert not sim.violations()
    assert not sim.truth()
    for loc in LOCATIONS:
        assert set(sim.declared[loc]) == set(CHECK_TIMES), loc


def test_out_of_order_delivery_is_detected_as_unsafe():
    """Applying a worker's batches out of FIFO order breaks safety; the checker sees it."""
    sim = Simulation(1)
    for source in SOURCES:
        if source != Source(1, 0):
            sim.drop(0, source, 0)
    for _ in range(len(sim.logs[0])):
        sim.deliver(0, 0)
    sim.send(0, Source(1, 0), 0, Target(2, 0), 0)
    sim.drop(0, Source(1, 0), 0)
    # deliver the drop before the send
    sim.logs[0][-1], sim.logs[0][-2] = sim.logs[0][-2], sim.logs[0][-1]
    sim.deliver(0, 0)
    found = sim.violations()
    assert any("message at Target(2, 0) time 0" in v for v in found), found


def test_multi_worker_initial_counts_hold_back_completion():
    """With two workers, one worker dropping its capability does not complete anything."""
    sim = Simulation(2)
    sim.drop(0, Source(1, 0), 0)
    sim.deliver(1, 0)
    assert 0 not in sim.declared[Target(2, 0)]
    sim.drop(1, Source(1, 0), 0)
    sim.deliver(1, 1)
    # the map and loop still hold capabilities at 0, but the input edge is now complete
    assert 0 in sim.declared[Target(2, 0)]
    assert not sim.violations()
