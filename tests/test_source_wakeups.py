"""A user's source waiting for outside data parks its worker: ``info.activate_after`` and ``info.waker()``.

Each run's source reads a :class:`queue.Queue` that a thread fills after about
a second (:data:`HOLD`).  The test measures the run's CPU time in its own
process (:class:`helpers.idle_cpu.RunCpu`, which leaves out the threads and the
garbage of earlier tests), and each process of ``processes=2`` measures its own
over its whole ``main``: a source that re-activates itself on every step
(``info.activate()``) burns about the whole second, one that polls with
``activate_after`` at a growing interval, or waits for the feeding thread's
``waker()`` call, a few percent.
"""

from __future__ import annotations

import math
import queue
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from helpers import eventually
from helpers.idle_cpu import RunCpu

import runtime
from runtime import execute
from runtime.communication.simulation import RecordedChoices, simulate
from runtime.errors import WorkerFailed
from runtime.testing import check_interleavings
from scopes import ActivationError, Capability, OperatorInfo

HOLD = 1.0
"""Seconds the feeding thread holds the data back: the idle wait that is measured."""

MOST_CPU = 0.15
"""The most CPU time a run may cost, as a share of its wall time (spinning costs about 1.0)."""

STALL_TIMEOUT = 30.0
"""A lost wake-up leaves the source waiting for ever: the run fails after this many seconds instead."""

RECORDS = 5
"""Records each worker's feeding thread puts on its queue."""

FIRST, LONGEST = 0.001, 0.05
"""The backoff of the polling source: its first interval, doubling up to the longest."""


def feed(items: queue.Queue[str | None], worker: int, wake: Callable[[], None] | None) -> None:
    """Hold back for :data:`HOLD` s, then put :data:`RECORDS` records and the end (``None``), waking after each."""
    time.sleep(HOLD)  # the idle wait measured: the source has nothing to read meanwhile
    for number in range(RECORDS):
        items.put(f"{worker}-{number}")
        if wake is not None:
            wake()
    items.put(None)
    if wake is not None:
        wake()


def queue_source(scope: Any, how: str) -> Any:
    """A source reading a queue fed by a thread it starts; ``how`` it waits: backoff, waker or spin."""

    def constructor(capability: Capability, info: OperatorInfo) -> Callable[[Any], None]:
        items: queue.Queue[str | None] = queue.Queue()
        held = [capability]
        interval = [FIRST]
        wake = info.waker() if how == "waker" else None
        threading.Thread(target=feed, args=(items, info.worker_index, wake), daemon=True).start()

        def logic(output: Any) -> None:
            if not held:
                return
            while True:
                try:
                    item = items.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    held.pop().drop()
                    return
                output.session(held[0]).give(item)
                interval[0] = FIRST
            if how == "backoff":
                info.activate_after(interval[0])
                interval[0] = min(interval[0] * 2, LONGEST)
            elif how == "spin":  # the costly pattern, for comparison
                info.activate()

        return logic

    return scope.source("Queue", constructor)


def run_source(worker: runtime.Worker, how: str) -> tuple[list[str], float, float]:
    """Build and run the source; return its records, and the CPU and wall seconds of the run."""
    cpu, wall = time.process_time(), time.monotonic()
    got: list[str] = []
    probe = worker.dataflow(lambda scope: queue_source(scope, how).inspect(got.append).probe())
    worker.step_while(lambda: not probe.done())
    return sorted(got), time.process_time() - cpu, time.monotonic() - wall


def main_backoff(worker: runtime.Worker) -> tuple[list[str], float, float]:
    """The source polls with ``activate_after`` at a growing interval."""
    return run_source(worker, "backoff")


def main_waker(worker: runtime.Worker) -> tuple[list[str], float, float]:
    """The feeding thread wakes the source with ``info.waker()``."""
    return run_source(worker, "waker")


MODES: dict[str, dict[str, Any]] = {"1 worker": {}, "2 threads": {"workers": 2}, "2 processes": {"processes": 2}}


def check_runs(main: Callable[[runtime.Worker], tuple[list[str], float, float]], mode: str) -> None:
    """Run ``main`` in ``mode``: every worker gets its records, and no process spends more than :data:`MOST_CPU`
    of its wall time (the processes of ``processes=2`` measure themselves; this process measures its threads)."""
    with RunCpu() as run:
        results = execute(main, stall_timeout=STALL_TIMEOUT, **MODES[mode])
    for index, (got, cpu, wall) in enumerate(results):
        assert got == [f"{index}-{number}" for number in range(RECORDS)]
        assert wall >= HOLD
        if "processes" in MODES[mode]:
            assert cpu < MOST_CPU * wall, f"process {index}: waiting cost {cpu:.2f} s of CPU in {wall:.2f} s"
    assert run.cpu < MOST_CPU * run.wall, f"waiting cost {run.cpu:.2f} s of CPU in {run.wall:.2f} s"


@pytest.mark.parametrize("mode", MODES)
def test_a_source_polling_with_activate_after_parks_its_worker(mode: str) -> None:
    check_runs(main_backoff, mode)


@pytest.mark.parametrize("mode", MODES)
def test_a_source_woken_by_the_feeding_thread_parks_its_worker(mode: str) -> None:
    check_runs(main_waker, mode)


def source_calling(call: Callable[[OperatorInfo], None]) -> Callable[[runtime.Worker], None]:
    """A ``main`` whose source calls ``call(info)`` on its first run."""

    def main(worker: runtime.Worker) -> None:
        def constructor(capability: Capability, info: OperatorInfo) -> Callable[[Any], None]:
            def logic(output: Any) -> None:
                call(info)
                capability.drop()

            return logic

        worker.dataflow(lambda scope: scope.source("Poller", constructor).probe())

    return main


