"""Smaller items of issue 17, each as a user would run into it."""

from __future__ import annotations

import warnings

import runtime
from runtime import execute


def test_a_temporary_barrier_does_not_hold_the_program_open():
    """``Barrier(worker).wait()`` on a temporary, then stepping to the end, completes."""

    def main(worker):
        runtime.Barrier(worker).wait()
        while worker.step():
            pass
        return "done"

    assert execute(main, workers=2, stall_timeout=5) == ["done", "done"]


def test_a_barrier_as_a_context_manager_closes_when_the_block_ends():
    def main(worker):
        with runtime.Barrier(worker) as barrier:
            barrier.wait()
            barrier.wait()
            rounds = barrier.rounds
        while worker.step():
            pass
        return rounds

    assert execute(main, workers=2, stall_timeout=5) == [2, 2]


def test_probe_frontier_is_called_like_less_than_and_done():
    def main(worker):
        def build(scope):
            handle, numbers = scope.new_input()
            return handle, numbers.probe()

        handle, probe = worker.dataflow(build)
        handle.advance_to(4)
        worker.step_while(lambda: probe.less_than(4))
        called = probe.frontier()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            old_style = list(probe.frontier)
        return list(called), old_style, [str(w.message) for w in caught]

    ((called, old_style, caught),) = execute(main)
    assert called == old_style == [4]
    assert len(caught) == 1 and "call probe.frontier()" in caught[0]
