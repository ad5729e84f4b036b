"""A loop scope whose children read no frontiers folds its peers' progress and its own once per step."""

from __future__ import annotations

from collections import Counter

import pytest
from test_scheduling import run_bouncing

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
    loops, steps, seen = run_bouncing(limit)
    assert seen == list(range(1, limit + 1))
    for loop in loops:
        assert not loop.tracker.reporting  # no child reads its frontiers
        assert folds[id(loop.tracker)] <= steps + 2
