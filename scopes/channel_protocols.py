"""The channel protocols: what the progress model and the operators need of a channel, and nothing more.

A :class:`Pusher` accepts ``(time, batch)`` messages, a :class:`Puller` yields
them, and an :class:`Allocator` (supplied by the runtime) creates channels
between workers; an :data:`Activator` asks for an operator to be run.  They are
interfaces only: the implementations are in :mod:`scopes.channels` and the
runtime.  This module imports nothing from the rest of :mod:`scopes`, so that
:mod:`scopes.progress` (whose progress exchange travels on channels) can use it
and stay pure.  A batch is a list of records or a columnar batch
(:data:`scopes.batches.Batch`); here it is typed ``Any`` for that reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

Message = tuple[Any, Any]
"""A batch of records sharing one timestamp: ``(time, records)``."""

Activator = Callable[[], None]
"""Marks an operator as needing to run."""


class Pusher(Protocol):
    """Accepts messages."""

    def push(self, time: Any, batch: Any) -> None:
        """Deliver ``batch`` at ``time``; the receiver may take ownership of the list."""
        ...


class Puller(Protocol):
    """Yields messages, or ``None`` when none are waiting."""

    def pull(self) -> Message | None:
        """Return the next waiting message, or ``None``."""
        ...


class Allocator(Protocol):
    """Creates channels between the workers of one computation (implemented by the runtime)."""

    @property
    def index(self) -> int:
        """This worker's index."""
        ...

    @property
    def peers(self) -> int:
        """The number of workers."""
        ...

    def allocate(self, channel: int, address: tuple[int, ...]) -> tuple[list[Pusher], Puller]:
        """Create (or join) channel ``channel``.

        Returns one pusher per worker, and this worker's puller.  Every worker must
        allocate the same channels in the same order.  ``address`` names the
        receiving operator, which is activated on each worker that receives a
        message.
        """
        ...


__all__ = ["Activator", "Allocator", "Message", "Puller", "Pusher"]
