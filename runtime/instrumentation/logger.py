"""The per-worker logger: one cheap method per kind of event."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from runtime.instrumentation.events import (
    K_CAPABILITY,
    K_CHANNEL,
    K_DATAFLOW_DONE,
    K_FRONTIERS,
    K_INPUT,
    K_LOCAL_POINTSTAMPS,
    K_LOCATIONS,
    K_MARK,
    K_MESSAGES,
    K_OPERATOR,
    K_POINTSTAMPS,
    K_SCHEDULE,
    K_SHUTDOWN,
)
from scopes.progress.order import Time


class Instrument:
    """One worker's logger: one cheap method per event kind (implements ``scopes.progress.hooks.ProgressObserver``).

    Methods append a tuple to this worker's deque; the process's writer thread
    encodes and ships them.  Nothing here blocks or raises into the dataflow.
    """

    __slots__ = ("worker", "seq", "_events", "_clock")

    def __init__(self, worker: int, events: deque[tuple[Any, ...]]) -> None:
        """A logger for ``worker`` appending to ``events``."""
        self.worker = worker
        self.seq = 0
        self._events = events
        self._clock = time.monotonic

    def _emit(self, kind: int, *fields: Any) -> None:
        self.seq += 1
        self._events.append((kind, self.worker, self.seq, self._clock(), *fields))

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
        """Log an operator or scope construction (built at ``site`` in the user's code, when known)."""
        reach_ = tuple(tuple(r) for r in reach)
        if site is None:
            self._emit(K_OPERATOR, tuple(address), name, inputs, outputs, reach_, scope_timestamp)
        else:
            self._emit(K_OPERATOR, tuple(address), name, inputs, outputs, reach_, scope_timestamp, site)

    def channel_created(
        self,
        scope: tuple[int, ...],
        source: tuple[int, int],
        target: tuple[int, int],
        contract: str,
        copies: int = 1,
    ) -> None:
        """Log an edge, its contract and its copies per record."""
        self._emit(K_CHANNEL, tuple(scope), tuple(source), tuple(target), contract, copies)

    def locations(self, scope: tuple[int, ...], table: Sequence[tuple[int, int, bool]]) -> None:
        """Log a scope's dense location numbering."""
        self._emit(K_LOCATIONS, tuple(scope), tuple(tuple(row) for row in table))

    def scheduled(self, address: tuple[int, ...], start: float, duration: float) -> None:
        """Log one scheduling of an operator."""
        self._emit(K_SCHEDULE, address, start, duration)

    def messages(
        self,
        address: tuple[int, ...],
        consumed: Sequence[Iterable[tuple[Any, int]]],
        produced: Sequence[Iterable[tuple[Any, int]]],
    ) -> None:
        """Log records received and sent per port and time in one scheduling."""
        self._emit(
            K_MESSAGES,
            address,
            tuple(tuple(port) for port in consumed),
            tuple(tuple(port) for port in produced),
        )

    def pointstamps(self, scope: tuple[int, ...], changes: Iterable[tuple[int, Any, int]]) -> None:
        """Log pointstamp changes applied to a scope's tracker."""
        batch = tuple(changes)
        if batch:
            self._emit(K_POINTSTAMPS, scope, batch)

    def local_pointstamps(self, scope: tuple[int, ...], changes: Iterable[tuple[int, Any, int]]) -> None:
        """Log the pointstamp changes this worker originated in a scope (its own batch)."""
        batch = tuple(changes)
        if batch:
            self._emit(K_LOCAL_POINTSTAMPS, scope, batch)

    def frontiers(self, scope: tuple[int, ...], changes: Iterable[tuple[int, Any, int]]) -> None:
        """Log frontier changes computed by a scope's tracker."""
        batch = tuple(changes)
        if batch:
            self._emit(K_FRONTIERS, scope, batch)

    def input_event(
        self, address: tuple[int, ...], name: str, action: str, time: Time, site: str | None = None
    ) -> None:
        """Log an input handle being created (at ``site``), advanced or closed."""
        if site is None:
            self._emit(K_INPUT, tuple(address), name, action, time)
        else:
            self._emit(K_INPUT, tuple(address), name, action, time, site)

    def capability_site(
        self, address: tuple[int, ...], output: int, time: Time, diff: int, action: str, site: str
    ) -> None:
        """Log a capability coming (``diff`` 1) or going (-1), with where the user's code took it."""
        self._emit(K_CAPABILITY, tuple(address), output, time, diff, action, site)

    def dataflow_completed(self, index: int, name: str) -> None:
        """Log a dataflow finishing on this worker."""
        self._emit(K_DATAFLOW_DONE, index, name)

    def shutdown(self) -> None:
        """Log the worker stopping."""
        self._emit(K_SHUTDOWN)

    def mark(self, label: str) -> None:
        """Attach ``label`` to this moment of the recording."""
        self._emit(K_MARK, label)
