"""Keyed state: the operators behind :class:`~scopes.keyed.KeyedStream`, state per key on the key's owner.

``stream.key_by(key)`` makes a keyed stream of ``(key, record)`` pairs,
exchanged so that every record of a key reaches the one worker that owns it
(by :func:`~scopes.hashing.stable_hash`, the same at every worker count and in
every process).  The keyed operators then keep their state in a dictionary on
that worker:

* :func:`stateful_map`: ``(state, value) -> (state, output)`` per record;
* :func:`fold` and :func:`reduce`: a running value per key,
  emitted once per complete time for the keys that changed;
* :func:`process`: per-record logic with per-key timers at a time, fired
  once the frontier has passed it (as the notificator does for an operator);
* windows (:mod:`scopes.windows`) and joins (:mod:`scopes.joins`).

Records are applied one complete time after another, in time order, so the state a
record sees is the state as of the times before it, whatever the interleaving of
the workers.  Within one time, records of one key are applied in arrival order.

All NaN keys are one key, as is a tuple key with NaN in the same places
(:mod:`scopes.key_equality`): a lookup that misses is tried again with the key's
:func:`~scopes.key_equality.canonical_key`, and the state is kept under that.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable, Iterator
from itertools import chain
from typing import Any, TypeVar

from scopes.channels import Exchange, Pipeline
from scopes.core import StreamCore
from scopes.errors import BuildError, CapabilityError, UserFunctionError
from scopes.generic_operators import unary
from scopes.key_equality import PLAIN_KEY_TYPES, canonical_key
from scopes.key_owners import record_key_check
from scopes.operator import Capability, OperatorInfo, OperatorInput, OperatorOutput
from scopes.per_record import identity, pipe
from scopes.progress.order import in_time_order as times_in_order
from scopes.progress.order import less_equal, natural_order
from scopes.signatures import check_function, describe_operator
from scopes.state_registry import OperatorState, refuse_state_in_loops_under_checkpoints, registry_of

S = TypeVar("S", bound=StreamCore)
"""The class of the streams read and made (for users, :class:`~scopes.stream.Stream`)."""


def key_pair(pair: tuple[Any, Any]) -> Hashable:
    """The key of a ``(key, value)`` pair: what keyed streams are exchanged by."""
    if type(pair) is tuple and len(pair) == 2:
        return pair[0]
    raise UserFunctionError(
        f"a keyed stream needs (key, value) pairs, got {type(pair).__name__} {pair!r:.80}; "
        "use key_by(key) to key records that are not pairs"
    )


def key_by(stream: S, key: Callable[[Any], Hashable], name: str) -> S:
    """``(key(record), record)`` pairs, routed to the worker that owns the key."""
    check_function(key, ("record",), "the key function", describe_operator(name, stream.scope.path))
    return pipe(stream, name, lambda batch: [(key(record), record) for record in batch], Exchange(key), records=True)


def keyed(stream: S, name: str) -> S:
    """A stream of ``(key, value)`` pairs, routed to the worker that owns each key."""
    return pipe(stream, name, identity, Exchange(key_pair))


def check_initial(initial: Any, role: str, where: str) -> None:
    """Refuse a value given where a function making it is expected (``fold(0, ...)``); else check the function."""
    if not callable(initial):
        shown = repr(initial) if len(repr(initial)) <= 40 else f"{type(initial).__name__} value"
        value = repr(initial) if len(repr(initial)) <= 40 else "VALUE"
        raise BuildError(
            f"{where}: {role} makes each new key's first value, so it is a function taking no arguments, called "
            f"once per key (each key gets its own list or dict); got the {shown}: pass lambda: {value} (or a type "
            "such as int, list or dict) instead"
        )
    check_function(initial, (), role, where)


def stateful_map(
    stream: S, initial: Callable[[], Any], function: Callable[[Any, Any], tuple[Any, Any]], name: str
) -> S:
    """``state, out = function(state, value)`` per record; ``(key, out)`` at the record's time."""
    where = describe_operator(name, stream.scope.path)
    check_initial(initial, "the initial-state function", where)
    check_function(function, ("state", "value"), "the stateful_map function", where)
    states: dict[Any, Any] = {}
    plain = PLAIN_KEY_TYPES

    def apply(time: Any, records: list[Any]) -> list[Any]:
        out = []
        for key, value in records:
            if key in states:
                state = states[key]
            elif key.__class__ in plain or (key := canonical_key(key)) not in states:
                state = initial()
            else:  # a NaN key (or a tuple holding NaN), found in its canonical form
                state = states[key]
            result = function(state, value)
            if not isinstance(result, tuple) or len(result) != 2:
                raise UserFunctionError(
                    f"the stateful_map function of {where} must return (state, output), "
                    f"not {type(result).__name__}, for key {key!r} at time {time!r}"
                )
            state, output = result
            if state is None:
                states.pop(key, None)
            else:
                states[key] = state
            out.append((key, output))
        return out

    return in_time_order(stream, name, apply, states, initial)


