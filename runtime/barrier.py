"""``Barrier``: wait until every worker has reached the same point, built as a dataflow.

Each worker feeds one input of a small dataflow and probes its output.  The
``n``-th :meth:`Barrier.wait` advances the input to time ``n`` and steps the
worker until the probe shows that no time before ``n`` remains anywhere, which
happens exactly when every worker has advanced its input to ``n``: all workers
have reached their ``n``-th wait.  While it waits the worker keeps stepping,
so the worker's other dataflows keep running.
"""

from __future__ import annotations

import time
import weakref
from types import TracebackType
from typing import TYPE_CHECKING

from runtime.errors import SynchronizationTimeout as SynchronizationTimeout
from runtime.errors import TimelyRuntimeError

if TYPE_CHECKING:
    from runtime.worker import Worker
    from scopes.builder import InputHandle, ProbeHandle, ScopeBuilder


class Barrier:
    """A reusable barrier among all workers of a computation.

    Every worker must create its barriers in the same order as its other
    dataflows (a barrier is a dataflow).  A worker that closes its barrier,
    drops its last reference to it, leaves its ``with Barrier(worker) as b:``
    block, or returns from its main function, no longer holds the others back.
    """

    def __init__(self, worker: Worker, name: str = "Barrier") -> None:
        """Build the barrier's dataflow on ``worker``."""
        self._worker = worker
        self.name = name

        def build(scope: ScopeBuilder) -> tuple[InputHandle, ProbeHandle]:
            handle, stream = scope.new_input(name)
            return handle, stream.probe(f"{name}Probe")

        self._input, self._probe = worker.dataflow(build, name=name)
        self._round = 0
        # once nothing refers to the barrier, its input closes (as dropping one does in timely),
        # so a temporary Barrier(worker).wait() does not hold the dataflow open for ever
        self._finalizer = weakref.finalize(self, self._input.close)

    @property
    def rounds(self) -> int:
        """How many waits this worker has completed (or begun)."""
        return self._round

    def wait(self, timeout: float | None = None) -> None:
        """Return once every worker has reached this (its ``n``-th) wait; keep other dataflows running.

        Raises :class:`SynchronizationTimeout` after ``timeout`` seconds (``None``:
        wait as long as it takes; the wait still ends if another worker fails).
        Without a timeout the wait is a :meth:`~runtime.worker.Worker.step_while` on
        the barrier's probe: if it can never end (every other worker that has not
        reached it waits in the same way, see :mod:`runtime.stalls`), it raises
        :class:`~runtime.errors.DataflowStuck` naming the barrier's line.
        """
        if self._input.closed:
            raise TimelyRuntimeError(
                f"barrier '{self.name}' on worker {self._worker.index} is closed; create a new Barrier"
            )
        self._round += 1
        target = self._round
        self._input.advance_to(target)
        probe = self._probe
        worker = self._worker
        if timeout is None:  # a wait on the barrier's probe alone: judged as any step_while, so a certain stall raises
            worker.step_while(lambda: probe.less_than(target))
            return
        deadline = time.monotonic() + timeout
        while probe.less_than(target):
            worker.step_or_park(0.01)
            if time.monotonic() > deadline:
                raise SynchronizationTimeout(
                    f"barrier '{self.name}': worker {worker.index} waited {timeout} s at wait "
                    f"number {target}, but some worker has not reached it (the barrier frontier is "
                    f"{list(probe.frontier())!r}); every worker must call wait() the same number of times",
                    worker.index,
                )

    def close(self) -> None:
        """Stop taking part: other workers no longer wait for this one."""
        self._finalizer()

    def __enter__(self) -> Barrier:
        """``with Barrier(worker) as barrier:`` closes the barrier when the block ends."""
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close the barrier."""
        self.close()

    def __repr__(self) -> str:
        return f"Barrier({self.name!r}, worker={self._worker.index}, rounds={self._round})"
