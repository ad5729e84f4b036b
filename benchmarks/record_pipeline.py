"""Workload 1: the record pipeline (map, filter, exchange, count per epoch) on one worker.

Every variant computes the same thing from the same input, ``epochs`` epochs of
``per_epoch`` consecutive integers: for each epoch, how many ``x * 3 + 1`` are
even.  Each runner returns ``(seconds, {epoch: count})``; inputs are built
before the timer starts, and building or tearing down a dataflow is not timed
(except for bytewax, whose ``run_main`` builds and runs in one call: see
:func:`bytewax_pipeline`).

Variants:

* ``loop``: a handwritten loop (the baseline of the goals);
* ``builtins``: the same two functions the dataflow uses, through builtin ``map``/``filter``;
* ``bytewax``: bytewax 0.21.1 doing the same (see :func:`bytewax_pipeline` for why
  its configuration is the fairest one);
* ``record``: pytimely record-wise ``map`` / ``filter`` / ``exchange`` / ``count``;
* ``map_batch``: pytimely ``map_batch`` with list functions, one for the map and one
  for the filter;
* ``map_batch_fused``: pytimely ``map_batch`` with one list function doing the map and
  the filter in one pass, as the handwritten loop does;
* ``numpy``: pytimely with NumPy batches (``map_batch`` and ``exchange_batch``).
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from typing import Any

from harness import Log, Metric, Size, WrongAnswer, in_seconds, interleaved

from runtime.execute import execute
from runtime.worker import Worker
from scopes import Stream

Counts = dict[int, int]
Runner = Callable[[int, int], tuple[float, Counts]]

BYTEWAX_BATCH_SIZE = 1_000
"""Records per ``TestingSource`` batch: the fastest of 1, 1,000 and 100,000 measured on the bench machine."""


def times_three_plus_one(x: int) -> int:
    """The map of the record pipeline."""
    return x * 3 + 1


def is_even(x: int) -> bool:
    """The filter of the record pipeline."""
    return x % 2 == 0


def identity(x: int) -> int:
    """The exchange key of the record pipeline."""
    return x


def make_batches(epochs: int, per_epoch: int) -> list[list[int]]:
    """The input: ``epochs`` lists of consecutive integers."""
    return [list(range(epoch * per_epoch, (epoch + 1) * per_epoch)) for epoch in range(epochs)]


def expected_counts(epochs: int, per_epoch: int) -> Counts:
    """The right answer, from arithmetic: ``3x + 1`` is even exactly when ``x`` is odd."""
    return {epoch: (epoch + 1) * per_epoch // 2 - epoch * per_epoch // 2 for epoch in range(epochs)}


def loop(epochs: int, per_epoch: int) -> tuple[float, Counts]:
    """The handwritten loop (the baseline)."""
    batches = make_batches(epochs, per_epoch)
    counts: Counts = {}
    gc.collect()
    start = time.perf_counter()
    for epoch, batch in enumerate(batches):
        count = 0
        for x in batch:
            y = x * 3 + 1
            if y % 2 == 0:
                count += 1
        counts[epoch] = count
    return time.perf_counter() - start, counts


def builtins(epochs: int, per_epoch: int) -> tuple[float, Counts]:
    """The dataflow's own two functions through builtin ``map``/``filter``, no engine."""
    batches = make_batches(epochs, per_epoch)
    counts: Counts = {}
    gc.collect()
    start = time.perf_counter()
    for epoch, batch in enumerate(batches):
        counts[epoch] = len(list(filter(is_even, map(times_three_plus_one, batch))))
    return time.perf_counter() - start, counts


def _run_pytimely(
    epochs: int,
    per_epoch: int,
    pipeline: Callable[[Stream], Stream],
    batches: list[Any],
) -> tuple[float, Counts]:
    """Drive ``input -> pipeline -> inspect -> probe`` one epoch per batch; time only the epochs."""

    def main(worker: Worker) -> tuple[float, Counts]:
        counts: Counts = {}

        def record(time: Any, batch: list[int]) -> None:
            for count in batch:
                counts[time] = counts.get(time, 0) + count

        def build(scope: Any) -> Any:
            handle, stream = scope.new_input("Records")
            return handle, pipeline(stream).inspect_batch(record).probe()

        handle, probe = worker.dataflow(build, name="record pipeline")
        start = time.perf_counter()
        for epoch, batch in enumerate(batches):
            handle.send_batch(batch)
            handle.advance_to(epoch + 1)
            while probe.less_than(epoch + 1):
                worker.step()
        return time.perf_counter() - start, counts

    gc.collect()
    result: tuple[float, Counts] = execute(main, workers=1)[0]
    return result


