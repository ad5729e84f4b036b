"""Streaming word count: exchange by word, and per-epoch notifications for running totals.

Lines of text arrive over several epochs; each worker reads the lines whose
position ``i`` in the epoch has ``i % peers == worker``.  The dataflow splits
lines into ``(word, 1)`` pairs, routes each pair to the worker that owns the word
(``Exchange`` on the word), and counts there.  The counting operator is stateful
and uses a notificator: it accumulates the counts of each epoch separately, asks
to be notified when the epoch is complete, and only then folds them into the
running totals and emits ``(word, total so far)`` for each word seen in that
epoch.  Notifications arrive in time order, so the totals are always those of a
complete prefix of the input.

Run it with ``.venv/bin/python examples/wordcount.py -w 2``.

With ``--input DIR`` the lines come from a directory of Parquet (or
``--format csv``/``jsonl``) files with a ``line`` column, read through
:func:`runtime.files.read_files`: the ``k``-th file in path order is epoch
``k``.  ``--write-sample DIR`` writes the random text there, one Parquet file
per epoch, and ``--output DIR`` writes each epoch's ``(word, total)`` rows with
:func:`runtime.files.write_files`, one Parquet file per epoch and worker
(replacing the epochs an earlier run wrote there)::

    .venv/bin/python examples/wordcount.py --write-sample /tmp/lines
    .venv/bin/python examples/wordcount.py -w 2 --input /tmp/lines --output /tmp/totals
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime import Worker, execute, execute_from_args  # noqa: E402
from runtime.cluster import cluster_arguments  # noqa: E402
from scopes import (  # noqa: E402
    Exchange,
    Notificator,
    OperatorInput,
    OperatorOutput,
    ScopeBuilder,
    Stream,
)

Totals = dict[int, dict[str, int]]
"""For each epoch, the running total of every word that appeared in that epoch."""

VOCABULARY = (
    "timely",
    "dataflow",
    "naiad",
    "epoch",
    "loop",
    "frontier",
    "progress",
    "notify",
    "capability",
    "worker",
    "stream",
    "operator",
    "exchange",
    "scope",
    "time",
    "record",
    "batch",
    "iterate",
)


def random_text(epochs: int, lines: int, seed: int, words_per_line: int = 8) -> list[list[str]]:
    """``epochs`` lists of ``lines`` random lines each, drawn from a small vocabulary."""
    rng = random.Random(seed)
    return [
        [" ".join(rng.choices(VOCABULARY, k=rng.randint(0, words_per_line))) for _ in range(lines)]
        for _ in range(epochs)
    ]


def count_words(pairs: Stream) -> Stream:
    """Running totals of ``(word, n)`` pairs, emitted as ``(word, total)`` once each epoch is done."""
    pending: dict[Any, Counter[str]] = {}
    totals: Counter[str] = Counter()

    def logic(input: OperatorInput, output: OperatorOutput, notificator: Notificator) -> None:
        for ref, batch in input:
            counts = pending.get(ref.time)
            if counts is None:
                counts = pending[ref.time] = Counter()
                notificator.notify_at(ref.retain())
            for word, n in batch:
                counts[word] += n
        for capability in notificator:
            counts = pending.pop(capability.time)
            totals.update(counts)
            output.session(capability).give_batch([(word, totals[word]) for word in counts])

    return pairs.unary_notify(Exchange(lambda pair: pair[0]), "Count", logic)


def worker_main(worker: Worker, text: list[list[str]], lockstep: bool = True) -> list[tuple[int, str, int]]:
    """Build and drive the dataflow on one worker; return the ``(epoch, word, total)`` it produced."""
    produced: list[tuple[int, str, int]] = []

    def collect(time: Any, batch: list[tuple[str, int]]) -> None:
        produced.extend((time, word, total) for word, total in batch)

    def build(scope: ScopeBuilder) -> Any:
        handle, lines = scope.new_input("Lines")
        pairs = lines.flat_map(lambda line: [(word, 1) for word in line.split()], name="Split")
        probe = count_words(pairs).inspect_batch(collect, name="Collect").probe()
        return handle, probe

    handle, probe = worker.dataflow(build, name="wordcount")
    for epoch, lines in enumerate(text):
        handle.send_batch(line for i, line in enumerate(lines) if i % worker.peers == worker.index)
        handle.advance_to(epoch + 1)
        if lockstep:
            worker.step_while(lambda: probe.less_than(handle.time))
    handle.close()
    worker.step_while(lambda: not probe.done())
    return produced


def files_main(worker: Worker, source: str, format: str, output: str | None) -> list[tuple[int, str, int]]:
    """Count the words of the ``line`` column of the files under ``source``; one epoch per file."""
    from runtime.files import read_files, write_files

    produced: list[tuple[int, str, int]] = []

    def collect(time: Any, batch: list[tuple[str, int]]) -> None:
        produced.extend((time, word, total) for word, total in batch)

    def build(scope: ScopeBuilder) -> Any:
        rows = read_files(scope, source, format=format, name="Lines")
        pairs = rows.flat_map(lambda row: [(word, 1) for word in str(row["line"]).split()], name="Split")
        totals = count_words(pairs).inspect_batch(collect, name="Collect")
        if output is not None:
            write_files(totals, output, columns=("word", "total"), overwrite=True, name="Totals")
        return totals.probe()

    probe = worker.dataflow(build, name="wordcount")
    worker.step_while(lambda: not probe.done())
    return produced


def write_sample(text: list[list[str]], directory: str) -> None:
    """Write ``text`` as one Parquet file per epoch, ``lines-EEEE.parquet``, each with a ``line`` column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    Path(directory).mkdir(parents=True, exist_ok=True)
    for epoch, lines in enumerate(text):
        pq.write_table(pa.table({"line": pa.array(lines, pa.string())}), Path(directory) / f"lines-{epoch:04d}.parquet")


