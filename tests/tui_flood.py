"""A sender for the load test: streams synthetic events to a viewer at a fixed rate.

``python tests/tui_flood.py PORT RATE SECONDS``: connects to ``127.0.0.1:PORT``,
sends the synthetic dataflow's structure, then ``RATE`` events per second
(scheduling, messages and pointstamp changes) for ``SECONDS``, in batches every
10 ms, the way a program's TCP sink does.  One batch is encoded once and sent
repeatedly, so the sender itself keeps up.
"""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from viz_synthetic import running  # noqa: E402

from runtime.instrument import K_MESSAGES, K_POINTSTAMPS, K_SCHEDULE, _header, _pack  # noqa: E402
from scopes.timestamp import Product  # noqa: E402


def main() -> None:
    """Send the events."""
    port, rate, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    sock = socket.create_connection(("127.0.0.1", port))
    script = running(workers=2)
    sock.sendall(_header(0) + b"".join(_pack(raw) for raw in script.raw))
    seq = {0: 1000, 1: 1000}
    kinds = [
        lambda w, s, t: (K_SCHEDULE, w, s, t, (0, 2, 2), t, 0.0001),
        lambda w, s, t: (K_MESSAGES, w, s, t, (0, 2, 2), (((Product(0, 0), 5),), ()), (((Product(0, 0), 5),),)),
        lambda w, s, t: (K_POINTSTAMPS, w, s, t, (0, 2), ((5, Product(0, 1), 1),)),
        lambda w, s, t: (K_POINTSTAMPS, w, s, t, (0, 2), ((5, Product(0, 1), -1),)),
    ]
    per_batch = max(1, rate // 100)
    start = time.monotonic()
    sent = 0
    chunk = []
    for i in range(per_batch):  # encoded once, sent again and again (Python could not encode 100,000/s)
        worker = i & 1
        seq[worker] += 1
        chunk.append(_pack(kinds[i % 4](worker, seq[worker], start)))
    encoded = b"".join(chunk)
    while time.monotonic() - start < seconds:
        sock.sendall(encoded)
        sent += per_batch
        delay = start + sent / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    sock.close()
    print(sent)


if __name__ == "__main__":
    main()
