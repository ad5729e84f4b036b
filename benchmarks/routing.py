"""Benchmark: the record-wise exchange's routing cost per record, and two checkouts side by side.

An :class:`~scopes.channels.ExchangePusher` among 2 (or more) workers routes
batches of ``(key, 1)`` pairs by ``pair[0]``, the wordcount's key: words from a
5,000-word vocabulary (fresh ``str`` objects, as ``str.split`` makes them),
integers below a million, and ``(int, str)`` tuples.  The pushers downstream
discard what they get, so the figure is the routing alone (the key function's
call included), in CPU nanoseconds per record, best of several rounds through
one pusher (as one dataflow's exchange routes every epoch) (``time.process_time``, so that
other processes on a loaded machine count less).

From ``benchmarks/run.py``: ``routing_ns_per_record(kind, batch, peers)`` measures
the checkout that is imported; ``compare_checkouts(roots)`` runs each checkout
in its own interpreter, alternating, and returns ``{root: {case: ns}}`` (best of
the rounds), for a before/after table::

    python benchmarks/routing.py /work/main /work/wt/perf
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CASES = [("str", 48_000), ("str", 1_000), ("str", 128), ("int", 48_000), ("int", 128), ("tuple", 48_000)]
"""(kind of key, records per batch): the wordcount's batches are about 48,000 pairs per epoch and worker."""


def make_keys(kind: str, count: int, seed: int = 1) -> list[Any]:
    """``count`` keys of ``kind`` ("str", "int" or "tuple"); strings are built afresh, like ``str.split``'s."""
    rng = random.Random(seed)
    if kind == "str":
        return " ".join(f"word{rng.randrange(5000)}" for _ in range(count)).split()
    if kind == "int":
        return [rng.randrange(1_000_000) for _ in range(count)]
    if kind == "tuple":
        return [(rng.randrange(100), f"w{rng.randrange(50)}") for _ in range(count)]
    raise ValueError(f"unknown kind of key {kind!r}; expected str, int or tuple")


class _Discard:
    """A pusher that drops what it receives."""

    def push(self, time: Any, batch: Any) -> None:
        """Drop the batch."""


def routing_ns_per_record(kind: str, batch: int, peers: int = 2, records: int = 96_000, rounds: int = 5) -> float:
    """CPU ns per record to route ``records`` pairs in batches of ``batch`` among ``peers`` (best of ``rounds``)."""
    from scopes.channels import ExchangePusher  # the checkout first on sys.path

    pairs = [(key, 1) for key in make_keys(kind, records)]
    batches = [pairs[start : start + batch] for start in range(0, records, batch)]
    best = float("inf")
    exchange = ExchangePusher(lambda pair: pair[0], [_Discard() for _ in range(peers)])  # one per run, as in a dataflow
    for _ in range(rounds):
        if kind == "str":  # fresh strings, whose hashes are not cached yet, as every epoch's split makes them
            batches = [[(word, 1) for word in " ".join(key for key, _ in part).split()] for part in batches]
        began = time.process_time()
        for part in batches:
            exchange.push(0, part)
        exchange.flush()
        best = min(best, time.process_time() - began)
    return best * 1e9 / records


def measure_all(peers: int = 2) -> dict[str, float]:
    """:func:`routing_ns_per_record` for every case of :data:`CASES`, keyed ``"kind/batch"``."""
    return {f"{kind}/{batch}": routing_ns_per_record(kind, batch, peers) for kind, batch in CASES}


def compare_checkouts(roots: list[str], rounds: int = 3, peers: int = 2) -> dict[str, dict[str, float]]:
    """Run :func:`measure_all` in a fresh interpreter per checkout, alternating; best per case and checkout."""
    best: dict[str, dict[str, float]] = {root: {} for root in roots}
    code = (  # this file is run by path, so that each checkout's own scopes is the one imported
        "import json, runpy, sys; sys.path.insert(0, sys.argv[1]); "
        f"space = runpy.run_path({__file__!r}); "
        "print(json.dumps(space['measure_all'](int(sys.argv[2]))))"
    )
    for _ in range(rounds):
        for root in roots:
            env = dict(os.environ, PYTHONPATH=root)
            out = subprocess.run(
                [sys.executable, "-c", code, root, str(peers)],
                env=env,
                cwd=root,
                capture_output=True,
                text=True,
                timeout=600,
                check=True,
            )
            for case, value in json.loads(out.stdout.strip().splitlines()[-1]).items():
                best[root][case] = min(best[root].get(case, float("inf")), value)
    return best


def main(argv: list[str]) -> int:
    """Print a before/after table for the checkouts named on the command line (default: this one)."""
    roots = argv or [str(ROOT)]
    load = os.getloadavg()
    results = compare_checkouts(roots)
    print("| case | " + " | ".join(roots) + " | ratio |")
    print("|---|" + "---|" * (len(roots) + 1))
    for case in results[roots[0]]:
        values = [results[root][case] for root in roots]
        ratio = f"{values[-1] / values[0]:.2f}" if len(values) > 1 else ""
        print(f"| {case} | " + " | ".join(f"{value:.0f} ns" for value in values) + f" | {ratio} |")
    print(f"load average before: {load[0]:.2f}; after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
