"""Feeding a checkpointed dataflow epoch by epoch, with a crash after a chosen epoch, for the resume tests.

A resume test runs one program three times: uninterrupted, crashing once an epoch is complete, and resumed
from the checkpoint.  :func:`feed_epochs` is that program's loop over its inputs, and :class:`Crash` the
failure it raises.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


class Crash(Exception):
    """The simulated crash of a test run: ``crash after epoch N``."""


def feed_epochs(
    worker: Any,
    inputs: Sequence[Any],
    batches: Callable[[int], Sequence[Any]],
    probe: Any,
    epochs: range,
    crash_after: int | None,
) -> None:
    """Feed ``epochs`` to ``inputs``, then close them and run the dataflow to its end.

    For each epoch, ``batches(epoch)`` gives one batch per input (``None``: send
    nothing on it); every input then advances past the epoch, and the worker
    steps until ``probe`` has passed it.  Worker 0 raises :class:`Crash` once
    epoch ``crash_after`` is complete (``None`` or ``-1``: never).
    """
    for epoch in epochs:
        for handle, batch in zip(inputs, batches(epoch), strict=True):
            if batch is not None:
                handle.send_batch(batch)
        for handle in inputs:
            handle.advance_to(epoch + 1)
        worker.step_while(lambda epoch=epoch: probe.less_than(epoch + 1))
        if epoch == crash_after and worker.index == 0:
            raise Crash(f"crash after epoch {epoch}")
    for handle in inputs:
        handle.close()
    worker.step_while(lambda: not probe.done())
