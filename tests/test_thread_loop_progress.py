"""A loop scope whose children read no frontiers folds its peers' progress and its own once per step."""

from __future__ import annotations

from collections import Counter

import pytest
from test_scheduling import bouncing

from runtime.communication.fabric import ThreadFabric
from runtime.worker import Worker
from scopes.progress.reachability import Tracker


def test_a_loop_scope_without_frontier_readers_folds_progress_once_per_step(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two workers stepped in turn in one thread; the record crosses to the other worker at every iteration, so
    # every step of the loop scope has a peer's batch to apply, and its own. No child of the loop reads its
    # frontiers, so applying the peer's batch before the children run would change nothing they see: it is
    # folded with this worker's own batch after they ran, one fold per step instead of two.
    folds: Counter[int] = Counter()
    fold = Tracker._fold_pending

    def counted(tracker: Tracker) -> bool:
        folds[id(tracker)] += 1
        return fold(tracker)

    monkeypatch.setattr(Tracker, "_fold_pending", counted)
    limit = 40
    fabric = ThreadFabric(2)
    workers = [Worker(communicator) for communicator in fabric.communicators()]
    seen: list[int] = []
    probes = []
    loops = []
    for worker in workers:
        handle, probe = worker.dataflow(bouncing(limit, seen))
        if worker.index == 0:
            handle.send(0)
        handle.close()
        probes.append(probe)
        (root,) = [dataflow.root for dataflow in worker.dataflows]
        loops.append(root.children[2])  # the iterative scope
    steps = 0
    while not all(probe.done() for probe in probes):
        steps += 1
        assert steps < 10 * limit, "the loop did not finish"
        for worker in workers:
            worker.step_or_park(0)
    assert seen == list(range(1, limit + 1))
    for loop in loops:
        assert not loop.tracker.reporting  # no child reads its frontiers
        assert folds[id(loop.tracker)] <= steps + 2
