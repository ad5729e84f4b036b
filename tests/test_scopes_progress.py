"""Progress through scopes: connectivity, nested sources, deep nesting, and the Operate interface.

(a) An input that a declared summary disconnects from an output does not hold it back.
(b) A source inside a nested scope holds back its parent until it releases its capability.
(c) Ten thousand operators in deeply nested regions build and run.
(d) Wrapping parts of a computation in regions does not change the frontiers it reports;
    and a hand-built Subgraph speaks the Operate interface directly.
(e) ``scopes`` does not depend on ``runtime`` or ``viz``.
(f) Worker and execute bookkeeping.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime import execute
from scopes import Exchange, IntegerSummary, Pipeline, Product
from scopes.antichain import Antichain
from scopes.change_batch import ChangeBatch
from scopes.channels import LocalQueue
from scopes.location import Source, Target
from scopes.nesting import scope_input, scope_output
from scopes.operator import (
    Capability,
    InputPort,
    Operator,
    OperatorInput,
    OperatorOutput,
    OutputPort,
)
from scopes.stream import generic
from scopes.subgraph import Subgraph
from scopes.timestamp import INTEGER, IdentityRefinement

ROOT = Path(__file__).resolve().parent.parent
INF = float("inf")


def frontier(probe) -> list[Any]:
    return sorted(probe.frontier().elements)


def step_for(worker, seconds: float) -> None:
    """Step for a while (long enough for everything runnable to settle)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        worker.step()


