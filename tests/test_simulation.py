"""The deterministic simulation: examples give the sequential answer under hundreds of delivery orders.

Every message is held in flight and delivered in an order drawn from the seed
(FIFO only per channel, sender and receiver).  Besides the results, every
operator input checks that no message arrives at a time its frontier has
already passed; splitting progress batches (the negative control) must break
that check for some seed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers.example_loader import load_example

from runtime import DataflowStuck, WorkerFailed
from runtime.communication.simulation import simulate
from scopes import Exchange, OperatorInput, OperatorOutput, Pipeline, ScopeBuilder, Stream
from scopes.operator import InputPort

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


wordcount = load_example("wordcount")
connected_components = load_example("connected_components")
scc = load_example("scc")

Violation = tuple[str, int, Any, list[Any]]


@pytest.fixture
def violations(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Violation]]:
    """Make every operator input record each message that arrives behind its frontier.

    Pulls are checked where Python calls them: ``InputPort.pull`` (the record-wise
    chains, and every pull in pure Python) and the iteration of an ``OperatorInput``
    by an operator's logic.  In the compiled build (``make compiled``) compiled code
    calls ``InputPort.pull`` natively, past the patch, so the iteration is checked too
    (a message checked twice is recorded twice; compiled logic's own pulls, a probe's,
    go unchecked there), and at least one check must have run.
    """
    found: list[Violation] = []
    checked = [0]
    original_pull = InputPort.pull
    original_iter = OperatorInput.__iter__

    def check(port: InputPort, time: Any) -> None:
        checked[0] += 1
        if not port.frontier.less_equal(time):
            found.append((port.operator, port.port, time, list(port.frontier.frontier())))

    def checked_pull(self: InputPort) -> tuple[Any, Sequence[Any]] | None:
        message = original_pull(self)
        if message is not None:
            check(self, message[0])
        return message

    def checked_iter(self: OperatorInput) -> Iterator[tuple[Any, Sequence[Any]]]:
        for ref, batch in original_iter(self):
            check(self._port, ref.time)  # noqa: SLF001 - the test looks at the port behind the handle
            yield ref, batch

    monkeypatch.setattr(InputPort, "pull", checked_pull)
    monkeypatch.setattr(OperatorInput, "__iter__", checked_iter)
    yield found
    assert checked[0] > 0, "no message was checked: the checks are not reached"


def check_frontier(stream: Stream, contract: Any, name: str, found: list[Violation]) -> Stream:
    """An operator that checks ``input.frontier.less_equal(time)`` for every batch, then forwards it."""

    def constructor(capability: Any, info: Any) -> Callable[[OperatorInput, OperatorOutput], None]:
        capability.drop()

        def logic(input: OperatorInput, output: OperatorOutput) -> None:
            for ref, batch in input:
                if not input.frontier.less_equal(ref.time):
                    found.append((name, 0, ref.time, list(input.frontier.frontier())))
                output.session(ref).give_batch(batch)

        return logic

    return stream.unary(contract, name, constructor)


# ---------------------------------------------------------------------- computations


def wordcount_main(text: list[list[str]], found: list[Violation], lockstep: bool) -> Callable[[Any], Any]:
    """Exchange by word and count per epoch with notifications, checked before and after."""

    def main(worker: Any) -> list[tuple[int, str, int]]:
        produced: list[tuple[int, str, int]] = []

        def build(scope: ScopeBuilder) -> Any:
            handle, lines = scope.new_input("Lines")
            pairs = lines.flat_map(lambda line: [(word, 1) for word in line.split()], name="Split")
            routed = check_frontier(pairs, Exchange(lambda pair: pair[0]), "CheckRouted", found)
            counted = check_frontier(wordcount.count_words(routed), Pipeline, "CheckCounted", found)
            counted.inspect_batch(lambda time, batch: produced.extend((time, word, total) for word, total in batch))
            return handle, counted.probe()

        handle, probe = worker.dataflow(build, name="wordcount")
        for epoch, lines in enumerate(text):
            handle.send_batch(line for i, line in enumerate(lines) if i % worker.peers == worker.index)
            handle.advance_to(epoch + 1)
            if lockstep:
                worker.step_while(lambda: probe.less_than(handle.time))
        handle.close()
        worker.step_while(lambda: not probe.done())
        return produced

    return main


def wordcount_result(outputs: list[list[tuple[int, str, int]]]) -> dict[int, dict[str, int]]:
    result: dict[int, dict[str, int]] = {}
    for produced in outputs:
        for epoch, word, total in produced:
            assert word not in result.setdefault(epoch, {}), f"{word!r} reported twice at {epoch}"
            result[epoch][word] = total
    return result


def scc_main(edges: list[tuple[int, int]]) -> Callable[[Any], Any]:
    """The example's strongly connected components (a loop nested in a loop) on ``edges``."""

    def main(worker: Any) -> list[Any]:
        components: list[Any] = []

        def build(scope: ScopeBuilder) -> None:
            mine = [edge for i, edge in enumerate(edges) if i % worker.peers == worker.index]
            stream = scope.to_stream(mine, name="ReadEdges")
            scc.group_components(scc.scc_edges(stream)).inspect_batch(lambda time, batch: components.extend(batch))

        worker.dataflow(build, name="scc")
        return components

    return main


