"""Benchmark: wordcount with exchange on 1 process against 2 processes of 1 worker.

Each worker generates its share of the text (line ``i`` belongs to worker
``i % peers``) before timing starts, then sends every epoch at once; the
dataflow splits lines into ``(word, 1)``, exchanges by word and counts per
epoch with a notificator.  The time reported is the dataflow's: from the
moment every worker has built its dataflow and finished a warm-up epoch to the
moment the last worker sees the final epoch complete (the slowest worker
counts).  Process start-up (about a third of a second) is reported apart.

Usage::

    python benchmarks/cluster.py            # full size
    python benchmarks/cluster.py --quick    # small, a smoke test

From ``benchmarks/run.py``: ``from benchmarks.cluster import cluster_wordcount_row``
and ``cluster_wordcount_row(quick, repeat)`` returns one Markdown table row
(plus a note on the load) for the report.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(ROOT / "examples") not in sys.path:  # wordcount_columnar's split, for the columnar variant
    sys.path.append(str(ROOT / "examples"))

from runtime import Worker, execute  # noqa: E402
from scopes import (  # noqa: E402
    Capability,
    Exchange,
    Notificator,
    OperatorInfo,
    OperatorInput,
    OperatorOutput,
    Pipeline,
    ScopeBuilder,
)

GOAL = 1.6
WORDS = [f"word{number}" for number in range(5000)]
"""A vocabulary large enough that exchange balances it between workers."""


def line(number: int) -> str:
    """Line ``number`` of the benchmark's text (deterministic)."""
    rng = random.Random(number)
    return " ".join(rng.choices(WORDS, k=8))


def local_counts(capability: Capability, info: OperatorInfo) -> Callable[..., None]:
    """Operator logic (a combiner): each batch of lines becomes ``(word, count)`` pairs, one per distinct word."""
    capability.drop()

    def logic(input: OperatorInput, output: OperatorOutput) -> None:
        for ref, batch in input:
            counts = Counter(word for text_line in batch for word in text_line.split())
            output.session(ref).give_batch(list(counts.items()))

    return logic


def split_words(lines: Any) -> Any:
    """Columnar split: a NumPy array of lines becomes one ``word`` column (pyarrow's split in C when installed)."""
    import wordcount_columnar  # type: ignore[import-not-found]

    return wordcount_columnar.split_lines(lines)


def wordcount_dataflow(worker: Worker, combine: bool = False, columnar: bool = False) -> tuple[Any, Any, list[int]]:
    """Build the wordcount dataflow on ``worker``; return (input handle, probe, ``[words counted here]``).

    With ``combine``, each worker counts each batch locally before the exchange.
    With ``columnar``, each batch of lines is one NumPy array: ``map_batch`` splits
    them into a column of words (in C with pyarrow), and ``aggregate_batch`` counts
    each batch where it is, exchanges only ``(word, count)`` rows and adds them up
    per epoch.  Otherwise the count is kept per epoch with a notificator and
    emitted as ``(word, count)`` pairs when the epoch completes.
    """
    counted = [0]
    pending: dict[Any, Counter[str]] = {}
    if columnar:
        import wordcount_columnar  # noqa: F401  # its imports (pyarrow) now, not in the timed part

    def count(input: OperatorInput, output: OperatorOutput, notificator: Notificator) -> None:
        for ref, batch in input:
            if ref.time not in pending:
                pending[ref.time] = Counter()
                notificator.notify_at(ref.retain())
            counts = pending[ref.time]
            for word, n in batch:
                counts[word] += n
        for capability in notificator:
            counts = pending.pop(capability.time)
            counted[0] += sum(counts.values())
            output.session(capability).give_batch(list(counts.items()))

    def tally(batch: Any) -> None:
        column = batch["count"] if hasattr(batch, "dtype") else batch.column("count").to_numpy()
        counted[0] += int(column.sum())

    def build(scope: ScopeBuilder) -> Any:
        handle, text = scope.new_input("Lines")
        if columnar:
            words = text.map_batch(split_words, name="Split")
            counts = words.aggregate_batch("word", [("word", "count", "count")], name="Count")
            return handle, counts.inspect_batch(lambda _time, batch: tally(batch), name="Tally").probe()
        if combine:
            pairs = text.unary(Pipeline, "LocalCounts", local_counts)
        else:
            pairs = text.flat_map(lambda text_line: [(word, 1) for word in text_line.split()], name="Split")
        probe = pairs.unary_notify(Exchange(lambda pair: pair[0]), "Count", count).probe()
        return handle, probe

    handle, probe = worker.dataflow(build, name="wordcount")
    return handle, probe, counted


