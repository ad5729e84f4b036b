"""Capture a stream as a sequence of events, and replay events as a stream.

A captured stream is described completely by two kinds of :data:`CaptureEvent`:

* :class:`Progress` ``(updates)``: changes ``(time, diff)`` to the frontier of the
  stream, exactly as the capturing operator saw them at its input.
* :class:`CapturedBatch` ``(time, data)``: a batch that arrived at ``time``: a list of
  records, or a columnar batch (a numpy array, an Arrow record batch or table),
  recorded and replayed as itself, never as rows.

By contract every recorded stream *starts* holding one capability at the
minimum time: :func:`capture_into` removes that initial capability from what it
records, and :func:`replay_into` adds it back, once per replayed stream.  A
stream's events therefore describe a count of capabilities per time that starts
at ``{minimum: 1}`` and ends empty when the captured stream is complete.

Any interleaving of several recorded streams is itself a valid stream, so a
replaying worker may replay any number of them, and streams captured on N
workers may be replayed on M.

This module is pure: it never touches sockets, files or threads (a recorder
read from several threads is handed its lock by the runtime).  It records
into any object with a ``push(event)`` method (an :class:`EventPusher`) and
replays from any iterables of events (see :func:`replay_into`);
:mod:`runtime.eventlog` provides pushers and readers over files and sockets.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, NamedTuple, Protocol, TypeVar, runtime_checkable

from scopes.arrow_values import records
from scopes.batches import batch_len, copy_batch, is_arrow
from scopes.contracts import Pipeline
from scopes.core import ScopeCore, StreamCore
from scopes.errors import BuildError, ReplayError
from scopes.operator import Operator, OperatorInfo
from scopes.operator_builder import OperatorBuilder
from scopes.ports import OutputPort
from scopes.progress.antichain import Antichain
from scopes.progress.change_batch import ChangeBatch
from scopes.progress.operate import Updates
from scopes.progress.order import less_equal
from scopes.progress.timestamp import INTEGER, PathSummary
from scopes.signatures import describe_operator
from scopes.state_registry import registry_of

S = TypeVar("S", bound=StreamCore)
"""The class of the streams read and made (for users, :class:`~scopes.stream.Stream`)."""


class Progress(NamedTuple):
    """Changes ``(time, diff)`` to the frontier of a captured stream, applied as one batch."""

    updates: list[tuple[Any, int]]


class CapturedBatch(NamedTuple):
    """A batch ``data`` that the captured stream carried at ``time``: a list of records or a columnar batch."""

    time: Any
    data: Any


Batch = CapturedBatch
"""The old name of :class:`CapturedBatch` (renamed so as not to clash with :data:`scopes.batches.Batch`)."""

CaptureEvent = Progress | CapturedBatch
"""One event of a captured stream."""


@runtime_checkable
class EventPusher(Protocol):
    """Receives the events of a captured stream, in order.

    A pusher may also have a ``finish()`` method; :func:`capture_into` calls it
    once, when the captured stream's frontier has become empty and nothing more
    will ever be recorded.
    """

    def push(self, event: CaptureEvent) -> None:
        """Record one event."""


# ---------------------------------------------------------------------- capture


class CaptureOperator(Operator):
    """A sink that records every frontier change and message batch of its input as events.

    Frontier changes are recorded as they are delivered to the operator, so the
    final change (the frontier becoming empty) is recorded even when the dataflow
    retires right after delivering it.  Batches are recorded when the operator
    runs; a message at time ``t`` always precedes the frontier change that
    passes ``t``, because an unconsumed message holds the frontier at ``t``.
    """

    def __init__(self, *args: Any, pusher: EventPusher) -> None:
        """Create the operator; ``pusher`` receives the events."""
        super().__init__(*args)
        self.pusher = pusher
        self.finished = False

    def set_external_summary(
        self, summaries: Sequence[Sequence[Antichain[PathSummary]]], frontier: Sequence[Updates]
    ) -> None:
        """Record the initial frontier, less the initial capability every stream is assumed to hold."""
        super().set_external_summary(summaries, frontier)
        changes: ChangeBatch[Any] = ChangeBatch(frontier[0])
        changes.update(self.timestamp_type.minimum(), -1)
        self._record(changes.drain())

    def push_external_progress(self, external: Sequence[Updates]) -> None:
        """Record a change of the input frontier."""
        super().push_external_progress(external)
        if external[0]:
            self._record(ChangeBatch(external[0]).drain())

    def _record(self, updates: list[tuple[Any, int]]) -> None:
        if self.finished:
            return
        if updates:
            self.pusher.push(Progress(updates))
        if self.input_ports[0].frontier.is_empty():
            self.finished = True
            finish = getattr(self.pusher, "finish", None)
            if finish is not None:
                finish()


def capture_into(stream: StreamCore, pusher: EventPusher, name: str = "Capture") -> None:
    """Record ``stream`` into ``pusher``: every frontier change and every message batch, in order.

    Each worker records what arrives on its own share of the stream, together
    with the frontier of the whole stream.  The initial capability at the
    minimum time is not recorded (see the module documentation).  When the
    stream is complete, ``pusher.finish()`` is called if the pusher has one.
    """
    if not callable(getattr(pusher, "push", None)):
        raise TypeError(f"capture_into '{name}': {pusher!r} has no push(event) method")
    if registry_of(stream.scope) is not None and not isinstance(pusher, CaptureRecorder):
        raise BuildError(
            f"{describe_operator(name, stream.scope.path)} records the stream from its start into "
            f"{type(pusher).__name__}, and a run resumed from a checkpoint sends only the epochs from its resume "
            "epoch on: a recording it writes (an EventWriter on the same file) would lose the earlier ones. Write "
            "the stream with write_files, which keeps the committed epochs, or build this dataflow without checkpoint="
        )
    builder = OperatorBuilder(stream.scope, name, reads=stream)
    port = builder.new_input(stream, Pipeline)
    operator = builder.build(None, operator_class=CaptureOperator, pusher=pusher)
    push = pusher.push
    pull = port.pull

    def logic() -> None:
        while (message := pull()) is not None:
            push(CapturedBatch(message[0], message[1]))

    operator.set_logic(logic)


def _rows(batch: Any, time: Any) -> Any:
    """The records of ``batch`` as Python values (for :meth:`CaptureRecorder.messages`; not used by the engine).

    An Arrow value Python cannot hold is an :class:`~scopes.errors.ArrowValueError` naming ``time``, the column
    and the row.
    """
    if batch.__class__ is list:
        return batch
    if is_arrow(batch):
        return records(
            batch,
            f"CaptureRecorder.messages(): the batch recorded at time {time!r}",
            "use CaptureRecorder.batches(), which gives the Arrow batches themselves, or cast the column before "
            "capturing (to int64 or string)",
        )
    to_pylist = getattr(batch, "to_pylist", None)
    if to_pylist is not None:
        return to_pylist()
    return batch.tolist()  # numpy


class CaptureRecorder:
    """An in-memory record of a captured stream's events; thread-safe when given a lock.

    It behaves like a read-only list of events (``len``, indexing, iteration over
    the events recorded so far) and can be replayed: pass it to
    :func:`replay_into`, which follows it live through :meth:`cursor`.
    """

    def __init__(self, lock: AbstractContextManager[Any] | None = None) -> None:
        """An empty recording, guarded by ``lock`` (for example a ``threading.Lock()``; none: one thread only).

        :meth:`Stream.capture <scopes.stream.Stream.capture>` passes a lock from its worker.
        """
        self._events: list[CaptureEvent] = []
        self._lock: AbstractContextManager[Any] = nullcontext() if lock is None else lock
        self._finished = False
        self._waiting: list[Callable[[], None]] = []  # called once when the recording grows or ends

    def push(self, event: CaptureEvent) -> None:
        """Append an event."""
        with self._lock:
            if self._finished:
                raise ReplayError(f"cannot record {event!r}: the recording is already finished", -1)
            self._events.append(event)
            waiting, self._waiting = self._waiting, []
        for callback in waiting:
            callback()

    def finish(self) -> None:
        """Mark the recording complete: the captured stream's frontier is empty."""
        with self._lock:
            self._finished = True
            waiting, self._waiting = self._waiting, []
        for callback in waiting:
            callback()

    def notify_when_past(self, position: int, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once the recording holds more than ``position`` events or has ended (at once if it
        does already); the thread that records calls it."""
        with self._lock:
            now = position < len(self._events) or self._finished
            if not now:
                self._waiting.append(callback)
        if now:
            callback()

    @property
    def finished(self) -> bool:
        """Whether the captured stream has completed."""
        return self._finished

    def events(self) -> list[CaptureEvent]:
        """A copy of the events recorded so far."""
        with self._lock:
            return list(self._events)

    def messages(self) -> list[tuple[Any, Any]]:
        """Every recorded record with its time, as ``(time, record)`` pairs, in recorded order.

        The rows of a columnar batch are listed as Python values: a numpy
        array's by ``tolist()`` (a structured array's rows as tuples), an
        Arrow batch's by ``to_pylist()`` (dicts by column name); an Arrow value
        that Python cannot hold (a timestamp past year 9999, say) is an
        :class:`~scopes.errors.ArrowValueError` naming the time, column and row.
        Use :meth:`batches` to get the batches themselves.
        """
        return [(time, record) for time, batch in self.batches() for record in _rows(batch, time)]

    def batches(self) -> list[tuple[Any, Any]]:
        """Every recorded batch with its time, as ``(time, batch)`` pairs, in recorded order."""
        return [(event.time, event.data) for event in self.events() if isinstance(event, CapturedBatch)]

    def __len__(self) -> int:
        return len(self._events)

    def __getitem__(self, index: int) -> CaptureEvent:
        with self._lock:
            return self._events[index]

    def __iter__(self) -> Iterator[CaptureEvent]:
        return iter(self.events())

    def poll(self, position: int) -> tuple[CaptureEvent | None, bool]:
        """The event at ``position`` (``None``: not recorded yet), and whether the recording ended before it."""
        with self._lock:
            if position < len(self._events):
                return self._events[position], False
            return None, self._finished

    def cursor(self) -> RecorderCursor:
        """A live reader from the first event: yields events, ``None`` while waiting, ends when finished."""
        return RecorderCursor(self)

    def __repr__(self) -> str:
        state = "finished" if self._finished else "recording"
        return f"CaptureRecorder({len(self._events)} events, {state})"


class RecorderCursor:
    """Reads a :class:`CaptureRecorder` from the start, without blocking."""

    def __init__(self, recorder: CaptureRecorder) -> None:
        """Read ``recorder`` from its first event."""
        self._recorder = recorder
        self._position = 0
        self._asked = False

    def __iter__(self) -> RecorderCursor:
        return self

    def __next__(self) -> CaptureEvent | None:
        event, ended = self._recorder.poll(self._position)
        if event is not None:
            self._position += 1
            return event
        if ended:
            raise StopIteration
        return None

    def notify_when_ready(self, callback: Callable[[], None]) -> bool:
        """After ``None``: ask for ``callback()`` once the next event is recorded or the recording ends (from the
        recording thread); returns ``True``: it always comes."""
        if self._asked:  # the request made since the last event stands: one is enough
            return True
        self._asked = True

        def fire() -> None:
            self._asked = False
            callback()

        self._recorder.notify_when_past(self._position, fire)
        return True


def capture(stream: StreamCore, name: str = "Capture") -> CaptureRecorder:
    """Record ``stream`` in memory; returns this worker's :class:`CaptureRecorder`."""
    recorder = CaptureRecorder(stream.scope.context.new_lock())
    capture_into(stream, recorder, name)
    return recorder


