"""Workload 2: epoch latency, input -> map -> probe, one epoch at a time.

Each function returns the mean seconds per epoch over ``epochs`` epochs.

* :func:`pytimely_one_worker`: for each epoch, ``send`` one record,
  ``advance_to(epoch + 1)``, then ``worker.step()`` until the probe passes it.
  Only the epochs are timed, not building the dataflow.
* The multi-worker settings (2 threads, 2 processes) are measured by
  ``benchmarks/latency_processes.py``'s ``measure``, as ``run.py`` does for every setting.
* :func:`bytewax_epoch_interval_zero`: bytewax 0.21.1, ``TestingSource`` of
  ``epochs`` records (one per batch) -> ``op.map`` -> ``TestingSink``, run by
  ``run_main(flow, epoch_interval=timedelta(0))`` so that every record closes
  an epoch.  ``run_main`` builds and runs in one call, so its time includes
  building the dataflow; :func:`bytewax_start_cost` measures that on its own
  (one record) so the report can show it is small.
"""

from __future__ import annotations

import gc
import time
from datetime import timedelta
from typing import Any

from runtime.execute import execute
from runtime.worker import Worker


def plus_one(x: int) -> int:
    """The map of the latency dataflow."""
    return x + 1


def latency_worker(worker: Worker, epochs: int) -> tuple[float, float]:
    """One worker's part: advance ``epochs`` epochs one at a time; return (start, end) ``perf_counter``."""

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Ticks")
        return handle, stream.map(plus_one).probe()

    handle, probe = worker.dataflow(build, name="epoch latency")
    handle.send(0)  # a warm-up epoch, not timed: both processes have built and connected
    handle.advance_to(1)
    while probe.less_than(1):
        worker.step()
    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        handle.send(epoch)
        handle.advance_to(epoch + 1)
        while probe.less_than(epoch + 1):
            worker.step()
    return start, time.perf_counter()


def pytimely_one_worker(epochs: int) -> float:
    """Mean seconds per epoch on one worker."""
    gc.collect()
    start, end = execute(lambda worker: latency_worker(worker, epochs), workers=1)[0]
    return (end - start) / epochs


def bytewax_epoch_interval_zero(epochs: int) -> float:
    """Mean seconds per epoch of bytewax 0.21.1 with ``epoch_interval=0`` (build included)."""
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("epoch_latency")
    out: list[int] = []
    op.output("out", op.map("map", op.input("ticks", flow, TestingSource(range(epochs))), plus_one), TestingSink(out))
    gc.collect()
    start = time.perf_counter()
    run_main(flow, epoch_interval=timedelta(0))
    seconds = time.perf_counter() - start
    if len(out) != epochs:
        raise RuntimeError(f"bytewax delivered {len(out)} records, expected {epochs}")
    return seconds / epochs


def bytewax_start_cost() -> float:
    """Seconds for bytewax's ``run_main`` on one record: the build and start included in its per-epoch figure."""
    return bytewax_epoch_interval_zero(1)
