"""What bounds the speed-up of 2 processes over 1 (issue 18): the machine, and the exchange's own costs.

Two measurements, each in CPU time so that a loaded machine distorts them less,
turned into a bound that the report prints beside each COST goal it misses:

* :func:`machine_ceiling` -- the same pure-Python work (a ``Counter`` over
  fresh words, the wordcount's inner loop) in 1 process, then in 2 processes at
  once: the speed-up *any* 2-process program could reach on this machine, given
  how its CPUs share caches and memory bandwidth.
* :func:`exchange_costs` -- nanoseconds per record that crossing an exchange
  adds, at the engine's message size (1,024 lines, 8,192 ``(word, 1)`` pairs):
  routing (the key function's call, the destination, the split), encoding a
  remote batch, and decoding it; and for columnar batches of words, hashing the
  keys and taking each destination's rows, encoding and decoding.

:func:`bound` combines them: with 2 processes each process does half the work
(``w`` per record, the 1-process time per record), routes half the records and
encodes or decodes half of those (a random key stays local half the time), so
the best speed-up is ``w / (w / 2 + route / 2 + (encode + decode) / 4)``, times
the machine's ceiling over 2.
"""

from __future__ import annotations

import multiprocessing
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

WORDS = 2_000_000
"""Words in the ceiling measurement's work, per process."""


def _count_words(seed: int, rounds: int, words: int) -> float:
    """CPU seconds to count ``words`` fresh words ``rounds`` times (best round)."""
    import random

    rng = random.Random(seed)
    text = " ".join(f"word{rng.randrange(5000)}" for _ in range(words))
    best = float("inf")
    for _ in range(rounds):
        began = time.process_time()
        counts: Counter[str] = Counter()
        for word in text.split():
            counts[word] += 1
        best = min(best, time.process_time() - began)
    return best


def _child(seed: int, rounds: int, words: int, results: Any) -> None:
    results.put(_count_words(seed, rounds, words))


def machine_ceiling(rounds: int = 3, words: int = WORDS) -> float:
    """The speed-up of 2 processes over 1 on the same pure-Python work: at most 2, less if the CPUs interfere.

    Each process counts its own ``words`` words; 1 process alone, then 2 at
    once (started with ``spawn``, as pytimely's processes are).  The ratio of
    CPU per word alone to CPU per word side by side, times 2.
    """
    context = multiprocessing.get_context("spawn")
    alone_queue = context.Queue()
    alone = context.Process(target=_child, args=(1, rounds, words, alone_queue))
    alone.start()
    single = alone_queue.get(timeout=600)
    alone.join(timeout=60)
    pair_queue = context.Queue()
    pair = [context.Process(target=_child, args=(seed, rounds, words, pair_queue)) for seed in (2, 3)]
    for process in pair:
        process.start()
    both = [pair_queue.get(timeout=600) for _ in pair]
    for process in pair:
        process.join(timeout=60)
    return 2 * single / max(both)


@dataclass(frozen=True)
class ExchangeCosts:
    """Nanoseconds per record (or row) that an exchange between 2 processes adds, by step."""

    route: float
    """Routing a record: the key function, its destination, and the split by destination."""
    encode: float
    """Encoding a record bound for the other process."""
    decode: float
    """Decoding a record received from the other process."""


