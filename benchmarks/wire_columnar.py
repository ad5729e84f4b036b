"""Columnar batches on the wire: encode + frame + decode cost, and a 2-process exchange against 1 process.

``python benchmarks/wire_columnar.py`` prints two tables:

1. the round trip of one batch through the wire (``encode_batch``, ``frame``,
   ``FrameReader.feed``, ``decode_batch``) for a numpy structured array, an
   Arrow record batch and the same rows as a list of tuples, with the
   throughput in MB/s of the array's memory and the time of a plain
   ``bytes`` copy of that memory for scale;
2. an exchange by key column of numpy / Arrow batches (``exchange_batch``)
   and of the same rows as records (``exchange``), on 1 process and on 2
   processes of 1 worker, median of the repetitions;
3. the keyed MAC's cost (:func:`mac_rates`): MB/s of splitting frames alone,
   of opening sealed records and splitting them, and of sealing.

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
from runtime.communication.wire import FrameReader, decode_batch, encode_batch, frame, frame_head  # noqa: E402

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


def mac_rates(megabytes: int, repeat: int) -> dict[str, list[float]]:
    """MB/s of the TCP path over ``megabytes`` of 64 KiB frames, with and without the keyed MAC (issue 27).

    ``frames only``: what the reader did before records were sealed (copy each
    received 1 MB piece, as ``recv_into`` does, and split it into frames);
    ``opened and split``: the same through :class:`~runtime.communication.seal.Opener`
    (each record's MAC checked first); ``sealed``: the sender's
    :meth:`~runtime.communication.seal.Sealer.seal` (each record's MAC computed).
    Every run's rate is returned, one list per variant.
    """
    from runtime.communication.seal import Opener, Sealer, session_keys

    key = session_keys("benchmark", b"transcript")[0]
    payload = bytes(65536 - 32)
    one = frame_head([0, 1, 2, 3, 0, 0], len(payload)) + payload
    data = memoryview(one * (megabytes * (1 << 20) // len(one)))
    stream = memoryview(b"".join(bytes(piece) for piece in Sealer(key).seal([data])))

    def frames_only() -> None:
        reader, buffer = FrameReader(), memoryview(bytearray(RECV_SIZE))
        for start in range(0, len(data), RECV_SIZE):
            piece = data[start : start + RECV_SIZE]
            buffer[: len(piece)] = piece
            for _ in reader.feed(buffer[: len(piece)]):
                pass

    def opened() -> None:
        reader, opener, position = FrameReader(), Opener(key), 0
        while position < len(stream):
            space = opener.space()
            take = min(len(space), RECV_SIZE, len(stream) - position)
            space[:take] = stream[position : position + take]
            position += take
            for body in opener.received(take):
                for _ in reader.feed(body):
                    pass

    def sealed() -> None:
        Sealer(key).seal([data])

    size = len(data) / 1e6
    variants = {"frames only": frames_only, "opened and split": opened, "sealed": sealed}
    return {name: [size / best_of(1, run) for _ in range(repeat)] for name, run in variants.items()}


def mac_table(megabytes: int, repeat: int) -> None:
    """Print :func:`mac_rates`: median MB/s of each variant."""
    print(f"\nkeyed MAC on {megabytes} MB of 64 KiB frames (MB/s, median of {repeat})")
    for name, rates in mac_rates(megabytes, repeat).items():
        print(f"  {name:<18} {statistics.median(rates):10.0f}")


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
    mac_table(256, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
