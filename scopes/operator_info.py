"""``OperatorInfo``: what an operator's logic knows of itself, and how it asks to run again.

An operator runs when a message arrives, when a frontier it watches moves, or
when it asked to.  A source that polls something outside the dataflow (a
queue, a client library, a socket, a directory) has no input to wake it, so it
asks in one of three ways:

* :meth:`OperatorInfo.activate`: at the worker's next step.  A source that
  does this on every run while it waits keeps its worker stepping, a CPU core
  busy doing nothing;
* :meth:`OperatorInfo.activate_after`: once some seconds have passed; the
  worker parks meanwhile (it still runs other operators whose input arrives);
* :meth:`OperatorInfo.waker`: a function that any thread may call, when the
  outside system has something, to run the operator and wake its worker.

The timers and the thread-safe wake-up are the runtime's (this package has no
threads): it sets them on the :class:`~scopes.core.BuildContext`, whose
``timer`` and ``wake_from_outside`` this module calls.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Protocol

from scopes.channel_protocols import Activator
from scopes.errors import ActivationError

__all__ = ["OperatorInfo", "WakeSupport"]


class WakeSupport(Protocol):
    """What the runtime offers to run an operator later or from another thread (a
    :class:`~scopes.core.BuildContext`); ``timer`` is ``None`` and ``waker`` returns ``None`` when it offers nothing."""

    timer: Callable[[tuple[int, ...], float, str], None] | None

    def waker(self, address: tuple[int, ...]) -> Callable[[], None] | None:
        """A function any thread may call to activate the operator at ``address``, or ``None``."""
        ...

    def waits_outside(self, address: tuple[int, ...], waiting: bool = True) -> None:
        """Say that the operator at ``address`` waits for something outside to wake it (or no longer does)."""
        ...


class OperatorInfo:
    """What an operator knows about itself: its name, address, worker, and how to wake itself."""

    __slots__ = ("name", "index", "address", "worker_index", "peers", "position", "_activate", "_wakes")

    def __init__(
        self,
        name: str,
        index: int,
        address: tuple[int, ...],
        worker_index: int,
        peers: int,
        activate: Activator,
        wakes: WakeSupport | None = None,
    ) -> None:
        """Describe operator ``name`` at child ``index`` of its scope; ``wakes`` is its worker's build context."""
        self.name = name
        self.index = index
        self.address = address
        self.worker_index = worker_index
        self.peers = peers
        self._activate = activate
        self._wakes = wakes
        self.position: object | None = None
        """What the operator's logic is doing, for an error it raises outside any batch: a source sets it to
        a text, or to an object whose ``str()`` gives one when asked (for example ``"reading 'part-1.parquet'
        (row 0, epoch 1 or later)"``); ``None``: nothing to add."""

    def activate(self) -> None:
        """Ask for the operator to be scheduled again, even without new input (at the worker's next step)."""
        self._activate()

    def activate_after(self, seconds: float) -> None:
        """Ask for the operator to be scheduled again once ``seconds`` have passed, even without new input.

        The worker parks meanwhile, unless something else has work, so a source
        that waits for outside data costs no CPU; one run comes when the time is
        up (sooner if input arrives or :meth:`activate` is called, and then the
        timer still fires later).  Of several requests that are pending, the
        earliest stands.  ``0`` is :meth:`activate`.  Called from the operator's
        own logic (or its worker's thread); from another thread use :meth:`waker`.
        Without runtime timers (a worker is needed), it is :meth:`activate`.

        Raises :class:`~scopes.errors.ActivationError` if ``seconds`` is negative,
        NaN, infinite or not a number, or (the runtime checks it) if the calling
        thread is not the one stepping the operator's worker.
        """
        if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
            raise ActivationError(
                f"operator '{self.name}' (address {self.address}) asked to run again after {seconds!r} seconds: "
                "activate_after takes a number of seconds (an int or a float)"
            )
        if math.isnan(seconds) or seconds < 0 or math.isinf(seconds):
            raise ActivationError(
                f"operator '{self.name}' (address {self.address}) asked to run again after {seconds!r} seconds: "
                "the delay must be a finite number >= 0; to wait for something outside without a deadline, "
                "call the function info.waker() returns when it happens"
            )
        timer = None if self._wakes is None else self._wakes.timer
        if seconds == 0 or timer is None:
            self._activate()
        else:
            timer(self.address, float(seconds), self.name)

    def waker(self) -> Callable[[], None]:
        """A function that any thread may call to run this operator at its worker's next step, waking the
        worker if it is parked: give it to a client library's callback, or call it from a thread that waits
        on a queue or a socket.

        While the operator's dataflow runs, a worker that cannot move counts as
        waiting for outside data (not stalled).  It takes no arguments and
        returns at once.  Calls made while the
        operator waits to run are merged into one run.  Once the dataflow has
        completed (or the computation has stopped) a call does nothing, so a
        callback that outlives the dataflow is harmless.  The operator still
        decides in its logic whether there is something to read: a wake is a
        hint, never data.

        Raises :class:`~scopes.errors.ActivationError` if the runtime cannot
        wake the worker from another thread (its communicator has no
        ``activate_from_outside``); use :meth:`activate_after` to poll instead.
        """
        wake = None if self._wakes is None else self._wakes.waker(self.address)
        if wake is None:
            raise ActivationError(
                f"operator '{self.name}' (address {self.address}) asked for a waker, but its worker cannot be woken "
                "from another thread (it runs without a runtime, or on a communicator without "
                "activate_from_outside); poll with info.activate_after(seconds) instead"
            )
        assert self._wakes is not None
        self._wakes.waits_outside(self.address)  # its worker waits for outside data while it lives, not stalled
        return wake

    def __repr__(self) -> str:
        return f"OperatorInfo({self.name!r}, address={self.address}, worker={self.worker_index})"
