"""A worker's timers, and the wake-up that other threads call: how an operator waits without spinning.

An operator asks to run again after some seconds
(:meth:`~scopes.operator_info.OperatorInfo.activate_after`, through
``BuildContext.timer``) or hands out a function that any thread may call to
run it (:meth:`~scopes.operator_info.OperatorInfo.waker`, through
``BuildContext.wake_from_outside``).  :class:`Timers` keeps the first, and the
worker parks until the next one is due; :func:`wake_from_outside` delivers the
second through the communicator's ``activate_from_outside``, as long as the
operator's dataflow still runs.

Timers belong to the thread that steps their worker: their heap is not
thread-safe, and a timer added by another thread while the worker parks would
not be noticed until something else woke it, so :meth:`Timers.add` refuses a
call from any other thread with :class:`~scopes.errors.ActivationError`,
pointing to ``info.waker()``.  Which thread that is costs nothing per step:
the worker notes it (:attr:`Timers.thread`) when it builds a dataflow, parks,
goes idle or resumes; a call from another thread is then taken only from
inside one of the worker's steps (``in_step``, which looks at the calling
thread's frames, and makes that thread the owner), so a worker built in one
thread and stepped in another, or the simulated communicator's workers, whose
``main`` take turns on threads of their own, keep their timers.

The clock is the communicator's ``clock()`` if it has one (the simulated
communicator keeps a virtual clock, so that a seed decides when timers fire),
else :func:`time.monotonic`.  A communicator with a ``timers_due(due)`` method
is told the earliest due time whenever it changes (``None``: no timer).
"""

from __future__ import annotations

import heapq
import threading
import time
import weakref
from collections.abc import Callable
from threading import get_ident
from typing import Any, Protocol

from scopes.errors import ActivationError

__all__ = ["Timers", "wake_from_outside"]

Address = tuple[int, ...]


class Timers:
    """Operators to activate once ``clock()`` reaches a due time; the earliest request for an address stands."""

    __slots__ = ("_clock", "_announce", "_heap", "_due", "_announced", "_worker", "_in_step", "thread")

    def __init__(self, communicator: object, in_step: Callable[[], bool] = lambda: False) -> None:
        """Timers on ``communicator``'s clock (or :func:`time.monotonic`), owned by the calling thread until the
        worker sets :attr:`thread`; ``in_step()`` says whether the calling thread is inside one of the worker's
        steps."""
        self.thread: int = get_ident()
        """The :func:`threading.get_ident` of the thread stepping the worker, as last noted (see the module's
        documentation): another thread may add timers only from inside a step, which makes it the owner."""
        self._worker: int = getattr(communicator, "index", 0)
        self._in_step = in_step
        self._clock: Callable[[], float] = getattr(communicator, "clock", time.monotonic)
        self._announce: Callable[[float | None], None] | None = getattr(communicator, "timers_due", None)
        self._heap: list[tuple[float, Address]] = []
        """``(due, address)`` pairs; an entry whose due is not :attr:`_due`'s for its address is stale."""
        self._due: dict[Address, float] = {}
        self._announced: float | None = None

    def __bool__(self) -> bool:
        """Whether any timer is pending."""
        return bool(self._heap)

    @property
    def pending(self) -> list[tuple[float, Address]]:
        """The pending timers, one list for the life of this object (empty: none), which a caller on a hot path
        may keep and test for truth without a call."""
        return self._heap

    def add(self, address: Address, seconds: float, name: str = "") -> None:
        """Activate ``address`` once ``seconds`` have passed, unless a request due sooner is pending.

        Raises :class:`~scopes.errors.ActivationError`, naming the operator (``name``) and both threads, if the
        calling thread is not :attr:`thread`.
        """
        if get_ident() != self.thread:
            if not self._in_step():
                raise ActivationError(self._wrong_thread(address, name))
            self.thread = get_ident()  # the worker is stepped by this thread now
        due = self._clock() + seconds
        if self._due.get(address, due + 1) <= due:
            return
        self._due[address] = due
        heapq.heappush(self._heap, (due, address))
        self._tell()

    def fire(self, activate: Callable[[list[Address]], None]) -> float | None:
        """Pass the addresses whose time has come to ``activate``; return the seconds until the next (``None``:
        none)."""
        heap = self._heap
        due_at = self._due
        now = self._clock()
        fired = []
        while heap and heap[0][0] <= now:
            due, address = heapq.heappop(heap)
            if due_at.get(address) == due:
                del due_at[address]
                fired.append(address)
        if fired:
            activate(fired)
        self._tell()
        return heap[0][0] - now if heap else None

    def drop_dataflow(self, index: int) -> None:
        """Forget the timers of dataflow ``index`` (it has completed: nothing of it runs again)."""
        if not any(address[0] == index for address in self._due):
            return
        self._due = {address: due for address, due in self._due.items() if address[0] != index}
        self._heap[:] = [entry for entry in self._heap if entry[1][0] != index]  # in place: see pending
        heapq.heapify(self._heap)
        self._tell()

    def _wrong_thread(self, address: Address, name: str) -> str:
        """Why a timer asked for from the calling thread is refused."""
        owner = self.thread
        owner_name = next((thread.name for thread in threading.enumerate() if thread.ident == owner), None)
        stepper = "a thread that has ended" if owner_name is None else f"thread '{owner_name}'"
        current = threading.current_thread()
        operator = f"operator '{name}'" if name else "an operator"
        return (
            f"{operator} (address {address}) called activate_after from thread '{current.name}' "
            f"(ident {current.ident}), but worker {self._worker} is stepped by {stepper} (ident {owner}): "
            "its timers belong to that thread, and one added from another would go unnoticed while the worker is "
            "parked. From another thread, call the function info.waker() returns (take it in the operator's "
            "constructor and hand it to that thread)"
        )

    def _tell(self) -> None:
        announce = self._announce
        if announce is None:
            return
        due = self._heap[0][0] if self._heap else None
        if due != self._announced:
            self._announced = due
            announce(due)


class _Waking(Protocol):
    """What :func:`wake_from_outside` reads of a worker."""

    def wakes(self, address: Address) -> bool:
        """Whether an activation of ``address`` may still matter (its dataflow runs, nothing stopped)."""
        ...

    @property
    def communicator(self) -> Any:
        """The worker's communicator."""
        ...


def wake_from_outside(worker: weakref.ref[Any], address: Address) -> None:
    """Activate ``address`` on ``worker`` from any thread and wake it; nothing if its dataflow has completed, the
    computation has stopped or the worker is gone (the function a waker calls may outlive them all)."""
    alive: _Waking | None = worker()
    if alive is not None and alive.wakes(address):
        alive.communicator.activate_from_outside(address)
