"""Benchmark: what a second process buys (issue 18), measured for whichever pytimely is importable.

Each function runs one workload on 1 process and on 2 processes of 1 worker,
interleaved, and returns the figures as a dict; :func:`compare` runs the same
functions in fresh interpreters for several checkouts (``PYTHONPATH``) so that
"before" and "after" are measured side by side, in one run, under one load.

* :func:`wordcount` -- record-wise or columnar wordcount with an exchange by word
  (``benchmarks/cluster.py``'s dataflow); dataflow time, start-up excluded.
* :func:`wcc` -- columnar weakly connected components of random edges (fixed
  seed; ``examples/connected_components_columnar.py``'s dataflow); each process
  builds the same graph before timing, so only the dataflow is timed.
* :func:`latency` -- epoch latency of input -> map -> probe on 2 processes.
* :func:`startup` -- seconds from calling ``execute(main, processes=2)`` until
  every worker runs ``main``, and until ``execute`` returns (``main`` does nothing).
* :func:`import_seconds` -- seconds to ``import runtime`` in a fresh interpreter.

Usage::

    python benchmarks/process_ratios.py                       # this checkout
    python benchmarks/process_ratios.py --compare A B         # checkouts A and B, alternating
    python benchmarks/process_ratios.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for _path in (HERE, HERE.parent / "examples"):  # appended: an installed or PYTHONPATH pytimely wins
    if str(_path) not in sys.path:
        sys.path.append(str(_path))

import runtime  # noqa: E402
from runtime import Worker, execute  # noqa: E402


def _interleaved(run: Any, repeat: int) -> dict[str, Any]:
    """Run ``run(processes)`` for 1 and 2 processes ``repeat`` times, interleaved; best times and their ratio."""
    one: list[float] = []
    two: list[float] = []
    for _ in range(repeat):
        one.append(run(1))
        two.append(run(2))
    return {"one": min(one), "two": min(two), "ratio": min(one) / min(two), "all_one": one, "all_two": two}


def wordcount(columnar: bool, epochs: int = 10, lines: int = 50_000, repeat: int = 3) -> dict[str, Any]:
    """Wordcount of ``epochs * lines * 8`` words on 1 and 2 processes.

    Returns ``{"one": s, "two": s, "ratio": one / two, "words": n, ...}`` (best
    dataflow seconds of each; ``ratio`` above 1 means 2 processes are faster).
    """
    import cluster  # benchmarks/cluster.py

    words = 8 * epochs * lines

    def run(processes: int) -> float:
        seconds, _, counted, _ = cluster.measure(processes, epochs, lines, columnar=columnar)
        if counted != words:
            raise AssertionError(f"{processes} process(es) counted {counted} words, expected {words}")
        return float(seconds)

    return {**_interleaved(run, repeat), "words": words}


def _random_graph(edges: int, nodes: int, seed: int) -> Any:
    import numpy as np
    from connected_components_columnar import Graph  # type: ignore[import-not-found]

    generator = np.random.default_rng(seed)
    src = generator.integers(0, nodes, edges, dtype=np.int32)
    dst = generator.integers(0, nodes, edges, dtype=np.int32)
    names = np.arange(nodes).astype("S")
    return Graph(names, src, dst)


def wcc_worker(worker: Worker, edges: int, nodes: int, seed: int) -> tuple[float, float, int]:
    """Build the random graph (untimed), run the columnar WCC; return (start, end, labels found here)."""
    from connected_components_columnar import weak_labels

    graph = _random_graph(edges, nodes, seed)
    found: list[int] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Edges")
        labels = weak_labels(stream, graph.nodes)
        return handle, labels.inspect_batch(lambda _t, batch: found.append(len(batch))).probe()

    handle, probe = worker.dataflow(build, name="wcc")
    share = graph.share(worker.index, worker.peers)
    runtime_barrier = runtime.Barrier(worker)
    runtime_barrier.wait(timeout=120)
    start = time.perf_counter()
    handle.send_batch(share)
    handle.close()
    worker.step_while(lambda: not probe.done())
    return start, time.perf_counter(), sum(found)


def wcc(edges: int = 4_000_000, nodes: int = 2_000_000, seed: int = 18, repeat: int = 3) -> dict[str, Any]:
    """Columnar WCC of ``edges`` random edges on ``nodes`` nodes (fixed seed) on 1 and 2 processes.

    Returns ``{"one": s, "two": s, "ratio": one / two, ...}``: dataflow seconds
    from the moment every worker has its share until the last worker's probe is done.
    """

    def run(processes: int) -> float:
        results = execute(
            partial(wcc_worker, edges=edges, nodes=nodes, seed=seed), processes=processes, stall_timeout=120
        )
        if sum(r[2] for r in results) <= 0:
            raise AssertionError("the WCC found no labels")
        return max(r[1] for r in results) - min(r[0] for r in results)

    return {**_interleaved(run, repeat), "edges": edges}


def latency(epochs: int = 3000, repeat: int = 3) -> dict[str, Any]:
    """Epoch latency on 2 processes: ``{"us": best microseconds per epoch, "all": [...]}``."""
    import latency_processes

    figures = [latency_processes.measure(epochs, 1, 2)[0] for _ in range(repeat)]
    return {"us": min(figures), "all": figures}


def _started(worker: Worker) -> float:
    """The moment this worker's ``main`` began (``perf_counter`` is system-wide on Linux)."""
    return time.perf_counter()


