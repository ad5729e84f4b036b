"""Synthetic instrumentation events for the viz tests: a loop scope fed by an input, read by a probe.

Dataflow 0 ``flow`` (integer times)::

    1 Input 'numbers' --Pipeline--> 2 scope 'Loop' (Product) --Exchange--> 3 Probe

Inside the loop (address (0, 2))::

    scope input 0 -> 2 Step.in0;  1 Feedback.out0 -> 2 Step.in1
    2 Step.out0 -> 1 Feedback.in0;  2 Step.out0 -> scope output 0
"""

from __future__ import annotations

from typing import Any

from runtime.instrument import (
    K_CHANNEL,
    K_DATAFLOW_DONE,
    K_FRONTIERS,
    K_INPUT,
    K_LOCATIONS,
    K_MESSAGES,
    K_OPERATOR,
    K_POINTSTAMPS,
    K_SCHEDULE,
    Event,
    decode,
)
from scopes.timestamp import Product

ROOT = (0,)
LOOP = (0, 2)
ROOT_LOCS = ((1, 0, True), (2, 0, False), (2, 0, True), (3, 0, False))
LOOP_LOCS = ((0, 0, False), (0, 0, True), (1, 0, False), (1, 0, True), (2, 0, False), (2, 1, False), (2, 0, True))


class Script:
    """Emits raw events for several workers with increasing times."""

    def __init__(self) -> None:
        self.raw: list[tuple[Any, ...]] = []
        self.seq: dict[int, int] = {}
        self.t = 100.0

    def emit(self, worker: int, kind: int, *fields: Any) -> None:
        self.seq[worker] = self.seq.get(worker, 0) + 1
        self.t += 0.001
        self.raw.append((kind, worker, self.seq[worker], self.t, *fields))

    def events(self) -> list[Event]:
        return [decode(raw) for raw in self.raw]


def build(script: Script, worker: int) -> None:
    """The structure events one worker logs."""
    e = script.emit
    e(worker, K_OPERATOR, (0, 1), "numbers", 0, 1, (), None)
    e(worker, K_OPERATOR, (0, 2, 1), "Feedback", 1, 1, ((0,),), None)
    e(worker, K_OPERATOR, (0, 2, 2), "Step", 2, 1, ((0,), (0,)), None)
    e(worker, K_CHANNEL, LOOP, (0, 0), (2, 0), "Pipeline")
    e(worker, K_CHANNEL, LOOP, (1, 0), (2, 1), "Pipeline")
    e(worker, K_CHANNEL, LOOP, (2, 0), (1, 0), "Pipeline")
    e(worker, K_CHANNEL, LOOP, (2, 0), (0, 0), "Pipeline")
    e(worker, K_OPERATOR, LOOP, "Loop", 1, 1, ((0,),), "Product[integer, integer]")
    e(worker, K_LOCATIONS, LOOP, LOOP_LOCS)
    e(worker, K_OPERATOR, (0, 3), "Probe", 1, 0, ((),), None)
    e(worker, K_CHANNEL, ROOT, (1, 0), (2, 0), "Pipeline")
    e(worker, K_CHANNEL, ROOT, (2, 0), (3, 0), "Exchange")
    e(worker, K_OPERATOR, ROOT, "flow", 0, 0, (), "integer")
    e(worker, K_LOCATIONS, ROOT, ROOT_LOCS)
    e(worker, K_INPUT, (0, 1), "numbers", "created", 0)


def _loop_frontier(diff: int) -> tuple[tuple[int, Product, int], ...]:
    p00, p01 = Product(0, 0), Product(0, 1)
    return tuple((loc, p01 if loc in (3, 5) else p00, diff) for loc in (1, 4, 6, 0, 2, 3, 5))


def started(script: Script, worker: int, peers: int) -> None:
    """Initial pointstamps and frontiers: the input's capability at 0 on every worker."""
    e = script.emit
    e(worker, K_POINTSTAMPS, ROOT, ((0, 0, peers),))
    e(worker, K_FRONTIERS, ROOT, ((0, 0, 1), (1, 0, 1), (2, 0, 1), (3, 0, 1)))
    e(worker, K_FRONTIERS, LOOP, _loop_frontier(1))


def running(workers: int = 2, in_flight: int = 0) -> Script:
    """Every worker built and started; optionally records in flight to Step.in1 at (0, 1)."""
    script = Script()
    for w in range(workers):
        build(script, w)
    for w in range(workers):
        started(script, w, workers)
    for w in range(workers):
        script.emit(w, K_SCHEDULE, (0, 1), 1.0, 0.002)
        script.emit(w, K_MESSAGES, (0, 2, 2), ((), ()), (((Product(0, 0), 7),),))
        if in_flight:
            script.emit(w, K_POINTSTAMPS, LOOP, ((5, Product(0, 1), in_flight),))
    return script


def finish(script: Script, workers: int = 2) -> None:
    """Every worker closes its input; pointstamps and frontiers drain; the dataflow completes."""
    e = script.emit
    for w in range(workers):
        e(w, K_INPUT, (0, 1), "numbers", "closed", 0)
    for w in range(workers):
        e(w, K_POINTSTAMPS, ROOT, ((0, 0, -workers),))
        e(w, K_FRONTIERS, ROOT, ((0, 0, -1), (1, 0, -1), (2, 0, -1), (3, 0, -1)))
        e(w, K_FRONTIERS, LOOP, _loop_frontier(-1))
        e(w, K_DATAFLOW_DONE, 0, "flow")