def fold(stream: S, initial: Callable[[], Any], function: Callable[[Any, Any], Any], name: str) -> S:
    """A running ``acc = function(acc, value)`` per key from ``initial()``; ``(key, acc)`` per complete time."""
    where = describe_operator(name, stream.scope.path)
    check_initial(initial, "the initial-value function", where)
    check_function(function, ("accumulator", "value"), "the fold function", where)
    return running(stream, name, function, initial)


def reduce(stream: S, function: Callable[[Any, Any], Any], name: str) -> S:
    """A running ``acc = function(acc, value)`` per key from its first value; ``(key, acc)`` per complete time."""
    check_function(
        function, ("accumulator", "value"), "the reduce function", describe_operator(name, stream.scope.path)
    )
    return running(stream, name, function, None)


def running(stream: S, name: str, function: Callable[[Any, Any], Any], initial: Callable[[], Any] | None) -> S:
    """Per key, ``acc = function(acc, value)`` from ``initial()``; each changed key's value once per complete time.

    With ``initial`` ``None``, a key's first value is its first ``acc`` (:func:`reduce`).
    A new key's first ``acc`` is computed in the loop, without a call of a
    function made for it: that call cost more than the class test a new key
    takes to find its canonical form.
    """
    states: dict[Any, Any] = {}
    plain = PLAIN_KEY_TYPES

    def apply(time: Any, records: list[Any]) -> list[Any]:
        changed: dict[Any, None] = {}
        for key, value in records:
            if key in states:
                states[key] = function(states[key], value)
            elif key.__class__ in plain or (key := canonical_key(key)) not in states:
                states[key] = value if initial is None else function(initial(), value)
            else:  # a NaN key (or a tuple holding NaN), found in its canonical form
                states[key] = function(states[key], value)
            changed[key] = None
        return [(key, states[key]) for key in changed]

    return in_time_order(stream, name, apply, states)


def process(
    stream: S,
    on_record: Callable[[KeyContext, Any], None],
    on_timer: Callable[[KeyContext], None] | None,
    initial: Callable[[], Any] | None,
    name: str,
) -> S:
    """Per-record logic with per-key state and timers (see :meth:`~scopes.keyed.KeyedStream.process`)."""
    where = describe_operator(name, stream.scope.path)
    check_function(on_record, ("context", "value"), "the on_record function", where)
    if on_timer is not None:
        check_function(on_timer, ("context",), "the on_timer function", where)
    if initial is not None:
        check_initial(initial, "the initial-state function", where)
    refuse_state_in_loops_under_checkpoints(stream.scope, where)
    operator = KeyedProcess(where, on_record, on_timer, initial)
    operator.order = stream.scope.timestamp_type.sort_key()
    registry = registry_of(stream.scope)

    def constructor(capability: Capability, info: OperatorInfo) -> Callable[[OperatorInput, OperatorOutput], None]:
        operator.info = info
        if registry is None:
            capability.drop()
        else:  # kept until the run knows whether it resumes: restored timers need capabilities
            operator.initial_capability = capability
        return operator.step

    out = unary(stream, Pipeline, name, constructor, None, notify=True)
    if registry is not None:
        address = (*out.scope.address, out.source.node)
        operator.tracked = registry.register(
            address,
            name,
            where,
            operator.snapshot,
            operator.restore,
            initial and initial(),
            operator.settle,
            record_key_check(out.scope, operator.keys),
        )
    return out


