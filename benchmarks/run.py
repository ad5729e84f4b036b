"""pytimely's benchmarks: run every workload, judge the goals of ``goals.toml``, write the report.

Usage::

    python benchmarks/run.py --output BENCHMARKS.md       # what `make bench` runs
    python benchmarks/run.py --quick --repeat 1           # small sizes, no Spark: a smoke test
    python benchmarks/run.py --quick --workloads latency,loop
    python benchmarks/run.py --cpu-wait 0                 # never wait for full CPU speed before a repetition

The exit status is 1 only if a variant computed a wrong answer (a bug, not a slow
run); nothing asserts on timings.  To add a workload: write a module here with a
``bench(size, log)`` function returning its metrics, add it to :data:`WORKLOADS`,
and add its goals (and COST lines) to ``goals.toml``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):
    if _path not in sys.path:  # run as `python benchmarks/run.py` without installing
        sys.path.insert(0, _path)

from cpu_speed import CpuSpeed  # noqa: E402
from harness import Run, Size, Skip, WrongAnswer, judge, load, load_goals, render, watch_cpu_speed  # noqa: E402

WORKLOADS: dict[str, str] = {
    "pipeline": "record_pipeline:bench",
    "latency": "latency_processes:bench",
    "startup": "startup:bench",
    "loop": "scaling:bench_loop",
    "cost": "cost:bench",
    "windows": "windows:bench",
    "instrument": "instrument:bench",
    "shape": "scaling:bench_shape",
    "graphs": "graphs:bench",
    "spark": "spark_wcc:bench",
    "spark_forms": "spark_forms:bench",
}
"""Every workload, in the order run: ``name: "module:function"``, the function taking ``(Size, log)``.
Spark runs last: its JVM outlives ``spark.stop()`` and would share the CPU with what follows."""


def main(argv: list[str] | None = None) -> int:
    """Run the chosen workloads, print the tally and write the report; 1 if an answer was wrong."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", "-o", type=Path, help="write the Markdown report here (default: print it)")
    parser.add_argument("--quick", action="store_true", help="small sizes and no Spark, for smoke testing")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions per measurement (default 5)")
    parser.add_argument("--settle", type=float, help="seconds to wait for a load under 1.0 (300; 0 with --quick)")
    parser.add_argument(
        "--cpu-wait",
        type=float,
        help="seconds to wait in all, before repetitions, for every CPU at full speed (180; 0 with --quick, which "
        "does not run a repetition again either)",
    )
    parser.add_argument(
        "--workloads", "--sections", default=",".join(WORKLOADS), help=f"a subset of: {', '.join(WORKLOADS)}"
    )
    args = parser.parse_args(argv)
    chosen = [name.strip() for name in args.workloads.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in WORKLOADS]
    if args.repeat < 1 or unknown:
        parser.error(f"--repeat must be at least 1; workloads are {', '.join(WORKLOADS)} (got {unknown})")
    if args.cpu_wait is not None and args.cpu_wait < 0:
        parser.error(f"--cpu-wait is seconds to wait in all, 0 or more (got {args.cpu_wait:g})")
    goals, costs = load_goals()
    command = " ".join(["python benchmarks/run.py", *(argv if argv is not None else sys.argv[1:])])
    settle = args.settle if args.settle is not None else (0.0 if args.quick else 300.0)
    settle_until = time.monotonic() + settle  # after a build, say: let the load fall before measuring
    while load() >= 1.0 and time.monotonic() < settle_until:
        time.sleep(5)
    run = Run(command, Size(args.quick, args.repeat))
    print(f"1-minute load at the start: {run.load_start:.2f}", flush=True)
    run.speed = CpuSpeed(retries_per_run=0, wait_per_run=0.0) if args.quick else CpuSpeed()
    if args.cpu_wait is not None:
        run.speed.wait_per_run = args.cpu_wait
    results, skipped = {}, {}
    with run.speed:
        print(f"CPU speed: the probe's loop takes {run.speed.best * 1e3:.1f} ms at best", flush=True)
        watch_cpu_speed(run.speed)
        try:
            for name in [name for name in WORKLOADS if name in chosen]:
                module, function = WORKLOADS[name].split(":")
                print(f"{name} ...", flush=True)
                began = time.perf_counter()
                try:
                    results[name] = getattr(importlib.import_module(module), function)(run.size, print)
                except Skip as reason:
                    skipped[name] = str(reason)
                except WrongAnswer as error:
                    print(f"error: wrong answer in {name}: {error}", file=sys.stderr)
                    return 1
                run.took[name] = time.perf_counter() - began
        finally:
            watch_cpu_speed(None)
    run.load_end = load()
    if settle:  # other programs keep the load up after the run; the run's own processes do not
        idle_since = time.monotonic()
        while load() >= 1.0 and time.monotonic() - idle_since < settle:
            time.sleep(5)
        run.load_after, run.idle_after = load(), time.monotonic() - idle_since
    skipped.update({name: "not run (--workloads)" for name in WORKLOADS if name not in chosen})
    verdicts = [judge(goal, results, skipped) for goal in goals if goal.workload in chosen]
    text = render(run, verdicts, [line for line in costs if line.workload in results], results)
    tally = {result: sum(v.result == result for v in verdicts) for result in ("met", "missed", "not measured")}
    print(f"{tally['met']} goals met, {tally['missed']} missed, {tally['not measured']} not measured")
    if args.output is None:
        print(text)
    else:
        args.output.write_text(text)
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
