"""pytimely benchmark harness.

Measures, in one run and side by side:

1. **Record pipeline** - ``map``, ``filter``, ``exchange`` and a per-epoch ``count``
   over many integers on one worker, against the same logic written as a plain
   Python loop.  Reports records/s for both and their ratio (goal: pytimely
   reaches at least 0.5x the loop).
2. **Epoch latency** - an input, a ``map`` and a probe, advanced one epoch at a
   time.  Reports microseconds per epoch (goal: under 30 us on one worker).

Each measurement is the best of several repetitions (``time.perf_counter``),
each in a fresh ``execute()``.  Goals are reported as PASS/MISS; nothing here
asserts on timings.  When a goal is missed (or with ``--profile``), the
benchmark is run once more under cProfile and the top functions are listed.

Usage::

    python benchmarks/run.py --output BENCHMARKS.md   # full size (make bench)
    python benchmarks/run.py --quick                  # small sizes, smoke test
    python benchmarks/run.py --profile                # profile every benchmark
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import gc
import os
import platform
import pstats
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # allow `python benchmarks/run.py` without installing
    sys.path.insert(0, str(ROOT))

from runtime.execute import execute  # noqa: E402
from runtime.worker import Worker  # noqa: E402

# ---------------------------------------------------------------------------- configuration

PIPELINE_GOAL_RATIO = 0.5  # pytimely records/s >= 0.5 x handwritten loop records/s
LATENCY_GOAL_US = 30.0  # microseconds per epoch, 1 worker
RUST_LATENCY_US = 2.0  # Rust timely, for reference only
PROFILE_TOP = 12


@dataclass(frozen=True)
class Sizes:
    """Problem sizes for one run of the harness."""

    label: str
    epochs: int
    records_per_epoch: int
    latency_epochs: int

    @property
    def records(self) -> int:
        return self.epochs * self.records_per_epoch


FULL = Sizes("full", epochs=20, records_per_epoch=100_000, latency_epochs=10_000)
QUICK = Sizes("quick", epochs=4, records_per_epoch=20_000, latency_epochs=1_000)


# ---------------------------------------------------------------------------- the record logic

def times_three_plus_one(x: int) -> int:
    """The map of the record pipeline."""
    return x * 3 + 1


def is_even(x: int) -> bool:
    """The filter of the record pipeline."""
    return x % 2 == 0


def identity(x: int) -> int:
    """The exchange key of the record pipeline."""
    return x


def plus_one(x: int) -> int:
    """The map of the latency dataflow."""
    return x + 1


def make_batches(sizes: Sizes) -> list[list[int]]:
    """The input: ``epochs`` lists of consecutive integers."""
    n = sizes.records_per_epoch
    return [list(range(epoch * n, (epoch + 1) * n)) for epoch in range(sizes.epochs)]


# ---------------------------------------------------------------------------- timed runs

@dataclass
class Timing:
    """The repetitions of one measured variant (seconds), plus what the runs produced."""

    seconds: list[float] = field(default_factory=list)
    counts: dict[int, int] = field(default_factory=dict)
    steps: int = 0

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def spread(self) -> float:
        """How much slower the slowest repetition was than the best (0.1 = 10%)."""
        return max(self.seconds) / min(self.seconds) - 1


NOISY_SPREAD = 0.15  # warn when repetitions of one measurement differ by more than this


class _Profiling:
    """Switches an optional profiler on and off around a timed region."""

    def __init__(self, profiler: cProfile.Profile | None) -> None:
        self.profiler = profiler

    def __enter__(self) -> None:
        if self.profiler is not None:
            self.profiler.enable()

    def __exit__(self, *exc: object) -> None:
        if self.profiler is not None:
            self.profiler.disable()


def _single_worker(main: Callable[[Worker], Any]) -> Any:
    gc.collect()
    return execute(main, workers=1)[0]


def pipeline_pytimely(
    batches: list[list[int]], profiler: cProfile.Profile | None = None
) -> tuple[float, dict[int, int]]:
    """Run the record pipeline as a dataflow; return (seconds, count per epoch)."""

    def main(worker: Worker) -> tuple[float, dict[int, int]]:
        counts: dict[int, int] = {}

        def record(time: Any, batch: list[int]) -> None:
            for count in batch:
                counts[time] = counts.get(time, 0) + count

        def build(scope: Any) -> Any:
            handle, stream = scope.new_input("Records")
            probe = (
                stream.map(times_three_plus_one)
                .filter(is_even)
                .exchange(identity)
                .count()
                .inspect_batch(record)
                .probe()
            )
            return handle, probe

        handle, probe = worker.dataflow(build, name="record pipeline")
        with _Profiling(profiler):
            start = time.perf_counter()
            for epoch, batch in enumerate(batches):
                handle.send_batch(batch)
                handle.advance_to(epoch + 1)
                while probe.less_than(epoch + 1):
                    worker.step()
            elapsed = time.perf_counter() - start
        return elapsed, counts

    result: tuple[float, dict[int, int]] = _single_worker(main)
    return result


def pipeline_loop(batches: list[list[int]]) -> tuple[float, dict[int, int]]:
    """The same logic as a handwritten loop; return (seconds, count per epoch)."""
    counts: dict[int, int] = {}
    gc.collect()
    start = time.perf_counter()
    for epoch, batch in enumerate(batches):
        count = 0
        for x in batch:
            y = x * 3 + 1
            if y % 2 == 0:
                count += 1
        if count:
            counts[epoch] = count
    elapsed = time.perf_counter() - start
    return elapsed, counts


def pipeline_functions(batches: list[list[int]]) -> tuple[float, dict[int, int]]:
    """Reference: the dataflow's own functions through builtin map/filter, no engine at all."""
    counts: dict[int, int] = {}
    gc.collect()
    start = time.perf_counter()
    for epoch, batch in enumerate(batches):
        count = len(list(filter(is_even, map(times_three_plus_one, batch))))
        if count:
            counts[epoch] = count
    elapsed = time.perf_counter() - start
    return elapsed, counts


