"""A program whose processes start with different settings, for the tests of the handshake's settings check.

Run as a script (``python tests/helpers/settings_mains.py`` with the cluster's flags: ``-n``, ``-p``, ``-h``, ``-w``)
it runs :func:`exchange_epochs` with :func:`runtime.execute_from_args` and prints its results; each process is
started with its own environment, so each can be given its own ``PYTIMELY_*`` settings, and
``$SETTINGS_TEST_CONNECT_TIMEOUT`` shortens the connect deadline.

Imported by a process of ``execute(..., processes=P)`` while ``$SETTINGS_TEST_CLAIM`` names a file that does not
exist yet, the first process to import it creates that file and sets ``$SETTINGS_TEST_VARIABLE`` to
``$SETTINGS_TEST_VALUE`` in its own environment: one process of the cluster then differs from the others, as one
started by hand with another environment would.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from runtime import execute_from_args  # noqa: E402
from runtime.worker import Worker  # noqa: E402


def _claim() -> None:
    """Give this process the odd setting if it is the first process to import this module (see the docstring)."""
    claim = os.environ.get("SETTINGS_TEST_CLAIM")
    if not claim or os.environ.get("SETTINGS_TEST_PARENT") == str(os.getpid()):
        return
    try:
        os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    os.environ[os.environ["SETTINGS_TEST_VARIABLE"]] = os.environ["SETTINGS_TEST_VALUE"]


_claim()


def exchange_epochs(worker: Worker, epochs: int = 20) -> int:
    """Exchange ten numbers per epoch between every worker for ``epochs`` epochs; the epochs done."""

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        return handle, stream.exchange(lambda x: x).probe()

    handle, probe = worker.dataflow(build)
    for epoch in range(1, epochs + 1):
        handle.send_batch(list(range(10)))
        handle.advance_to(epoch)
        worker.step_while(functools.partial(probe.less_than, epoch))
    return epochs


if __name__ == "__main__":
    # $SETTINGS_TEST_CONNECT_TIMEOUT: seconds the processes have to find each other (default: the usual 30 s)
    connect_timeout = float(os.environ.get("SETTINGS_TEST_CONNECT_TIMEOUT") or 30.0)
    results = execute_from_args(exchange_epochs, stall_timeout=None, connect_timeout=connect_timeout)
    print("results", results, flush=True)