def in_time_order(
    stream: S,
    name: str,
    apply: Callable[[Any, list[Any]], list[Any]],
    states: dict[Any, Any] | None = None,
    initial: Callable[[], Any] | None = None,
) -> S:
    """Buffer each time's records; once the time is complete, send ``apply(time, records)``, in time order.

    ``states`` is the operator's state per key: with checkpoints on, it is
    registered (:mod:`scopes.state_registry`) and reported as of each time
    before the next is applied.
    """
    if states is not None:
        refuse_state_in_loops_under_checkpoints(stream.scope, describe_operator(name, stream.scope.path))
    pending: dict[Any, list[Any]] = {}
    capabilities: dict[Any, Capability] = {}
    tracked: list[OperatorState] = []
    key = stream.scope.timestamp_type.sort_key()  # the order of times that complete together

    def constructor(capability: Capability, info: OperatorInfo) -> Callable[[OperatorInput, OperatorOutput], None]:
        capability.drop()

        def logic(input: OperatorInput, output: OperatorOutput) -> None:
            for ref, batch in input:
                time = ref.time
                if time not in capabilities:
                    capabilities[time] = ref.retain()
                    pending[time] = []
                pending[time].extend(batch)
            frontier = input.frontier
            done = [time for time in capabilities if not frontier.less_equal(time)]
            for time in times_in_order(done, key) if done else done:
                info.position = f"applying the records of the complete time {time!r}"  # a failure names the time
                if tracked:
                    tracked[0].reached(time)
                capability = capabilities.pop(time)
                records = apply(time, pending.pop(time))
                if records:
                    output.session(capability).give_batch(records)
                    output.flush()
                capability.drop()
            info.position = None
            if tracked:
                elements = frontier.elements
                tracked[0].reached(min(elements) if elements else None)

        return logic

    out = unary(stream, Pipeline, name, constructor, None, notify=True)
    if states is not None:
        tracked.extend(track_state(out, name, states, initial))
    return out


def track_state(out: StreamCore, name: str, states: dict[Any, Any], initial: Callable[[], Any] | None) -> list[Any]:
    """Register ``states`` (per key) for checkpoints when the dataflow has them: ``[OperatorState]`` or ``[]``."""
    registry = registry_of(out.scope)
    if registry is None:
        return []

    def restore(pairs: Any) -> None:
        states.clear()
        states.update((canonical_key(key), value) for key, value in pairs)  # decoded NaN: found as new records' NaN

    where = describe_operator(name, out.scope.path)
    address = (*out.scope.address, out.source.node)
    misplaced = record_key_check(out.scope, states.keys)
    return [
        registry.register(
            address, name, where, lambda: list(states.items()), restore, initial and initial(), None, misplaced
        )
    ]


class KeyContext:
    """What :meth:`~scopes.keyed.KeyedStream.process`'s functions see: the key, the time, its state, and how to emit."""

    __slots__ = ("key", "time", "state", "outputs", "timers", "where")

    def __init__(self, key: Any, time: Any, state: Any, timers: list[Any], where: str) -> None:
        """The context of ``key`` at ``time``; ``timers`` collects the times asked for."""
        self.key = key
        self.time = time
        self.state = state
        self.outputs: list[Any] = []
        self.timers = timers
        self.where = where

    def emit(self, output: Any) -> None:
        """Send ``(key, output)`` at this context's time."""
        self.outputs.append((self.key, output))

    def set_timer(self, time: int) -> None:
        """Call ``on_timer`` for this key once the frontier has passed ``time`` (not before this context's).

        With integer times, any integer is taken (a NumPy integer as the equal ``int``); a float or a
        boolean is refused here, where it would be taken or refused by whether the operator happened to
        hold the time already, which depends on the worker count.
        """
        if time.__class__ is not self.time.__class__ and self.time.__class__ is int:
            try:
                if isinstance(time, bool):
                    raise TypeError("a boolean")
                time = operator.index(time)
            except TypeError:
                raise CapabilityError(
                    f"{self.where}: a timer for key {self.key!r} at time {time!r}: the times of this scope are "
                    f"integers, not {type(time).__name__}"
                ) from None
        if not less_equal(self.time, time):
            raise CapabilityError(
                f"{self.where}: a timer for key {self.key!r} at time {time!r} is not at or after the current time "
                f"{self.time!r}; timers can only be set at or after it"
            )
        self.timers.append(time)


