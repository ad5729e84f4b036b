"""Event-time windows on a keyed stream, closed by the frontier, never by the clock.

``keyed.window(Tumbling(10)).count()`` counts each key's records in the windows
``[0, 10)``, ``[10, 20)``, ... of their time.  Three shapes:

* :class:`Tumbling`: ``[origin + k·size, origin + (k+1)·size)``, one window a record;
* :class:`Sliding`: windows of ``size`` starting every ``step``, several a record;
* :class:`Session`: a key's records closer than ``gap`` to each other, merged.

A window ending at ``end`` (exclusive) closes, and its result is sent at time
``end - 1 + lateness``, exactly when the input frontier passes that time: then no
record that belongs in it can still arrive.  By default a record's event time is
its timestamp (its epoch) and ``lateness`` is 0, so no record is ever late.

A source whose records carry their own event times, running ahead of its epochs,
passes ``event_time=`` and a ``lateness`` bound in the same units as its epochs.
A record is *late* when its epoch is after the close time of a window it belongs
in (for a session: of the session it would start alone); it goes to the
``late`` stream as its ``(key, value)`` pair, never dropped.  Whether a record is
late depends only on its epoch and event time, not on the order things ran.

All NaN keys are one key (:mod:`scopes.key_equality`): their windows are kept
under the one canonical NaN, which the results carry.

Results are ``(key, (start, end), value)``.  Records are applied one complete
time after another, in time order (within a time, in arrival order); sessions
fold theirs in event-time order once they close.  Windows need integer timestamps (the top-level scope's
epochs, or a scope with integer times).
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from scopes.channels import Pipeline
from scopes.core import StreamCore
from scopes.errors import BuildError, UserFunctionError
from scopes.generic_operators import generic
from scopes.key_equality import PLAIN_KEY_TYPES, canonical_key
from scopes.key_owners import record_key_check
from scopes.operator import Capability, OperatorInfo, OperatorInput, OperatorOutput
from scopes.progress.timestamp import UINT64_MAX, IntegerType
from scopes.signatures import check_function, describe_operator
from scopes.state_registry import OperatorState, registry_of

S = TypeVar("S", bound=StreamCore)
"""The class of the streams read and made (for users, :class:`~scopes.stream.Stream`)."""


def _positive(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise BuildError(f"a window's {what} must be a positive integer, not {value!r}")
    return value


@dataclass(frozen=True)
class Tumbling:
    """Windows ``[origin + k·size, origin + (k+1)·size)``: each record in exactly one."""

    size: int
    origin: int = 0

    def __post_init__(self) -> None:
        _positive(self.size, "size")

    def starts(self, event: int) -> range:
        """The start of the window holding ``event``."""
        start = event - (event - self.origin) % self.size
        return range(start, start + 1)

    def length(self) -> int:
        """How long each window is."""
        return self.size


@dataclass(frozen=True)
class Sliding:
    """Windows of ``size`` starting at ``origin + k·step``: each record in ``size / step`` of them."""

    size: int
    step: int
    origin: int = 0

    def __post_init__(self) -> None:
        _positive(self.size, "size")
        _positive(self.step, "step")
        if self.step > self.size:
            raise BuildError(
                f"a sliding window's step ({self.step}) is longer than its size ({self.size}): "
                "records between windows would belong to none; use Tumbling for step == size"
            )

    def starts(self, event: int) -> range:
        """The starts of the windows holding ``event``, earliest first."""
        last = event - (event - self.origin) % self.step
        first = last - ((self.size - 1) // self.step) * self.step
        while first + self.size <= event:
            first += self.step
        return range(first, last + 1, self.step)

    def length(self) -> int:
        """How long each window is."""
        return self.size


@dataclass(frozen=True)
class Session:
    """A key's records, merged into one window while each is closer than ``gap`` to the next."""

    gap: int

    def __post_init__(self) -> None:
        _positive(self.gap, "gap")


WindowSpec = Tumbling | Sliding | Session
"""The window shapes."""


class Windowed(NamedTuple, Generic[S]):
    """A window operator's outputs: the results, and the late records."""

    down: S
    late: S


