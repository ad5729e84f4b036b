"""How fast ``stable_hash_array`` hashes a list of keys (what ``exchange_batch`` does when a key function returns a
list), beside the general path and a ``stable_hash`` call per key, in one run.  A tool run by hand::

    python benchmarks/key_hashing.py              # nanoseconds a key, batches of 1,000 keys
    python benchmarks/key_hashing.py --rows 100000

The general path is what every list took before lists had paths of their own:
an object array, hashed with one ``stable_hash`` call per distinct key of the
batch.  Words are drawn from 5,000; the string cache is warm, as it is from the
second batch of a stream on.
"""

from __future__ import annotations

import argparse
import random
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from scopes.hashing import stable_hash, stable_hash_array  # noqa: E402


def nanoseconds_a_key(function: Callable[[], Any], keys: int, repeat: int = 7) -> float:
    """The best of ``repeat`` timings of ``function`` (about 0.2 s each), per key."""
    number = max(1, 200_000 // keys)
    return min(timeit.repeat(function, number=number, repeat=repeat)) / number / keys * 1e9


def measure(rows: int) -> dict[str, dict[str, float]]:
    """Nanoseconds a key for a list of ``rows`` ints and one of ``rows`` words, by each way of hashing them."""
    rng = random.Random(1)
    batches = {
        "ints": [rng.randrange(-(2**40), 2**40) for _ in range(rows)],
        "words": [f"word{rng.randrange(5_000)}" for _ in range(rows)],
    }
    found: dict[str, dict[str, float]] = {}
    for kind, keys in batches.items():
        objects = np.empty(len(keys), dtype=object)
        objects[:] = keys
        expected = [stable_hash(key) for key in keys]
        if stable_hash_array(keys).tolist() != expected or stable_hash_array(objects).tolist() != expected:
            raise AssertionError(f"the hashes of the {kind} disagree with stable_hash")
        found[kind] = {
            "list": nanoseconds_a_key(lambda keys=keys: stable_hash_array(keys), rows),
            "general path": nanoseconds_a_key(lambda objects=objects: stable_hash_array(objects), rows),
            "stable_hash per key": nanoseconds_a_key(lambda keys=keys: [stable_hash(key) for key in keys], rows),
        }
    return found


def main() -> None:
    """Print a table: ns a key by each way, and the speed-up of the list's own path."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000, help="keys per batch (default 1,000)")
    args = parser.parse_args()
    if args.rows < 1:
        parser.error(f"--rows must be at least 1 (got {args.rows})")
    print("| keys | list (ns/key) | general path | stable_hash per key | list vs general |")
    print("|---|---:|---:|---:|---:|")
    for kind, times in measure(args.rows).items():
        speedup = times["general path"] / times["list"]
        print(
            f"| {args.rows:,} {kind} | {times['list']:.1f} | {times['general path']:.1f} | "
            f"{times['stable_hash per key']:.1f} | {speedup:.1f}× |"
        )


if __name__ == "__main__":
    main()