def _best(run: Any, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        began = time.process_time()
        run()
        best = min(best, time.process_time() - began)
    return best


def exchange_costs(columnar: bool, records: int = 400_000, rounds: int = 5) -> ExchangeCosts:
    """CPU ns per record of the wordcount's exchange between 2 workers, at the engine's message size."""
    import random

    from runtime.communication.wire import decode_batch, encode_batch
    from scopes.builder import BATCH_SIZE
    from scopes.channels import ExchangeBatchPusher, ExchangePusher

    class Keep:
        def __init__(self) -> None:
            self.batches: list[Any] = []

        def push(self, time: Any, batch: Any) -> None:
            self.batches.append(batch)

    rng = random.Random(7)
    words = [f"word{rng.randrange(5000)}" for _ in range(records)]
    chunk = BATCH_SIZE * 8  # a message of BATCH_SIZE lines of 8 words
    if columnar:
        import numpy as np

        from scopes.channels import BatchKeys

        epoch = records // 2  # the COST wordcount sends each epoch's share as one array (about 200,000 words)
        batches: list[Any] = [np.array(words[start : start + epoch]) for start in range(0, records, epoch)]

        def route() -> list[Any]:
            pushers = [Keep(), Keep()]
            exchange = ExchangeBatchPusher(BatchKeys(lambda batch: batch, "limits"), pushers)
            for batch in batches:
                exchange.push(0, batch)
            exchange.flush()
            return pushers[1].batches
    else:
        fresh_rounds = [  # new strings for every round, as every epoch's split makes them; built before timing
            [
                [(word, 1) for word in " ".join(words[start : start + chunk]).split()]
                for start in range(0, records, chunk)
            ]
            for _ in range(rounds + 1)
        ]

        def route() -> list[Any]:
            pushers = [Keep(), Keep()]
            exchange = ExchangePusher(lambda pair: pair[0], pushers)
            for batch in fresh_rounds.pop():
                exchange.push(0, batch)
                exchange.flush()
            return pushers[1].batches

    routed = route()
    remote = sum(len(batch) for batch in routed)
    encoded = [encode_batch(batch) for batch in routed]
    per = 1e9
    return ExchangeCosts(
        route=_best(route, rounds) * per / records,
        encode=_best(lambda: [encode_batch(batch) for batch in routed], rounds) * per / remote,
        decode=_best(lambda: [decode_batch(path, data) for path, data in encoded], rounds) * per / remote,
    )


def bound(one_process_seconds: float, records: int, costs: ExchangeCosts, ceiling: float) -> float:
    """The best speed-up of 2 processes over 1 that the exchange's costs and the machine's ceiling allow."""
    work = one_process_seconds * 1e9 / records
    per_process = work / 2 + costs.route / 2 + (costs.encode + costs.decode) / 4
    return work / per_process * ceiling / 2


def explain(label: str, one_process_seconds: float, records: int, costs: ExchangeCosts, ceiling: float) -> str:
    """One Markdown sentence: the bound for ``label`` and what it is made of."""
    work = one_process_seconds * 1e9 / records
    return (
        f"- **{label}**: 1 process spends {work:.0f} ns per record on everything; crossing the exchange adds "
        f"{costs.route:.0f} ns to route a record and {costs.encode:.0f} + {costs.decode:.0f} ns to encode and "
        f"decode one that goes to the other process. With each process doing half the work, routing half the "
        f"records and sending or receiving half of those, 2 processes can be at most "
        f"{bound(one_process_seconds, records, costs, 2.0):.2f}× faster on an ideal machine, and "
        f"{bound(one_process_seconds, records, costs, ceiling):.2f}× on this one (its ceiling: {ceiling:.2f}×)."
    )


def explain_waiting(label: str, one: tuple[float, float], two: tuple[float, float], goal: float) -> str:
    """One Markdown sentence: how much of 2 processes' time is CPU and how much is waiting.

    ``one`` and ``two`` are ``(wall seconds, CPU seconds of the busiest process)`` medians of the
    same run, without reading.  If the busiest process only computed, the speed-up would be
    ``one wall / two CPU``; what the wall time holds beyond that CPU is the process waiting.
    """
    one_wall, one_cpu = one
    two_wall, two_cpu = two
    cpu_bound = one_wall / two_cpu if two_cpu else float("inf")
    waiting = max(two_wall - two_cpu, 0.0)
    needed = one_wall / goal
    return (
        f"- **{label}, CPU against waiting**: 1 process takes {_seconds(one_wall)} ({_seconds(one_cpu)} of CPU); "
        f"of 2 processes' {_seconds(two_wall)} the busier spends {_seconds(two_cpu)} computing "
        f"({two_cpu / one_cpu:.2f}× 1 process's CPU, where an even split of the work would be 0.50×) and "
        f"{_seconds(waiting)} waiting (in its profile below, the lock `acquire`). Computing alone, 2 processes "
        f"would be {cpu_bound:.2f}× as fast as 1; the goal of {goal:g}× needs them done in {_seconds(needed)}."
    )


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if value >= 1 else f"{value * 1e3:.0f} ms"


def _profiled(worker: Any, target: str, kwargs: dict[str, Any], top: int) -> list[tuple[str, int, float, float]]:
    """Run ``target`` (``"module:function"``) on ``worker`` under cProfile; its top functions by own time."""
    import cProfile
    import importlib
    import pstats

    module, _, name = target.partition(":")
    function = getattr(importlib.import_module(module), name)
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        function(worker, **kwargs)
    finally:
        profiler.disable()
    raw = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    entries = sorted(raw.items(), key=lambda item: item[1][2], reverse=True)[:top]
    lines = []
    for (file, line, function), (_, calls, own, cumulative, _) in entries:
        where = function if file == "~" else f"{file.rsplit('/', 1)[-1]}:{line}({function})"
        lines.append((where, calls, own, cumulative))
    return lines


def profile_two_processes(title: str, target: str, kwargs: dict[str, Any], top: int = 8) -> list[str]:
    """Markdown: the top functions by own time of worker 0 when ``target(worker, **kwargs)`` runs on 2 processes.

    ``target`` is ``"module:function"``, importable in every process (the arguments of an ``execute`` travel).
    """
    from functools import partial

    from runtime import execute

    results = execute(partial(_profiled, target=target, kwargs=kwargs, top=top), workers=1, processes=2)
    lines = [
        f"Profile of {title}, worker 0 of 2 processes (cProfile, one untimed run, reading included; "
        f"top {top} by own time):",
        "",
        "| function | calls | own s | cumulative s |",
        "|---|---:|---:|---:|",
    ]
    for where, calls, own, cumulative in results[0]:
        lines.append(f"| `{where}` | {calls} | {own:.3f} | {cumulative:.3f} |")
    return lines


if __name__ == "__main__":
    print(f"machine ceiling: {machine_ceiling():.2f}x")
    for columnar in (False, True):
        print("columnar" if columnar else "record-wise", exchange_costs(columnar))
