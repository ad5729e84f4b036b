"""``Worker``: hosts dataflows and drives them through the ``Scope`` interface."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from runtime.errors import DataflowStuck, WorkerAborted
from runtime.fabric import ThreadAllocator, WorkerSignal
from runtime.instrument import Instrument, logger_for
from scopes.builder import BuildContext, ScopeBuilder
from scopes.change_batch import ChangeBatch
from scopes.subgraph import Subgraph
from scopes.timestamp import INTEGER, TimestampType

R = TypeVar("R")

_NOTHING: list[ChangeBatch[Any]] = []


class Dataflow:
    """A dataflow hosted by a worker: its name and top-level subgraph."""

    def __init__(self, index: int, name: str, root: Subgraph) -> None:
        """Describe dataflow ``index``."""
        self.index = index
        self.name = name
        self.root = root

    def __repr__(self) -> str:
        return f"Dataflow({self.index}, {self.name!r})"


class Worker:
    """One worker: builds dataflows and runs them a step at a time.

    Every worker of a computation must build the same dataflows in the same order.
    """

    def __init__(self, allocator: ThreadAllocator) -> None:
        """Create a worker that communicates through ``allocator``."""
        self._allocator = allocator
        self._signal: WorkerSignal = allocator.fabric.signals[allocator.index]
        self._abort = allocator.fabric.abort
        self._context = BuildContext(allocator)
        self._dataflows: dict[int, Dataflow] = {}
        self._active: set[int] = set()
        self._next_dataflow = 0
        self._park = 0.002 if allocator.peers > 1 else 0.0
        self.logger: Instrument | None = logger_for(allocator.index)
        """This worker's instrumentation logger; ``None`` when logging is off (the default)."""

    @property
    def index(self) -> int:
        """This worker's index, from 0 to ``peers - 1``."""
        return self._allocator.index

    @property
    def peers(self) -> int:
        """The number of workers in the computation."""
        return self._allocator.peers

    def dataflow(
        self,
        build: Callable[[ScopeBuilder], R],
        name: str | None = None,
        timestamp: TimestampType = INTEGER,
    ) -> R:
        """Build a new dataflow with ``build(scope)`` and return what it returns."""
        index = self._next_dataflow
        self._next_dataflow += 1
        label = name or f"dataflow {index}"
        root = Subgraph(
            label,
            (index,),
            timestamp,
            None,
            self._allocator,
            self._context.next_channel(),
            lambda: self._active.add(index),
        )
        root.observer = self.logger
        scope = ScopeBuilder(root, self._context)
        result = build(scope)
        scope.check_complete()
        root.get_internal_summary()
        root.set_external_summary([], [])
        self._dataflows[index] = Dataflow(index, label, root)
        self._active.add(index)
        return result

    @property
    def dataflows(self) -> list[Dataflow]:
        """The dataflows that have not completed yet."""
        return list(self._dataflows.values())

    def _drain_signals(self) -> None:
        pending = self._signal.pending
        dataflows = self._dataflows
        while pending:
            address = pending.popleft()
            dataflow = dataflows.get(address[0])
            if dataflow is None:
                continue
            if len(address) == 1:
                self._active.add(address[0])
            else:
                dataflow.root.activate_address(address[1:])

    def step(self) -> bool:
        """Run every dataflow that has work once; return whether any dataflow is unfinished."""
        return self.step_or_park(self._park)

    def step_or_park(self, timeout: float | None = None) -> bool:
        """Like :meth:`step`, but first wait up to ``timeout`` seconds if there is nothing to do."""
        if self._abort.is_set():
            raise WorkerAborted(f"worker {self.index} stopped because another worker failed")
        signal = self._signal
        self._drain_signals()
        if not self._active and timeout != 0 and self._dataflows:
            signal.event.clear()
            self._drain_signals()
            if not self._active:
                signal.event.wait(timeout)
                self._drain_signals()
        if self._active:
            self._allocator.fabric.activity += 1
            active = sorted(self._active)
            self._active.clear()
            for index in active:
                dataflow = self._dataflows.get(index)
                if dataflow is None:
                    continue
                if not dataflow.root.pull_internal_progress(_NOTHING, _NOTHING, _NOTHING):
                    del self._dataflows[index]
                    self._active.discard(index)
                    if self.logger is not None:
                        self.logger.dataflow_completed(index, dataflow.name)
        return bool(self._dataflows)

    def step_while(self, condition: Callable[[], bool]) -> None:
        """Step (parking when idle) while ``condition()`` holds."""
        while condition():
            self.step_or_park(0.01)

    def close_inputs(self) -> None:
        """Close every input this worker created (done automatically when ``main`` returns)."""
        for handle in self._context.inputs:
            handle.close()

    def run_to_completion(self, stall_timeout: float | None = 30.0) -> None:
        """Close inputs and step until every dataflow has completed.

        If every worker is finishing and none has run anything for
        ``stall_timeout`` seconds, raise :class:`~runtime.errors.DataflowStuck`
        naming what holds the remaining dataflows back.
        """
        self.close_inputs()
        fabric = self._allocator.fabric
        fabric.enter_finishing()
        last = fabric.activity
        since = time.monotonic()
        while self._dataflows:
            self.step_or_park(0.01)
            if fabric.activity != last:
                last = fabric.activity
                since = time.monotonic()
            elif (
                stall_timeout is not None
                and fabric.finishing == fabric.peers
                and time.monotonic() - since > stall_timeout
            ):
                raise DataflowStuck(self.explain_stuck())

    def explain_stuck(self) -> str:
        """Describe, for each unfinished dataflow, the capabilities and messages that remain."""
        lines = [f"worker {self.index}: {len(self._dataflows)} dataflow(s) cannot complete:"]
        for dataflow in self._dataflows.values():
            lines.append(f"  dataflow '{dataflow.name}':")
            held = list(_pointstamps(dataflow.root))
            if not held:
                lines.append("    (no capabilities or messages remain; waiting for other workers)")
            for what in held:
                lines.append(f"    {what}")
        lines.append(
            "An operator that holds a capability must downgrade or drop it, and every input "
            "must be closed, for a dataflow to complete."
        )
        return "\n".join(lines)


def _pointstamps(subgraph: Subgraph) -> list[str]:
    """Positive pointstamps in ``subgraph`` and its nested scopes, described for a person."""
    from scopes.location import Source

    found: list[str] = []
    tracker = subgraph.tracker
    for location in tracker.locations():
        if location.node == 0:
            continue
        name = subgraph.child_names[location.node]
        for time_, count in sorted(tracker.pointstamps(location).items(), key=lambda item: repr(item[0])):
            if count <= 0:
                continue
            if isinstance(location, Source):
                found.append(
                    f"operator '{name}' (address {subgraph.address + (location.node,)}) holds "
                    f"{count} capability(ies) for time {time_!r} at output {location.port}"
                )
            else:
                found.append(
                    f"{count} message(s) at time {time_!r} wait at input {location.port} of "
                    f"operator '{name}' (address {subgraph.address + (location.node,)})"
                )
    for child in subgraph.children[1:]:
        if isinstance(child, Subgraph):
            found.extend(_pointstamps(child))
    return found
