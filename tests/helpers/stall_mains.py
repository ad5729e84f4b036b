"""Programs for the certain-stall tests (issue 26): importable, so that they also run on 2 processes.

Each sets ``worker.certain_stall`` small, so that a stall judged certain raises
within a fraction of a second and a wait that lasts :data:`OUTSIDE_WAIT` seconds
outlives that delay several times over.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from runtime.worker import Worker

CERTAIN_STALL = 0.2
"""The tests' ``worker.certain_stall``: seconds of stall before a certain one raises."""

OUTSIDE_WAIT = 1.5
"""Seconds a program waits for something outside the dataflow (longer than the default certain delay, 1 s)."""


def counted(worker: Worker) -> tuple[Any, Any, list[Any]]:
    """The issue's dataflow: an input 'Edges', exchanged, counted per time, probed; counts go to the list."""
    seen: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Edges")
        counts = stream.exchange(lambda x: x).count()
        counts.inspect(lambda record: seen.append(record))
        return handle, counts.probe()

    handle, probe = worker.dataflow(build, name="edges")
    return handle, probe, seen


def deadline_main(worker: Worker) -> list[Any]:
    """Shape 1: ``step_while`` on a wall-clock deadline (polling outside), then more input: healthy."""
    worker.certain_stall = CERTAIN_STALL
    handle, probe, seen = counted(worker)
    handle.send_batch(list(range(10)))
    handle.advance_to(1)
    deadline = time.monotonic() + OUTSIDE_WAIT
    worker.step_while(lambda: time.monotonic() < deadline)  # polling an outside source
    handle.send_batch(list(range(10)))
    handle.advance_to(2)
    worker.step_while(lambda: probe.less_than(2))
    return sorted(seen)


def operator_reads_probe_main(worker: Worker) -> list[Any]:
    """``step_while`` on a deadline while an operator reads the probe that the open input holds: healthy.

    The wait's condition reads no probe; the operator's read (logging how far the output is behind, say)
    does not make the wait one on the probe.
    """
    worker.certain_stall = CERTAIN_STALL
    seen: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Edges")
        probe = stream.probe()
        stream.inspect(lambda record: seen.append(probe.less_than(record)))
        return handle, probe

    handle, probe = worker.dataflow(build, name="edges")
    handle.send(1)  # the input stays open at time 0 during the wait
    deadline = time.monotonic() + OUTSIDE_WAIT
    worker.step_while(lambda: time.monotonic() < deadline)
    handle.advance_to(1)
    worker.step_while(lambda: probe.less_than(1))
    return seen


def monitored_main(worker: Worker) -> list[Any]:
    """``step_while`` on an outside event while a thread of the user's reads the probe that the open input holds:
    healthy.

    The thread (a progress reporter, say) reads the probe all through the wait; the condition never does. Before,
    every read of the probe during an idle period counted as the condition's, so the wait was judged certain and
    raised ``DataflowStuck`` (found by a randomized campaign of waiting programs).
    """
    worker.certain_stall = CERTAIN_STALL
    handle, probe, seen = counted(worker)
    handle.send(1)  # the input stays open at time 0 during the wait
    arrived = threading.Event()

    def reporter() -> None:
        deadline = time.monotonic() + OUTSIDE_WAIT
        while time.monotonic() < deadline:
            probe.less_than(1)  # reading how far the output is behind, as a progress line would
            time.sleep(0.001)  # not a sync: the pace of the reporter's reads
        arrived.set()  # the outside data the wait is for

    threading.Thread(target=reporter, daemon=True).start()
    worker.step_while(lambda: not arrived.is_set())
    handle.advance_to(1)
    worker.step_while(lambda: probe.less_than(1))
    return sorted(seen)


def polling_source(scope: Any, name: str) -> Any:
    """A source polling an outside queue that stays empty, every 5 ms with ``info.activate_after``, for ever."""

    def constructor(capability: Any, info: Any) -> Any:
        held = [capability]

        def logic(output: Any) -> None:
            assert held  # the source keeps its capability: more data may come
            info.activate_after(0.005)

        return logic

    return scope.source(name, constructor)


def polled_forgotten_main(worker: Worker) -> None:
    """``forgotten_main`` while another dataflow polls outside for ever: the stall is certain all the same.

    Before, every poll (a run that found nothing) ended the stall, so it never lasted ``certain_stall`` and the
    wait hung for ever, with no error and no warning (found by a randomized campaign of stuck programs).
    """
    worker.certain_stall = CERTAIN_STALL
    worker.dataflow(lambda scope: polling_source(scope, "Polled").probe(), name="stream")
    handle, probe, _ = counted(worker)
    handle.send(1)
    worker.step_while(lambda: not probe.done())


