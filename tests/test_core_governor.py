"""PYTIMELY_THREAD_CORES=auto: worker threads start on one core; a governor spreads them when they queue for it.

The rule (:func:`runtime.core_policy.decide`) is tested on made-up windows; the
governor itself on real threads, syncing on what it reports and on the threads'
CPU sets, never on time.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import pytest
from helpers import eventually

from runtime import core_governor, execute
from runtime.core_governor import latest_report, read_counters, start_governor
from runtime.core_policy import POLICY, Action, GovernorState, Policy, Window, decide
from runtime.errors import WorkerFailed
from runtime.thread_cores import CORES_VARIABLE
from runtime.worker import Worker

QUEUEING = Window(wall=0.02, on_cpu=0.02, waiting=0.02)  # two threads wanting one core: demand 2
GIL_BOUND_PINNED = Window(wall=0.02, on_cpu=0.02, waiting=0.01)  # a woken thread queued a while: demand 1.5
GIL_BOUND_SPREAD = Window(wall=0.02, on_cpu=0.021, waiting=0.004)  # on a CPU 1.05 of the time
PARALLEL_SPREAD = Window(wall=0.02, on_cpu=0.038, waiting=0.001)  # both threads running


def feed(state: GovernorState, windows: list[Window | None]) -> tuple[GovernorState, list[Action]]:
    """Run ``decide`` over ``windows``; the last state and every action."""
    actions = []
    for window in windows:
        state, action = decide(state, window)
        actions.append(action)
    return state, actions


def test_pinned_threads_that_queue_for_the_core_are_spread_after_three_windows() -> None:
    state, actions = feed(GovernorState(), [QUEUEING] * POLICY.spread_windows)
    assert actions == [Action.STAY] * (POLICY.spread_windows - 1) + [Action.SPREAD]
    assert state.spread


def test_pinned_threads_that_do_not_queue_stay_pinned() -> None:
    state, actions = feed(GovernorState(), [GIL_BOUND_PINNED] * 500 + [Window(0.02, 0.004, 0.0)] * 50)
    assert set(actions) == {Action.STAY} and not state.spread


def test_other_programs_load_alone_does_not_spread() -> None:
    # one worker thread wanting the core, queued behind another program half the time: demand 1, waiting 0.5
    state, actions = feed(GovernorState(), [Window(0.02, 0.01, 0.01)] * 100)
    assert set(actions) == {Action.STAY} and not state.spread


def test_queueing_must_last_three_windows_in_a_row() -> None:
    windows = [QUEUEING, QUEUEING, GIL_BOUND_PINNED] * 20
    state, actions = feed(GovernorState(), windows)
    assert set(actions) == {Action.STAY} and not state.spread


def test_spread_gil_bound_threads_are_pinned_after_settling_and_ten_windows() -> None:
    state, _ = feed(GovernorState(), [QUEUEING] * POLICY.spread_windows)
    state, actions = feed(state, [GIL_BOUND_SPREAD] * (POLICY.settle_windows + POLICY.pin_windows))
    assert actions[:-1] == [Action.STAY] * (len(actions) - 1) and actions[-1] is Action.PIN
    assert not state.spread


def test_spread_threads_that_use_both_cores_stay_spread() -> None:
    state, _ = feed(GovernorState(), [QUEUEING] * POLICY.spread_windows)
    windows = ([GIL_BOUND_SPREAD] * (POLICY.pin_windows - 1) + [PARALLEL_SPREAD]) * 50
    state, actions = feed(state, windows)
    assert set(actions) == {Action.STAY} and state.spread


def test_spread_threads_that_want_two_cores_but_get_one_on_a_loaded_machine_stay_spread() -> None:
    state, _ = feed(GovernorState(), [QUEUEING] * POLICY.spread_windows)
    state, actions = feed(state, [Window(wall=0.02, on_cpu=0.02, waiting=0.02)] * 500)
    assert set(actions) == {Action.STAY} and state.spread


def test_windows_right_after_a_move_are_ignored() -> None:
    state, _ = feed(GovernorState(), [QUEUEING] * POLICY.spread_windows)
    assert state.settle == POLICY.settle_windows
    state, actions = feed(state, [GIL_BOUND_SPREAD] * POLICY.pin_windows)
    assert set(actions) == {Action.STAY}  # the first windows after the move did not count


def test_quick_reversals_make_each_next_move_need_more_evidence_so_it_cannot_flap() -> None:
    """Alternating phases of queueing and GIL-bound work, each long enough to move the threads once."""
    phase = 30
    windows = ([QUEUEING] * phase + [GIL_BOUND_SPREAD] * phase) * 80  # 4,800 windows, 96 s at 20 ms
    _, actions = feed(GovernorState(), windows)
    moves = [index for index, action in enumerate(actions) if action is not Action.STAY]
    assert len(moves) >= 4  # it does follow the work at first...
    gaps = [later - earlier for earlier, later in zip(moves, moves[1:], strict=False)]
    assert min(gaps) >= POLICY.settle_windows + POLICY.spread_windows  # ...never every window...
    late = [index for index in moves if index >= 500]  # ...and after 10 s about twice every 6 s, not every 0.6 s
    assert len(late) <= 2 * (len(windows) - 500) // 250
    assert len(late) < (len(windows) - 500) // phase // 4


def test_calm_stretches_ease_what_earlier_reversals_added() -> None:
    state, _ = feed(GovernorState(), [QUEUEING] * 3 + [GIL_BOUND_SPREAD] * 15 + [QUEUEING] * 11)
    assert state.spread and state.pin_need == 2 * POLICY.pin_windows  # a pin was undone quickly
    state, _ = feed(state, [PARALLEL_SPREAD] * (round(POLICY.calm_seconds / PARALLEL_SPREAD.wall) + 1))
    assert state.pin_need == 0  # back to the base count
    state, actions = feed(state, [GIL_BOUND_SPREAD] * POLICY.pin_windows)
    assert actions[-1] is Action.PIN


def test_windows_grow_while_nothing_is_pending_and_shrink_when_a_move_may_come() -> None:
    state, _ = feed(GovernorState(), [GIL_BOUND_PINNED] * (POLICY.eager_windows - 1))
    assert state.window == POLICY.window  # short windows for the first half second
    state, _ = feed(state, [GIL_BOUND_PINNED] * 10)
    assert state.window == POLICY.max_window
    state, _ = feed(state, [QUEUEING])
    assert state.window == POLICY.window and state.streak == 1
    state, _ = feed(state, [QUEUEING] * (POLICY.spread_windows - 1))
    assert state.spread and state.window == POLICY.window


def test_unreadable_counters_stop_the_governor_where_the_threads_are() -> None:
    state, _ = feed(GovernorState(), [QUEUEING] * 3)
    after, action = decide(state, None)
    assert action is Action.STOP and after == state


def test_a_window_of_no_length_changes_nothing() -> None:
    state, action = decide(GovernorState(streak=2), Window(0.0, 0.0, 0.0), Policy())
    assert action is Action.STAY and not state.spread and state.streak == 0


# -- real threads ------------------------------------------------------------------------------------------------


def _governable() -> bool:
    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2:
        return False
    try:
        with open("/proc/thread-self/schedstat", "rb") as counters:
            counters.read()
    except OSError:
        return False
    return True


needs_governor = pytest.mark.skipif(
    not _governable(), reason="needs Linux schedstat files, sched_setaffinity and at least 2 allowed CPUs"
)


class Placement:
    """The worker threads' ids, and the CPU sets they were all seen on once a condition held."""

    def __init__(self, workers: int) -> None:
        self.tids: dict[int, int] = {}
        self.seen: dict[int, frozenset[int]] = {}
        self.found = threading.Event()
        self.registered = threading.Barrier(workers, timeout=30)
        self.lock = threading.Lock()

    def register(self, worker: Worker) -> None:
        with self.lock:
            self.tids[worker.index] = threading.get_native_id()
        self.registered.wait()

    def cpu_sets(self) -> dict[int, frozenset[int]]:
        return {index: frozenset(os.sched_getaffinity(tid)) for index, tid in self.tids.items()}

    def until(self, work: Any, holds: Any, what: str) -> None:
        """Do ``work`` until ``holds(cpu sets)`` (recorded) or another worker saw it hold."""

        def done() -> bool:
            if not self.found.is_set():
                work()
            with self.lock:  # a worker that saw it and returned may end its thread only after this
                if not self.found.is_set():
                    cpus = self.cpu_sets()
                    if holds(cpus):
                        self.seen = cpus
                        self.found.set()
                return self.found.is_set()

        eventually(done, timeout=120, what=what)


