"""Replay streams captured by ``capture_send.py`` on a possibly different number of workers.

``source_peers`` streams were captured; worker ``i`` of this computation replays
streams ``i, i + peers, i + 2 * peers, ...``, listening for stream ``s`` on
``host:port + s`` (or reading ``LOG_DIR/stream-s.log`` with ``--log-dir``).
Every replayed record is printed as ``replayed: x``; at the end the program
checks that each of the ``source_peers`` streams delivered ``0 .. records - 1``.

    python examples/capture_recv.py 5 -w 3      # in one shell
    python examples/capture_send.py -w 5        # in another
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime import Worker, execute  # noqa: E402
from runtime.eventlog import EventReader, LogFile  # noqa: E402
from scopes import INTEGER, ScopeBuilder  # noqa: E402

PRINT_LOCK = threading.Lock()


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(1)
    return listener


def accept(listener: socket.socket | None, worker: Worker, args: argparse.Namespace) -> EventReader:
    """Wait for the sender of one stream to connect to ``listener``; read its events."""
    assert listener is not None, "replay opens only this worker's streams"
    listener.settimeout(args.accept_timeout)
    try:
        connection, _ = listener.accept()
    except TimeoutError as error:
        raise ConnectionError(
            f"worker {worker.index}: no sender connected to {listener.getsockname()} within "
            f"{args.accept_timeout} s; run capture_send.py with -w {args.source_peers}"
        ) from error
    finally:
        listener.close()
    return EventReader(connection, INTEGER)


def worker_main(worker: Worker, args: argparse.Namespace) -> list[Any]:
    """Replay this worker's share of the captured streams; return the records it replayed."""
    recordings: list[Any]
    if args.log_dir:
        recordings = [LogFile(Path(args.log_dir) / f"stream-{s}.log", INTEGER) for s in range(args.source_peers)]
    else:
        # every worker lists every stream; only the worker replaying stream s opens it,
        # accepting on the port it listens on (bound before any sender may connect)
        mine = range(worker.index, args.source_peers, worker.peers)
        listeners = {s: listen(args.host, args.port + s) for s in mine}
        recordings = [partial(accept, listeners.get(s), worker, args) for s in range(args.source_peers)]
    replayed: list[Any] = []

    def show(record: Any) -> None:
        replayed.append(record)
        with PRINT_LOCK:  # one whole line at a time: the workers are threads
            sys.stdout.write(f"replayed: {record!r}\n")
            sys.stdout.flush()

    def build(scope: ScopeBuilder) -> Any:
        return scope.replay(recordings).inspect(show).probe()

    probe = worker.dataflow(build, name="capture_recv")
    worker.step_while(lambda: not probe.done())
    return replayed


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source_peers", type=int, help="how many streams were captured")
    parser.add_argument("-w", "--workers", type=int, default=1, help="number of worker threads")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8000, help="stream s arrives on port + s")
    parser.add_argument("--records", type=int, default=10, help="records per captured stream (for the check)")
    parser.add_argument("--log-dir", help="read LOG_DIR/stream-s.log instead of listening")
    parser.add_argument("--accept-timeout", type=float, default=60.0, help="seconds to wait for each sender")
    args = parser.parse_args(argv)
    results = execute(lambda worker: worker_main(worker, args), workers=args.workers)
    counts = Counter(record for per_worker in results for record in per_worker)
    expected = Counter({record: args.source_peers for record in range(args.records)})
    ok = counts == expected
    total = sum(counts.values())
    print(
        f"replayed {total} records from {args.source_peers} stream(s) on {args.workers} worker(s); complete: {ok}",
        flush=True,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