def sequential_sccs(edges: list[tuple[int, int]]) -> list[frozenset[int]]:
    """Components with more than one node, by mutual reachability (a plain-Python reference)."""
    nodes = {v for edge in edges for v in edge}
    reach = {v: {v} for v in nodes}
    changed = True
    while changed:
        changed = False
        for u, v in edges:
            if not reach[v] <= reach[u]:
                reach[u] |= reach[v]
                changed = True
    components = {frozenset(w for w in reach[v] if v in reach[w]) for v in nodes}
    return sorted((c for c in components if len(c) > 1), key=lambda c: sorted(c))


def small_graph(seed: int, nodes: int, edges: int) -> list[tuple[int, int]]:
    import random

    rng = random.Random(seed)
    return [(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(edges)]


# ---------------------------------------------------------------------- properties

SEEDS = range(200)


def test_wordcount_over_seeds(violations: list[Violation]) -> None:
    text = wordcount.random_text(epochs=3, lines=6, seed=5, words_per_line=4)
    text[1] = []
    expected = wordcount.reference(text)
    for seed in SEEDS:
        workers = 2 + seed % 2
        outputs = simulate(wordcount_main(text, violations, lockstep=seed % 3 != 0), workers, seed)
        assert wordcount_result(outputs) == expected, f"seed {seed}"
        assert violations == [], f"seed {seed}: messages behind the frontier: {violations[:3]}"


def test_connected_components_over_seeds(violations: list[Violation]) -> None:
    for seed in SEEDS:
        nodes = 8
        edges = small_graph(seed, nodes, 6)
        workers = 2 + seed % 2
        outputs = simulate(
            lambda worker, edges=edges, nodes=nodes: connected_components.worker_main(worker, nodes, edges),
            workers,
            seed,
        )
        labels = {node: label for produced in outputs for node, label in produced}
        assert labels == connected_components.reference(nodes, edges), f"seed {seed}"
        assert violations == [], f"seed {seed}: messages behind the frontier: {violations[:3]}"


def test_nested_loop_scc_over_seeds(violations: list[Violation]) -> None:
    for seed in SEEDS:
        edges = small_graph(seed, 5, 7)
        outputs = simulate(scc_main(edges), 2, seed)
        found = sorted((frozenset(members) for out in outputs for _, members in out), key=lambda c: sorted(c))
        assert found == sequential_sccs(edges), f"seed {seed}"
        assert violations == [], f"seed {seed}: messages behind the frontier: {violations[:3]}"


def numbers_main(found: list[Violation], epochs: int = 4) -> Callable[[Any], Any]:
    """Integers exchanged by value (routing independent of hash salt), epoch by epoch in lockstep."""

    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            handle, numbers = scope.new_input("Numbers")
            routed = check_frontier(numbers.map(lambda x: x + 1), Exchange(lambda x: x), "Check", found)
            return handle, routed.probe()

        handle, probe = worker.dataflow(build, name="numbers")
        for epoch in range(epochs):
            handle.send_batch(range(worker.index, 12, worker.peers))
            handle.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(handle.time))
        handle.close()
        worker.step_while(lambda: not probe.done())

    return main