def check_window(scope: Any, spec: Any, lateness: Any, prefix: str) -> None:
    """Refuse, when the dataflow is built, a window ``spec``, scope or ``lateness`` a window cannot use.

    Every message starts with ``prefix`` (the operator, for the columnar windows).
    """
    if not isinstance(spec, (Tumbling, Sliding, Session)):
        raise BuildError(f"{prefix}a window needs Tumbling, Sliding or Session, not {spec!r}")
    if not isinstance(scope.timestamp_type, IntegerType):
        raise BuildError(
            f"{prefix}windows need integer timestamps, and scope {' > '.join(scope.path)!r} has "
            f"{scope.timestamp_type!r}; window the stream outside the loop"
        )
    if isinstance(lateness, bool) or not isinstance(lateness, int) or lateness < 0:
        raise BuildError(f"{prefix}a window's lateness must be a non-negative integer, not {lateness!r}")


def earliest_complete(holds: Iterable[int], closes: Iterable[int], frontier: Any) -> int | None:
    """The earliest time the ``frontier`` has passed among held input times and window close times, if any."""
    complete = [time for time in holds if not frontier.less_equal(time)]
    complete.extend(close for close in closes if not frontier.less_equal(close))
    return min(complete) if complete else None


class WindowBuilder(Generic[S]):
    """A keyed stream with its windows chosen: pick what to compute per window."""

    def __init__(self, keyed: S, spec: Any, event_time: Callable[[Any], int] | None, lateness: int) -> None:
        """Windows of ``spec`` over ``keyed``, a stream of pairs routed by key; see :mod:`scopes.windows`."""
        check_window(keyed.scope, spec, lateness, "")
        if event_time is None and lateness:
            raise BuildError(
                "a lateness bound without event_time= has no effect: records are windowed by their epoch, "
                "which is never late; pass event_time= to window by a time the records carry"
            )
        self.keyed = keyed
        self.spec = spec
        self.event_time = event_time
        self.lateness = lateness

    def fold(self, initial: Any, function: Callable[[Any, Any], Any], name: str = "WindowFold") -> Windowed[S]:
        """``acc = function(acc, value)`` over each window's values, from a deep copy of ``initial``.

        ``initial`` is the value itself, not a function making it (as
        :meth:`~scopes.keyed.KeyedStream.fold` takes): a function or a type is refused.
        """
        if callable(initial):
            label = getattr(initial, "__qualname__", None) or repr(initial)
            plain = any(initial is kind for kind in (int, float, str, list, dict, set, tuple))
            instead = repr(initial()) if plain else "the value it makes"  # int -> 0, list -> [], ...
            raise BuildError(
                f"{self._where(name)}: a window's fold starts each window from a deep copy of its initial value, "
                f"so it takes the value itself, not a function or type that makes it (as a keyed fold does); got "
                f"{label}: pass {instead} instead"
            )
        check_function(function, ("accumulator", "value"), "the window fold function", self._where(name))
        return self._build(name, lambda: copy.deepcopy(initial), function)

    def count(self, name: str = "WindowCount") -> Windowed[S]:
        """How many records each window holds."""
        return self._build(name, int, lambda total, value: total + 1)

    def collect(self, name: str = "WindowCollect") -> Windowed[S]:
        """The list of each window's values."""

        def append(values: list[Any], value: Any) -> list[Any]:
            values.append(value)
            return values

        return self._build(name, list, append)

    def reduce(self, function: Callable[[Any, Any], Any], name: str = "WindowReduce") -> Windowed[S]:
        """``acc = function(acc, value)`` over each window's values, from its first value.

        ``None`` stands for "no value yet", so ``function`` must not return ``None``: a result of
        ``None`` (a function that changes ``acc`` in place and returns nothing, such as
        ``list.extend``) fails the operator, where it would drop the window's values before it.
        """
        where = self._where(name)
        check_function(function, ("accumulator", "value"), "the window reduce function", where)

        def step(acc: Any, value: Any) -> Any:
            if acc is None:
                return value
            result = function(acc, value)
            if result is None:
                raise UserFunctionError(
                    f"the window reduce function of {where} returned None, which stands for a window with no "
                    "value yet: the window's values before this one would be dropped. Return the new value "
                    "(a function that changes its accumulator in place must return it too)"
                )
            return result

        return self._build(name, lambda: None, step)

    def _where(self, name: str) -> str:
        return describe_operator(name, self.keyed.scope.path)

    def _build(self, name: str, start: Callable[[], Any], fold: Callable[[Any, Any], Any]) -> Windowed[S]:
        where = self._where(name)
        operator = WindowOperator(self.spec, self.event_time, self.lateness, start, fold, where)
        stream = self.keyed
        registry = registry_of(stream.scope)

        def constructor(capabilities: list[Capability], info: OperatorInfo) -> Any:
            operator.info = info
            if registry is not None:  # kept until the run knows whether it resumes: restored windows need it
                operator.initial = capabilities[0]
                capabilities = capabilities[1:]
            for capability in capabilities:
                capability.drop()
            return operator.step

        down, late = generic(stream.scope, name, [(stream, Pipeline)], 2, constructor)
        if registry is not None:
            address = (*down.scope.address, down.source.node)
            operator.tracked = registry.register(
                address,
                window_state_name(
                    name, self.spec, "epochs" if self.event_time is None else "event time", self.lateness
                ),
                where,
                operator.snapshot,
                operator.restore,
                start(),
                operator.settle,
                record_key_check(down.scope, operator.keys),
            )
        return Windowed(down, late)