@needs_governor
def test_auto_spreads_two_worker_threads_sorting_with_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    np = pytest.importorskip("numpy")
    monkeypatch.delenv(CORES_VARIABLE, raising=False)  # auto is the default
    allowed = frozenset(os.sched_getaffinity(0))
    placement = Placement(2)

    def main(worker: Worker) -> None:
        placement.register(worker)
        numbers = np.random.default_rng(worker.index).random(1_000_000)

        def sort_for_a_while() -> None:
            # One sort lasts about 20 ms, as long as two of ``eventually``'s 10 ms pauses: sorting once per poll
            # kept each thread runnable about 2/3 of the time, a demand (1.3) that rightly does not spread.
            until = time.monotonic() + 0.25
            while time.monotonic() < until:
                np.sort(numbers)

        placement.until(
            sort_for_a_while,
            lambda cpus: all(cpu_set == allowed for cpu_set in cpus.values()),
            "both sorting threads spread",
        )

    execute(main, workers=2)
    assert placement.seen == {0: allowed, 1: allowed}
    assert os.sched_getaffinity(0) == allowed


@needs_governor
def test_auto_keeps_two_worker_threads_doing_python_on_one_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CORES_VARIABLE, "auto")
    placement = Placement(2)
    reports = []

    def python_work() -> None:
        total = 0
        for number in range(20_000):
            total += number % 7

    def on_one_core_after_a_second_of_governing(cpus: dict[int, frozenset[int]]) -> bool:
        report = latest_report()
        if report is None or report.windows < 30 or report.spread:  # 30 windows: more than a second
            return False
        reports.append(report)
        return len(set(cpus.values())) == 1 and all(len(cpu_set) == 1 for cpu_set in cpus.values())

    def main(worker: Worker) -> None:
        placement.register(worker)
        placement.until(python_work, on_one_core_after_a_second_of_governing, "Python threads on one core")

    execute(main, workers=2)
    assert len(set(placement.seen.values())) == 1 and len(next(iter(placement.seen.values()))) == 1
    assert reports and not reports[-1].spread and not reports[-1].stopped


