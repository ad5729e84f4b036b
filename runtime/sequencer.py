"""``Sequencer``: every worker sees the items proposed by all workers in one same order.

Built as a dataflow, as in the seed: a source operator on each worker stamps
proposed items with the current clock time (microseconds) and holds a
capability at that time; the items are broadcast to every worker, where a sink
releases them once the sink's frontier shows that no earlier item can still
arrive.  Released items are ordered by ``(time, proposing worker, proposal
number)``, which every worker computes identically, so all see the same order,
and items proposed at different times come out in the order they were proposed.

The source advances its capability only while some item is waiting to be
released, so an idle sequencer costs nothing.  A worker's clock reading is
always past the latest time it has seen in an item (a Lamport clock), so a
worker with a slow clock cannot hold the others back: its capability moves past
an item from a faster clock as soon as it has seen it.
"""

from __future__ import annotations

import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from itertools import count
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from runtime.barrier import SynchronizationTimeout
from runtime.errors import TimelyRuntimeError
from scopes.contracts import Broadcast
from scopes.operator import Operator
from scopes.operator_builder import OperatorBuilder
from scopes.progress.antichain import MutableAntichain
from scopes.progress.operate import Updates

if TYPE_CHECKING:
    from runtime.worker import Worker
    from scopes.builder import ScopeBuilder
    from scopes.capability import Capability
    from scopes.core import BuildContext
    from scopes.handles import OperatorOutput
    from scopes.operator import OperatorInfo

T = TypeVar("T")


RECHECK = 0.05
"""Seconds after which a source holding staged items looks at the clock again, unless woken earlier (the sink
wakes it whenever an item arrives or its frontier moves; a worker waiting for a busy peer parks meanwhile)."""


def microseconds() -> int:
    """The default clock: wall-clock time in microseconds (comparable between processes on one host)."""
    return time.time_ns() // 1000


class _State:
    """What the sequencer object shares with its dataflow's operators on one worker."""

    def __init__(self) -> None:
        self.proposals: list[Any] = []
        self.ready: deque[Any] = deque()
        self.staged = 0  # items received but not yet released
        self.seen = 0  # the latest time seen in any item
        self.closed = False
        self.ended = False  # every worker's sequencer closed and every item delivered: no item can come
        self.activate_source: Callable[[], None] = lambda: None


class _ReleasingSink(Operator):
    """The sequencer's sink: releases items as soon as its input frontier passes them.

    Releasing on each frontier change (not only when scheduled) delivers the
    last items even when the dataflow completes right after the frontier empties.
    """

    def __init__(self, *args: Any, release: Callable[[MutableAntichain[int]], None]) -> None:
        super().__init__(*args)
        self._release = release

    def push_external_progress(self, external: Sequence[Updates]) -> None:
        """Apply the frontier change, then release what it allows."""
        super().push_external_progress(external)
        if external[0]:
            self._release(self.input_ports[0].frontier)


def _close(state: _State) -> None:
    if not state.closed:
        state.closed = True
        state.activate_source()