def window_state_name(name: str, spec: Any, timed: str, lateness: int) -> str:
    """The name a window operator files its checkpointed state under: its name, spec, ``timed`` and lateness.

    ``timed`` says what times the windows: ``"epochs"``, or the event time.

    A checkpoint of windows of another spec or lateness (or timed otherwise) holds
    windows this operator would close wrongly, or could not handle at all; with
    these in the name, resuming from it is refused with a message naming both
    (:meth:`scopes.state_registry.StateRegistry.restore`).
    """
    return f"{name}[{spec!r}, {timed}, lateness={lateness}]"


class _Open:
    """An open window (or session) of one key: its extent and what it has folded or gathered."""

    __slots__ = ("key", "start", "end", "value", "close")

    def __init__(self, key: Any, start: int, end: int, value: Any, close: int) -> None:
        self.key = key
        self.start = start
        self.end = end
        self.value = value
        self.close = close


class WindowOperator:
    """The logic of a window operator: send late records, apply complete times in order, close windows.

    A record's lateness depends only on its epoch and event time, so late records
    are sent as they arrive.  The others wait until their time is complete; then
    each complete time ``t``, in order, has its records applied and the windows
    closing at ``t`` sent.  Before ``t`` is handled, the state is exactly the state
    as of the times before ``t`` (what a checkpoint holds): every record before
    ``t`` applied, every window closing before ``t`` sent, nothing of ``t`` or later.
    """

    def __init__(
        self,
        spec: WindowSpec,
        event_time: Callable[[Any], int] | None,
        lateness: int,
        start: Callable[[], Any],
        fold: Callable[[Any, Any], Any],
        where: str,
    ) -> None:
        """Windows of ``spec``; each starts from ``start()`` and folds values with ``fold``."""
        self.spec = spec
        self.event_time = event_time
        self.lateness = lateness
        self.start = start
        self.fold = fold
        self.where = where
        self.windows: dict[tuple[Any, int], _Open] = {}
        self.sessions: dict[Any, list[_Open]] = {}
        self.closing: dict[int, list[_Open]] = {}
        self.capabilities: dict[int, Capability] = {}
        self.pending: dict[int, list[tuple[Any, Any, int]]] = {}
        self.holds: dict[int, Capability] = {}
        self.initial: Capability | None = None
        self.tracked: OperatorState | None = None
        self.info: OperatorInfo | None = None
        """The operator's info, once built: an error while a complete time is applied names that time."""

    def step(self, inputs: list[OperatorInput], outputs: list[OperatorOutput]) -> None:
        """Send the late records, then apply every complete time and close the windows it passes."""
        down, late = outputs
        for ref, batch in inputs[0]:
            time = ref.time
            lates = []
            for pair in batch:
                key, value = pair
                event = time if self.event_time is None else self.event_of(value, key, time)
                if self.late_for_some(event, time):
                    lates.append(pair)
                self.pending.setdefault(time, []).append((key, value, event))
            if lates:
                late.session(ref).give_batch(lates)
            if time not in self.holds and time in self.pending:
                self.holds[time] = ref.retain(0)
        late.flush()
        frontier = inputs[0].frontier
        # records may open windows that close at complete times too: look again after each time
        info = self.info
        while (time := earliest_complete(self.holds, self.capabilities, frontier)) is not None:
            # the state now is as of the times before ``time``: its records not applied, its windows not sent
            if info is not None:
                info.position = f"applying the complete time {time!r} and closing the windows it passes"
            if self.tracked is not None:
                self.tracked.reached(time)
            hold = self.holds.pop(time, None)
            if hold is not None:
                for key, value, event in self.pending.pop(time, ()):
                    self.assign(key, value, event, time, hold)
                hold.drop()
            self.close_at(time, down)
        if info is not None:
            info.position = None
        if self.tracked is not None:
            elements = frontier.elements
            self.tracked.reached(min(elements) if elements else None)

    def close_at(self, close: int, down: OperatorOutput) -> None:
        """Send the windows that close at ``close`` (the frontier has passed it) and release its capability."""
        capability = self.capabilities.pop(close, None)
        if capability is None:
            return
        results = [self.result(window) for window in self.closing.pop(close, ()) if window.close == close]
        if results:
            down.session(capability).give_batch(results)
            down.flush()
        capability.drop()

    def late_for_some(self, event: int, time: int) -> bool:
        """Whether a record of ``event`` at epoch ``time`` is late for a window it belongs in."""
        if isinstance(self.spec, Session):
            return time > event + self.spec.gap - 1 + self.lateness
        length = self.spec.length()
        return any(time > start + length - 1 + self.lateness for start in self.spec.starts(event))

    def assign(self, key: Any, value: Any, event: int, time: int, hold: Capability) -> None:
        """Fold ``value`` into the windows of ``key`` it is on time for."""
        if isinstance(self.spec, Session):
            self.assign_session(key, value, event, time, hold)
            return
        length = self.spec.length()
        for start in self.spec.starts(event):
            close = start + length - 1 + self.lateness
            if time > close:
                continue
            window = self.windows.get((key, start))
            if window is None and key.__class__ not in PLAIN_KEY_TYPES:  # NaN keys: one key, kept canonical
                key = canonical_key(key)
                window = self.windows.get((key, start))
            if window is None:
                window = _Open(key, start, start + length, self.start(), close)
                self.windows[(key, start)] = window
                self.expect(window, hold)
            window.value = self.fold(window.value, value)

    def assign_session(self, key: Any, value: Any, event: int, time: int, hold: Capability) -> None:
        """Merge ``value`` at ``event`` into the key's sessions still open at ``time`` (late ones are skipped)."""
        gap = self.spec.gap  # type: ignore[union-attr]
        if time > event + gap - 1 + self.lateness:
            return
        start, last, gathered = event, event, [(event, value)]
        kept = []
        sessions = self.sessions.get(key)
        if sessions is None and key.__class__ not in PLAIN_KEY_TYPES:  # NaN keys: one key, kept canonical
            key = canonical_key(key)
            sessions = self.sessions.get(key)
        for session in sessions or ():
            if session.close >= time and session.start - gap < event < session.end - 1 + gap:
                start, last = min(start, session.start), max(last, session.end - 1)
                gathered.extend(session.value)
                session.close = -1
            else:
                kept.append(session)
        merged = _Open(key, start, last + 1, gathered, last + gap - 1 + self.lateness)
        kept.append(merged)
        self.sessions[key] = kept
        self.expect(merged, hold)

    def expect(self, window: _Open, hold: Capability) -> None:
        """Hold a capability at ``window``'s close time, and list it to close then."""
        if window.close > UINT64_MAX:
            raise UserFunctionError(
                f"{self.where}: the window {(window.start, window.end)} of key {window.key!r:.60} would close at time "
                f"{window.close}, past the largest timestamp 2**64 - 1, so it could never be sent; the event_time "
                "function must give times in the units of the epochs (use coarser units or subtract an offset)"
            )
        self.closing.setdefault(window.close, []).append(window)
        if window.close not in self.capabilities:
            self.capabilities[window.close] = hold.delayed(window.close)

    def result(self, window: _Open) -> tuple[Any, tuple[int, int], Any]:
        """``(key, (start, end), value)`` for a closing window, which is forgotten."""
        if isinstance(self.spec, Session):
            self.sessions[window.key].remove(window)
            if not self.sessions[window.key]:
                del self.sessions[window.key]
            value = self.start()
            for _, item in sorted(window.value, key=lambda pair: pair[0]):
                value = self.fold(value, item)
            return (window.key, (window.start, window.end), value)
        del self.windows[(window.key, window.start)]
        return (window.key, (window.start, window.end), window.value)

    def event_of(self, value: Any, key: Any, time: int) -> int:
        """The event time of ``value``, checked to be an integer (a NumPy integer is taken as the equal ``int``)."""
        event = self.event_time(value)  # type: ignore[misc]
        if event.__class__ is int:
            return event
        if not isinstance(event, bool):
            try:
                return operator.index(event)  # an int subclass, or a NumPy integer from a record taken out of an array
            except TypeError:
                pass
        raise UserFunctionError(
            f"the event_time function of {self.where} must return an integer, in the units of the epochs, "
            f"not {type(event).__name__} {event!r:.60} (key {key!r:.60} at time {time})"
        )

    # ------------------------------------------------------------------ checkpoints

    def snapshot(self) -> Any:
        """The open windows and sessions, as plain values, for a checkpoint."""
        windows = [[w.key, w.start, w.end, w.value, w.close] for w in self.windows.values()]
        sessions = [[w.key, w.start, w.end, w.value, w.close] for ws in self.sessions.values() for w in ws]
        return [windows, sessions]

    def restore(self, saved: Any) -> None:
        """Put back a :meth:`snapshot`; the capabilities to send them come in :meth:`settle`.

        Each window is checked to be one this operator makes (its extent and
        close time follow from the spec and lateness), so that a checkpoint
        changed under a right checksum fails here, not when the window closes.
        """
        windows, sessions = saved
        for key, start, end, value, close in windows:
            key = canonical_key(key)  # a decoded NaN: found as new records' NaN
            window = _Open(key, start, end, value, close)
            self.check_restored(window, False)
            self.windows[(key, start)] = window
            self.closing.setdefault(close, []).append(window)
        for key, start, end, value, close in sessions:
            key = canonical_key(key)
            window = _Open(key, start, end, [tuple(item) for item in value], close)
            self.check_restored(window, True)
            self.sessions.setdefault(key, []).append(window)
            self.closing.setdefault(close, []).append(window)

    def check_restored(self, window: _Open, session: bool) -> None:
        """:class:`ValueError` unless ``window`` (a session if ``session``) is one this operator could have open."""
        start, end, close = window.start, window.end, window.close
        if session != isinstance(self.spec, Session):
            raise ValueError(f"{'a session' if session else 'a window'} for windows of {self.spec!r}")
        if not all(part.__class__ is int for part in (start, end, close)):
            raise ValueError(f"the window {[start, end, close]!r:.80} of key {window.key!r:.60} is not of integers")
        if isinstance(self.spec, Session):
            fits = start < end and close == end - 2 + self.spec.gap + self.lateness  # its last event + gap - 1
            fits = fits and all(len(item) == 2 and item[0].__class__ is int for item in window.value)
        else:
            length = self.spec.length()
            fits = start in self.spec.starts(start) and end == start + length and close == end - 1 + self.lateness
        if not fits or not 0 <= close <= UINT64_MAX:
            raise ValueError(
                f"the window [{start}, {end}) of key {window.key!r:.60}, closing at {close}, is none that windows "
                f"of {self.spec!r} with lateness {self.lateness} make"
            )

    def keys(self) -> Iterator[Any]:
        """The key of every open window and of every key with open sessions, for the check of restored keys' owners."""
        yield from (key for key, _ in self.windows)
        yield from self.sessions

    def settle(self) -> None:
        """Take a capability for every restored window's close from the initial one, then drop that."""
        initial, self.initial = self.initial, None
        if initial is None:
            return
        boundary = self.tracked.covered if self.tracked is not None else 0
        if self.closing and min(self.closing) < boundary:  # sent before the checkpoint: only a changed file has it
            initial.drop()
            raise ValueError(
                f"a restored window closes at {min(self.closing)}, before the checkpoint's epoch {boundary}, "
                "so it was sent before the checkpoint was taken"
            )
        for close in self.closing:
            if close not in self.capabilities:
                self.capabilities[close] = initial.delayed(close)
        initial.drop()