def test_splitting_progress_batches_breaks_safety(violations: list[Violation]) -> None:
    """The negative control: split progress batches are caught, by the frontier check or by the progress audit.

    With ``PYTIMELY_AUDIT=1`` (``make test-audit``) the audit usually refuses the run first, as soon as a
    frontier goes backwards, before any message can arrive behind it: that is a detection too.
    """
    intact, broken = [], []
    for seed in range(40):
        simulate(numbers_main(violations), 3, seed)
        if violations:
            intact.append(seed)
            violations.clear()
        audited = False
        try:
            simulate(numbers_main(violations), 3, seed, split_progress=True)
        except WorkerFailed as error:  # splitting may break it in other ways too
            audited = "AuditViolation" in str(error)
        if violations or audited:
            broken.append(seed)
            violations.clear()
    assert intact == [], f"intact progress batches let messages arrive behind the frontier: {intact}"
    assert len(broken) >= 3, f"splitting progress batches broke safety only for seeds {broken}"


# ---------------------------------------------------------------------- the simulator itself


def test_a_seed_fixes_the_interleaving() -> None:
    text = wordcount.random_text(epochs=3, lines=8, seed=2)
    found: list[Violation] = []
    runs = [simulate(wordcount_main(text, found, lockstep=False), 3, seed) for seed in (7, 7, 8)]
    assert runs[0] == runs[1]
    assert wordcount_result(runs[0]) == wordcount_result(runs[2]) == wordcount.reference(text)


def test_different_seeds_deliver_in_different_orders() -> None:
    def main(worker: Any) -> list[Any]:
        seen: list[Any] = []

        def build(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()
            stream.exchange(lambda x: 0).inspect_batch(lambda t, batch: seen.append(tuple(batch)))
            return handle

        handle = worker.dataflow(build)
        for i in range(4):
            handle.send((worker.index, i))
            handle.flush()
            worker.step()
        return seen

    orders = {tuple(simulate(main, 3, seed)[0]) for seed in range(30)}
    assert len(orders) > 5
    for order in orders:  # FIFO per sender: each worker's records arrive in the order sent
        for sender in range(3):
            mine = [record[0][1] for record in order if record[0][0] == sender]
            assert mine == sorted(mine)


def test_a_stuck_simulation_is_reported() -> None:
    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input("Forgotten")
            return handle, stream.probe()

        handle, probe = worker.dataflow(build, name="stuck")
        handle.advance_to(3)
        worker.step_while(lambda: not probe.done())  # never closed: cannot finish

    with pytest.raises(WorkerFailed) as failure:
        simulate(main, 2, seed=1)
    cause = failure.value.__cause__
    assert isinstance(cause, DataflowStuck)
    assert "input 'Forgotten' is still open at time 3" in str(cause)
    assert "worker 0" in str(cause) and "worker 1" in str(cause)


def test_counts_match_a_counter() -> None:
    text = [["a b a", "c"], ["b"]]
    found: list[Violation] = []
    outputs = simulate(wordcount_main(text, found, lockstep=True), 2, seed=3)
    totals = Counter(word for epoch in text for line in epoch for word in line.split())
    assert wordcount_result(outputs)[1]["b"] == totals["b"]


def test_a_failing_worker_stops_the_simulation() -> None:
    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()
            return handle, stream.exchange(lambda x: x).probe()

        handle, probe = worker.dataflow(build)
        if worker.index == 1:
            raise RuntimeError("bad input file")
        worker.step_while(lambda: True)

    with pytest.raises(WorkerFailed, match="worker 1 of 3 failed: RuntimeError: bad input file"):
        simulate(main, 3, seed=4)