def record(epochs: int, per_epoch: int) -> tuple[float, Counts]:
    """pytimely, record-wise: ``map`` -> ``filter`` -> ``exchange`` -> ``count``."""
    return _run_pytimely(
        epochs,
        per_epoch,
        lambda s: s.map(times_three_plus_one).filter(is_even).exchange(identity).count(),
        make_batches(epochs, per_epoch),
    )


def map_batch_lists(epochs: int, per_epoch: int) -> tuple[float, Counts]:
    """pytimely, one Python call per batch with list functions, then a record-wise exchange and count."""
    return _run_pytimely(
        epochs,
        per_epoch,
        lambda s: (
            s.map_batch(lambda batch: [x * 3 + 1 for x in batch])
            .map_batch(lambda batch: [y for y in batch if y % 2 == 0])
            .exchange_batch(lambda batch: batch)
            .count()
        ),
        make_batches(epochs, per_epoch),
    )


def map_batch_fused(epochs: int, per_epoch: int) -> tuple[float, Counts]:
    """pytimely, one list function per batch doing map and filter in one pass (as the loop does)."""
    return _run_pytimely(
        epochs,
        per_epoch,
        lambda s: (
            s.map_batch(lambda batch: [y for x in batch if (y := x * 3 + 1) % 2 == 0])
            .exchange_batch(lambda batch: batch)
            .count()
        ),
        make_batches(epochs, per_epoch),
    )


def numpy_batches(epochs: int, per_epoch: int) -> tuple[float, Counts]:
    """pytimely with NumPy batches: vectorised map and filter, ``exchange_batch`` on the values, ``count``."""
    import numpy as np

    arrays = [np.arange(epoch * per_epoch, (epoch + 1) * per_epoch, dtype=np.int64) for epoch in range(epochs)]
    return _run_pytimely(
        epochs,
        per_epoch,
        lambda s: (
            s.map_batch(lambda a: a * 3 + 1).map_batch(lambda a: a[a % 2 == 0]).exchange_batch(lambda a: a).count()
        ),
        arrays,
    )


def missing_bytewax() -> str | None:
    """Why bytewax cannot run here, or ``None`` when it can."""
    try:
        import bytewax  # noqa: F401
    except ImportError:
        return "not measured: bytewax is not installed (`make bench` installs bytewax==0.21.1)"
    return None