def forgotten_main(worker: Worker) -> None:
    """Shape 2: the input is never advanced or closed, and ``main`` waits for the probe to finish."""
    worker.certain_stall = CERTAIN_STALL
    handle, probe, _ = counted(worker)
    handle.send(1)
    worker.step_while(lambda: not probe.done())


def other_input_main(worker: Worker) -> list[Any]:
    """Worker 1 waits on a probe that worker 0's open input holds, while worker 0 polls outside: healthy."""
    worker.certain_stall = CERTAIN_STALL
    handle, probe, seen = counted(worker)
    if worker.index == 0:
        deadline = time.monotonic() + OUTSIDE_WAIT
        while time.monotonic() < deadline:  # a streaming main, waiting for outside data
            worker.step()
        handle.send_batch([1, 2, 3])
    handle.close()
    worker.step_while(lambda: not probe.done())
    return sorted(seen)


def timer_main(worker: Worker) -> list[Any]:
    """A user operator holds a capability at time 0 until a timer fires; ``main`` waits on the probe: healthy.

    The input has advanced to 1, so it cannot be the cause of the capability at
    0: the stall is not certain, and the timer ends it.
    """
    worker.certain_stall = CERTAIN_STALL
    seen: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Ticks")

        def constructor(capability: Any, info: Any) -> Any:
            held = [capability]
            fired = threading.Event()

            def fire() -> None:
                fired.set()
                info.activate()

            timer = threading.Timer(OUTSIDE_WAIT, fire)
            timer.daemon = True
            timer.start()

            def logic(output: Any) -> None:
                if held and fired.is_set():
                    output.session(held[0]).give("tick")
                    held.pop().drop()

            return logic

        ticks = scope.source("Timer", constructor)
        merged = stream.concat(ticks)
        merged.inspect(lambda record: seen.append(record))
        return handle, merged.probe()

    handle, probe = worker.dataflow(build, name="timed")
    handle.advance_to(1)
    worker.step_while(lambda: probe.less_than(1))
    handle.close()
    worker.step_while(lambda: not probe.done())
    return seen


def one_forgets_main(worker: Worker) -> None:
    """Worker 1's main returns at once (its input closes); worker 0 never advances its input and waits."""
    worker.certain_stall = CERTAIN_STALL
    handle, probe, _ = counted(worker)
    if worker.index == 0:
        handle.send(1)
        worker.step_while(lambda: not probe.done())


def crossed_main(worker: Any) -> None:
    """Each worker waits on a probe that only the *other* worker's copy of an input holds (one line makes both).

    Worker 0 advances 'Left' to 1 and waits on its probe; worker 1 does the same with 'Right'.  So each
    worker's own copy of the input that holds its wait is at time 1, and the holder (the other's) is at time 0.
    """
    worker.certain_stall = 0.2

    def build(scope: Any) -> Any:
        handles, probes = [], []
        for name in ("Left", "Right"):
            handle, stream = scope.new_input(name)  # the line the error names
            handles.append(handle)
            probes.append(stream.probe())
        return handles, probes

    handles, probes = worker.dataflow(build)
    mine = worker.index % 2
    handles[mine].advance_to(1)
    worker.step_while(lambda: probes[mine].less_than(1))


def long_main_after_completion(worker: Worker) -> int:
    """Worker 0's ``main`` goes on for longer than the silence limit after every dataflow completed."""
    from runtime.communication.process_fabric import SILENCE_LIMIT

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        return handle, stream.exchange(lambda record: record).probe()

    handle, probe = worker.dataflow(build)
    handle.send(worker.index)
    handle.close()
    worker.step_while(lambda: not probe.done())
    if worker.index == 0:
        time.sleep(SILENCE_LIMIT + 1.5)  # the program's own work after the dataflows (the scenario, not a sync)
    return worker.index


def barrier_on_worker_0_only(worker: Worker) -> int:
    """Only worker 0 builds a Barrier (a dataflow) and waits at it: the others can never build it."""
    from runtime.barrier import Barrier

    worker.certain_stall = 0.2
    if worker.index == 0:
        Barrier(worker).wait()  # the line the error names
    return worker.index


def extra_dataflow_on_worker_0(worker: Worker) -> int:
    """Worker 0 builds one dataflow more than the others and returns."""
    worker.certain_stall = 0.2
    if worker.index == 0:
        worker.dataflow(lambda scope: scope.new_input("Extra")[0], name="extra")
    return worker.index
