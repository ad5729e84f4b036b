"""A waiting stream is not a failure: only a stall that can never end raises.

A streaming program keeps stepping while it waits for outside data, its input
open and nothing in flight.  Before, it died with ``DataflowStuck`` after the
default 30 s.  Now it keeps running and logs the explanation once as a warning;
a wait that cannot end (the worker waits in ``step_while`` on what only its own
open input holds back) still raises, within seconds; and ``stall_timeout`` still
makes any stall an error for those who want one.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

import pytest

from runtime import DataflowStuck, WorkerFailed, execute
from scopes import Pipeline

PATIENCE = 30.0
"""How long the outside data waits for the warning before it comes anyway (and the test fails on the warning)."""
QUIET = 1.2
"""How long the data still waits after the warning: four warning delays in which no second warning may come."""


def streaming_main(outside: queue.Queue, stall_warning: float):
    """The user's program: a worker loop that polls an outside queue and steps meanwhile."""

    def main(worker):
        worker.stall_warning = stall_warning

        def build(scope):
            handle, readings = scope.new_input("Readings")
            seen: list[int] = []
            readings.inspect(seen.append)
            return handle, readings.probe(), seen

        handle, probe, seen = worker.dataflow(build)
        epoch = 0
        while True:
            try:
                item = outside.get_nowait()
            except queue.Empty:
                worker.step()  # nothing from outside yet: keep the dataflow going
                continue
            if item is None:
                break
            if worker.index == 0:
                handle.send(item)
            epoch += 1
            handle.advance_to(epoch)
            worker.step_while(lambda: probe.less_than(handle.time))
        return seen

    return main


def feed_after(outside: queue.Queue, items: list, warned: Callable[[], bool]) -> threading.Thread:
    """Put ``items`` on ``outside`` :data:`QUIET` seconds after ``warned()`` holds: the stream has been waiting
    longer than its warning delay, and then some more, so that a repeated warning would show. (A fixed sleep from
    the start raced the workers' start: on a loaded machine the data could come before the stall was old enough
    to warn.)"""

    def feed() -> None:
        deadline = time.monotonic() + PATIENCE
        while not warned() and time.monotonic() < deadline:  # not eventually(): its failure would hang the worker
            time.sleep(0.01)
        time.sleep(QUIET)  # not a sync: time in which the stall goes on, and must not warn again
        for item in items:
            outside.put(item)

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    return thread


def warnings_in(records: list[logging.LogRecord]) -> int:
    """The warnings of ``runtime.worker`` among ``records``."""
    return sum(1 for record in list(records) if record.name == "runtime.worker" and record.levelno == logging.WARNING)


def test_a_stream_waiting_for_outside_data_survives_and_warns_once(caplog):
    outside: queue.Queue = queue.Queue()
    feed_after(outside, [7, 8, None], lambda: warnings_in(caplog.records) > 0)
    with caplog.at_level(logging.WARNING, logger="runtime.worker"):
        (seen,) = execute(streaming_main(outside, stall_warning=0.3))
    assert seen == [7, 8]
    warnings = [record for record in caplog.records if record.name == "runtime.worker"]
    assert len(warnings) == 1, [record.getMessage() for record in warnings]
    message = warnings[0].getMessage()
    assert "input 'Readings' is still open at time 0" in message
    assert "keeps running" in message and "stall_timeout" in message


def test_two_streaming_workers_each_warn_once_and_finish():
    outside: list[queue.Queue] = [queue.Queue(), queue.Queue()]
    records: list[logging.LogRecord] = []
    for box in outside:
        feed_after(box, [1, None], lambda: warnings_in(records) == 2)  # both workers have warned
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("runtime.worker")
    logger.addHandler(handler)
    try:
        results = execute(lambda worker: streaming_main(outside[worker.index], 0.3)(worker), workers=2)
    finally:
        logger.removeHandler(handler)
    assert results == [[1], []]
    assert len([r for r in records if r.levelno == logging.WARNING]) == 2  # one per worker


def test_waiting_on_its_own_open_input_raises_quickly():
    """The certain case: the worker waits for time 3 while its own input, open at 2, holds it."""

    def main(worker):
        def build(scope):
            handle, prices = scope.new_input("Prices")
            return handle, prices.probe()

        handle, probe = worker.dataflow(build)
        handle.send(5)
        handle.advance_to(2)
        worker.step_while(lambda: probe.less_than(3))  # forgot handle.advance_to(3)

    started = time.monotonic()
    with pytest.raises(WorkerFailed) as failure:
        execute(main)
    assert time.monotonic() - started < 10
    cause = failure.value.__cause__
    assert isinstance(cause, DataflowStuck)
    assert "input 'Prices' is still open at time 2" in str(cause)
    assert "only its own open inputs" in str(cause)


@pytest.mark.parametrize("workers", [1, 2])
def test_waiting_with_every_dataflow_complete_is_no_stall(workers):
    """stall_timeout counts stalls with work unfinished: a main that waits between dataflows has none."""

    def main(worker):
        def build(scope):
            handle, words = scope.new_input("Words")
            return handle, words.count().probe()

        handle, probe = worker.dataflow(build)
        handle.send("a")
        handle.close()
        worker.step_while(lambda: not probe.done())
        deadline = time.monotonic() + 1.0  # then waits for outside data before its next dataflow
        worker.step_while(lambda: time.monotonic() < deadline)
        return worker.dataflows

    assert execute(main, workers=workers, stall_timeout=0.3) == [[]] * workers


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [1, 2])
def test_a_timer_that_moves_a_loop_on_inside_is_no_stall(workers):
    """A timer's run that moves only a nested scope's times (a loop's iterations) is work: no stall_timeout.

    A run that only timers woke counts as work when it moves progress, and a loop's iterations move inside its
    scope only: the loop's summary at its outputs stays at the outer time. Checking the top-level scope alone
    took each tick for a poll that found nothing, and this loop of 100 ticks failed with DataflowStuck.
    """

    def main(worker):
        def ticker(stream):
            def constructor(capability, info):
                held = [capability]
                ticks = [0]

                def logic(input, output):
                    for _ in input:
                        pass
                    if not held:
                        return
                    if ticks[0] == 100:
                        held.pop().drop()
                        return
                    if ticks[0]:
                        time_ = held[0].time
                        held[0].downgrade(type(time_)(time_.outer, time_.inner + 1))
                    ticks[0] += 1
                    info.activate_after(0.01)

                return logic

            return stream.unary(Pipeline, "Ticker", constructor)

        def build(scope):
            handle, stream = scope.new_input("In")
            return handle, scope.iterative(lambda inner: ticker(stream.enter(inner)).leave()).probe()

        handle, probe = worker.dataflow(build)
        handle.advance_to(1)
        worker.step_while(lambda: probe.less_than(1))
        return probe.less_than(1)

    assert execute(main, workers=workers, stall_timeout=0.5) == [False] * workers
