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

Results are ``(key, (start, end), value)``.  Tumbling and sliding windows fold
their records as they arrive, in arrival order; sessions fold theirs in event-time
order once they close.  Windows need integer timestamps (the top-level scope's
epochs, or a scope with integer times).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from scopes.channels import Pipeline
from scopes.core import StreamCore
from scopes.errors import BuildError, UserFunctionError
from scopes.generic_operators import generic
from scopes.operator import Capability, CapabilityRef, OperatorInfo, OperatorInput, OperatorOutput
from scopes.signatures import check_function, describe_operator
from scopes.timestamp import IntegerType

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


class WindowBuilder(Generic[S]):
    """A keyed stream with its windows chosen: pick what to compute per window."""

    def __init__(self, keyed: S, spec: Any, event_time: Callable[[Any], int] | None, lateness: int) -> None:
        """Windows of ``spec`` over ``keyed``, a stream of pairs routed by key; see :mod:`scopes.windows`."""
        scope = keyed.scope
        if not isinstance(spec, (Tumbling, Sliding, Session)):
            raise BuildError(f"a window needs Tumbling, Sliding or Session, not {spec!r}")
        if not isinstance(scope.timestamp_type, IntegerType):
            raise BuildError(
                f"windows need integer timestamps, and scope {' > '.join(scope.path)!r} has "
                f"{scope.timestamp_type!r}; window the stream outside the loop, or key it by its iteration"
            )
        if isinstance(lateness, bool) or not isinstance(lateness, int) or lateness < 0:
            raise BuildError(f"a window's lateness must be a non-negative integer, not {lateness!r}")
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
        """``acc = function(acc, value)`` over each window's values, from a deep copy of ``initial``."""
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
        """``acc = function(acc, value)`` over each window's values, from its first value."""
        check_function(function, ("accumulator", "value"), "the window reduce function", self._where(name))
        empty = object()
        return self._build(name, lambda: empty, lambda acc, value: value if acc is empty else function(acc, value))

    def _where(self, name: str) -> str:
        return describe_operator(name, self.keyed.scope.path)

    def _build(self, name: str, start: Callable[[], Any], fold: Callable[[Any, Any], Any]) -> Windowed[S]:
        operator = WindowOperator(self.spec, self.event_time, self.lateness, start, fold, self._where(name))

        def constructor(capabilities: list[Capability], info: OperatorInfo) -> Any:
            for capability in capabilities:
                capability.drop()
            return operator.step

        stream = self.keyed
        down, late = generic(stream.scope, name, [(stream, Pipeline)], 2, constructor)
        return Windowed(down, late)


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
    """The logic of a window operator: assign records, send the late ones, close windows at the frontier."""

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

    def step(self, inputs: list[OperatorInput], outputs: list[OperatorOutput]) -> None:
        """Take the arrived records, then close every window the frontier has passed."""
        down, late = outputs
        for ref, batch in inputs[0]:
            time = ref.time
            lates = [pair for pair in batch if self.assign(pair, time, ref)]
            if lates:
                late.session(ref).give_batch(lates)
        late.flush()
        frontier = inputs[0].frontier
        for close in sorted(close for close in self.capabilities if not frontier.less_equal(close)):
            capability = self.capabilities.pop(close)
            results = [self.result(window) for window in self.closing.pop(close, ()) if window.close == close]
            if results:
                down.session(capability).give_batch(results)
                down.flush()
            capability.drop()

    def assign(self, pair: Any, time: int, ref: CapabilityRef) -> bool:
        """Put ``pair`` into its windows; True if it is late for any of them."""
        key, value = pair
        event = time if self.event_time is None else self.event_of(value, key, time)
        if isinstance(self.spec, Session):
            return self.assign_session(key, value, event, time, ref)
        late = False
        length = self.spec.length()
        for start in self.spec.starts(event):
            close = start + length - 1 + self.lateness
            if time > close:
                late = True
                continue
            window = self.windows.get((key, start))
            if window is None:
                window = _Open(key, start, start + length, self.start(), close)
                self.windows[(key, start)] = window
                self.expect(window, ref)
            window.value = self.fold(window.value, value)
        return late

    def assign_session(self, key: Any, value: Any, event: int, time: int, ref: CapabilityRef) -> bool:
        """Merge ``value`` at ``event`` into the key's sessions still open at ``time``; True if it is late."""
        gap = self.spec.gap  # type: ignore[union-attr]
        if time > event + gap - 1 + self.lateness:
            return True
        sessions = self.sessions.setdefault(key, [])
        start, last, gathered = event, event, [(event, value)]
        kept = []
        for session in sessions:
            if session.close >= time and session.start - gap < event < session.end - 1 + gap:
                start, last = min(start, session.start), max(last, session.end - 1)
                gathered.extend(session.value)
                session.close = -1
            else:
                kept.append(session)
        merged = _Open(key, start, last + 1, gathered, last + gap - 1 + self.lateness)
        kept.append(merged)
        self.sessions[key] = kept
        self.expect(merged, ref)
        return False

    def expect(self, window: _Open, ref: CapabilityRef) -> None:
        """Hold a capability at ``window``'s close time, and list it to close then."""
        self.closing.setdefault(window.close, []).append(window)
        if window.close not in self.capabilities:
            self.capabilities[window.close] = ref.delayed(window.close, 0)

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
        """The event time of ``value``, checked to be an integer."""
        event = self.event_time(value)  # type: ignore[misc]
        if isinstance(event, bool) or not isinstance(event, int):
            raise UserFunctionError(
                f"the event_time function of {self.where} must return an integer, in the units of the epochs, "
                f"not {type(event).__name__} {event!r:.60} (key {key!r:.60} at time {time})"
            )
        return event
