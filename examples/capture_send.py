"""Capture a stream on every worker and send it away: over TCP, or into log files.

Each worker builds a dataflow holding the numbers ``0 .. records - 1`` and
captures that stream with an :class:`~runtime.eventlog.EventWriter`: worker ``i``
connects to ``host:port + i`` (where ``capture_recv.py`` listens), or writes
``LOG_DIR/stream-i.log`` with ``--log-dir``.  Start ``capture_recv.py`` first:

    python examples/capture_recv.py 5 -w 3      # in one shell
    python examples/capture_send.py -w 5        # in another

The receiver replays the five captured streams on its three workers.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime import Worker, execute  # noqa: E402
from runtime.eventlog import EventWriter  # noqa: E402
from scopes import ScopeBuilder  # noqa: E402
from scopes.capture import capture_into  # noqa: E402


def stream_log(log_dir: str | Path, index: int) -> Path:
    """The log file of captured stream ``index`` in ``log_dir``."""
    return Path(log_dir) / f"stream-{index}.log"


def connect(host: str, port: int, timeout: float) -> socket.socket:
    """Connect to ``host:port``, retrying until ``timeout`` seconds have passed (the receiver may start late)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.create_connection((host, port), timeout=timeout)
        except OSError as error:
            if time.monotonic() > deadline:
                raise ConnectionError(
                    f"could not connect to {host}:{port} within {timeout} s ({error}); "
                    "start capture_recv.py first, with the same --host and --port"
                ) from error
            time.sleep(0.05)


def worker_main(worker: Worker, args: argparse.Namespace) -> None:
    """Capture this worker's share of the numbers into its socket or log file."""
    if args.log_dir:
        writer = EventWriter(stream_log(args.log_dir, worker.index))
    else:
        writer = EventWriter(connect(args.host, args.port + worker.index, args.connect_timeout))

    def build(scope: ScopeBuilder) -> None:
        capture_into(scope.to_stream(range(args.records)), writer)

    worker.dataflow(build, name="capture_send")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-w", "--workers", type=int, default=1, help="number of worker threads")
    parser.add_argument("--host", default="127.0.0.1", help="the receiver's address")
    parser.add_argument("--port", type=int, default=8000, help="worker i connects to port + i")
    parser.add_argument("--records", type=int, default=10, help="each worker captures 0 .. records - 1")
    parser.add_argument("--log-dir", help="write LOG_DIR/stream-i.log instead of connecting")
    parser.add_argument("--connect-timeout", type=float, default=30.0, help="seconds to keep trying to connect")
    args = parser.parse_args(argv)
    execute(lambda worker: worker_main(worker, args), workers=args.workers)
    print(f"captured {args.workers} stream(s) of {args.records} records", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