def latency_pytimely(epochs: int, profiler: cProfile.Profile | None = None) -> tuple[float, int]:
    """Advance input -> map -> probe one epoch at a time; return (seconds, worker steps)."""

    def main(worker: Worker) -> tuple[float, int]:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input("Ticks")
            return handle, stream.map(plus_one).probe()

        handle, probe = worker.dataflow(build, name="epoch latency")
        steps = 0
        with _Profiling(profiler):
            start = time.perf_counter()
            for epoch in range(epochs):
                handle.send(epoch)
                handle.advance_to(epoch + 1)
                while probe.less_than(epoch + 1):
                    worker.step()
                    steps += 1
            elapsed = time.perf_counter() - start
        return elapsed, steps

    result: tuple[float, int] = _single_worker(main)
    return result


# ---------------------------------------------------------------------------- results

@dataclass
class PipelineResult:
    sizes: Sizes
    pytimely: Timing
    loop: Timing
    functions: Timing

    @property
    def records(self) -> int:
        return self.sizes.records

    def rate(self, timing: Timing) -> float:
        return self.records / timing.best

    @property
    def ratio(self) -> float:
        return self.rate(self.pytimely) / self.rate(self.loop)

    @property
    def passed(self) -> bool:
        return self.ratio >= PIPELINE_GOAL_RATIO

    @property
    def counts_match(self) -> bool:
        return self.pytimely.counts == self.loop.counts == self.functions.counts


@dataclass
class LatencyResult:
    sizes: Sizes
    pytimely: Timing

    @property
    def epochs(self) -> int:
        return self.sizes.latency_epochs

    @property
    def micros(self) -> float:
        return self.pytimely.best / self.epochs * 1e6

    @property
    def passed(self) -> bool:
        return self.micros < LATENCY_GOAL_US