def read_text(directory: str, format: str) -> list[list[str]]:
    """The ``line`` column of every file under ``directory``, one epoch per file in path order."""
    import pyarrow.dataset as ds

    from runtime.files import FORMATS

    dataset = ds.dataset(directory, format=FORMATS[format])
    fragments = sorted(dataset.get_fragments(), key=lambda fragment: fragment.path)
    return [[str(line) for line in fragment.to_table(columns=["line"])["line"].to_pylist()] for fragment in fragments]


def run(text: list[list[str]], workers: int = 1, lockstep: bool = True, processes: int = 1) -> Totals:
    """Count the words of ``text`` (a list of epochs, each a list of lines) on ``workers`` workers.

    With ``lockstep`` each worker waits for an epoch's results before sending the
    next epoch; without it, every epoch is sent at once.
    """
    return combine(execute(partial(worker_main, text=text, lockstep=lockstep), workers=workers, processes=processes))


def combine(outputs: list[list[tuple[int, str, int]]]) -> Totals:
    """Every worker's ``(epoch, word, total)`` triples, as running totals per epoch."""
    result: Totals = {}
    for produced in outputs:
        for epoch, word, total in produced:
            per_epoch = result.setdefault(epoch, {})
            if word in per_epoch:
                raise AssertionError(f"word {word!r} reported twice at epoch {epoch}")
            per_epoch[word] = total
    return result


def reference(text: list[list[str]]) -> Totals:
    """What :func:`run` should return, computed directly."""
    result: Totals = {}
    totals: Counter[str] = Counter()
    for epoch, lines in enumerate(text):
        counts = Counter(word for line in lines for word in line.split())
        totals.update(counts)
        if counts:
            result[epoch] = {word: totals[word] for word in counts}
    return result


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False, parents=[cluster_arguments()])
    parser.add_argument("--help", action="help", help="show this help message and exit")
    parser.add_argument("--epochs", type=int, default=4, help="number of epochs")
    parser.add_argument("--lines", type=int, default=50, help="lines per epoch")
    parser.add_argument("--seed", type=int, default=1, help="random seed for the text")
    parser.add_argument("--no-lockstep", action="store_true", help="send every epoch without waiting")
    parser.add_argument("--input", metavar="DIR", help="read lines from the files under DIR (a 'line' column)")
    parser.add_argument("--format", default="parquet", choices=("parquet", "csv", "jsonl"), help="format of --input")
    parser.add_argument("--output", metavar="DIR", help="write each epoch's (word, total) rows under DIR as Parquet")
    parser.add_argument("--write-sample", metavar="DIR", help="write the random text under DIR and exit")
    args = parser.parse_args(argv)

    if args.write_sample:
        write_sample(random_text(args.epochs, args.lines, args.seed), args.write_sample)
        print(f"wrote {args.epochs} Parquet file(s) of {args.lines} lines under {args.write_sample}")
        return 0
    if args.input:
        text = read_text(args.input, args.format)
        job = partial(files_main, source=args.input, format=args.format, output=args.output)
    else:
        text = random_text(args.epochs, args.lines, args.seed)
        job = partial(worker_main, text=text, lockstep=not args.no_lockstep)
    result = combine(execute_from_args(job, argv))
    for epoch in sorted(result):
        top = sorted(result[epoch].items(), key=lambda item: (-item[1], item[0]))[:4]
        shown = ", ".join(f"{word}={total}" for word, total in top)
        print(f"epoch {epoch}: {len(result[epoch])} words updated; top totals: {shown}")
    ok = result == reference(text)
    print(f"{args.workers * args.processes} worker(s); matches reference: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
