"""The cost of instrumentation: the record pipeline and epoch latency with logging off and on.

``compare()`` returns rows ``(measurement, variant, seconds)``; ``python
benchmarks/instrument.py`` prints them.  Variants: ``off`` (the default: every
hook is one ``is not None`` test), ``memory`` (a :class:`runtime.instrument.Recorder`)
and ``file`` (a msgpack file written by the background writer).  Each figure is
the best of ``repeat`` runs on one worker.
"""

from __future__ import annotations

import gc
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime.execute import execute  # noqa: E402
from runtime.instrument import Recorder, configure_from, stop_logging  # noqa: E402


def record_pipeline(epochs: int = 10, per_epoch: int = 20_000) -> float:
    """Seconds to push ``epochs`` x ``per_epoch`` records through map, filter, exchange, count, probe."""

    def main(worker: Any) -> float:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input("Records")
            probe = stream.map(lambda x: x * 3 + 1).filter(lambda y: y % 2 == 0).exchange(lambda x: x).count().probe()
            return handle, probe

        handle, probe = worker.dataflow(build, name="record pipeline")
        start = time.perf_counter()
        for epoch in range(epochs):
            handle.send_batch(list(range(epoch * per_epoch, (epoch + 1) * per_epoch)))
            handle.advance_to(epoch + 1)
            while probe.less_than(epoch + 1):
                worker.step()
        return time.perf_counter() - start

    gc.collect()
    return float(execute(main, workers=1)[0])


def epoch_latency(epochs: int = 2_000) -> float:
    """Mean seconds per epoch of one record through map and probe."""

    def main(worker: Any) -> float:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input("Ticks")
            return handle, stream.map(lambda x: x + 1).probe()

        handle, probe = worker.dataflow(build, name="latency")
        start = time.perf_counter()
        for epoch in range(epochs):
            handle.send(epoch)
            handle.advance_to(epoch + 1)
            while probe.less_than(epoch + 1):
                worker.step()
        return (time.perf_counter() - start) / epochs

    gc.collect()
    return float(execute(main, workers=1)[0])


@contextmanager
def logging(variant: str) -> Iterator[None]:
    """Run the body with logging ``off``, to ``memory``, or to a ``file``."""
    if variant == "off":
        yield
    elif variant == "memory":
        with Recorder():
            yield
    else:
        with tempfile.TemporaryDirectory() as directory:
            configure_from(str(Path(directory) / "bench.msgpack"))
            try:
                yield
            finally:
                stop_logging()


def compare(repeat: int = 3, variants: tuple[str, ...] = ("off", "memory", "file")) -> list[tuple[str, str, float]]:
    """Best-of-``repeat`` seconds for each measurement and logging variant."""
    rows = []
    measurements: list[tuple[str, Callable[[], float]]] = [
        ("record pipeline, 200k records", record_pipeline),
        ("epoch latency (per epoch)", epoch_latency),
    ]
    for name, measure in measurements:
        for variant in variants:
            best = float("inf")
            for _ in range(repeat):
                with logging(variant):
                    best = min(best, measure())
            rows.append((name, variant, best))
    return rows


if __name__ == "__main__":
    for measurement, variant, seconds in compare():
        shown = f"{seconds * 1e6:9.1f} µs" if seconds < 0.01 else f"{seconds:9.3f} s"
        print(f"{measurement:32} {variant:7} {shown}")