def _governor_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "timely-core-governor"]


@needs_governor
def test_the_governor_runs_beside_the_worker_threads_and_ends_with_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CORES_VARIABLE, raising=False)
    placement = Placement(2)

    both_saw_it = threading.Barrier(2, timeout=30)  # the first worker to end stops the governor

    def main(worker: Worker) -> int:
        placement.register(worker)
        seen = len(eventually(_governor_threads, what="the governor thread"))
        both_saw_it.wait()
        return seen

    assert execute(main, workers=2) == [1, 1]
    assert _governor_threads() == []
    assert latest_report() is None  # it kept nothing alive


@needs_governor
def test_the_governor_ends_when_a_worker_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CORES_VARIABLE, raising=False)
    placement = Placement(2)

    both_saw_it = threading.Barrier(2, timeout=30)

    def main(worker: Worker) -> None:
        placement.register(worker)
        eventually(_governor_threads, what="the governor thread")
        both_saw_it.wait()
        if worker.index == 1:
            raise RuntimeError("boom")
        worker.step_while(lambda: True)  # stopped by worker 1's failure

    with pytest.raises(WorkerFailed, match="boom"):
        execute(main, workers=2)
    assert _governor_threads() == []


@pytest.mark.parametrize("setting", ["one", "all"])
def test_one_and_all_run_no_governor(monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    monkeypatch.setenv(CORES_VARIABLE, setting)
    assert execute(lambda worker: len(_governor_threads()), workers=2) == [0, 0]


def test_a_single_worker_runs_no_governor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CORES_VARIABLE, raising=False)
    assert execute(lambda worker: len(_governor_threads()), workers=1) == [0]