def startup(repeat: int = 5) -> dict[str, Any]:
    """``{"first_main": s, "returned": s}``: best seconds from ``execute(processes=2)`` to every worker's
    ``main`` running, and to ``execute`` returning, for a ``main`` that does nothing."""
    first: list[float] = []
    total: list[float] = []
    for _ in range(repeat):
        began = time.perf_counter()
        results = execute(_started, processes=2)
        total.append(time.perf_counter() - began)
        first.append(max(results) - began)
    return {"first_main": min(first), "returned": min(total), "all_returned": total}


def import_seconds(repeat: int = 7) -> dict[str, Any]:
    """``{"seconds": best, "numpy": imported?}``: a fresh interpreter's ``import runtime``, best of ``repeat``."""
    best = float("inf")
    probe = (
        "import time, sys; t = time.perf_counter(); import runtime; "
        "print(time.perf_counter() - t, 'numpy' in sys.modules)"
    )
    loaded = False
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
        best = min(best, float(out[0]))
        loaded = out[1] == "True"
    return {"seconds": best, "numpy": loaded}


def everything(quick: bool = False) -> dict[str, Any]:
    """Every measurement above for this checkout (``quick``: small sizes), with the load average."""
    scale = 10 if quick else 1
    return {
        "load_before": os.getloadavg(),
        "runtime": str(Path(runtime.__file__).resolve().parent.parent),
        "import": import_seconds(),
        "startup": startup(),
        "latency": latency(3000 // scale),
        "wordcount_records": wordcount(False, 10, 50_000 // scale),
        "wordcount_columnar": wordcount(True, 10, 50_000 // scale),
        "wcc": wcc(4_000_000 // scale, 2_000_000 // scale),
        "load_after": os.getloadavg(),
    }


def compare(checkouts: list[str], what: str = "everything", quick: bool = False) -> list[dict[str, Any]]:
    """Run measurement ``what`` (a function of this module) once per checkout, in fresh interpreters, in turn."""
    results = []
    for checkout in checkouts:
        env = dict(os.environ, PYTHONPATH=checkout)
        code = (
            f"import sys, json; sys.path.append({str(HERE)!r}); import process_ratios as p; "
            f"print(json.dumps(p.{what}(quick={quick!r}) if {what!r} == 'everything' else p.{what}()))"
        )
        done = subprocess.run([sys.executable, "-c", code], env=env, cwd="/", capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{checkout}: {done.stderr[-2000:]}")
        results.append({"checkout": checkout, **json.loads(done.stdout.splitlines()[-1])})
    return results


def main() -> None:
    """Print the measurements (JSON) of this checkout, or of several with ``--compare``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", nargs="*", default=None, help="checkout directories, measured in turn")
    parser.add_argument("--what", default="everything", help="one function of this module (default everything)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.compare:
        print(json.dumps(compare(args.compare, args.what, args.quick), indent=1))
    else:
        print(json.dumps(everything(args.quick), indent=1))


if __name__ == "__main__":
    main()