def step_until(
    worker, condition: Callable[[], bool], timeout: float = 10.0, invariant: Callable[[], None] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for progress"
        worker.step()
        if invariant is not None:
            invariant()


# ---------------------------------------------------------------------------- (a) connectivity


def diagnostic_dataflow(worker, summary):
    """Seed 000's example: data 0 -> data 0 and diagnostic 1 -> diagnostic 1."""

    def build(scope):
        data_handle, data = scope.new_input("Data")
        diag_handle, diag = scope.new_input("Diagnostic")

        def constructor(capabilities, info):
            for capability in capabilities:
                capability.drop()

            def logic(inputs, outputs):
                for ref, batch in inputs[0]:
                    outputs[0].session(ref).give_batch(batch)
                for ref, batch in inputs[1]:
                    outputs[1].session(ref).give_batch(batch)

            return logic

        data_out, diag_out = generic(
            scope,
            "DataAndDiagnostic",
            [(data, Pipeline), (diag, Pipeline)],
            2,
            constructor,
            summary=summary,
        )
        received: list[tuple[int, int]] = []
        data_out.inspect_batch(lambda t, batch: received.extend((t, x) for x in batch))
        return data_handle, diag_handle, data_out.probe(), diag_out.probe(), received

    return worker.dataflow(build)


@pytest.mark.parametrize("workers", [1, 2])
def test_disconnected_diagnostic_input_does_not_hold_back_data_output(workers):
    summary = {(0, 0): [IntegerSummary()], (1, 1): [IntegerSummary()]}

    def main(worker):
        data_handle, diag_handle, data_probe, diag_probe, received = diagnostic_dataflow(worker, summary)
        diag_handle.send("query")  # a diagnostic message in flight, at time 0, never advanced
        for epoch in range(5):
            data_handle.send(epoch * 10 + worker.index)
            data_handle.advance_to(epoch + 1)
            step_until(worker, lambda epoch=epoch: not data_probe.less_than(epoch + 1))
            assert frontier(data_probe) == [epoch + 1]
            assert frontier(diag_probe) == [0]
        return sorted(received)

    results = execute(main, workers=workers)
    for index, received in enumerate(results):
        assert received == [(e, e * 10 + index) for e in range(5)]


def test_connected_diagnostic_input_holds_back_data_output():
    """The contrast: with the default summary (every input reaches every output) it is held."""

    def main(worker):
        data_handle, diag_handle, data_probe, diag_probe, received = diagnostic_dataflow(worker, None)
        for epoch in range(3):
            data_handle.send(epoch)
            data_handle.advance_to(epoch + 1)
            step_for(worker, 0.05)
            assert frontier(data_probe) == [0]
        assert len(received) == 3, "data itself still flows"
        diag_handle.advance_to(2)
        step_until(worker, lambda: not data_probe.less_than(2))
        assert frontier(data_probe) == [2] and frontier(diag_probe) == [2]
        diag_handle.close()
        step_until(worker, lambda: not data_probe.less_than(3))
        assert frontier(data_probe) == [3]
        assert frontier(diag_probe) == [3], "the default summary also connects data to diagnostics"

    execute(main)


# ---------------------------------------------------------------------------- (b) nested source


class Gatekeeper:
    """Controls a source inside a nested scope: downgrade to a time, then release."""

    def __init__(self) -> None:
        self.downgrade_to: Any = None
        self.release = False
        self.infos: list = []
        self.sent: list = []

    def constructor(self, capability: Capability, info):
        self.infos.append(info)
        held = [capability]

        def logic(output):
            if not held:
                return
            if self.downgrade_to is not None and held[0].time != self.downgrade_to:
                held[0].downgrade(self.downgrade_to)
            if self.release:
                output.session(held[0]).give(("exogenous", info.worker_index, held[0].time))
                held.pop().drop()

        return logic

    def poke(self) -> None:
        for info in self.infos:
            info.activate()


def nested_source_dataflow(worker, kind: str, gate: Gatekeeper):
    def build(scope):
        handle, data = scope.new_input("Data")

        def body(inner):
            return inner.source("Exogenous", gate.constructor).leave()

        if kind == "region":
            exogenous = scope.region(body, name="SourceRegion")
        elif kind == "iterative":
            exogenous = scope.iterative(body, name="SourceLoop")
        else:  # a source two levels down: a region inside a loop
            exogenous = scope.iterative(lambda loop: loop.region(body, name="DeepRegion").leave(), name="OuterLoop")
        merged = data.concat(exogenous)
        outputs: list = []
        merged.inspect_batch(lambda t, batch: outputs.extend((t, x) for x in batch))
        return handle, merged.probe(), outputs

    return worker.dataflow(build)


@pytest.mark.parametrize("kind", ["region", "iterative", "region-in-loop"])
def test_source_in_nested_scope_holds_back_parent(kind):
    gate = Gatekeeper()

    def main(worker):
        handle, probe, outputs = nested_source_dataflow(worker, kind, gate)
        handle.send("d")
        handle.advance_to(5)
        step_for(worker, 0.05)
        assert frontier(probe) == [0], "the nested source's capability at time 0 must hold the parent"
        assert worker.step() is True
        inner_time = 3 if kind == "region" else Product(3, 7)
        gate.downgrade_to = inner_time
        gate.poke()
        step_for(worker, 0.05)
        assert frontier(probe) == [3]
        handle.close()
        step_for(worker, 0.05)
        assert frontier(probe) == [3], "closing the parent's input does not release the nested source"
        assert worker.step() is True and len(worker.dataflows) == 1
        gate.release = True
        gate.poke()
        step_until(worker, probe.done)
        assert sorted(outputs) == [(0, "d"), (3, ("exogenous", 0, inner_time))]
        step_until(worker, lambda: not worker.step())
        assert worker.dataflows == []

    execute(main)


def test_source_in_nested_scope_without_output_keeps_dataflow_alive():
    """A nested source whose stream never leaves its scope still keeps the dataflow running."""
    gate = Gatekeeper()
    seen: list = []

    def main(worker):
        def build(scope):
            def body(inner):
                inner.source("Hidden", gate.constructor).inspect(seen.append).probe()

            scope.region(body, name="Sealed")

        worker.dataflow(build)
        for _ in range(20):
            assert worker.step() is True
        assert seen == [] and len(worker.dataflows) == 1
        gate.release = True
        gate.poke()
        step_until(worker, lambda: not worker.step())
        assert worker.dataflows == []

    execute(main)
    assert seen == [("exogenous", 0, 0)]


def test_source_in_nested_scope_holds_back_other_workers():
    """Only worker 0's nested source holds a capability; worker 1's probe must wait for it too."""
    gates = [Gatekeeper(), Gatekeeper()]
    gates[1].release = True
    barrier = threading.Barrier(2, timeout=20)

    def main(worker):
        gate = gates[worker.index]
        handle, probe, outputs = nested_source_dataflow(worker, "iterative", gate)
        handle.advance_to(4)
        step_for(worker, 0.1)
        held = frontier(probe)
        barrier.wait()
        if worker.index == 0:
            gate.release = True
            gate.poke()
        step_until(worker, lambda: not probe.less_than(4))
        return held, frontier(probe)

    results = execute(main, workers=2)
    assert results == [([0], [4]), ([0], [4])]


# ---------------------------------------------------------------------------- (c) deep nesting


def count_operators(subgraph: Subgraph) -> int:
    total = 0
    for child in subgraph.children[1:]:
        if isinstance(child, Subgraph):
            total += count_operators(child)
        else:
            total += 1
    return total


def nested_chain(
    stream, depth: int, per_region: int, hits: list[int], fuse: bool = False, exchange_at_bottom: bool = False
):
    """Regions nested ``depth`` deep, each with ``per_region`` operators around the next one.

    Each ``map`` adds one to the record.  Consecutive ``map`` stages are fused into one
    operator by the engine, so unless ``fuse`` is set the chain alternates ``map`` with
    ``inspect`` (which counts the records it sees in ``hits``), one operator each.
    """
    half = per_region // 2

    def count(record) -> None:
        hits[0] += 1

    def stage(inner, index):
        if fuse or index % 2 == 0:
            return inner.map(lambda x: x + 1)
        return inner.inspect(count)

    def body(region):
        inner = stream.enter(region)
        for index in range(half):
            inner = stage(inner, index)
        if depth > 1:
            inner = nested_chain(inner, depth - 1, per_region, hits, fuse, exchange_at_bottom)
        elif exchange_at_bottom:
            inner = inner.exchange(lambda x: x)
        for index in range(half, per_region):
            inner = stage(inner, index)
        return inner.leave()

    return stream.scope.region(body, name=f"Level{depth}")


@pytest.mark.parametrize(
    "workers,depth,per_region,fuse",
    [(1, 100, 100, False), (2, 50, 200, False), (1, 100, 100, True)],
    ids=["100x100-1worker", "50x200-2workers", "100x100-fused-maps"],
)
def test_ten_thousand_operators_in_nested_regions(workers, depth, per_region, fuse):
    epochs = 3
    per_epoch = 4
    started = time.perf_counter()
    cpu = time.process_time()  # this process's CPU (the workers are its threads): blind to other processes' load
    total = depth * per_region
    increments = total if fuse else total // 2

    def main(worker):
        hits = [0]

        def build(scope):
            handle, stream = scope.new_input()
            out = nested_chain(stream, depth, per_region, hits, fuse, exchange_at_bottom=workers > 1)
            got: list = []
            out.inspect(got.append)
            return handle, out.probe(), got

        handle, probe, got = worker.dataflow(build)
        built = time.perf_counter()
        operators = count_operators(worker.dataflows[0].root)
        for epoch in range(epochs):
            handle.send_batch([epoch * 100 + worker.index * 10 + k for k in range(per_epoch)])
            handle.advance_to(epoch + 1)
            step_until(worker, lambda epoch=epoch: not probe.less_than(epoch + 1), timeout=60)
            assert sorted(got)[-1] >= epoch * 100 + increments, "the epoch's data arrived"
        handle.close()
        step_until(worker, probe.done, timeout=60)
        return operators, got, probe.done(), hits[0], built

    results = execute(main, workers=workers)
    elapsed = time.perf_counter() - started
    build_time = max(built for *_, built in results) - started
    print(
        f"\n{workers} worker(s), regions {depth} deep x {per_region} operators "
        f"(fused maps: {fuse}): build {build_time:.2f}s, total {elapsed:.2f}s"
    )
    expected = sorted(
        e * 100 + w * 10 + k + increments for e in range(epochs) for w in range(workers) for k in range(per_epoch)
    )
    assert sorted(x for _, got, _, _, _ in results for x in got) == expected
    for operators, _, done, _, _ in results:
        assert done
        if not fuse:
            assert operators >= total
    if not fuse:
        records = epochs * per_epoch * workers
        assert sum(hits for _, _, _, hits, _ in results) == records * (total // 2)
    assert time.process_time() - cpu < 60


# ---------------------------------------------------------------------------- (d) same frontiers


def gated_loop_dataflow(worker, wrap: bool, hold: dict, gate_infos: list, contract):
    """Records ``v`` loop ``v`` times through a gate, then leave.

    The gate holds a record at ``Product(e, i)`` while input B has not passed ``e``, or
    while ``i >= hold[e]``.  With ``wrap``, the loop sits in a region, and the gate and
    the loop body sit in regions (two deep) inside the loop.
    """

    def in_region(scope, streams, fn, name):
        if not wrap:
            return fn(scope, streams)

        def body(region):
            return [s.leave() for s in fn(region, [s.enter(region) for s in streams])]

        return scope.region(body, name=name)

    def gate(scope, streams):
        data, ctrl = streams

        def constructor(capability, info):
            capability.drop()
            gate_infos.append(info)
            stash: dict = {}
            caps: dict = {}

            def logic(data_in, ctrl_in, output):
                for ref, batch in data_in:
                    stash.setdefault(ref.time, []).extend(batch)
                    if ref.time not in caps:
                        caps[ref.time] = ref.retain()
                for _ref, _batch in ctrl_in:
                    pass
                for t in sorted(stash):
                    if not ctrl_in.frontier.less_equal(t) and t.inner < hold.get(t.outer, INF):
                        output.session(caps[t]).give_batch(stash.pop(t))
                        caps.pop(t).drop()

            return logic

        return [data.binary_frontier(ctrl, contract, Pipeline, "Gate", constructor)]

    def body_step(scope, streams):
        (gated,) = streams

        def deeper(inner, inner_streams):
            stepped = inner_streams[0].map(lambda v: v - 1, name="Decrement")
            again, done = stepped.branch(lambda v: v <= 0, name="Finished?")
            return [again, done]

        return in_region(scope, [gated], deeper, "BodyInner")

    def loop(scope, streams):
        a, b = streams

        def iterate(loop_scope):
            feedback_handle, feedback = loop_scope.loop_variable(1)
            data = a.enter(loop_scope).concat(feedback)
            ctrl = b.enter(loop_scope)
            (gated,) = in_region(loop_scope, [data, ctrl], gate, "GateRegion")
            again, done = in_region(loop_scope, [gated], body_step, "BodyRegion")
            again.connect_loop(feedback_handle)
            inner_probe = done.probe()
            return [done.leave()], inner_probe

        (out,), inner_probe = scope.iterative(iterate, name="Loop")
        probes.append(inner_probe)
        return [out]

    probes: list = []

    def build(scope):
        a_handle, a = scope.new_input("A")
        b_handle, b = scope.new_input("B")
        (out,) = in_region(scope, [a, b], loop, "Outer")
        outputs: list = []
        out.inspect_batch(lambda t, batch: outputs.extend((t, v) for v in batch))
        return a_handle, b_handle, out.probe(), probes[0], outputs

    return worker.dataflow(build)


P = Product
#: (action, expected top-level frontier, expected frontier inside the loop)
SCENARIO = [
    (("send_a", [3, 1]), [0], [P(0, 0)]),
    (("advance_a", 1, {0: 2}), [0], [P(0, 0)]),
    (("advance_b", 1), [0], [P(0, 2), P(1, 0)]),
    (("send_a", [2]), [0], [P(0, 2), P(1, 0)]),
    (("advance_a", 2, {1: 1}), [0], [P(0, 2), P(1, 0)]),
    (("advance_b", 5), [0], [P(0, 2), P(1, 1), P(2, 0)]),
    (("release", 0), [1], [P(1, 1), P(2, 0)]),
    (("release", 1), [2], [P(2, 0)]),
    (("close_a",), [5], [P(5, 0)]),
    (("close_b",), [], []),
]


def apply(action, a_handle, b_handle, hold, gate_infos):
    kind = action[0]
    if kind == "send_a":
        a_handle.send_batch(action[1])
    elif kind == "advance_a":
        hold.update(action[2])
        a_handle.advance_to(action[1])
    elif kind == "advance_b":
        b_handle.advance_to(action[1])
    elif kind == "release":
        del hold[action[1]]
        for info in gate_infos:
            info.activate()
    elif kind == "close_a":
        a_handle.close()
    elif kind == "close_b":
        b_handle.close()


def test_regions_report_the_same_frontiers_as_the_flat_computation():
    """Flat and region-wrapped versions, fed the same actions, settle on the same frontiers."""
    history: dict[str, list] = {"flat": [], "wrapped": []}

    def main(worker):
        flows = {}
        for name, wrap in (("flat", False), ("wrapped", True)):
            hold: dict = {}
            infos: list = []
            flows[name] = (gated_loop_dataflow(worker, wrap, hold, infos, Pipeline), hold, infos)
        for action, top, inner in SCENARIO:
            for (a_handle, b_handle, _, _, _), hold, infos in flows.values():
                apply(action, a_handle, b_handle, hold, infos)

            def never_ahead(top=top, inner=inner, action=action):
                # frontiers only advance: before settling, they may not pass the settled value
                for (_, _, probe, inner_probe, _), _, _ in flows.values():
                    assert all(probe.less_equal(t) for t in top), (action, frontier(probe))
                    assert all(inner_probe.less_equal(t) for t in inner), (action, frontier(inner_probe))

            for _ in range(300):
                worker.step()
                never_ahead()
            for name, ((_, _, probe, inner_probe, _), _, _) in flows.items():
                history[name].append((action, frontier(probe), frontier(inner_probe)))
        return {name: sorted(flow[0][4]) for name, flow in flows.items()}

    (outputs,) = execute(main)
    assert history["flat"] == history["wrapped"]
    assert [(top, inner) for _, top, inner in history["flat"]] == [(top, sorted(inner)) for _, top, inner in SCENARIO]
    assert outputs["flat"] == outputs["wrapped"] == [(0, 0), (0, 0), (1, 0)]


def test_regions_report_the_same_frontiers_with_two_workers():
    barrier = threading.Barrier(2, timeout=30)
    seen: list = []
    lock = threading.Lock()

    def main(worker):
        flows = {}
        for name, wrap in (("flat", False), ("wrapped", True)):
            hold: dict = {}
            infos: list = []
            flow = gated_loop_dataflow(worker, wrap, hold, infos, Exchange(lambda v: v))
            flows[name] = (flow, hold, infos)
        for action, top, inner in SCENARIO:
            for (a_handle, b_handle, _, _, _), hold, infos in flows.values():
                if action[0] == "send_a" and worker.index == 1:
                    a_handle.send_batch([v + 4 for v in action[1]])
                else:
                    apply(action, a_handle, b_handle, hold, infos)
            probes = [(flow[2], flow[3]) for flow, _, _ in flows.values()]

            def never_ahead(top=top, inner=inner, probes=probes, action=action):
                for probe, inner_probe in probes:
                    assert all(probe.less_equal(t) for t in top), (action, frontier(probe))
                    assert all(inner_probe.less_equal(t) for t in inner), (action, frontier(inner_probe))

            def settled(top=top, inner=inner, probes=probes):
                return all(
                    frontier(probe) == top and frontier(inner_probe) == sorted(inner) for probe, inner_probe in probes
                )

            step_until(worker, settled, timeout=20, invariant=never_ahead)
            with lock:
                seen.append((worker.index, action))
            barrier.wait()

    execute(main, workers=2)
    assert len(seen) == 2 * len(SCENARIO)


# ---------------------------------------------------------------------------- (d) Operate interface


class FakeAllocator:
    index = 0
    peers = 1

    def __init__(self) -> None:
        self.allocated: list = []

    def allocate(self, channel, address):
        self.allocated.append((channel, address))
        queue = LocalQueue()
        return [queue], queue


def batch_dict(batch: ChangeBatch) -> dict:
    return dict(batch.drain())


class HandBuilt:
    """A subgraph built by hand: scope input -> A (holds data two ticks) -> B (+3 summary) -> output."""

    def __init__(self) -> None:
        self.parent_activations = 0
        self.subgraph = Subgraph(
            "HandBuilt",
            (0, 1),
            INTEGER,
            IdentityRefinement(INTEGER),
            FakeAllocator(),
            0,
            self._activate_parent,
        )
        sub = self.subgraph
        self.input_index, self.entrance, input_tee = scope_input(sub)
        # child A: releases what it receives at t + 2 once the input frontier passes t + 2
        a = sub.graph.reserve_child("A")
        a_queue = LocalQueue(lambda: sub.activate_child(a))
        input_tee.add(a_queue)
        a_in, a_out = InputPort("A", 0, a_queue), OutputPort("A", 0)
        self.a = Operator("A", INTEGER, 1, [a_in], [a_out], [[Antichain([IntegerSummary()])]], True)
        sub.graph.set_child(a, self.a)
        sub.graph.connect(Source(0, 0), Target(a, 0))
        a_input, a_output = OperatorInput(a_in, self.a), OperatorOutput(a_out, self.a)
        initial = [Capability.initial(0, a_out)]
        held: dict = {}
        self.a_runs = 0

        def a_logic() -> None:
            self.a_runs += 1
            for ref, batch in a_input:
                if ref.time + 2 not in held:
                    held[ref.time + 2] = (ref.delayed(ref.time + 2), [])
                held[ref.time + 2][1].extend(batch)
                if initial:
                    initial.pop().drop()
            for t in sorted(held):
                if not a_input.frontier.less_equal(t):
                    capability, records = held.pop(t)
                    a_output.session(capability).give_batch(records)
                    capability.drop()

        self.a.set_logic(a_logic, [a_output])
        # child B: passes records on, three ticks later, with a declared +3 summary
        b = sub.graph.reserve_child("B")
        b_queue = LocalQueue(lambda: sub.activate_child(b))
        a_out.tee.add(b_queue)
        b_in, b_out = InputPort("B", 0, b_queue), OutputPort("B", 0)
        self.b = Operator("B", INTEGER, 1, [b_in], [b_out], [[Antichain([IntegerSummary(3)])]], False)
        sub.graph.set_child(b, self.b)
        sub.graph.connect(Source(a, 0), Target(b, 0))
        b_initial = [Capability.initial(0, b_out)]

        def b_logic() -> None:
            if b_initial:
                b_initial.pop().drop()
            while (message := b_in.pull()) is not None:
                b_out.send(message[0] + 3, message[1])

        self.b.set_logic(b_logic)
        self.output_index, exit_pusher, output_tee = scope_output(sub)
        b_out.tee.add(exit_pusher)
        sub.graph.connect(Source(b, 0), Target(0, 0))
        self.delivered = LocalQueue()
        output_tee.add(self.delivered)

    def _activate_parent(self) -> None:
        self.parent_activations += 1

    def pull(self) -> tuple[bool, dict, dict, dict]:
        internal, consumed, produced = ChangeBatch(), ChangeBatch(), ChangeBatch()
        more = self.subgraph.pull_internal_progress([internal], [consumed], [produced])
        return more, batch_dict(internal), batch_dict(consumed), batch_dict(produced)


def test_hand_built_subgraph_speaks_the_scope_interface():
    hand = HandBuilt()
    sub = hand.subgraph
    assert (sub.inputs, sub.outputs) == (1, 1)

    summaries, capabilities = sub.get_internal_summary()
    assert len(summaries) == 1 and len(summaries[0]) == 1
    assert list(summaries[0][0].elements) == [IntegerSummary(3)]
    # each child holds one capability at 0; both reach the output (A through B's +3)
    assert capabilities == [[(0, 1)]]

    sub.set_external_summary([[Antichain()]], [[(0, 1)]])
    assert hand.parent_activations > 0, "setting up the children schedules them"

    more, internal, consumed, produced = hand.pull()
    assert more is True
    assert (internal, consumed, produced) == ({0: -1, 3: 1}, {}, {}), "B dropped its capability"

    # a message enters at time 4: consumed at the input and A's new capability, in one call
    hand.entrance.push(4, ["x", "y"])
    more, internal, consumed, produced = hand.pull()
    assert consumed == {4: 2}
    assert internal == {3: -1, 9: 1}, "A's capability at 6 reaches the output as 9 (through B)"
    assert produced == {}
    assert more is True
    assert sub.frontier_at(Target(1, 0)).elements == (0,)

    # the outside world moves the input frontier from 0 to 10: A releases its records,
    # B moves them to 9, and the capability retires and the output is produced in one call
    sub.push_external_progress([[(0, -1), (10, 1)]])
    more, internal, consumed, produced = hand.pull()
    assert produced == {9: 2}
    assert internal == {9: -1}
    assert consumed == {}
    assert hand.delivered.pull() == (9, ["x", "y"])
    assert hand.delivered.pull() is None
    assert more is True, "the input frontier (10) is still tracked"
    assert sub.frontier_at(Target(1, 0)).elements == (10,)

    sub.push_external_progress([[(10, -1)]])
    more, internal, consumed, produced = hand.pull()
    assert (internal, consumed, produced) == ({}, {}, {})
    assert more is False
    assert sub.frontier_at(Target(2, 0)).elements == ()


def test_hand_built_subgraph_external_summary_initial_frontier():
    """Set up with an input frontier at 5: children see it before any pull."""
    hand = HandBuilt()
    sub = hand.subgraph
    sub.get_internal_summary()
    sub.set_external_summary([[Antichain([IntegerSummary(1)])]], [[(5, 1)]])
    assert list(hand.a.input_ports[0].frontier.frontier().elements) == [5]
    assert len(sub.external_summaries) == 1 and len(sub.external_summaries[0]) == 1
    assert list(sub.external_summaries[0][0].elements) == [IntegerSummary(1)]


def test_subgraph_summary_respects_declared_connectivity():
    """A subgraph with two inputs and two outputs, crossing: 0 -> 1 (+2) and 1 -> 0 (identity)."""
    sub = Subgraph("Crossing", (0, 1), INTEGER, IdentityRefinement(INTEGER), FakeAllocator(), 0, lambda: None)
    sub.graph.add_input()
    sub.graph.add_input()
    index = sub.graph.reserve_child("Cross")
    ports = [InputPort("Cross", p, LocalQueue()) for p in range(2)]
    outs = [OutputPort("Cross", p) for p in range(2)]
    connectivity = [[Antichain(), Antichain([IntegerSummary(2)])], [Antichain([IntegerSummary()]), Antichain()]]
    operator = Operator("Cross", INTEGER, 1, ports, outs, connectivity, True)
    operator.set_logic(lambda: None)
    sub.graph.set_child(index, operator)
    for p in range(2):
        sub.graph.connect(Source(0, p), Target(index, p))
    sub.graph.add_output()
    sub.graph.add_output()
    for p in range(2):
        sub.graph.connect(Source(index, p), Target(0, p))
    summaries, capabilities = sub.get_internal_summary()
    table = [{o: list(cell.elements) for o, cell in row.items()} for row in summaries]
    assert table == [{1: [IntegerSummary(2)]}, {0: [IntegerSummary()]}]
    assert capabilities == [[(0, 1)], [(0, 1)]]


# ---------------------------------------------------------------------------- (e) layering


def test_scopes_sources_import_nothing_from_runtime_or_viz():
    offenders = []
    files = sorted((ROOT / "scopes").glob("*.py"))
    assert len(files) >= 10
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level and node.level > 1:
                    names = [f"..{node.module or ''}"]
                else:
                    names = [node.module or ""] + [alias.name for alias in node.names]
            elif isinstance(node, ast.Call):
                func = node.func
                called = getattr(func, "attr", None) or getattr(func, "id", None)
                if called in ("import_module", "__import__") and node.args:
                    first = node.args[0]
                    if isinstance(first, ast.Constant) and isinstance(first.value, str):
                        names = [first.value]
            for name in names:
                root = name.split(".")[0]
                if root in ("runtime", "viz") or name.startswith(".."):
                    offenders.append(f"{path.name}:{node.lineno}: {name}")
    assert offenders == []


def test_importing_scopes_loads_neither_runtime_nor_viz():
    code = (
        "import importlib, pkgutil, sys\n"
        "import scopes\n"
        "for module in pkgutil.iter_modules(scopes.__path__):\n"
        "    importlib.import_module('scopes.' + module.name)\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('runtime', 'viz'))\n"
        "print(len([m for m in sys.modules if m.startswith('scopes.')]), loaded)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    count, loaded = result.stdout.split(" ", 1)
    assert int(count) >= 10
    assert loaded.strip() == "[]"


# ---------------------------------------------------------------------------- (f) bookkeeping


def test_step_returns_false_once_all_dataflows_completed():
    def main(worker):
        handle = worker.dataflow(lambda scope: scope.new_input()[0])
        assert [worker.step() for _ in range(5)] == [True] * 5, "an open input keeps it running"
        handle.close()
        step_until(worker, lambda: not worker.step())
        assert worker.dataflows == []
        assert worker.step() is False
        return True

    assert execute(main) == [True]


def test_worker_hosts_several_dataflows_and_drops_completed_ones():
    def main(worker):
        flows = []
        for name in ("first", "second", "third"):
            outputs: list = []

            def build(scope, outputs=outputs, name=name):
                handle, stream = scope.new_input()
                stream.map(lambda x, name=name: (name, x)).inspect(outputs.append)
                return handle

            flows.append((worker.dataflow(build, name=name), outputs))
        assert [d.name for d in worker.dataflows] == ["first", "second", "third"]
        for index, (handle, _) in enumerate(flows):
            handle.send(index)
        flows[1][0].close()
        step_until(worker, lambda: len(worker.dataflows) == 2)
        assert [d.name for d in worker.dataflows] == ["first", "third"]
        assert flows[1][1] == [("second", 1)]
        flows[0][0].advance_to(3)
        flows[0][0].send(30)
        flows[0][0].close()
        step_until(worker, lambda: len(worker.dataflows) == 1)
        assert [d.name for d in worker.dataflows] == ["third"]
        assert worker.step() is True
        flows[2][0].close()
        step_until(worker, lambda: not worker.step())
        assert worker.dataflows == []
        return [outputs for _, outputs in flows]

    (outputs,) = execute(main)
    assert outputs == [[("first", 0), ("first", 30)], [("second", 1)], [("third", 2)]]


def test_dataflow_returns_what_build_returns():
    marker = object()

    def main(worker):
        assert worker.dataflow(lambda scope: marker) is marker
        assert worker.dataflow(lambda scope: None) is None
        pair = worker.dataflow(lambda scope: (scope.name, scope.index, scope.peers), name="named")
        return pair

    assert execute(main, workers=2) == [("named", 0, 2), ("named", 1, 2)]


def test_execute_returns_results_in_worker_order():
    finished: list[int] = []
    done = [threading.Event() for _ in range(4)]

    def main(worker):
        # the last worker finishes first: each waits for the next one's end (an event, not a sleep
        # a slow thread start could outlast)
        if worker.index + 1 < worker.peers:
            assert done[worker.index + 1].wait(30)
        finished.append(worker.index)
        done[worker.index].set()
        return {"worker": worker.index, "peers": worker.peers}

    results = execute(main, workers=4)
    assert finished == [3, 2, 1, 0]
    assert results == [{"worker": i, "peers": 4} for i in range(4)]


def test_execute_runs_dataflows_to_completion_after_main_returns():
    """Inputs left open by main are closed; execute returns only once every dataflow is done."""
    counted: list = []

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()
            stream.exchange(lambda x: x).count().inspect(counted.append)
            return handle

        handle = worker.dataflow(build)
        handle.send_batch(range(worker.index * 10, worker.index * 10 + 10))
        return worker.index

    assert execute(main, workers=3) == [0, 1, 2]
    assert sum(counted) == 30


def test_a_child_that_leaves_an_operate_method_unimplemented_is_refused_in_both_builds():
    """Pure Python refuses to instantiate it; the compiled Operate does not, so the scope checks each child."""
    from scopes.progress.operate import Operate

    class Incomplete(Operate):
        inputs = 0
        outputs = 0

        def get_internal_summary(self):
            return [], []

        def set_external_summary(self, summaries, frontier):
            pass

        def push_external_progress(self, external):
            pass

    subgraph = Subgraph("outer", (0,), INTEGER, None, FakeAllocator(), 0, lambda: None)
    with pytest.raises(TypeError, match="pull_internal_progress"):
        subgraph.graph.add_child(Incomplete())