def test_threads_whose_counters_cannot_be_opened_are_not_governed() -> None:
    ended = threading.Thread(target=lambda: None)
    ended.start()
    ended.join()
    tid = ended.native_id
    assert tid is not None
    eventually(lambda: not os.path.exists(f"/proc/self/task/{tid}"), what="the system to reap the thread")
    # the thread is gone: its schedstat file no longer exists, and nothing is started or moved
    assert start_governor([tid, tid], 0, threading.Event()) is None


@needs_governor
def test_the_counters_of_an_ended_thread_cannot_be_read() -> None:
    release = threading.Event()
    thread = threading.Thread(target=release.wait, args=(30,))
    thread.start()
    descriptor = os.open(f"/proc/self/task/{thread.native_id}/schedstat", os.O_RDONLY)
    try:
        counters = read_counters([descriptor])
        assert counters is not None and counters[0] >= 0 and counters[1] >= 0
        release.set()
        thread.join()
        # the governor then stops (decide(..., None) is STOP); the system reaps the thread soon after the join
        eventually(lambda: read_counters([descriptor]) is None, what="the ended thread's counters to vanish")
    finally:
        os.close(descriptor)


def _cpu_sets_of_two_workers() -> list[frozenset[int]]:
    def main(worker: Worker) -> frozenset[int]:
        return frozenset(os.sched_getaffinity(0))

    return execute(main, workers=2)


@needs_governor
def test_without_counters_auto_leaves_the_worker_threads_on_every_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CORES_VARIABLE, raising=False)
    monkeypatch.setattr(core_governor, "open_counters", lambda tids: None)
    allowed = frozenset(os.sched_getaffinity(0))
    assert _cpu_sets_of_two_workers() == [allowed, allowed]
    assert _governor_threads() == []


@needs_governor
def test_threads_the_system_will_not_move_are_left_as_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CORES_VARIABLE, raising=False)

    def refuse(tid: int, cpus: Any) -> None:
        raise PermissionError("not allowed")

    monkeypatch.setattr(core_governor.os, "sched_setaffinity", refuse)
    allowed = frozenset(os.sched_getaffinity(0))
    assert _cpu_sets_of_two_workers() == [allowed, allowed]


@needs_governor
def test_a_governor_that_cannot_move_the_threads_stops_without_a_fuss(caplog: pytest.LogCaptureFixture) -> None:
    release = threading.Event()
    threads = [threading.Thread(target=release.wait, args=(30,)) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        tids = [thread.native_id for thread in threads if thread.native_id is not None]
        descriptors = core_governor.open_counters(tids)
        assert descriptors is not None
        eager = Policy(queue_fraction=0.0, spread_demand=0.0, spread_windows=1)  # spreads at the first window
        governor = core_governor.CoreGovernor(tids, descriptors, 0, {4095}, threading.Event(), eager)  # no such CPU
        with caplog.at_level(logging.DEBUG, logger="runtime.core_governor"):
            governor.start()
            report = eventually(lambda: governor.report().stopped and governor.report(), what="the governor to stop")
        assert report.moves == 0 and report.windows == 1
        assert [record.message for record in caplog.records if "cannot move" in record.message] != []
        assert len(caplog.records) == 1
        governor.stop()
    finally:
        release.set()
        for thread in threads:
            thread.join()


@needs_governor
def test_under_auto_each_worker_thread_starts_on_the_shared_core(monkeypatch: pytest.MonkeyPatch) -> None:
    # the threads put themselves on the core before main runs, not when the governor gets to them a little later
    monkeypatch.delenv(CORES_VARIABLE, raising=False)
    first_looks = _cpu_sets_of_two_workers()
    assert len(set(first_looks)) == 1 and len(first_looks[0]) == 1
    assert core_governor.counters_readable()
