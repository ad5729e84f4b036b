"""What two processes can gain on this machine with no dataflow at all: the ceiling of a 2-process speed-up.

A 2-process run of a workload cannot beat two bare processes that run the same
kernels on the same halves of the input at the same moment, with nothing
exchanged.  :func:`ceiling` measures that: one spawned process runs the kernel
on the whole input, then two others run it on their halves at the same moment,
round after round (interleaved), and the ratio of the medians is the most the
machine gives (:attr:`Ceiling.speedup`); a workload's own 2-process speed-up is
read against it.  Two more processes run the same halves one at a time, each
alone on the machine (:attr:`Ceiling.split`), which tells the two causes of a
ceiling below 2× apart: a kernel whose work does not halve with its input has a
low ``split``; two cores that slow each other down (a shared cache, memory
bandwidth, a neighbour on the host) make ``speedup`` lower than ``split``.

The kernels are the workloads' own:

* :func:`wordcount_kernel`: each epoch's lines split into words and counted by
  Arrow's hash aggregation (``benchmarks/cluster.py``'s ``split_words`` and the
  local count of ``aggregate_batch``);
* :func:`record_kernel`: the record-wise wordcount's Python work without its
  routing (each line made into ``(word, 1)`` pairs by the ``flat_map`` function,
  the pairs counted into a ``Counter`` as its ``Count`` operator does);
* :func:`wcc_kernel`: the local step of ``examples/connected_components_cost.py``
  (each node's smallest component-mate over the share's edges), whose random
  reads of a node-sized array are what two cores sharing a cache slow down.
"""

from __future__ import annotations

import multiprocessing
import queue
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE), str(HERE.parent / "examples")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from harness import median, repetition  # noqa: E402

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
    return [np.array(lines, dtype=str) for lines in record_lines(paths, index, peers)]


def wordcount_kernel(epochs: list[np.ndarray]) -> int:
    """Split each epoch's lines into words and count them per word (Arrow's ``group_by`` on one thread, as
    ``aggregate_batch`` does); the words counted."""
    from cluster import split_words

    counted = 0
    for lines in epochs:
        counts = split_words(lines).group_by("word", use_threads=False).aggregate([("word", "count")])
        counted += int(counts.column("word_count").to_numpy().sum())
    return counted


def record_lines(paths: list[str], index: int, peers: int) -> list[list[str]]:
    """Share ``index`` of ``peers`` of every epoch file as a list of lines (as the record-wise wordcount reads)."""
    from cost import share_lines

    return [share_lines(path, index, peers) for path in paths]


def record_kernel(epochs: list[list[str]]) -> int:
    """Make each epoch's lines into ``(word, 1)`` pairs with one Python call per line (the record-wise wordcount's
    ``flat_map``) and add the pairs up per word in a ``Counter`` (its ``Count``); the words counted."""
    from cluster import word_pairs

    counted = 0
    for lines in epochs:
        counts: Counter[str] = Counter()
        for word, n in chain.from_iterable(map(word_pairs, lines)):
            counts[word] += n
        counted += sum(counts.values())
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
    when its start event of the round is set."""
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
    """Processes that run the kernel on the ``peers`` shares of the input once per round: at the same moment
    (``together``), or one after the other, each alone on the machine."""

    def __init__(self, context: Any, load: Loader, kernel: Kernel, peers: int, rounds: int, together: bool) -> None:
        self.together = together
        if together:  # one start event per round, shared by every process
            self.starts = [[context.Event()] * peers for _ in range(rounds)]
        else:
            self.starts = [[context.Event() for _ in range(peers)] for _ in range(rounds)]
        self.ready, self.results = context.Queue(), context.Queue()
        self.processes = [
            context.Process(
                target=_share,
                args=(load, kernel, index, peers, [events[index] for events in self.starts], self.ready, self.results),
                daemon=True,
            )
            for index in range(peers)
        ]
        for process in self.processes:
            process.start()

    def round(self, number: int) -> float:
        """Run round ``number`` once every process is ready and idle; the slowest one's seconds."""
        _collect(self.ready, self.processes, len(self.processes))
        if self.together:
            self.starts[number][0].set()  # only now do they run: nothing else does
            return float(max(_collect(self.results, self.processes, len(self.processes))))
        seconds = []
        for start in self.starts[number]:  # one at a time: each the only one running
            start.set()
            seconds.extend(_collect(self.results, self.processes, 1))
        return float(max(seconds))


@dataclass(frozen=True)
class Ceiling:
    """Median seconds of a kernel: on the whole input, and the slower half when the halves run at once or apart."""

    whole: float
    together: float
    """The slower of two processes running the halves at the same moment."""
    apart: float
    """The slower of the same halves, each run while nothing else measured runs."""

    @property
    def speedup(self) -> float:
        """What two processes can gain on this machine: ``whole / together`` (the ceiling)."""
        return self.whole / max(self.together, 1e-9)

    @property
    def split(self) -> float:
        """What halving the input gains with a core to itself: ``whole / apart`` (2: the work halves)."""
        return self.whole / max(self.apart, 1e-9)


def ceiling(load: Loader, kernel: Kernel, rounds: int) -> Ceiling:
    """The kernel's :class:`Ceiling`: on the whole input in one spawned process, on the halves in two spawned
    processes at once, and on the halves in two others one at a time; rounds interleaved, every process fresh and
    warmed alike, and never two groups at once.  ``load`` and ``kernel`` must be picklable (top-level functions,
    or partials of them)."""
    context = multiprocessing.get_context("spawn")
    groups = [_Group(context, load, kernel, peers, rounds, together) for peers, together in GROUPS]
    times: list[list[float]] = [[] for _ in groups]
    try:
        for number in range(rounds):
            for group, found in zip(groups, times, strict=True):
                with repetition():
                    found.append(group.round(number))
    finally:
        for process in (process for group in groups for process in group.processes):
            process.join(POLL)
            if process.is_alive():
                process.kill()
                process.join()
    whole, together, apart = (median(found) for found in times)
    return Ceiling(whole, together, apart)


GROUPS = ((1, True), (2, True), (2, False))
"""The measured groups, in the order of each round: the whole input, the halves at once, the halves apart."""


def wordcount_ceiling(paths: list[str], rounds: int) -> Ceiling:
    """:func:`ceiling` of the columnar wordcount's kernel over ``paths``."""
    return ceiling(partial(wordcount_lines, paths), wordcount_kernel, rounds)


def record_wordcount_ceiling(paths: list[str], rounds: int) -> Ceiling:
    """:func:`ceiling` of the record-wise wordcount's Python work over ``paths``."""
    return ceiling(partial(record_lines, paths), record_kernel, rounds)


def wcc_ceiling(path: str, rounds: int) -> Ceiling:
    """:func:`ceiling` of the WCC example's local step over the edges in ``path``."""
    return ceiling(partial(wcc_edges, path), wcc_kernel, rounds)