@pytest.mark.parametrize("seconds", [-1, -0.5, math.nan, math.inf, "1", None, True])
def test_a_bad_delay_names_the_operator(seconds: Any) -> None:
    with pytest.raises(WorkerFailed) as caught:
        execute(source_calling(lambda info: info.activate_after(seconds)))
    cause = caught.value.__cause__
    assert isinstance(cause, ActivationError) or isinstance(getattr(cause, "__cause__", None), ActivationError)
    assert "operator 'Poller'" in str(caught.value) and repr(seconds) in str(caught.value)


def test_a_waker_called_after_the_dataflow_completed_does_nothing() -> None:
    wakers: list[Callable[[], None]] = []

    def main(worker: runtime.Worker) -> int:
        source_calling(lambda info: wakers.append(info.waker()))(worker)
        while worker.step():
            pass
        wakers[0]()  # the dataflow has completed: nothing is queued
        wakers[0]()
        return len(worker.communicator.take_activations())

    assert execute(main) == [0]
    wakers[0]()  # and once the computation has ended, no error either


def test_a_waker_called_from_another_thread_while_the_operator_has_finished_does_nothing() -> None:
    # the source has sent with its capability and dropped it, but the dataflow still runs (its other source
    # waits): a wake of the finished source does not run its logic again, which would send with a dropped
    # capability
    calls: list[str] = []
    gate = threading.Event()

    def main(worker: runtime.Worker) -> list[str]:
        def finished(capability: Capability, info: OperatorInfo) -> Callable[[Any], None]:
            calls.append("built")
            wakers.append(info.waker())

            def logic(output: Any) -> None:
                calls.append("ran")
                output.session(capability).give("once")
                capability.drop()

            return logic

        def waiting(capability: Capability, info: OperatorInfo) -> Callable[[Any], None]:
            wake = info.waker()
            threading.Thread(target=lambda: (gate.wait(), wake()), daemon=True).start()

            def logic(output: Any) -> None:
                if gate.is_set():
                    capability.drop()

            return logic

        wakers: list[Callable[[], None]] = []

        def build(scope: Any) -> Any:
            return scope.source("Finished", finished).concat(scope.source("Waiting", waiting)).probe()

        probe = worker.dataflow(build)
        eventually(lambda: (worker.step(), calls.count("ran") == 1)[1], what="the finished source to run")
        for _ in range(3):
            wakers[0]()
            worker.step()
        gate.set()
        worker.step_while(lambda: not probe.done())
        return calls

    assert execute(main, stall_timeout=STALL_TIMEOUT) == [["built", "ran"]]


def test_a_timer_of_a_completed_dataflow_is_dropped() -> None:
    def main(worker: runtime.Worker) -> bool:
        source_calling(lambda info: info.activate_after(3600))(worker)
        while worker.step():
            pass
        return bool(worker._timers)

    assert execute(main) == [False]


def polled_in_simulation(worker: runtime.Worker) -> list[tuple[int, int]]:
    """A source that emits one record per timer, 10 s apart on the simulated clock, three times."""
    got: list[tuple[int, int]] = []

    def constructor(capability: Capability, info: OperatorInfo) -> Callable[[Any], None]:
        runs = [0]

        def logic(output: Any) -> None:
            if runs[0] < 3:
                output.session(capability).give((info.worker_index, runs[0]))
                capability.downgrade(capability.time + 1)
                runs[0] += 1
                info.activate_after(10.0)
            else:
                capability.drop()

        return logic

    probe = worker.dataflow(
        lambda scope: scope.source("Timed", constructor).exchange(lambda r: 0).inspect(got.append).probe()
    )
    worker.step_while(lambda: not probe.done())
    return got


def test_timers_run_on_the_simulated_clock_and_a_seed_repeats_the_run() -> None:
    started = time.monotonic()
    runs = []
    for seed in (1, 1, 2):
        choices = RecordedChoices(random.Random(seed))
        runs.append((simulate(polled_in_simulation, workers=2, choices=choices), choices.schedule))
    assert time.monotonic() - started < 10  # three 10 s timers per worker: the virtual clock skipped them
    assert runs[0] == runs[1]  # the same seed: the same run, choice for choice
    for results, _ in runs:
        assert sorted(results[0]) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)] and results[1] == []


def test_without_runtime_timers_activate_after_activates_and_waker_is_refused() -> None:
    activations: list[str] = []
    info = OperatorInfo("Lonely", 1, (0, 1), 0, 1, lambda: activations.append("now"))
    info.activate_after(5)  # no timers: at the next step, as activate()
    assert activations == ["now"]
    with pytest.raises(ActivationError, match="operator 'Lonely'.*cannot be woken.*activate_after"):
        info.waker()
    with pytest.raises(ActivationError, match="operator 'Lonely'.*-1"):
        info.activate_after(-1)


def ticking(scope: Any, numbers: Any) -> Any:
    """Worker 0's source sends a 0 at times 0, 1 and 2, one time per timer of 50 ms; the input is counted with it."""

    def constructor(capability: Capability, info: OperatorInfo) -> Callable[[Any], None]:
        def logic(output: Any) -> None:
            if info.worker_index != 0:
                capability.drop()
                return
            output.session(capability).give(0)
            if capability.time == 2:
                capability.drop()
            else:
                capability.downgrade(capability.time + 1)
                info.activate_after(0.05)

        return logic

    return scope.source("Ticks", constructor).concat(numbers).exchange(lambda n: 0).count()


def test_a_timed_source_gives_one_answer_under_every_simulated_order() -> None:
    reference = check_interleavings(ticking, [[1, 2], [3]], workers=2, seeds=range(20), shrink=0)
    assert reference.output() == {0: [3], 1: [2], 2: [1]}
