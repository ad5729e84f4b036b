"""What scopes code may report to an observer: the instrumentation hooks' interface.

``scopes`` is pure (no files, sockets or threads), so it cannot log by itself.
Instead, scopes and operators hold an optional observer, ``None`` by default,
and every hook site is guarded by ``if observer is not None:`` so that logging
costs nothing when it is off.  The runtime supplies the implementation
(``runtime.instrument.Instrument``); the event schema is documented there.

Addresses are tuples of child indices from the dataflow down
(``(dataflow, child, grandchild, ...)``).  Locations inside a scope are dense
tracker indices; :meth:`ProgressObserver.locations` gives their meaning once
per scope.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from scopes.progress.order import Time


class ProgressObserver(Protocol):
    """Receives events from scopes code; each method must be cheap and never raise."""

    def operator_created(
        self,
        address: tuple[int, ...],
        name: str,
        inputs: int,
        outputs: int,
        reach: Sequence[Sequence[int]],
        scope_timestamp: str | None,
        site: str | None = None,
    ) -> None:
        """An operator (or a scope, when ``scope_timestamp`` names its timestamp type) was built.

        ``reach[i]`` lists the outputs that input ``i`` can reach inside the operator; ``site``
        is where the user's code built it (``file.py:LINE``), when known.
        """
        ...

    def channel_created(
        self,
        scope: tuple[int, ...],
        source: tuple[int, int],
        target: tuple[int, int],
        contract: str,
        copies: int = 1,
    ) -> None:
        """An edge ``(node, port) -> (node, port)`` inside ``scope``; node 0 is the scope's boundary.

        ``copies``: records arriving (over all workers) per record sent, the number of workers for a broadcast.
        """
        ...

    def locations(self, scope: tuple[int, ...], table: Sequence[tuple[int, int, bool]]) -> None:
        """The meaning of each dense location index in ``scope``: ``(node, port, is_source)``."""
        ...

    def scheduled(self, address: tuple[int, ...], start: float, duration: float) -> None:
        """The operator at ``address`` ran for ``duration`` seconds from ``start`` (``perf_counter``)."""
        ...

    def messages(
        self,
        address: tuple[int, ...],
        consumed: Sequence[Iterable[tuple[Any, int]]],
        produced: Sequence[Iterable[tuple[Any, int]]],
    ) -> None:
        """Records received at each input and sent at each output, per time, in one scheduling."""
        ...

    def pointstamps(self, scope: tuple[int, ...], changes: Iterable[tuple[int, Any, int]]) -> None:
        """Pointstamp count changes ``(location, time, diff)`` folded into ``scope``'s tracker."""
        ...

    def local_pointstamps(self, scope: tuple[int, ...], changes: Iterable[tuple[int, Any, int]]) -> None:
        """The changes ``(location, time, diff)`` this worker originated in ``scope``: its own progress batch."""
        ...

    def frontiers(self, scope: tuple[int, ...], changes: Iterable[tuple[int, Any, int]]) -> None:
        """Frontier changes ``(location, time, diff)`` computed by ``scope``'s tracker."""
        ...

    def input_event(
        self, address: tuple[int, ...], name: str, action: str, time: Time, site: str | None = None
    ) -> None:
        """An input handle was ``"created"`` (at ``site`` in the user's code), ``"advanced"`` (to ``time``) or
        ``"closed"``."""
        ...

    def capability_site(
        self, address: tuple[int, ...], output: int, time: Time, diff: int, action: str, site: str
    ) -> None:
        """A capability for ``time`` on ``output`` of the operator at ``address`` came (``diff`` 1) or went (-1).

        ``action`` says how the user's code came to hold it at ``site``
        (``file.py:LINE``): ``"created"`` (the capability an operator's
        constructor receives), ``"retained"``, ``"delayed"``, ``"downgraded"``
        or ``"notify_at"`` (the copy a notificator keeps).  Only capabilities
        whose place in the user's code is known are reported.
        """
        ...