def wordcount_worker(
    worker: Worker, epochs: int, lines: int, combine: bool = False, columnar: bool = False
) -> tuple[float, float, int, float]:
    """Count words of ``epochs`` epochs of ``lines`` lines; return (start, end, words counted here, CPU s).

    The dataflow is :func:`wordcount_dataflow`'s; each worker generates its share
    of the text (line ``i`` of an epoch belongs to worker ``i % peers``).
    """
    handle, probe, counted = wordcount_dataflow(worker, combine, columnar)
    mine: list[Any] = [
        [line(e * lines + i) for i in range(worker.index, lines, worker.peers)] for e in range(epochs + 1)
    ]
    if columnar:
        import numpy as np

        mine = [np.array(batch) for batch in mine]  # fixed-width unicode: NumPy's own string dtype
    handle.send_batch(mine[0])  # warm-up epoch, not timed
    handle.advance_to(1)
    worker.step_while(lambda: probe.less_than(1))
    counted[0] = 0
    start = time.perf_counter()
    cpu = time.process_time()
    for epoch in range(1, epochs + 1):
        handle.send_batch(mine[epoch])
        handle.advance_to(epoch + 1)
    worker.step_while(lambda: probe.less_than(epochs + 1))
    end = time.perf_counter()
    return start, end, counted[0], time.process_time() - cpu


def columnar_wire_missing() -> str | None:
    """Why the columnar variant cannot run on processes here (the wire cannot carry NumPy arrays), or ``None``."""
    import numpy as np

    from runtime.communication.wire import encode_batch

    try:
        encode_batch(cast(Any, np.array(["word"])))
    except TypeError:
        return (
            "not measured: the wire between processes cannot carry NumPy arrays in this revision "
            "(colio's part of the columnar contract, branch wip-colio, is not merged)"
        )
    return None


def measure(
    processes: int, epochs: int, lines: int, combine: bool = False, columnar: bool = False
) -> tuple[float, float, int, float]:
    """(dataflow seconds, wall seconds with start-up, words counted, CPU seconds of the busiest process)."""
    began = time.perf_counter()
    job = partial(wordcount_worker, epochs=epochs, lines=lines, combine=combine, columnar=columnar)
    results = execute(job, workers=1, processes=processes)
    wall = time.perf_counter() - began
    if processes == 1:
        start, end, words, cpu = results[0]
        return end - start, wall, words, cpu
    # perf_counter is system-wide on Linux (CLOCK_MONOTONIC), so starts and ends compare across processes
    start = min(r[0] for r in results)
    end = max(r[1] for r in results)
    return end - start, wall, sum(r[2] for r in results), max(r[3] for r in results)


def cluster_wordcount_row(quick: bool = False, repeat: int = 3, combine: bool = False) -> tuple[str, str]:
    """Measure; return a Markdown table row and a note on the machine's load.

    With ``combine`` the dataflow counts each batch locally before the exchange
    (a combiner), so that far fewer records cross between processes.
    """
    epochs, lines = (4, 2_000) if quick else (10, 12_000)
    expected = 8 * epochs * lines
    load_before = os.getloadavg()
    one: list[float] = []
    two: list[float] = []
    walls: dict[int, list[float]] = {1: [], 2: []}
    cpus: dict[int, list[float]] = {1: [], 2: []}
    for _ in range(repeat):
        for processes, times in ((1, one), (2, two)):
            seconds, wall, words, cpu = measure(processes, epochs, lines, combine)
            cpus[processes].append(cpu)
            if words != expected:
                raise AssertionError(f"{processes} process(es) counted {words} words, expected {expected}")
            times.append(seconds)
            walls[processes].append(wall)
    load_after = os.getloadavg()
    speedup = min(one) / min(two)
    verdict = "PASS" if speedup >= GOAL else f"MISS (short by {GOAL - speedup:.2f}x)"
    rate1 = expected / min(one)
    rate2 = expected / min(two)
    row = (
        f"| wordcount + exchange{' (with a local combiner)' if combine else ''}, "
        f"1 process x 1 worker vs 2 processes x 1 worker "
        f"({epochs} x {lines:,} lines, {expected:,} words) | {rate1:,.0f} words/s | {rate2:,.0f} words/s | "
        f"{speedup:.2f}x (goal >= {GOAL}x) | {verdict} |"
    )
    note = (
        f"Best of {repeat}; all runs: 1 process {', '.join(f'{t:.2f}' for t in one)} s, "
        f"2 processes {', '.join(f'{t:.2f}' for t in two)} s (dataflow time; wall time with start-up: "
        f"{min(walls[1]):.2f} s and {min(walls[2]):.2f} s). Load average (1, 5, 15 min) before: "
        f"{', '.join(f'{x:.2f}' for x in load_before)}; after: {', '.join(f'{x:.2f}' for x in load_after)}; "
        f"{os.cpu_count()} CPUs. CPU time in the timed part: {min(cpus[1]):.2f} s for 1 process, "
        f"{min(cpus[2]):.2f} s for the busier of 2, so with a CPU free for each process the speed-up "
        f"could reach at most about {min(cpus[1]) / min(cpus[2]):.2f}x."
    )
    return row, note


def main(argv: list[str] | None = None) -> int:
    """Print the row and the note."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (best is reported)")
    args = parser.parse_args(argv)
    rows = [cluster_wordcount_row(args.quick, args.repeat, combine) for combine in (False, True)]
    print("| benchmark | 1 process | 2 processes | speed-up | goal |")
    print("|---|---|---|---|---|")
    for row, _ in rows:
        print(row)
    print()
    for _, note in rows:
        print(note)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