# ---------------------------------------------------------------------- replay


POLL_FIRST = 0.001
"""Seconds before a waiting event stream that cannot wake the replay is asked again, the first time."""

POLL_LONGEST = 0.05
"""The most seconds between two looks at a waiting event stream that cannot wake the replay (the interval doubles
from :data:`POLL_FIRST` while it waits)."""


class _ReplayedStream:
    """One event stream being replayed, and the capabilities it holds."""

    __slots__ = ("index", "identity", "events", "held", "least", "open", "poll")

    def __init__(self, index: int, identity: str, events: Iterator[CaptureEvent | None], minimum: Any) -> None:
        self.index = index
        self.identity = identity
        self.events = events
        self.held: dict[Any, int] = {minimum: 1}
        self.least: list[Any] = [minimum]
        """Integer times: a heap of every time held (and of some no longer held), so the least is found at once."""
        self.open = True
        self.poll = POLL_FIRST
        """Seconds until the stream is asked again if it waits and cannot wake the replay (it grows while it waits)."""

    def holds_at_or_before(self, time: Any, integers: bool) -> bool:
        """Whether some time held is at or before ``time``: the least held (``integers``), else any held."""
        held = self.held
        if not integers:
            return any(less_equal(held_time, time) for held_time in held)
        least = self.least
        while least and least[0] not in held:
            heapq.heappop(least)
        return bool(least) and least[0] <= time

    def __str__(self) -> str:
        """What the replay is doing, for an error raised while reading it (an operator's ``position``)."""
        earliest = sorted(self.held, key=repr)[:3]
        return f"replaying event stream {self.index} ({self.identity}), holding capabilities for times {earliest!r}"

    def close(self) -> None:
        self.open = False
        close = getattr(self.events, "close", None)
        if close is not None:
            close()


