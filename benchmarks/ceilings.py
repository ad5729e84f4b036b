"""What two processes can gain on this machine with no dataflow at all: the ceiling of a 2-process speed-up.

A 2-process run of a workload cannot beat two bare processes that run the same
C kernels on the same halves of the input at the same moment, with nothing
exchanged.  :func:`ceiling` measures that: one spawned process runs the kernel
on the whole input, then two others run it on their halves at the same moment,
round after round (interleaved), and the ratio of the medians is the most the
machine gives.  Below 2× it is what two cores lose to each other
(memory bandwidth, a shared cache, a neighbour on the host), and a workload's
own 2-process speed-up is read against it.

The kernels are the workloads' own:

* :func:`wordcount_kernel`: each epoch's lines split into words and counted by
  Arrow's hash aggregation (``benchmarks/cluster.py``'s ``split_words`` and the
  local count of ``aggregate_batch``);
* :func:`wcc_kernel`: the local step of ``examples/connected_components_cost.py``
  (each node's smallest component-mate over the share's edges), whose work keeps
  a term in the number of nodes that splitting the edges does not shrink.
"""

from __future__ import annotations

import multiprocessing
import queue
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE), str(HERE.parent / "examples")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from harness import median  # noqa: E402

Loader = Callable[[int, int], Any]
"""``load(index, peers)``: share ``index`` of ``peers`` of a workload's input, as its kernel takes it."""
Kernel = Callable[[Any], Any]
"""The C work of a workload on one share of its input."""

WAIT_LIMIT = 120.0
"""Seconds one step of the measurement may wait for the other processes before it fails."""
POLL = 0.5
"""Seconds between two looks at whether the measuring processes are still alive."""


class CeilingError(RuntimeError):
    """A process of :func:`ceiling` died or stopped answering."""


def wordcount_lines(paths: list[str], index: int, peers: int) -> list[np.ndarray]:
    """Share ``index`` of ``peers`` of every epoch file as a NumPy array of lines (as the columnar wordcount reads)."""
    from cost import read_share

    return [np.array(read_share(path, index, peers).decode().splitlines(), dtype=str) for path in paths]


def wordcount_kernel(epochs: list[np.ndarray]) -> int:
    """Split each epoch's lines into words and count them per word (Arrow's ``group_by`` on one thread, as
    ``aggregate_batch`` does); the words counted."""
    from cluster import split_words

    counted = 0
    for lines in epochs:
        counts = split_words(lines).group_by("word", use_threads=False).aggregate([("word", "count")])
        counted += int(counts.column("word_count").to_numpy().sum())
    return counted


def wcc_edges(path: str, index: int, peers: int) -> tuple[np.ndarray, np.ndarray]:
    """Share ``index`` of ``peers`` of the edge file as ``(src, dst)`` columns."""
    from cost import parse_edges, read_share

    return parse_edges(read_share(path, index, peers))


def wcc_kernel(edges: tuple[np.ndarray, np.ndarray]) -> int:
    """The WCC example's local step on one share of the edges; the nodes it labelled."""
    import connected_components_cost as cost_wcc  # type: ignore[import-not-found]

    src, dst = edges
    return len(cost_wcc.local_pairs(src, dst, cost_wcc.default_method()))


def _share(load: Loader, kernel: Kernel, index: int, peers: int, starts: list[Any], ready: Any, results: Any) -> None:
    """One measuring process: load share ``index`` of ``peers``, warm the kernel, then time it once per round
    when told to start."""
    share = load(index, peers)
    kernel(share)
    for start in starts:
        ready.put(index)
        start.wait(WAIT_LIMIT)
        began = time.perf_counter()
        kernel(share)
        results.put(time.perf_counter() - began)


def _collect(results: Any, children: list[Any], count: int) -> list[Any]:
    """The next ``count`` messages of ``results``; :class:`CeilingError` once a child has died or
    :data:`WAIT_LIMIT` seconds pass (a child that stops answering cannot hang the benchmark)."""
    found: list[Any] = []
    deadline = time.monotonic() + WAIT_LIMIT
    while len(found) < count:
        try:
            found.append(results.get(timeout=POLL))
        except queue.Empty:
            codes = [child.exitcode for child in children]
            # 0: the process ended after its last round, its messages on their way; anything else: it died
            if any(code not in (None, 0) for code in codes) or time.monotonic() > deadline:
                raise CeilingError(
                    f"a process measuring the 2-process ceiling stopped or stopped answering (exit codes {codes}, "
                    "None: still running); its traceback, if any, is above"
                ) from None
    return found


class _Group:
    """Processes that run the kernel on the ``peers`` shares of the input at the same moment, once per round."""

    def __init__(self, context: Any, load: Loader, kernel: Kernel, peers: int, rounds: int) -> None:
        self.starts = [context.Event() for _ in range(rounds)]
        self.ready, self.results = context.Queue(), context.Queue()
        self.processes = [
            context.Process(
                target=_share,
                args=(load, kernel, index, peers, self.starts, self.ready, self.results),
                daemon=True,
            )
            for index in range(peers)
        ]
        for process in self.processes:
            process.start()

    def round(self, number: int) -> float:
        """Run round ``number`` once every process is ready and idle; the slowest one's seconds."""
        _collect(self.ready, self.processes, len(self.processes))
        self.starts[number].set()  # only now do they run: nothing else does
        return float(max(_collect(self.results, self.processes, len(self.processes))))


def ceiling(load: Loader, kernel: Kernel, rounds: int) -> tuple[float, float]:
    """``(whole, halves)``: median seconds of ``kernel`` on the whole input in one spawned process, and of the
    slower of two spawned processes running it on the halves at once; rounds interleaved, every process fresh
    and warmed alike, and never two groups at once.  ``load`` and ``kernel`` must be picklable (top-level
    functions, or partials of them)."""
    context = multiprocessing.get_context("spawn")
    whole, halves = _Group(context, load, kernel, 1, rounds), _Group(context, load, kernel, 2, rounds)
    everyone = whole.processes + halves.processes
    wholes: list[float] = []
    both: list[float] = []
    try:
        for number in range(rounds):
            wholes.append(whole.round(number))
            both.append(halves.round(number))
    finally:
        for process in everyone:
            process.join(POLL)
            if process.is_alive():
                process.kill()
                process.join()
    return median(wholes), median(both)


def wordcount_ceiling(paths: list[str], rounds: int) -> tuple[float, float]:
    """:func:`ceiling` of the columnar wordcount's kernel over ``paths``."""
    return ceiling(partial(wordcount_lines, paths), wordcount_kernel, rounds)


def wcc_ceiling(path: str, rounds: int) -> tuple[float, float]:
    """:func:`ceiling` of the WCC example's local step over the edges in ``path``."""
    return ceiling(partial(wcc_edges, path), wcc_kernel, rounds)