def run_pipeline(sizes: Sizes, repeat: int, log: Callable[[str], None]) -> PipelineResult:
    batches = make_batches(sizes)
    result = PipelineResult(sizes, Timing(), Timing(), Timing())
    Runner = Callable[[list[list[int]]], tuple[float, dict[int, int]]]
    variants: list[tuple[str, Timing, Runner]] = [
        ("pytimely", result.pytimely, pipeline_pytimely),
        ("loop", result.loop, pipeline_loop),
        ("functions", result.functions, pipeline_functions),
    ]
    for rep in range(repeat):  # interleave the variants so drift affects all alike
        for label, timing, run in variants:
            seconds, counts = run(batches)
            timing.seconds.append(seconds)
            timing.counts = counts
            log(f"  pipeline rep {rep + 1}/{repeat} {label:9s} {seconds * 1e3:9.1f} ms "
                f"({sizes.records / seconds / 1e6:.2f} M records/s)")
    return result


def run_latency(sizes: Sizes, repeat: int, log: Callable[[str], None]) -> LatencyResult:
    result = LatencyResult(sizes, Timing())
    for rep in range(repeat):
        seconds, steps = latency_pytimely(sizes.latency_epochs)
        result.pytimely.seconds.append(seconds)
        result.pytimely.steps = steps
        log(f"  latency  rep {rep + 1}/{repeat} {seconds * 1e3:9.1f} ms "
            f"({seconds / sizes.latency_epochs * 1e6:.1f} us/epoch)")
    return result


# ---------------------------------------------------------------------------- profiling

@dataclass
class ProfileRow:
    location: str
    calls: str
    tottime: float
    cumtime: float


@dataclass
class ProfileSummary:
    benchmark: str
    reason: str
    total: float
    by_tottime: list[ProfileRow]
    by_cumtime: list[ProfileRow]


def _location(file: str, line: int, function: str) -> str:
    if file == "~":  # builtins: pstats names them like "<built-in method builtins.len>"
        return function
    path = Path(file)
    try:
        shown = str(path.resolve().relative_to(ROOT))
    except ValueError:
        shown = path.name
    return f"{shown}:{line}({function})"


def summarize_profile(profiler: cProfile.Profile, benchmark: str, reason: str) -> ProfileSummary:
    stats = pstats.Stats(profiler)
    rows: list[ProfileRow] = []
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]]
    raw = stats.stats  # type: ignore[attr-defined]
    for (file, line, function), (primitive, calls, tottime, cumtime, _) in raw.items():
        if "_lsprof.Profiler" in function:
            continue
        shown_calls = str(calls) if calls == primitive else f"{calls}/{primitive}"
        rows.append(ProfileRow(_location(file, line, function), shown_calls, tottime, cumtime))
    total = stats.total_tt  # type: ignore[attr-defined]
    by_tottime = sorted(rows, key=lambda row: row.tottime, reverse=True)[:PROFILE_TOP]
    by_cumtime = sorted(rows, key=lambda row: row.cumtime, reverse=True)[:PROFILE_TOP]
    return ProfileSummary(benchmark, reason, total, by_tottime, by_cumtime)


def profile_pipeline(sizes: Sizes, reason: str) -> ProfileSummary:
    profiler = cProfile.Profile()
    pipeline_pytimely(make_batches(sizes), profiler)
    return summarize_profile(profiler, "Record pipeline (pytimely)", reason)


def profile_latency(sizes: Sizes, reason: str) -> ProfileSummary:
    profiler = cProfile.Profile()
    latency_pytimely(sizes.latency_epochs, profiler)
    return summarize_profile(profiler, "Epoch latency (pytimely)", reason)


# ---------------------------------------------------------------------------- machine info