class KeyedProcess:
    """The operator behind :meth:`~scopes.keyed.KeyedStream.process`: records and timers applied in time order."""

    def __init__(
        self,
        where: str,
        on_record: Callable[[KeyContext, Any], None],
        on_timer: Callable[[KeyContext], None] | None,
        initial: Callable[[], Any] | None,
    ) -> None:
        """The logic of the operator described by ``where``; see :meth:`~scopes.keyed.KeyedStream.process`."""
        self.where = where
        self.on_record = on_record
        self.on_timer = on_timer
        self.initial = initial
        self.states: dict[Any, Any] = {}
        self.pending: dict[Any, list[Any]] = {}
        self.capabilities: dict[Any, Capability] = {}
        self.timers: dict[Any, dict[Any, None]] = {}
        self.initial_capability: Capability | None = None
        self.tracked: OperatorState | None = None
        self.info: OperatorInfo | None = None
        """The operator's info, once built: an error while a complete time is run names that time."""
        self.order: Callable[[Any], Any] | None = natural_order  # the timestamp type's sort key

    def step(self, input: OperatorInput, output: OperatorOutput) -> None:
        """Take what arrived, then run every complete time's records and timers in time order."""
        for ref, batch in input:
            time = ref.time
            if time not in self.capabilities:
                self.capabilities[time] = ref.retain()
            self.pending.setdefault(time, []).extend(batch)
        frontier = input.frontier
        while True:
            ready = [time for time in self.capabilities if not frontier.less_equal(time)]
            if not ready:
                break
            time = min(ready) if self.order is natural_order else times_in_order(ready, self.order)[0]
            if self.info is not None:
                self.info.position = f"running the records and timers of the complete time {time!r}"
            if self.tracked is not None:
                self.tracked.reached(time)
            self.run_time(time, output)
        if self.info is not None:
            self.info.position = None
        if self.tracked is not None:
            elements = frontier.elements
            self.tracked.reached(min(elements) if elements else None)

    def snapshot(self) -> Any:
        """The state per key and the timers, as plain values, for a checkpoint."""
        return [list(self.states.items()), [(time, list(keys)) for time, keys in self.timers.items()]]

    def restore(self, saved: Any) -> None:
        """Put back a :meth:`snapshot`; the restored timers get their capabilities in :meth:`settle`."""
        states, timers = saved
        self.states = dict((canonical_key(key), value) for key, value in states)
        self.timers = {time: dict.fromkeys(map(canonical_key, keys)) for time, keys in timers}

    def keys(self) -> Iterator[Any]:
        """Every key with state or a timer (each timer's once), for the check of restored keys' owners."""
        return chain(self.states, *self.timers.values())

    def settle(self) -> None:
        """Take a capability for every restored timer from the initial one, then drop that."""
        capability, self.initial_capability = self.initial_capability, None
        if capability is None:
            return
        boundary = self.tracked.covered if self.tracked is not None else 0
        for time in self.timers:
            if time.__class__ is not int or time < boundary:  # fired before the checkpoint: only a changed file has it
                capability.drop()
                raise ValueError(
                    f"a restored timer is at time {time!r:.60}, not an epoch at or after the checkpoint's {boundary}"
                )
        for time in self.timers:
            if time not in self.capabilities:
                self.capabilities[time] = capability.delayed(time)
        capability.drop()

    def run_time(self, time: Any, output: OperatorOutput) -> None:
        """Apply ``time``'s records, then fire its timers, then release its capability."""
        capability = self.capabilities[time]
        outputs: list[Any] = []
        for key, value in self.pending.pop(time, ()):
            outputs.extend(self.call(self.on_record, key, time, capability, value))
        while time in self.timers:
            for key in self.timers.pop(time):
                if self.on_timer is not None:
                    outputs.extend(self.call(self.on_timer, key, time, capability))
        if outputs:
            output.session(capability).give_batch(outputs)
            output.flush()
        del self.capabilities[time]
        capability.drop()

    def call(self, function: Callable[..., None], key: Any, time: Any, capability: Capability, *args: Any) -> list[Any]:
        """Run ``function`` on ``key``'s context; keep its state; schedule the timers it set."""
        state = self.states.get(key)
        if state is None and key.__class__ not in PLAIN_KEY_TYPES:  # a NaN key is kept in its canonical form
            key = canonical_key(key)
            state = self.states.get(key)
        if state is None and self.initial is not None:
            state = self.initial()
        asked: list[Any] = []
        context = KeyContext(key, time, state, asked, self.where)
        function(context, *args)
        if context.state is None:
            self.states.pop(key, None)
        else:
            self.states[key] = context.state
        for at in asked:
            self.timers.setdefault(at, {})[key] = None
            if at not in self.capabilities:
                self.capabilities[at] = capability.delayed(at)
        return context.outputs
