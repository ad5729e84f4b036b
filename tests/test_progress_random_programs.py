"""Random dataflows against the laws of progress tracking, on the real engine.

Hypothesis builds chains of stages (maps, filters, exchanges, operators that hold a
capability per time or one capability they downgrade, notificators, notifications
requested at later times, nested loops and regions) over an input whose workers advance
their epochs irregularly.  Every stage records what arrives and every frontier and
notification it sees, and the laws are checked afterwards:

* never too early: no record arrives at a time its input frontier had already passed,
  or at or before a time already notified; a probe that passed a time has every output
  record before it;
* never never: every time that arrived is notified, every frontier ends empty;
* the same answer as a sequential reference, on 1 worker and on 2 simulated workers
  (hypothesis picks the seed, so the interleaving, of the simulated communicator).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import execute
from runtime.communication.simulation import simulate
from scopes import Exchange, Pipeline
from scopes.progress.order import less_equal
from scopes.progress.timestamp import Product

LEAVES = st.one_of(
    st.tuples(st.just("map"), st.integers(0, 3)),
    st.tuples(st.just("filter"), st.integers(2, 4)),
    st.tuples(st.just("exchange")),
    st.tuples(st.just("per_time")),
    st.tuples(st.just("downgrading")),
    st.tuples(st.just("notify")),
    st.tuples(st.just("notify_later")),
)


def stages(depth: int) -> st.SearchStrategy[list[Any]]:
    options = [LEAVES]
    if depth < 2:
        options.append(st.tuples(st.just("loop"), st.integers(1, 3), st.deferred(lambda: stages(depth + 1))))
        options.append(st.tuples(st.just("region"), st.deferred(lambda: stages(depth + 1))))
    return st.lists(st.one_of(*options), max_size=4)


EPOCHS = st.lists(  # (records, how far each of two workers advances after them)
    st.tuples(st.lists(st.integers(0, 20), max_size=5), st.tuples(st.integers(0, 2), st.integers(0, 2))),
    min_size=1,
    max_size=4,
)


def later(time: Any) -> Any:
    return Product(time.outer, later(time.inner)) if isinstance(time, Product) else time + 1


def reference(spec: list[Any], value: int) -> list[int]:
    """What ``spec`` makes of one record (time does not change: loops leave at their entry time)."""
    values = [value]
    for stage in spec:
        kind, out = stage[0], []
        for v in values:
            if kind == "map":
                out.append(v + stage[1])
            elif kind == "filter":
                out.extend([v] if v % stage[1] else [])
            elif kind == "loop":
                pending = [(v, v % stage[1])]
                while pending:
                    current, rounds = pending.pop()
                    for w in reference(stage[2], current):
                        out.extend([w] if rounds == 0 else [])
                        pending.extend([(w, rounds - 1)] if rounds else [])
            elif kind == "region":
                out.extend(reference(stage[1], v))
            else:
                out.append(v)
        values = out
    return values


class Log:
    def __init__(self) -> None:
        self.events: dict[tuple[int, str], list[tuple[str, Any]]] = {}
        self.outputs: list[tuple[Any, int]] = []

    def add(self, worker: int, name: str, kind: str, time: Any) -> None:
        self.events.setdefault((worker, name), []).append((kind, time))


def watched(stream: Any, log: Log, name: str, kind: str, worker: int) -> Any:
    """One stage that records what it sees; records keep their time (and their loop counters)."""
    if kind in ("notify", "notify_later"):
        buffered: dict[Any, list[Any]] = {}

        def notified(input: Any, output: Any, notificator: Any) -> None:
            for ref, batch in input:
                log.add(worker, name, "arrive", ref.time)
                if kind == "notify_later":
                    output.session(ref).give_batch(list(batch))
                    if ref.time not in buffered:
                        buffered[ref.time] = []
                        notificator.notify_at(ref.delayed(later(ref.time)))
                    continue
                if ref.time not in buffered:
                    buffered[ref.time] = []
                    notificator.notify_at(ref.retain())
                buffered[ref.time].extend(batch)
            for capability in notificator:
                log.add(worker, name, "notified", capability.time)
                if kind == "notify":
                    output.session(capability).give_batch(buffered.pop(capability.time))

        contract = Pipeline if kind == "notify_later" else Exchange(lambda record: record[0])
        return stream.unary_notify(contract, name, notified)

    def constructor(capability: Any, info: Any) -> Any:
        held: dict[str, Any] = {"one": capability if kind == "downgrading" else None}
        if kind != "downgrading":
            capability.drop()
        buffered: dict[Any, list[Any]] = {}
        per_time: dict[Any, Any] = {}

        def logic(input: Any, output: Any) -> None:
            for ref, batch in input:
                log.add(worker, name, "arrive", ref.time)
                if kind == "checker":
                    output.session(ref).give_batch(list(batch))
                    continue
                one = held["one"]
                if ref.time not in per_time and (one is None or not less_equal(one.time, ref.time)):
                    per_time[ref.time] = ref.retain()
                buffered.setdefault(ref.time, []).extend(batch)
            frontier = input.frontier
            for time in sorted(buffered):
                if not frontier.less_equal(time):
                    log.add(worker, name, "notified", time)
                    one, mine = held["one"], per_time.pop(time, None)
                    capability = one if one is not None and less_equal(one.time, time) else mine
                    output.session(capability, time).give_batch(buffered.pop(time))
                    if mine is not None:
                        mine.drop()
            one = held["one"]
            if one is not None and not buffered:
                one.drop()
                held["one"] = None
            elif one is not None:
                least = min(buffered)  # the least time, if there is one (min is lexicographic for Product)
                if less_equal(one.time, least) and all(less_equal(least, time) for time in buffered):
                    one.downgrade(least)
            log.add(worker, name, "frontier", list(frontier.elements))

        return logic

    return stream.unary_frontier(Pipeline, name, constructor)


def build_stages(spec: list[Any], stream: Any, log: Log, path: str, worker: int) -> Any:
    stream = watched(stream, log, f"{path}/in", "checker", worker)
    for index, stage in enumerate(spec):
        name, kind = f"{path}/{index}{stage[0]}", stage[0]
        if kind == "map":
            stream = stream.map(lambda r, k=stage[1]: (r[0] + k, r[1]))
        elif kind == "filter":
            stream = stream.filter(lambda r, m=stage[1]: r[0] % m != 0)
        elif kind == "exchange":
            stream = stream.exchange(lambda r: r[0])
        elif kind == "loop":

            def body(
                inner: Any, n: int = stage[1], inner_spec: list[Any] = stage[2], name: str = name, s: Any = stream
            ) -> Any:
                handle, feedback = inner.loop_variable(1)
                entered = s.map(lambda r: (r[0], r[1] + (r[0] % n,))).enter(inner).concat(feedback)
                done, running = build_stages(inner_spec, entered, log, name, worker).branch(lambda r: r[1][-1] > 0)
                running.map(lambda r: (r[0], r[1][:-1] + (r[1][-1] - 1,))).connect_loop(handle)
                return done.map(lambda r: (r[0], r[1][:-1])).leave()

            stream = stream.scope.iterative(body)
        elif kind == "region":
            region_spec = stage[1]
            stream = stream.scope.region(
                lambda inner, s=stream, n=name, sp=region_spec: build_stages(sp, s.enter(inner), log, n, worker).leave()
            )
        else:
            stream = watched(stream, log, name, kind, worker)
        stream = watched(stream, log, f"{name}/out", "checker", worker)
    return stream


def program(spec: list[Any], epochs: list[Any], log: Log, peers: int) -> tuple[Any, Counter[tuple[Any, int]]]:
    sent: list[tuple[int, int]] = []
    for worker in range(peers):
        time = 0
        for records, steps in epochs:
            sent.extend((time, r) for j, r in enumerate(records) if j % peers == worker)
            time += steps[worker]
    expected = Counter((time, v) for time, record in sent for v in reference(spec, record))

    def main(worker: Any) -> list[Any]:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input("numbers")
            out = build_stages(spec, stream.map(lambda v: (v, ())), log, "top", worker.index)
            out = out.inspect_batch(lambda time, batch: log.outputs.extend((time, r[0]) for r in batch))
            return handle, out.probe()

        handle, probe = worker.dataflow(build)
        for records, steps in epochs:
            handle.send_batch([r for j, r in enumerate(records) if j % peers == worker.index])
            handle.advance_to(handle.time + steps[worker.index])
            worker.step_while(lambda: probe.less_than(handle.time))
            before = Counter((t, v) for t, v in log.outputs if t < handle.time)
            assert before == Counter({key: n for key, n in expected.items() if key[0] < handle.time})
        return []

    return main, expected


def check(log: Log, expected: Counter[tuple[Any, int]]) -> None:
    assert Counter(log.outputs) == expected
    for (worker, name), events in log.events.items():
        frontier: list[Any] | None = None
        notified: list[Any] = []
        for kind, time in events:
            if kind == "arrive":
                assert frontier is None or any(less_equal(f, time) for f in frontier), (name, worker, time, frontier)
                assert not any(less_equal(time, n) for n in notified), (name, worker, time, notified)
            elif kind == "frontier":
                frontier = time
            else:
                assert time not in notified, (name, worker, time, "notified twice")
                notified.append(time)
        arrived = {time for kind, time in events if kind == "arrive"}
        if name.endswith("notify_later"):
            assert set(notified) == {later(time) for time in arrived}, (name, worker)
        elif not name.endswith(("/in", "/out")):
            assert set(notified) == arrived, (name, worker, arrived, notified)
        frontiers = [time for kind, time in events if kind == "frontier"]
        assert not frontiers or frontiers[-1] == [], (name, worker, frontiers[-1])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stages(0), EPOCHS, st.integers(0, 10_000))
def test_random_dataflows_on_two_simulated_workers(spec: list[Any], epochs: list[Any], seed: int) -> None:
    log = Log()
    main, expected = program(spec, epochs, log, 2)
    simulate(main, workers=2, seed=seed)
    check(log, expected)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stages(0), EPOCHS)
def test_random_dataflows_on_one_worker(spec: list[Any], epochs: list[Any]) -> None:
    log = Log()
    main, expected = program(spec, epochs, log, 1)
    execute(main, workers=1, stall_timeout=20)
    check(log, expected)
