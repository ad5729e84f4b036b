"""Check and time the COST-style WCC (``examples/connected_components_cost.py``) on large random graphs against scipy.

Every process generates the same seeded random edges (:func:`cost.random_edges`,
``edges // 2`` nodes) and keeps its contiguous share, as if it had read its share
of a file; the dataflow then labels every node on an edge.  The answer is
compared with scipy's ``connected_components(connection="weak")`` through a
64-bit digest of every ``(node, label)`` pair and the number of components, so
that only a few numbers leave each process.

Usage::

    python benchmarks/wcc_cost_check.py                          # 3e7 edges on 1 and 2 processes
    python benchmarks/wcc_cost_check.py --edges 1000000 --processes 1 2 4
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _path in (str(ROOT), str(HERE), str(ROOT / "examples")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import connected_components_cost as cost_wcc  # type: ignore[import-not-found]  # noqa: E402
import cost  # noqa: E402

from runtime import Worker, execute  # noqa: E402

MIX = np.uint64(0x9E3779B97F4A7C15)


def digest(nodes: np.ndarray, labels: np.ndarray) -> int:
    """An order-free 64-bit digest of ``(node, label)`` pairs."""
    with np.errstate(over="ignore"):
        mixed = (nodes.astype(np.uint64) * MIX) ^ labels.astype(np.uint64)
        return int(mixed.sum(dtype=np.uint64))


def worker_main(worker: Worker, edges: int, method: str) -> tuple[float, float, int, int, int, float]:
    """Generate this worker's share, label it; return ``(start, end, digest, nodes, roots, CPU s)`` for its nodes.

    The time runs from the end of an empty warm-up epoch (every process has
    generated its share and connected) to this worker's last label.
    """
    src, dst, _ = cost.random_edges(edges)
    low, high = len(src) * worker.index // worker.peers, len(src) * (worker.index + 1) // worker.peers
    share = np.empty(high - low, cost_wcc.EDGES)
    share["src"], share["dst"] = src[low:high], dst[low:high]
    del src, dst
    found: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Edges")
        labels = cost_wcc.weak_components(stream, method)
        return handle, labels.inspect_batch(lambda _time, batch: found.append(batch), name="Collect").probe()

    handle, probe = worker.dataflow(build, name="wcc cost check")
    handle.advance_to(1)  # an empty warm-up epoch: every process has its share and is connected
    worker.step_while(lambda: probe.less_than(1))
    start, cpu = time.perf_counter(), time.process_time()
    handle.send_batch(share)
    handle.close()
    worker.step_while(lambda: not probe.done())
    end, cpu = time.perf_counter(), time.process_time() - cpu
    labels = cost_wcc.concat(found, cost_wcc.PAIRS)
    roots = int(np.count_nonzero(labels["node"] == labels["label"]))
    return start, end, digest(labels["node"], labels["label"]), len(labels), roots, cpu


def scipy_answer(edges: int) -> tuple[float, int, int, int]:
    """scipy's time (CSR build and ``connected_components``) and the digest, node count and components."""
    src, dst, nodes = cost.random_edges(edges)
    cost.scipy_components(np.zeros(1, np.int32), np.zeros(1, np.int32), 1)  # import scipy before the timer
    start, cpu = time.perf_counter(), time.process_time()
    _, labels = cost.scipy_components(src, dst, nodes)
    seconds = time.perf_counter() - start
    print(f"  scipy's CPU: {time.process_time() - cpu:.3f} s")
    on_edge = np.zeros(nodes, np.bool_)
    on_edge[src] = True
    on_edge[dst] = True
    smallest = np.full(int(labels.max()) + 1, nodes, np.int64)
    np.minimum.at(smallest, labels, np.arange(nodes))
    present = np.flatnonzero(on_edge)
    final = smallest[labels[present]]
    return seconds, digest(present, final), len(present), int(np.count_nonzero(present == final))


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: print the times and whether every run matched scipy."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", type=int, default=30_000_000)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--method", choices=cost_wcc.METHODS, default=cost_wcc.default_method())
    args = parser.parse_args(argv)
    seconds, expected, nodes, components = scipy_answer(args.edges)
    print(f"{args.edges:,} edges, {nodes:,} nodes on an edge, {components:,} components")
    print(f"  scipy CSR build + connected_components: {seconds:.3f} s")
    ok = True
    for processes in args.processes:
        results: list[Any] = execute(
            partial(worker_main, edges=args.edges, method=args.method), processes=processes, stall_timeout=600
        )
        took = max(r[1] for r in results) - min(r[0] for r in results)
        found = sum(r[2] for r in results) % (1 << 64)
        match = found == expected and sum(r[3] for r in results) == nodes and sum(r[4] for r in results) == components
        ok = ok and match
        print(
            f"  pytimely ({args.method}), {processes} process(es): {took:.3f} s, "
            f"{took / seconds:.2f}× scipy's time; busiest process's CPU {max(r[5] for r in results):.3f} s; "
            f"{'matches scipy' if match else 'MISMATCH'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
