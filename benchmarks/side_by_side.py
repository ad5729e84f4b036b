"""Benchmark: two (or more) checkouts measured side by side, alternating, each in its own interpreter.

For each round and each checkout, a fresh Python process puts the checkout
first on ``sys.path`` and runs :func:`measure_checkout`, which imports the
checkout's own ``benchmarks/epoch_latency.py``, ``record_pipeline.py``,
``latency_processes.py`` and ``scaling.py`` (by path) and measures:

* ``latency_1w_us``: epoch latency on 1 worker, µs per epoch;
* ``pipeline_s`` and ``loop_s``: the record pipeline (map -> filter -> exchange ->
  count, 1 worker) and the handwritten loop, seconds; ``pipeline_vs_loop`` is
  the loop's time over the pipeline's (higher is better, as in BENCHMARKS.md);
* ``latency_2t_us``: epoch latency on 2 worker threads, µs per epoch;
* ``collatz_1w_s``, ``collatz_2t_s`` and ``collatz_ratio``: the Collatz loop with an
  exchange (3,000 numbers) on 1 worker and on 2 threads, and the 2-thread time
  over the 1-worker time (goal: at most 1.5).

The best (lowest time; highest ``pipeline_vs_loop``) of the rounds is kept per
checkout, and the load average is recorded before and after, so that before and
after are compared under the same load.

From ``benchmarks/run.py``: ``compare(roots, rounds)`` returns ``{root: {name:
value}}`` plus ``"load"``; ``table(result, roots)`` renders it as Markdown::

    python benchmarks/side_by_side.py /work/main /work/wt/perf
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HIGHER_IS_BETTER = {"pipeline_vs_loop"}


def measure_checkout(root: str) -> dict[str, float]:
    """Measure the checkout at ``root`` (which must be first on ``sys.path``) once."""
    bench = Path(root) / "benchmarks"
    epoch = runpy.run_path(str(bench / "epoch_latency.py"), run_name="epoch_latency")
    pipeline = runpy.run_path(str(bench / "record_pipeline.py"), run_name="record_pipeline")
    processes = runpy.run_path(str(bench / "latency_processes.py"), run_name="latency_processes")
    scaling = runpy.run_path(str(bench / "scaling.py"), run_name="scaling")
    result: dict[str, float] = {}
    result["latency_1w_us"] = min(epoch["pytimely_one_worker"](5_000) for _ in range(3)) * 1e6
    loop_s = min(pipeline["loop"](20, 100_000)[0] for _ in range(3))
    pipeline_s = min(pipeline["record"](20, 100_000)[0] for _ in range(3))
    result.update(loop_s=loop_s, pipeline_s=pipeline_s, pipeline_vs_loop=loop_s / pipeline_s)
    result["latency_2t_us"] = min(processes["measure"](2_000, 2, 1)[0] for _ in range(3))
    collatz = scaling["collatz_once"]
    one = min(collatz(3_000, 1)["seconds"] for _ in range(3))
    two = min(collatz(3_000, 2)["seconds"] for _ in range(3))
    result.update(collatz_1w_s=one, collatz_2t_s=two, collatz_ratio=two / one)
    return result


def compare(roots: list[str], rounds: int = 3) -> dict[str, Any]:
    """Measure every checkout ``rounds`` times, alternating; the best value per measure and checkout."""
    best: dict[str, dict[str, float]] = {root: {} for root in roots}
    code = (
        "import json, runpy, sys; sys.path.insert(0, sys.argv[1]); "
        f"space = runpy.run_path({__file__!r}); "
        "print(json.dumps(space['measure_checkout'](sys.argv[1])))"
    )
    load_before = os.getloadavg()
    began = time.time()
    for _ in range(rounds):
        for root in roots:
            env = dict(os.environ, PYTHONPATH=root)
            out = subprocess.run(
                [sys.executable, "-c", code, root],
                env=env,
                cwd=root,
                capture_output=True,
                text=True,
                timeout=900,
                check=True,
            )
            for name, value in json.loads(out.stdout.strip().splitlines()[-1]).items():
                previous = best[root].get(name)
                if previous is None:
                    best[root][name] = value
                elif name in HIGHER_IS_BETTER:
                    best[root][name] = max(previous, value)
                else:
                    best[root][name] = min(previous, value)
    return {
        **best,
        "load": {"before": load_before, "after": os.getloadavg(), "seconds": time.time() - began, "rounds": rounds},
    }


def table(result: dict[str, Any], roots: list[str]) -> str:
    """The comparison as a Markdown table (the last checkout over the first, as a ratio), and the load."""
    lines = ["| measure | " + " | ".join(roots) + " | last / first |", "|---|" + "---|" * (len(roots) + 1)]
    for name in result[roots[0]]:
        values = [result[root][name] for root in roots]
        ratio = f"{values[-1] / values[0]:.2f}" if len(values) > 1 and values[0] else ""
        lines.append(f"| {name} | " + " | ".join(f"{value:.4g}" for value in values) + f" | {ratio} |")
    load = result["load"]
    lines.append("")
    lines.append(
        f"Best of {load['rounds']} alternating rounds ({load['seconds']:.0f} s); load average (1, 5, 15 min) before "
        f"{', '.join(f'{x:.2f}' for x in load['before'])}, after {', '.join(f'{x:.2f}' for x in load['after'])}; "
        f"{os.cpu_count()} CPUs."
    )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Print the table for the checkouts named on the command line."""
    roots = argv or [str(Path(__file__).resolve().parent.parent)]
    print(table(compare(roots), roots))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
