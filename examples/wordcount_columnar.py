"""Streaming word count written columnar: NumPy batches of words, exchanged by a vectorised hash.

The same computation as ``examples/wordcount.py``, on the same text and with the
same flags and output, but each operator handles a whole batch per call:

* each worker sends its share of an epoch's lines as one NumPy array of strings
  (dtype ``str``, which the wire between processes carries as raw memory;
  ``send_batch`` of an array is one message);
* ``map_batch`` splits all the lines of a batch into one array of words;
* ``exchange_batch`` routes the words by their own value: the word's stable hash
  is computed once per distinct word per batch, and each worker receives one
  array of words per epoch from each worker (never single records);
* the counting operator counts a whole array with one ``Counter`` call and,
  once the epoch is complete, emits ``(word, total so far)`` for each word seen
  in it, exactly as the record-wise version does.

Run it with ``python examples/wordcount_columnar.py -w 2`` (or ``-n 2 -w 1`` for
two processes); it checks its answer against the same plain-Python reference.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from wordcount import Totals, combine, random_text, reference  # noqa: E402

from runtime import Worker, execute, execute_from_args  # noqa: E402
from runtime.cluster import cluster_arguments  # noqa: E402
from scopes import Notificator, OperatorInput, OperatorOutput, Pipeline, ScopeBuilder, Stream  # noqa: E402


def split_lines(lines: np.ndarray) -> np.ndarray:
    """All the words of a batch of lines, as one NumPy ``str`` array (one call per batch)."""
    return np.array(" ".join(lines.tolist()).split(), dtype=str)


def count_words(words: Stream) -> Stream:
    """Running totals of a stream of word arrays, emitted as ``(word, total)`` once each epoch is done."""
    pending: dict[Any, Counter[str]] = {}
    totals: Counter[str] = Counter()

    def logic(input: OperatorInput, output: OperatorOutput, notificator: Notificator) -> None:
        for ref, batch in input:
            counts = pending.get(ref.time)
            if counts is None:
                counts = pending[ref.time] = Counter()
                notificator.notify_at(ref.retain())
            counts.update(batch.tolist())  # one C-speed count per batch
        for capability in notificator:
            counts = pending.pop(capability.time)
            totals.update(counts)
            output.session(capability).give_batch([(word, totals[word]) for word in counts])

    return words.exchange_batch(lambda batch: batch, name="ByWord").unary_notify(Pipeline, "Count", logic)


def worker_main(worker: Worker, text: list[list[str]], lockstep: bool = True) -> list[tuple[int, str, int]]:
    """Build and drive the dataflow on one worker; return the ``(epoch, word, total)`` it produced."""
    produced: list[tuple[int, str, int]] = []

    def collect(time: Any, batch: list[tuple[str, int]]) -> None:
        produced.extend((time, word, total) for word, total in batch)

    def build(scope: ScopeBuilder) -> Any:
        handle, lines = scope.new_input("Lines")
        words = lines.map_batch(split_lines, name="Split")
        probe = count_words(words).inspect_batch(collect, name="Collect").probe()
        return handle, probe

    handle, probe = worker.dataflow(build, name="wordcount_columnar")
    for epoch, lines in enumerate(text):
        mine = lines[worker.index :: worker.peers]
        if mine:
            handle.send_batch(np.array(mine, dtype=str))
        handle.advance_to(epoch + 1)
        if lockstep:
            worker.step_while(lambda: probe.less_than(handle.time))
    handle.close()
    worker.step_while(lambda: not probe.done())
    return produced


def run(text: list[list[str]], workers: int = 1, lockstep: bool = True, processes: int = 1) -> Totals:
    """Count the words of ``text`` (a list of epochs, each a list of lines) on ``workers`` workers."""
    return combine(execute(partial(worker_main, text=text, lockstep=lockstep), workers=workers, processes=processes))


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (the flags and output of ``examples/wordcount.py``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False, parents=[cluster_arguments()])
    parser.add_argument("--help", action="help", help="show this help message and exit")
    parser.add_argument("--epochs", type=int, default=4, help="number of epochs")
    parser.add_argument("--lines", type=int, default=50, help="lines per epoch")
    parser.add_argument("--seed", type=int, default=1, help="random seed for the text")
    parser.add_argument("--no-lockstep", action="store_true", help="send every epoch without waiting")
    args = parser.parse_args(argv)

    text = random_text(args.epochs, args.lines, args.seed)
    result = combine(execute_from_args(partial(worker_main, text=text, lockstep=not args.no_lockstep), argv))
    for epoch in sorted(result):
        top = sorted(result[epoch].items(), key=lambda item: (-item[1], item[0]))[:4]
        shown = ", ".join(f"{word}={total}" for word, total in top)
        print(f"epoch {epoch}: {len(result[epoch])} words updated; top totals: {shown}")
    ok = result == reference(text)
    print(f"{args.workers * args.processes} worker(s); matches reference: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
