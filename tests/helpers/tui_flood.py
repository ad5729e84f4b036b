"""A sender for the load test: streams synthetic events to a viewer at a fixed rate.

``python tests/helpers/tui_flood.py PORT RATE SECONDS``: connects to ``127.0.0.1:PORT``,
sends the synthetic dataflow's structure, then ``RATE`` events per second
(scheduling, messages and pointstamp changes) for ``SECONDS``, in chunks every
10 ms, the way a program's TCP sink does.  Python could not encode 100,000
events a second besides everything else, so one chunk is encoded once and sent
again and again, with every event's time field rewritten to the moment the
chunk leaves (``time.monotonic()``, the clock the viewer uses too): the viewer's
newest event time then says how far behind it truly is.

Prints ``SENT SECONDS IN_SEND``: the events sent after the structure, how long
that took, and how long of it ``sendall`` took: a viewer that does not read fast
enough fills the socket's buffers and makes ``sendall`` wait, so the test checks
both that the rate was achieved and that the sender hardly ever waited.
"""

from __future__ import annotations

import socket
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/, for the helpers package
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))  # the repository

from helpers.recording_v1 import header as _header  # noqa: E402
from helpers.recording_v1 import pack as _pack  # noqa: E402
from helpers.viz_synthetic import running  # noqa: E402
from runtime.instrument import K_MESSAGES, K_POINTSTAMPS, K_SCHEDULE  # noqa: E402
from scopes.timestamp import Product  # noqa: E402

PLACEHOLDER = 1234567.890625  # a time no event carries: marks where each event's time is encoded


def chunk_pieces(count: int) -> list[bytes]:
    """``count`` encoded events split around their time fields (join them with an encoded time)."""
    kinds = [
        lambda w, s, t: (K_SCHEDULE, w, s, t, (0, 2, 2), t, 0.0001),
        lambda w, s, t: (K_MESSAGES, w, s, t, (0, 2, 2), (((Product(0, 0), 5),), ()), (((Product(0, 0), 5),),)),
        lambda w, s, t: (K_POINTSTAMPS, w, s, t, (0, 2), ((5, Product(0, 1), 1),)),
        lambda w, s, t: (K_POINTSTAMPS, w, s, t, (0, 2), ((5, Product(0, 1), -1),)),
    ]
    seq = {0: 1000, 1: 1000}
    encoded = []
    for i in range(count):
        worker = (i >> 2) & 1  # every worker logs every kind, and its +1 and -1 changes cancel
        seq[worker] += 1
        # the scheduling start is not rewritten: only the event time (the fourth field) is the placeholder
        raw = kinds[i % 4](worker, seq[worker], PLACEHOLDER)
        if raw[0] == K_SCHEDULE:
            raw = (*raw[:5], 0.5, raw[6])
        encoded.append(_pack(raw))
    pieces = b"".join(encoded).split(struct.pack(">d", PLACEHOLDER))
    assert len(pieces) == count + 1
    return pieces


def main() -> None:
    """Send the events."""
    port, rate, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    sock = socket.create_connection(("127.0.0.1", port))
    script = running(workers=2)
    sock.sendall(_header(0) + b"".join(_pack(raw) for raw in script.raw))
    per_chunk = max(1, rate // 100)
    pieces = chunk_pieces(per_chunk)
    start = time.monotonic()
    sent = 0
    in_send = 0.0
    while time.monotonic() - start < seconds:
        chunk = struct.pack(">d", time.monotonic()).join(pieces)
        before = time.monotonic()
        sock.sendall(chunk)
        in_send += time.monotonic() - before
        sent += per_chunk
        delay = start + sent / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    elapsed = time.monotonic() - start
    sock.close()
    print(sent, f"{elapsed:.3f}", f"{in_send:.3f}")


if __name__ == "__main__":
    main()