def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def machine_info() -> list[tuple[str, str]]:
    try:
        usable = str(len(os.sched_getaffinity(0)))
    except AttributeError:
        usable = "n/a"
    commit = _git("rev-parse", "--short", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", "scopes", "runtime")
    if commit is None:
        revision = "unknown (not a git checkout)"
    else:
        revision = commit + (" + uncommitted engine changes" if dirty else "")
    return [
        ("Python", f"{platform.python_implementation()} {platform.python_version()} "
                   f"({sys.executable})"),
        ("Platform", platform.platform()),
        ("CPU", _cpu_model()),
        ("CPU count", f"{os.cpu_count()} (usable by this process: {usable})"),
        ("pytimely revision", revision),
        ("Load average (1/5/15 min) before the run", _load_average()),
        ("Date", datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")),
    ]


def _load_average() -> str:
    try:
        loads = os.getloadavg()
    except (AttributeError, OSError):
        return "n/a"
    return " / ".join(f"{load:.2f}" for load in loads) + (
        " (the machine was busy recently; timings may be noisier)"
        if loads[0] > 0.5 else ""
    )


# ---------------------------------------------------------------------------- report

def _rate(value: float) -> str:
    return f"{value / 1e6:.2f} M records/s"


def _reps(timing: Timing, scale: float, unit: str) -> str:
    return ", ".join(f"{seconds * scale:.1f}" for seconds in timing.seconds) + f" {unit}"


def _verdict(passed: bool) -> str:
    return "**PASS**" if passed else "**MISS**"


def render(
    sizes: Sizes,
    repeat: int,
    pipeline: PipelineResult,
    latency: LatencyResult,
    profiles: list[ProfileSummary],
    machine: list[tuple[str, str]],
) -> str:
    p, lat = pipeline, latency
    lines: list[str] = []
    add = lines.append
    add("# pytimely benchmarks")
    add("")
    command = "python benchmarks/run.py" + (" --quick" if sizes is QUICK else "")
    add(f"Generated by `{command}` ({sizes.label} size; best of {repeat} repetitions, "
        "each in a fresh `execute(main, workers=1)`). See `benchmarks/README.md` for what "
        "is measured. Timings vary from run to run by several percent; nothing asserts on them.")
    if sizes is QUICK:
        add("")
        add("> **Quick mode**: sizes are reduced for smoke testing; the numbers below are not "
            "representative. Run without `--quick` for the real measurement.")
    add("")
    add("## Machine")
    add("")
    for key, value in machine:
        add(f"- **{key}**: {value}")
    add("")
    add("## Summary")
    add("")
    add("| Benchmark | pytimely | Baseline | Ratio | Goal | Result |")
    add("|---|---|---|---|---|---|")
    add(f"| Record pipeline, 1 worker ({p.records:,} records, {sizes.epochs} epochs x "
        f"{sizes.records_per_epoch:,}) | {_rate(p.rate(p.pytimely))} | "
        f"{_rate(p.rate(p.loop))} (handwritten loop) | {p.ratio:.3f}x the loop | "
        f">= {PIPELINE_GOAL_RATIO}x the loop | {_verdict(p.passed)} |")
    add(f"| Epoch latency, 1 worker ({lat.epochs:,} epochs) | {lat.micros:.1f} us/epoch | "
        f"{LATENCY_GOAL_US:.0f} us (goal); ~{RUST_LATENCY_US:.0f} us (Rust timely, reference) | "
        f"{lat.micros / LATENCY_GOAL_US:.2f}x the goal; {lat.micros / RUST_LATENCY_US:.0f}x Rust | "
        f"< {LATENCY_GOAL_US:.0f} us/epoch | {_verdict(lat.passed)} |")
    add("")
    noisy = _noise_warning(p, lat)
    if noisy:
        add(f"> **Noisy run**: {noisy}")
        add("")
    check = "identical" if p.counts_match else "**DIFFERENT (bug!)**"
    add(f"Correctness check: per-epoch counts of pytimely, the loop and the function reference "
        f"are {check} ({len(p.loop.counts)} epochs, {sum(p.loop.counts.values()):,} records "
        f"counted by the loop; pytimely counted {sum(p.pytimely.counts.values()):,}).")
    add("")
    add("## 1. Record pipeline")
    add("")
    add(f"Input: {sizes.epochs} epochs of {sizes.records_per_epoch:,} consecutive integers "
        "(built before timing). pytimely: `send_batch` per epoch -> `map(x*3+1)` -> "
        "`filter(x % 2 == 0)` -> `exchange(identity)` -> `count()` -> probe, stepping the "
        "worker until the probe passes each epoch. Loop: `for x in batch: y = x*3+1; "
        "if y % 2 == 0: count += 1` per epoch.")
    add("")
    add("| Variant | Best time | Records/s | Ratio to loop | All repetitions |")
    add("|---|---|---|---|---|")
    for label, timing in (
        ("pytimely dataflow", p.pytimely),
        ("handwritten loop (baseline)", p.loop),
        ("reference: same map/filter functions via builtin `map`/`filter`, no engine", p.functions),
    ):
        add(f"| {label} | {timing.best * 1e3:.1f} ms | {_rate(p.rate(timing))} | "
            f"{p.rate(timing) / p.rate(p.loop):.2f}x | {_reps(timing, 1e3, 'ms')} |")
    add("")
    add("The reference row is not a goal: it applies the dataflow's own per-record Python "
        "functions with no engine around them, so it shows how much of pytimely's time is "
        "the unavoidable cost of calling user functions per record, and how much is the engine "
        f"(here {p.pytimely.best * 1e3:.1f} ms - {p.functions.best * 1e3:.1f} ms = "
        f"{(p.pytimely.best - p.functions.best) * 1e3:.1f} ms of engine overhead, "
        f"{(p.pytimely.best - p.functions.best) / p.records * 1e9:.0f} ns per record).")
    add("")
    add("## 2. Epoch latency")
    add("")
    add(f"One input, `map(x + 1)` and a probe. For each of {lat.epochs:,} epochs: `send` one "
        "record, `advance_to(epoch + 1)`, then `worker.step()` until `probe.less_than(epoch + 1)` "
        "is false.")
    add("")
    add("| Measurement | Value |")
    add("|---|---|")
    add(f"| Best total time | {lat.pytimely.best * 1e3:.1f} ms |")
    add(f"| Per epoch (best) | {lat.micros:.1f} us |")
    add(f"| All repetitions, per epoch | {_reps(lat.pytimely, 1e6 / lat.epochs, 'us')} |")
    add(f"| Worker steps per epoch | {lat.pytimely.steps / lat.epochs:.2f} |")
    add(f"| Goal | < {LATENCY_GOAL_US:.0f} us ({_verdict(lat.passed)}, "
        f"{lat.micros / LATENCY_GOAL_US:.2f}x the goal) |")
    add(f"| Rust timely (reference) | ~{RUST_LATENCY_US:.0f} us "
        f"({lat.micros / RUST_LATENCY_US:.0f}x) |")
    add("")
    if profiles:
        add("## Profiles")
        add("")
        add("Each profile is a separate, untimed run of the benchmark under `cProfile` (which "
            "inflates every Python call, so read the proportions rather than the absolute "
            "numbers). Times in seconds; `calls` shows `total/primitive` for recursive "
            "functions. *tottime* is time spent in the function itself, *cumtime* includes "
            "what it calls.")
        add("")
        for summary in profiles:
            add(f"### {summary.benchmark}")
            add("")
            add(f"Profiled because {summary.reason}. Total profiled time: {summary.total:.3f} s.")
            add("")
            tables = (("By tottime", summary.by_tottime), ("By cumtime", summary.by_cumtime))
            for title, rows in tables:
                add(f"{title} (top {len(rows)}):")
                add("")
                add("| Function (file:line(function)) | Calls | tottime | cumtime |")
                add("|---|---:|---:|---:|")
                for row in rows:
                    add(f"| `{row.location}` | {row.calls} | {row.tottime:.3f} | "
                        f"{row.cumtime:.3f} |")
                add("")
    return "\n".join(lines).rstrip() + "\n"


def _noise_warning(pipeline: PipelineResult, latency: LatencyResult) -> str:
    timings = [
        ("pytimely pipeline", pipeline.pytimely),
        ("handwritten loop", pipeline.loop),
        ("function reference", pipeline.functions),
        ("epoch latency", latency.pytimely),
    ]
    noisy = [f"{label} {timing.spread:.0%}" for label, timing in timings
             if len(timing.seconds) > 1 and timing.spread > NOISY_SPREAD]
    if not noisy:
        return ""
    return ("the slowest repetition was this much slower than the best: " + ", ".join(noisy)
            + ". Another program was probably competing for the CPU, so a PASS/MISS near "
            "its threshold may flip between runs. Rerun on a quiet machine (or use --repeat 5).")


def print_profile(summary: ProfileSummary) -> None:
    print(f"\nProfile: {summary.benchmark} ({summary.reason}); total {summary.total:.3f} s")
    print(f"  {'tottime':>8} {'cumtime':>8} {'calls':>12}  function (top by tottime)")
    for row in summary.by_tottime:
        print(f"  {row.tottime:8.3f} {row.cumtime:8.3f} {row.calls:>12}  {row.location}")


# ---------------------------------------------------------------------------- scaling

SHAPE_SIZES = {"quick": [1_000], "full": [1_000, 10_000, 100_000]}
COLLATZ_LIMIT = {"quick": 1_000, "full": 3_000}
SHAPE_GOAL_SECONDS, SHAPE_GOAL_MB = 10.0, 500.0  # at 10,000 ports


def run_scaling(sizes: Sizes, log: Callable[[str], None]) -> list[str]:
    """Sections 3 and 4 of the report: shape scaling and the Collatz loop (see ``scaling.py``)."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    from scaling import collatz_once, shape_in_child

    lines = ["## 3. Shape scaling", "",
             "Timely's `shape_scaling` shapes: one operator with N inputs and N outputs "
             "(one to one), and one region with N streams entering and leaving. Each in a "
             "fresh interpreter; peak RSS includes the interpreter. Goal: 10,000 ports in "
             f"under {SHAPE_GOAL_SECONDS:.0f} s and {SHAPE_GOAL_MB:.0f} MB.", "",
             "| Shape | N | Seconds | Peak MB |", "|---|---:|---:|---:|"]
    for shape in ("operator", "region"):
        for count in SHAPE_SIZES[sizes.label]:
            result = shape_in_child(shape, count)
            if result is None:
                log(f"  {shape:8} N={count:>7,}: failed or timed out")
                lines.append(f"| {shape} | {count:,} | failed or timed out | |")
                continue
            log(f"  {shape:8} N={count:>7,}: {result['seconds']:.2f} s, {result['peak_mb']:.0f} MB")
            lines.append(f"| {shape} | {count:,} | {result['seconds']:.2f} | {result['peak_mb']:.0f} |")
    limit = COLLATZ_LIMIT[sizes.label]
    lines += ["", "## 4. Collatz loop with exchange", "",
              f"Numbers 1..{limit:,} iterate the Collatz map in a loop, exchanged by value every "
              "round. Worker threads share one interpreter (the GIL), so more workers do not "
              "run faster; the point is that they are not much slower, because exchanged "
              "records travel in batches (records per message) rather than one by one.", "",
              "| Workers | Seconds | Records per message |", "|---:|---:|---:|"]
    for workers in (1, 2, 3):
        result = collatz_once(limit, workers)
        log(f"  collatz workers={workers}: {result['seconds']:.2f} s, "
            f"{result['per_message']:.1f} records/message")
        lines.append(f"| {workers} | {result['seconds']:.2f} | {result['per_message']:.1f} |")
    return lines


# ---------------------------------------------------------------------------- main

def run_cluster_and_instrumentation(quick: bool, repeat: int) -> list[str]:
    """Sections 5 and 6 of the report (see ``cluster.py`` and ``instrument.py``)."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    from cluster import cluster_wordcount_row
    from instrument import compare

    lines = ["## 5. Wordcount with exchange: 1 process against 2 processes x 1 worker", "",
             "Goal: at least 1.6x faster on 2 processes on this 2-core machine.", "",
             "| benchmark | 1 process | 2 processes | speed-up | goal |", "|---|---|---|---|---|"]
    rows = [cluster_wordcount_row(quick, repeat, combine) for combine in (False, True)]
    lines += [row for row, _ in rows]
    lines += [""] + [note + "\n" for _, note in rows]
    lines += ["## 6. Instrumentation overhead (1 worker, best of the repetitions)", "",
              "| measurement | logging | time |", "|---|---|---|"]
    for measurement, variant, seconds in compare(repeat):
        shown = f"{seconds * 1e6:.1f} us" if seconds < 0.01 else f"{seconds:.3f} s"
        lines.append(f"| {measurement} | {variant} | {shown} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--output", "-o", type=Path, help="write the Markdown report to this file")
    parser.add_argument("--quick", action="store_true", help="small sizes, for smoke testing")
    parser.add_argument("--profile", action="store_true",
                        help="profile every benchmark (by default only those that miss their goal)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="repetitions per measurement (the best is reported)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    sizes = QUICK if args.quick else FULL

    def log(message: str) -> None:
        print(message, flush=True)

    machine = machine_info()  # before running, so the load average shows other activity
    log(f"pytimely benchmarks ({sizes.label} size, best of {args.repeat})")
    log(f"1. record pipeline: {sizes.records:,} records in {sizes.epochs} epochs")
    pipeline = run_pipeline(sizes, args.repeat, log)
    log(f"2. epoch latency: {sizes.latency_epochs:,} epochs")
    latency = run_latency(sizes, args.repeat, log)

    profiles: list[ProfileSummary] = []
    if args.profile or not pipeline.passed:
        reason = "--profile was given" if pipeline.passed else (
            f"it missed its goal ({pipeline.ratio:.3f}x the loop, goal >= {PIPELINE_GOAL_RATIO}x)")
        log("profiling the record pipeline ...")
        profiles.append(profile_pipeline(sizes, reason))
    if args.profile or not latency.passed:
        reason = "--profile was given" if latency.passed else (
            f"it missed its goal ({latency.micros:.1f} us/epoch, goal < {LATENCY_GOAL_US:.0f} us)")
        log("profiling the epoch latency ...")
        profiles.append(profile_latency(sizes, reason))

    log("3. shape scaling and 4. Collatz loop with exchange")
    scaling_lines = run_scaling(sizes, log)
    report = render(sizes, args.repeat, pipeline, latency, profiles, machine)
    report = report.rstrip() + "\n\n" + "\n".join(scaling_lines) + "\n"
    log("5. wordcount with exchange on processes, and 6. instrumentation overhead")
    report = report.rstrip() + "\n\n" + "\n".join(run_cluster_and_instrumentation(args.quick, args.repeat)) + "\n"
    print()
    print(f"record pipeline: pytimely {_rate(pipeline.rate(pipeline.pytimely))}, loop "
          f"{_rate(pipeline.rate(pipeline.loop))}, ratio {pipeline.ratio:.3f}x "
          f"(goal >= {PIPELINE_GOAL_RATIO}x): {'PASS' if pipeline.passed else 'MISS'}; "
          f"counts {'match' if pipeline.counts_match else 'DIFFER'}")
    print(f"epoch latency:   {latency.micros:.1f} us/epoch (goal < {LATENCY_GOAL_US:.0f} us): "
          f"{'PASS' if latency.passed else 'MISS'}")
    noisy = _noise_warning(pipeline, latency)
    if noisy:
        print(f"warning: noisy run: {noisy}")
    for summary in profiles:
        print_profile(summary)
    if args.output is not None:
        args.output.write_text(report)
        print(f"\nwrote {args.output}")
    if not pipeline.counts_match:
        print("error: pytimely and the handwritten loop computed different counts", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