class Sequencer(Generic[T]):
    """Orders items proposed by any worker; every worker receives all of them in the same order.

    Create one on every worker, in the same order as the workers' other
    dataflows.  :meth:`push` proposes an item; :meth:`next` returns the next item
    in the agreed order, or ``None`` if none is ready; iterating yields the
    items ready now.  Items become ready as the worker steps.  :meth:`close` (or
    dropping the sequencer) stops this worker's proposals and lets the dataflow
    complete once every worker has done so.
    """

    def __init__(self, worker: Worker, name: str = "Sequencer", clock: Callable[[], int] = microseconds) -> None:
        """Build the sequencer's dataflow on ``worker``; ``clock()`` gives proposal times (ints)."""
        self._worker = worker
        self.name = name
        state = _State()
        self._state = state
        worker_index = worker.index

        def source_constructor(capability: Capability, info: OperatorInfo) -> Callable[[OperatorOutput], None]:
            held = [capability]
            numbers = count()
            state.activate_source = info.activate

            def logic(output: OperatorOutput) -> None:
                if not held:
                    return
                cap = held[0]
                now = max(clock(), state.seen + 1, cap.time)  # past every item seen: none waits on this clock
                if now != cap.time:
                    cap.downgrade(now)
                if state.proposals:
                    proposals, state.proposals = state.proposals, []
                    output.session(cap).give_batch([(worker_index, next(numbers), item) for item in proposals])
                if state.closed:
                    held.pop().drop()
                elif state.staged:  # the sink wakes it when items arrive or its frontier moves; this is a backstop
                    contexts[0].activate_after(info.address, RECHECK, info.activate, info.name)

            return logic

        staged: list[tuple[int, int, int, Any]] = []

        def release(frontier: MutableAntichain[int]) -> None:
            """Move the staged items that no earlier item can precede any more to ``ready``."""
            state.ended = frontier.is_empty()
            if not staged:
                return
            releasable = [entry for entry in staged if not frontier.less_equal(entry[0])]
            if releasable:
                releasable.sort(key=lambda entry: (entry[0], entry[1], entry[2]))
                state.ready.extend(entry[3] for entry in releasable)
                staged[:] = [entry for entry in staged if frontier.less_equal(entry[0])]
            state.staged = len(staged)
            if staged:
                state.activate_source()

        contexts: list[BuildContext] = []

        def build(scope: ScopeBuilder) -> None:
            contexts.append(scope.context)
            proposals = scope.source(name, source_constructor)
            builder = OperatorBuilder(scope, f"{name}Output", notify=True)
            port = builder.new_input(proposals, Broadcast)
            operator = builder.build(None, operator_class=_ReleasingSink, release=release)

            def sink_logic() -> None:
                while (message := port.pull()) is not None:
                    time_, batch = message
                    if time_ > state.seen:
                        state.seen = time_
                    for worker_of, number, item in batch:
                        staged.append((time_, worker_of, number, item))
                release(port.frontier)

            operator.set_logic(sink_logic)

        worker.dataflow(build, name=name)
        self._finalizer = weakref.finalize(self, _close, state)

    def push(self, item: T) -> None:
        """Propose ``item``; every worker will receive it."""
        state = self._state
        if state.closed:
            raise TimelyRuntimeError(
                f"sequencer '{self.name}' on worker {self._worker.index} is closed; cannot push {item!r}"
            )
        state.proposals.append(item)
        state.activate_source()

    def next(self) -> T | None:
        """The next item in the agreed order, or ``None`` if none is ready yet."""
        ready = self._state.ready
        return ready.popleft() if ready else None

    def __iter__(self) -> Iterator[T]:
        ready = self._state.ready
        while ready:
            yield ready.popleft()

    def take(self, number: int, timeout: float | None = None) -> list[T]:
        """Step the worker until ``number`` items are ready, and return them.

        Raises :class:`~runtime.barrier.SynchronizationTimeout` after ``timeout`` seconds,
        and :class:`~runtime.errors.TimelyRuntimeError` as soon as every worker's
        sequencer is closed with fewer than ``number`` items left: none can come then.
        """
        state = self._state
        ready = state.ready
        worker = self._worker
        deadline = None if timeout is None else time.monotonic() + timeout
        if deadline is None:  # judged as a step_while: a take that no worker's main can still feed raises
            worker.wait_for_peers(
                lambda: len(ready) < number and not (state.ended and not state.staged),
                f"sequencer '{self.name}'.take({number})",
                lambda: not state.staged and not state.proposals,
            )
        while len(ready) < number:
            if state.ended and not state.staged:
                raise TimelyRuntimeError(
                    f"sequencer '{self.name}': worker {worker.index} asked for {number} items but only "
                    f"{len(ready)} are left, and no more can come: every worker's sequencer is closed"
                )
            worker.step_or_park(0.01)
            if deadline is not None and time.monotonic() > deadline:
                raise SynchronizationTimeout(
                    f"sequencer '{self.name}': worker {worker.index} waited {timeout} s for {number} "
                    f"items but only {len(ready)} are ready ({self._state.staged} received and "
                    "waiting for other workers to advance)",
                    worker.index,
                )
        return [ready.popleft() for _ in range(number)]

    def close(self) -> None:
        """Propose nothing more; items already proposed are still delivered everywhere."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._state.closed

    def __repr__(self) -> str:
        return f"Sequencer({self.name!r}, worker={self._worker.index}, ready={len(self._state.ready)})"