def _open(source: Any) -> Iterator[CaptureEvent | None]:
    cursor = getattr(source, "cursor", None)
    if callable(cursor):
        return iter(cursor())
    return iter(source)


class ReplayOperator(Operator):
    """The operator replaying recordings; its :attr:`kind` says how many recordings it was given.

    The kind enters the dataflow's fingerprint, so workers given different lists
    of recordings are refused when the dataflow is built.
    """

    kind = "Replay"


def _identity(recording: Any) -> str:
    """How an error names ``recording``: its log file's path, else its type."""
    identity = recording_identity(recording)
    return repr(identity) if identity != "?" else f"a {type(recording).__name__}"


def recording_identity(recording: Any) -> str:
    """What names ``recording`` the same on every worker: a log file's path, else its position only."""
    identity = getattr(recording, "recording_id", None)
    return identity if isinstance(identity, str) else "?"


def replay_into(recordings: Iterable[Any], scope: ScopeCore[S], name: str = "Replay") -> S:
    """Reproduce recorded streams in ``scope``; returns the replayed stream.

    ``recordings`` is the list of *all* recordings, the same on every worker:
    worker ``i`` of ``P`` replays recordings ``i``, ``i + P``, ``i + 2P``, ... (so N
    recordings may be replayed on any number of workers, each exactly once).  A
    recording is an iterable of :data:`CaptureEvent`, an object with a ``cursor()``
    method returning one (such as :class:`CaptureRecorder`), or a function of no
    arguments that opens one: only the worker that replays it calls it (for
    example to accept a socket only that worker listens on).  The number of
    recordings, and the path of each log file, are part of the dataflow, so
    workers given different lists get :class:`~runtime.errors.DataflowMismatch`.

    An iterable yields ``None`` when no event is available yet; it is asked again
    later.  The operator never blocks: it takes the events that are available,
    and while a stream waits its worker may park.  A stream that has a
    ``notify_when_ready(callback)`` method returning ``True`` (an
    :class:`~runtime.eventlog.EventReader` over a socket, a
    :class:`CaptureRecorder`'s cursor) calls ``callback`` from any thread once it
    has more, which wakes the operator; any other is asked again after an
    interval growing from :data:`POLL_FIRST` to :data:`POLL_LONGEST` seconds
    while it waits (at once, outside the runtime, which has no timers).  A stream is finished
    when the capabilities it describes are all released (or it ends); ending
    earlier is a :class:`ReplayError`.
    """
    everything = list(recordings)
    mine = everything[scope.index :: scope.peers]
    event_streams = [recording() if callable(recording) else recording for recording in mine]
    minimum = scope.timestamp_type.minimum()
    if registry_of(scope) is not None:
        raise BuildError(
            f"{describe_operator(name, scope.path)} replays recordings from their start, so a run resumed from a "
            "checkpoint would replay what the checkpoint already holds: build this dataflow without checkpoint="
        )
    builder = OperatorBuilder(scope, name)
    output, stream = builder.new_output()
    info = builder.info
    replayer = _Replayer(
        [
            _ReplayedStream(index, _identity(recording), _open(source), minimum)
            for index, (recording, source) in enumerate(zip(mine, event_streams, strict=True))
        ],
        output,
        info,
        scope,
        f"replay operator '{name}' (address {builder.address}) on worker {info.worker_index}",
    )
    replayer.wake = scope.context.waker(builder.address)
    # a replay ending in an error elsewhere in its dataflow, or stopped, must not leave a socket watched for it
    scope.context.when_abandoned(builder.address, replayer.abandon)
    operator = builder.build(replayer.run, operator_class=ReplayOperator)
    assert isinstance(operator, ReplayOperator)
    operator.kind = f"Replay of {len(everything)} recording(s): {', '.join(map(recording_identity, everything))}"
    # This worker's initial capability is counted by the operator's summary; the
    # logic adjusts it to one per replayed stream on its first run.
    return stream


