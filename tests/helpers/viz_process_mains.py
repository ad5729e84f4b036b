"""Programs the 2-process recording tests run in each process of a local cluster (importable by the processes)."""

from __future__ import annotations

import json
import os
from typing import Any

from test_viz_recorded import countdown

from runtime.worker import Worker
from scopes.builder import ScopeBuilder


def plain(time: Any) -> Any:
    """A time as JSON: products become nested lists."""
    if isinstance(time, tuple):
        return [plain(part) for part in time]
    return time


def frontier(probe: Any) -> list[Any]:
    """A probe's frontier as sorted JSON values."""
    return [plain(t) for t in sorted(probe.frontier())]


def countdown_main(worker: Worker) -> int:
    """Countdown (a loop nested in a loop); after each step, note the log's seq and the probes' frontiers."""
    probes: list[Any] = []

    def build(scope: ScopeBuilder) -> Any:
        handle, numbers = scope.new_input("numbers")
        done = countdown(scope, numbers, probes)
        return handle, done.probe(name="TopProbe")

    handle, top = worker.dataflow(build, name="countdown")
    log = worker.logger
    assert log is not None
    samples = []
    for epoch in range(3):
        handle.send_batch(list(range(worker.index, 40, worker.peers)))
        handle.advance_to(epoch + 1)
        while top.less_than(handle.time):
            worker.step()
            samples.append((log.seq, frontier(top), frontier(probes[0])))
    handle.close()
    while worker.step():
        samples.append((log.seq, frontier(top), frontier(probes[0])))
    with open(f"{os.environ['VIZ_SAMPLES']}.{worker.index}.json", "w") as handle_out:
        json.dump(samples, handle_out)
    return len(samples)


def never_closed_main(worker: Worker) -> int:
    """Feed an input that is never advanced, step a while, and mark the moment before main returns (and closes it)."""

    def build(scope: ScopeBuilder) -> Any:
        handle, numbers = scope.new_input("sensor readings")
        return handle, countdown(scope, numbers, []).probe(name="TopProbe")

    handle, _probe = worker.dataflow(build, name="stuck")
    handle.send_batch([5, 8])
    for _ in range(200):
        worker.step()
    assert worker.logger is not None
    worker.logger.mark("still open")
    return 0
