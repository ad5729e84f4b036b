"""Columnar batches on the wire: encode + frame + decode cost, and a 2-process exchange against 1 process.

``python benchmarks/wire_columnar.py`` prints two tables:

1. the round trip of one batch through the wire (``encode_batch``, ``frame``,
   ``FrameReader.feed``, ``decode_batch``) for a numpy structured array, an
   Arrow record batch and the same rows as a list of tuples, with the
   throughput in MB/s of the array's memory and the time of a plain
   ``bytes`` copy of that memory for scale;
2. an exchange by key column of numpy / Arrow batches (``exchange_batch``)
   and of the same rows as records (``exchange``), on 1 process and on 2
   processes of 1 worker, median of the repetitions.

Times on a shared machine are noisy: compare the ratios within one run.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for entry in (ROOT, ROOT / "tests"):
    if str(entry) not in sys.path:
        sys.path.insert(0, str(entry))

import numpy as np  # noqa: E402
from helpers import columnar_helpers  # noqa: E402

from runtime import execute  # noqa: E402
from runtime.communication.wire import FrameReader, decode_batch, encode_batch, frame  # noqa: E402

RECV_SIZE = 1 << 20
"""What the TCP reader receives at once."""


def best_of(repeat: int, function: Any) -> float:
    """The fastest of ``repeat`` runs of ``function()``, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def round_trip(batch: Any) -> Any:
    """What two processes do: encode, join head and payload, read in 1 MB pieces (as the TCP reader), decode."""
    path, payload = encode_batch(batch)
    data = memoryview(frame([0, 1, 2, 3, 0, path], payload))
    reader = FrameReader()
    frames = []
    for start in range(0, len(data), RECV_SIZE):
        frames.extend(reader.feed(data[start : start + RECV_SIZE]))
    ((header, body),) = frames
    return decode_batch(header[5], body)


def wire_table(rows: int, repeat: int) -> None:
    array = columnar_helpers.make_batch("numpy", 0, 0, rows)
    arrow = columnar_helpers.make_batch("arrow", 0, 0, rows)
    records = [tuple(row) for row in array.tolist()]
    memory = array.nbytes
    copy = best_of(repeat, lambda: bytes(memoryview(array).cast("B")))
    print(f"\nwire round trip of one batch of {rows:,} rows ({memory / 1e6:.1f} MB as numpy), best of {repeat}")
    print(f"{'batch':<28}{'encode':>10}{'decode':>10}{'round trip':>12}{'MB/s':>9}{'x copy':>8}")
    for name, batch in (("numpy structured array", array), ("Arrow record batch", arrow), ("list of tuples", records)):
        encode = best_of(repeat, lambda b=batch: encode_batch(b))
        path, payload = encode_batch(batch)
        decode = best_of(repeat, lambda p=path, d=payload: decode_batch(p, d))
        total = best_of(repeat, lambda b=batch: round_trip(b))
        print(
            f"{name:<28}{encode * 1e3:>8.2f}ms{decode * 1e3:>8.2f}ms{total * 1e3:>10.2f}ms"
            f"{memory / total / 1e6:>9.0f}{total / copy:>8.1f}"
        )
    print(f"{'(bytes copy of the memory)':<28}{'':>10}{'':>10}{copy * 1e3:>10.2f}ms")


def exchange_seconds(kind: str, processes: int, batches: int, rows: int) -> tuple[float, Any]:
    """Seconds to exchange and sum on 2 workers (1 process of 2 threads, or 2 processes), and the result."""
    if kind == "records":
        main = functools.partial(columnar_helpers.exchange_records, batches=batches, rows=rows)
    else:
        main = functools.partial(columnar_helpers.exchange_and_sum, kind=kind, batches=batches, rows=rows)
    start = time.perf_counter()
    results = execute(main, workers=2 // processes, processes=processes, stall_timeout=60)
    return time.perf_counter() - start, sorted(x for per_worker in results for x in per_worker)


def exchange_table(batches: int, rows: int, repeat: int) -> None:
    print(f"\nexchange by key of {batches} batches x {rows:,} rows per worker, 2 workers; median of {repeat}")
    print("(start-up: the same with 1 batch of 10 rows; the rest is the work itself)")
    columns = f"{'1 process, 2 threads':>22}{'2 processes':>14}{'start-up':>10}{'2 proc. - start':>17}"
    print(f"{'batches':<10}{columns}{'equal':>7}")
    for kind in ("numpy", "arrow", "records"):
        one, two, start = [], [], []
        same = True
        for _ in range(repeat):
            seconds, first = exchange_seconds(kind, 1, batches, rows)
            one.append(seconds)
            seconds, second = exchange_seconds(kind, 2, batches, rows)
            two.append(seconds)
            start.append(exchange_seconds(kind, 2, 1, 10)[0])
            same = same and first == second
        one_s, two_s, start_s = (statistics.median(x) for x in (one, two, start))
        print(f"{kind:<10}{one_s:>20.2f} s{two_s:>12.2f} s{start_s:>8.2f} s{two_s - start_s:>15.2f} s{str(same):>7}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the wire round-trip batch")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batches", type=int, default=20, help="batches per worker in the exchange")
    parser.add_argument("--batch-rows", type=int, default=50_000, help="rows per batch in the exchange")
    args = parser.parse_args()
    np.random.seed(0)
    wire_table(args.rows, args.repeat)
    exchange_table(args.batches, args.batch_rows, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
