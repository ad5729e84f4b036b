"""The wordcount dataflow of the ``cost`` workload (``benchmarks/cost.py``).

The dataflow splits lines into ``(word, 1)``, exchanges by word and counts per
epoch with a notificator (record-wise, with a local combiner, or columnar);
:func:`line` makes the ``i``-th line of a generated text.
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(ROOT / "examples") not in sys.path:  # wordcount_columnar's split, for the columnar variant
    sys.path.append(str(ROOT / "examples"))

from runtime import Worker  # noqa: E402
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


def word_pairs(line: str) -> list[tuple[str, int]]:
    """A ``(word, 1)`` pair for each word of ``line``: the record-wise wordcount's ``flat_map`` function."""
    return [(word, 1) for word in line.split()]


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
            pairs = text.flat_map(word_pairs, name="Split")
        probe = pairs.unary_notify(Exchange(lambda pair: pair[0]), "Count", count).probe()
        return handle, probe

    handle, probe = worker.dataflow(build, name="wordcount")
    return handle, probe, counted
