"""The cost of instrumentation: the record pipeline and epoch latency with logging off and on.

``compare()`` returns rows ``(measurement, variant, seconds)``; ``python
benchmarks/instrument.py`` prints them.  Variants: ``no hooks`` (a copy of
``scopes`` and ``runtime`` without their hook sites, made by
``benchmarks/no_hooks.py``), ``off`` (the default: every hook is one ``is not
None`` test), ``memory`` (a :class:`runtime.instrument.Recorder`) and ``file``
(a msgpack file written by the background writer).  Every run is one fresh
Python process (:func:`run_in_subprocess`, the best of three timed runs after
a warm-up), so that ``no hooks`` and the others pay the same process overhead;
the figures are medians of ``repeat`` such processes on one worker, the
variants interleaved.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from statistics import median, quantiles
from typing import Any

from harness import Log, Metric, Size, measured

BENCHMARKS = Path(__file__).resolve().parent
REPO = BENCHMARKS.parent
if str(REPO) not in sys.path:  # appended, not prepended: a hook-free copy put first on the path must win
    sys.path.append(str(REPO))

from runtime.execute import execute  # noqa: E402
from runtime.instrument import Recorder, configure_from, stop_logging  # noqa: E402


def record_pipeline(epochs: int = 10, per_epoch: int = 20_000, collect: list[Any] | None = None) -> float:
    """Seconds to push ``epochs`` x ``per_epoch`` records through map, filter, exchange, count, probe.

    With ``collect``, the counts are appended to it (an extra inspect operator, for checking answers).
    """

    def main(worker: Any) -> float:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input("Records")
            counts = stream.map(lambda x: x * 3 + 1).filter(lambda y: y % 2 == 0).exchange(lambda x: x).count()
            if collect is not None:
                counts = counts.inspect(collect.append)
            return handle, counts.probe()

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


def epoch_latency(epochs: int = 2_000, collect: list[Any] | None = None) -> float:
    """Mean seconds per epoch of one record through map and probe.

    With ``collect``, the mapped records are appended to it (an extra inspect operator, for checking answers).
    """

    def main(worker: Any) -> float:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input("Ticks")
            mapped = stream.map(lambda x: x + 1)
            if collect is not None:
                mapped = mapped.inspect(collect.append)
            return handle, mapped.probe()

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


MEASUREMENTS: dict[str, Callable[..., float]] = {"record pipeline": record_pipeline, "epoch latency": epoch_latency}
"""The measurements a subprocess can run, by name; each takes its size (records per epoch, or epochs)."""

VARIANTS = ("no hooks", "off", "memory", "file")
"""The variants, in the order they are interleaved."""

LOGGING = {"no hooks": "off", "off": "off", "memory": "memory", "file": "file"}
"""The logging each variant runs with (the hook-free copy runs with logging off)."""


def _size_arguments(measurement: str, size: int) -> tuple[int, ...]:
    """The positional arguments of a measurement of ``size``."""
    return (10, size) if measurement == "record pipeline" else (size,)


INNER_RUNS = 3
"""Timed runs in each subprocess; a repetition is their best, which filters out a passing load spike."""


def child_main(measurement: str, size: int, logging_variant: str, collect: bool) -> dict[str, Any]:
    """Run in the subprocess: one untimed warm-up at a tenth of the size, then :data:`INNER_RUNS` timed runs.

    Returns the best seconds, where ``scopes`` and ``runtime`` were imported from, and (with ``collect``)
    the outputs of the first timed run.
    """
    import runtime
    import scopes

    measure = MEASUREMENTS[measurement]
    measure(*_size_arguments(measurement, max(1, size // 10)))
    outputs: list[Any] | None = [] if collect else None
    best = float("inf")
    for run in range(INNER_RUNS):
        with logging(logging_variant):
            best = min(best, measure(*_size_arguments(measurement, size), collect=outputs if run == 0 else None))
    return {
        "seconds": best,
        "scopes": scopes.__file__,
        "runtime": runtime.__file__,
        "outputs": None if outputs is None else [repr(output) for output in outputs],
    }


def run_in_subprocess(
    measurement: str,
    size: int,
    logging_variant: str = "off",
    packages: Path = REPO,
    collect: bool = False,
    timeout: float = 120,
) -> dict[str, Any]:
    """:func:`child_main` in a fresh Python whose ``PYTHONPATH`` puts ``packages`` (holding ``scopes`` and
    ``runtime``) first; checks that the packages really came from there."""
    code = (
        "import json, sys, instrument\n"
        f"print(json.dumps(instrument.child_main({measurement!r}, {size!r}, {logging_variant!r}, {collect!r})))\n"
    )
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(packages), str(BENCHMARKS)] + ([environment["PYTHONPATH"]] if environment.get("PYTHONPATH") else [])
    )
    # -P: no current directory on sys.path, so the repository cannot shadow the copy
    done = subprocess.run(
        [sys.executable, "-P", "-c", code],
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"the {measurement} measurement ({logging_variant}, packages {packages}) failed "
            f"with exit code {done.returncode}:\n{done.stderr}"
        )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    for package in ("scopes", "runtime"):
        if not Path(result[package]).resolve().is_relative_to(packages.resolve()):
            raise RuntimeError(
                f"the {measurement} measurement imported {package} from {result[package]}, "
                f"not from {packages}: the comparison would be meaningless"
            )
    return result


@contextmanager
def hook_free_packages() -> Iterator[tuple[Path, dict[str, int]]]:
    """A temporary directory holding hook-free ``scopes`` and ``runtime``, and the sites removed per file."""
    import no_hooks

    with tempfile.TemporaryDirectory(prefix="pytimely-no-hooks-") as directory:
        removed = no_hooks.make_hook_free(Path(directory))
        yield Path(directory), removed


def measure_variants(
    sizes: dict[str, int],
    repeat: int,
    log: Callable[[str], None] = lambda message: None,
) -> tuple[dict[str, dict[str, list[float]]], dict[str, int]]:
    """Seconds per repetition for each measurement (by name, of the given size) and variant, interleaved.

    Also returns the guard sites removed per file for the ``no hooks`` copy.
    """
    values: dict[str, dict[str, list[float]]] = {name: {variant: [] for variant in VARIANTS} for name in sizes}
    with hook_free_packages() as (copy, removed):
        for name, size in sizes.items():
            for rep in range(repeat):
                for variant in VARIANTS:
                    packages = copy if variant == "no hooks" else REPO
                    found = measured(partial(run_in_subprocess, name, size, LOGGING[variant], packages))
                    seconds = float(found["seconds"])
                    values[name][variant].append(seconds)
                    log(f"  instrument {name} rep {rep + 1}/{repeat} {variant:8} {seconds:.6f} s")
    return values, removed


NOISE_FLOOR = 0.05
"""The smallest noise band: medians within 5% of each other are always within noise."""


def relative_iqr(runs: list[float]) -> float:
    """The interquartile range of ``runs`` over their median (0 for fewer than two runs)."""
    if len(runs) < 2:
        return 0.0
    first, _, third = quantiles(runs, n=4, method="inclusive")
    return (third - first) / median(runs)


def within_noise(off: list[float], no_hooks: list[float]) -> tuple[float, float, bool]:
    """The ratio of medians ``off / no hooks``, the noise band, and whether the ratio lies inside it.

    The rule: ``|off / no hooks - 1| <= band``, where ``band`` is the larger of :data:`NOISE_FLOOR` and
    each variant's interquartile range over its median (one outlying repetition does not widen it).
    """
    band = max(NOISE_FLOOR, relative_iqr(off), relative_iqr(no_hooks))
    value = median(off) / median(no_hooks)
    return value, band, abs(value - 1) <= band


def compare(repeat: int = 3) -> list[tuple[str, str, float]]:
    """Median-of-``repeat`` seconds for each measurement and variant (full size)."""
    values, _ = measure_variants({"record pipeline": 20_000, "epoch latency": 2_000}, repeat)
    return [
        (name, variant, median(runs)) for name, per_variant in values.items() for variant, runs in per_variant.items()
    ]


def bench(size: Size, log: Log) -> dict[str, Metric]:
    """The workload for ``run.py``: the pipeline and the epoch latency with no hooks, logging off, to memory and
    to a file, each run a fresh process, interleaved; with the spread of each (interquartile range ÷ median)."""
    sizes = {"pipeline": 5_000 if size.quick else 20_000, "latency": 500 if size.quick else 2_000}
    values, _ = measure_variants(
        {"record pipeline": sizes["pipeline"], "epoch latency": sizes["latency"]}, max(size.repeat, 2), log
    )
    found: dict[str, Metric] = {}
    for name, key in (("record pipeline", "pipeline"), ("epoch latency", "latency")):
        for variant, runs in values[name].items():
            label = variant.replace(" ", "_")
            found[f"{key}_{label}"] = Metric(median(runs), "s", f"{name}, {variant}")
            found[f"{key}_{label}_spread"] = Metric(relative_iqr(runs), "x", f"spread of {name}, {variant}")
    return found


if __name__ == "__main__":
    for measurement, variant, seconds in compare():
        shown = f"{seconds * 1e6:9.1f} µs" if seconds < 0.01 else f"{seconds:9.3f} s"
        print(f"{measurement:16} {variant:8} {shown}")