def bytewax_pipeline(
    epochs: int, per_epoch: int, combine: bool = False, batch_size: int = BYTEWAX_BATCH_SIZE
) -> tuple[float, Counts]:
    """bytewax 0.21.1 doing the same, in its fairest configuration.

    * ``run_main`` (one worker thread, like pytimely's one worker) with the
      default ``epoch_interval`` (10 s): bytewax's epochs exist for snapshots
      and recovery (none here), so the longest interval costs the least.
    * ``TestingSource(..., batch_size=1_000)``: the input hands the dataflow
      batches of records; 1 record per batch is about 17x slower, and 100,000 (one
      pytimely epoch) is no faster than 1,000.
    * ``op.map`` and ``op.filter`` with the same two functions as pytimely.
    * bytewax has no user-visible epochs and exchanges only keyed streams, so the
      per-epoch count is keyed by the epoch number (derived from the value).
      Without ``combine``: ``op.count_final`` (bytewax's keyed exchange and count
      in one step; it calls Python per record for the key and the count).  With
      ``combine``: ``op.flat_map_batch`` counts each batch's records per epoch
      first (a combiner, like pytimely's ``count`` taking ``len`` of a batch), and
      only those few pairs go through ``key_on`` and ``reduce_final``.
    * ``run_main`` builds and runs in one call, so the time includes building
      the dataflow (under a millisecond; pytimely's time excludes it).
    """
    from collections import Counter

    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.testing import TestingSink, TestingSource, run_main

    items = [x for batch in make_batches(epochs, per_epoch) for x in batch]

    def epoch_of(y: int) -> str:
        return str((y - 1) // 3 // per_epoch)

    def count_batch(batch: list[int]) -> list[tuple[str, int]]:
        return list(Counter((y - 1) // 3 // per_epoch for y in batch).items())  # type: ignore[arg-type]

    flow = Dataflow("record_pipeline")
    stream = op.input("records", flow, TestingSource(items, batch_size=batch_size))
    stream = op.filter("filter", op.map("map", stream, times_three_plus_one), is_even)
    if combine:
        pairs = op.key_on("key", op.flat_map_batch("combine", stream, count_batch), lambda pair: str(pair[0]))
        counted = op.reduce_final("sum", op.map_value("count", pairs, lambda pair: pair[1]), lambda a, b: a + b)
    else:
        counted = op.count_final("count", stream, epoch_of)
    out: list[tuple[str, int]] = []
    op.output("out", counted, TestingSink(out))
    gc.collect()
    start = time.perf_counter()
    run_main(flow)
    seconds = time.perf_counter() - start
    return seconds, {int(epoch): count for epoch, count in out}


def count_even_images(batch: list[int]) -> int:
    """The handwritten loop's body over one epoch's list: how many ``x * 3 + 1`` are even."""
    count = 0
    for x in batch:
        y = x * 3 + 1
        if y % 2 == 0:
            count += 1
    return count


def bytewax_epoch_lists(epochs: int, per_epoch: int) -> tuple[float, Counts]:
    """bytewax 0.21.1 in its fastest configuration for this job: each epoch's list is one record.

    ``TestingSource`` over the epochs' lists (one record each) and one ``op.map``
    running :func:`count_even_images` on it: bytewax's operators see 20 records,
    so its time is the loop's plus a per-record cost paid 20 times.
    """
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("record_pipeline_lists")
    counted = op.map(
        "count", op.input("epochs", flow, TestingSource(make_batches(epochs, per_epoch))), count_even_images
    )
    out: list[int] = []
    op.output("out", counted, TestingSink(out))
    gc.collect()
    start = time.perf_counter()
    run_main(flow)
    seconds = time.perf_counter() - start
    return seconds, dict(enumerate(out))


def map_batch_epoch_function(epochs: int, per_epoch: int) -> tuple[float, Counts]:
    """pytimely with bytewax's fastest shape: ``map_batch`` runs :func:`count_even_images` once per epoch's batch."""
    return _run_pytimely(
        epochs,
        per_epoch,
        lambda s: s.map_batch(lambda batch: [count_even_images(batch)]),
        make_batches(epochs, per_epoch),
    )


def bytewax_combined(epochs: int, per_epoch: int) -> tuple[float, Counts]:
    """bytewax with a per-batch combiner before its keyed exchange (see :func:`bytewax_pipeline`)."""
    return bytewax_pipeline(epochs, per_epoch, combine=True)


LABELS = {
    "loop": "the handwritten loop",
    "builtins": "builtin map/filter",
    "record": "record-wise",
    "map_batch": "map_batch, two list functions",
    "map_batch_fused": "map_batch, one list function",
    "map_batch_epoch": "map_batch, the loop once per epoch",
    "numpy": "NumPy batches",
    "bytewax": "bytewax count_final",
    "bytewax_combined": "bytewax with a combiner",
    "bytewax_lists": "bytewax, one list per epoch",
}


def bench(size: Size, log: Log) -> dict[str, Metric]:
    """The workload for ``run.py``: every variant, interleaved, its counts checked; seconds and ns over the loop."""
    epochs, per_epoch = (4, 20_000) if size.quick else (20, 100_000)
    records = epochs * per_epoch
    runners: dict[str, Runner] = {
        "loop": loop,
        "builtins": builtins,
        "record": record,
        "map_batch": map_batch_lists,
        "map_batch_fused": map_batch_fused,
        "map_batch_epoch": map_batch_epoch_function,
        "numpy": numpy_batches,
    }
    bytewax = missing_bytewax()
    if bytewax is None:
        runners.update(bytewax=bytewax_pipeline, bytewax_combined=bytewax_combined, bytewax_lists=bytewax_epoch_lists)
    expected = expected_counts(epochs, per_epoch)

    def checked(key: str) -> Callable[[], float]:
        def run() -> float:
            seconds, counts = runners[key](epochs, per_epoch)
            if counts != expected:
                raise WrongAnswer(f"record pipeline: {key} counted {counts}, expected {expected}")
            return seconds

        return run

    values = interleaved({key: checked(key) for key in runners}, size, log, "pipeline")
    found = {key: in_seconds(times, f"{LABELS[key]}, {records:,} records") for key, times in values.items()}
    for key in ("record", "map_batch", "map_batch_fused", "numpy"):
        extra = (found[key].value - found["loop"].value) / records * 1e9
        found[f"{key}_over_loop"] = Metric(extra, "ns", f"{LABELS[key]}: time per record beyond the loop's")
    if bytewax is None:
        fastest = min(found["bytewax"], found["bytewax_combined"], key=lambda metric: metric.value)
        found["bytewax_recordwise"] = Metric(fastest.value, "s", "bytewax record-wise, the faster configuration")
    else:
        found["bytewax_recordwise"] = Metric(math.nan, "", bytewax)
    return found
