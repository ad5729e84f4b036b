"""A computation that runs until interrupted: used by tests/test_runtime_errors.py with SIGINT.

Usage: ``python tests/helpers/interrupt_workers.py WORKERS``.  Every worker prints
``ready <index>`` once stepping, then steps forever; its ``finally`` block
prints ``finally <index>``.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from runtime import Worker, execute  # noqa: E402


def main(worker: Worker) -> None:
    """Step a dataflow that never completes, until stopped."""
    handle, probe = worker.dataflow(lambda scope: _build(scope))
    try:
        worker.step()
        sys.stdout.write(f"ready {worker.index}\n")
        sys.stdout.flush()
        worker.step_while(lambda: True)
    finally:
        sys.stdout.write(f"finally {worker.index}\n")
        sys.stdout.flush()


def _build(scope):  # type: ignore[no-untyped-def]
    handle, stream = scope.new_input("Forever")
    return handle, stream.exchange(lambda x: x).probe()


if __name__ == "__main__":
    # A shell without job control starts background jobs with SIGINT ignored, and Python then installs no
    # KeyboardInterrupt handler: take Ctrl-C as a terminal would deliver it, wherever the tests were started.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    execute(main, workers=int(sys.argv[1]), stall_timeout=None)