class _Replayer:
    """The replay operator's logic: takes the available events of each stream and applies them."""

    def __init__(
        self,
        streams: list[_ReplayedStream],
        output: OutputPort,
        info: OperatorInfo,
        scope: ScopeCore[StreamCore],
        where: str,
    ) -> None:
        self.streams = streams
        self.internal = output.internal
        self.send = output.send
        self.info = info
        self.timestamp_type = scope.timestamp_type
        self.integers = scope.timestamp_type == INTEGER
        """Integer times: a message's time is checked against the least time held, not against every one (a log
        holding many times, each message after the least, was quadratic to replay)."""
        self.scope_name = scope.name
        self.where = where
        self.started = False
        self.context = scope.context
        self.wake: Callable[[], None] | None = None
        """Activates the operator from any thread (``None``: no runtime to do it), for streams that can call it."""

    def fail(self, state: _ReplayedStream, problem: str) -> ReplayError:
        position = getattr(state.events, "replay_position", None)  # a log file's reader says where in the file
        where = f" ({position})" if isinstance(position, str) else ""
        return ReplayError(f"{self.where}: event stream {state.index}{where} {problem}", state.index)

    def check_time(self, state: _ReplayedStream, time: Any) -> None:
        timestamp_type = self.timestamp_type
        if not timestamp_type.contains(time):
            raise self.fail(
                state,
                f"has time {time!r}, which is not a {timestamp_type.name} timestamp of scope "
                f"'{self.scope_name}'; replay a recording into a scope with the timestamps it was captured with",
            )

    def apply_progress(self, state: _ReplayedStream, updates: list[tuple[Any, int]]) -> None:
        held = state.held
        internal = self.internal
        integers = self.integers
        for time, diff in updates:
            self.check_time(state, time)
            value = held.get(time, 0) + diff
            if value > 0:
                if integers and time not in held:
                    heapq.heappush(state.least, time)
                held[time] = value
            elif value == 0:
                held.pop(time, None)
            else:
                raise self.fail(state, f"released a capability for time {time!r} that it did not hold")
            internal.update(time, diff)
        if not held:
            state.close()

    def apply_messages(self, state: _ReplayedStream, time: Any, data: Any) -> None:
        self.check_time(state, time)
        if not state.holds_at_or_before(time, self.integers):
            raise self.fail(
                state,
                f"has a message at time {time!r} while holding capabilities only for "
                f"{sorted(state.held, key=repr)!r}; the recording is out of order or damaged",
            )
        if batch_len(data):
            self.send(time, copy_batch(data))  # the recording stays intact whatever operators do to theirs

    def run(self) -> None:
        """Apply every available event; for each stream that waits for more, ask it to wake the operator, or else
        to be looked at again after its poll interval (which then doubles)."""
        if not self.started:
            self.internal.update(self.timestamp_type.minimum(), len(self.streams) - 1)
            self.started = True
        again: float | None = None
        outside = False  # a stream will wake the operator: its worker waits for outside data, not stalled
        for state in self.streams:
            if state.open and self.drain(state):
                if self.woken_by(state):
                    outside = True
                else:
                    again = state.poll if again is None else min(again, state.poll)
                    state.poll = min(state.poll * 2, POLL_LONGEST)
        self.context.waits_outside(self.info.address, outside)
        if again is not None:
            self.context.activate_after(self.info.address, again, self.info.activate, self.info.name)

    def abandon(self) -> None:
        """Close every stream still open (its dataflow was abandoned unfinished): a reader over a socket then
        cancels its request to the socket watcher, and closes the socket if it owns it."""
        for state in self.streams:
            if state.open:
                state.close()

    def woken_by(self, state: _ReplayedStream) -> bool:
        """Ask ``state``'s waiting stream to wake the operator when it has more; return whether it will."""
        notify = getattr(state.events, "notify_when_ready", None)
        return self.wake is not None and notify is not None and notify(self.wake) is True

    def drain(self, state: _ReplayedStream) -> bool:
        """Apply ``state``'s available events; return whether it waits for more (yielded ``None``)."""
        events = state.events
        self.info.position = state  # an error names the recording and the times it still holds, not "time None"
        while state.open:
            try:
                event = next(events)
            except StopIteration:
                state.open = False
                if state.held:
                    raise self.fail(
                        state,
                        "ended while still holding capabilities for times "
                        f"{sorted(state.held, key=repr)!r}; the recording is incomplete",
                    ) from None
                return False
            if event is None:
                return True
            state.poll = POLL_FIRST
            if isinstance(event, Progress):
                self.apply_progress(state, event.updates)
            elif isinstance(event, CapturedBatch):
                self.apply_messages(state, event.time, event.data)
            else:
                raise self.fail(state, f"yielded {event!r}, which is neither Progress nor CapturedBatch")
        return False


__all__ = [
    "CaptureOperator",
    "CaptureRecorder",
    "CaptureEvent",
    "EventPusher",
    "Batch",
    "CapturedBatch",
    "Progress",
    "RecorderCursor",
    "ReplayError",
    "ReplayOperator",
    "capture",
    "capture_into",
    "replay_into",
]
