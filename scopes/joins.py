"""Joins of keyed streams: per time, and against a slowly changing table.

* :func:`join_per_time`: an equi-join of two keyed streams at each time.  Each
  record is matched, as it arrives, with the other side's records of the same
  key and time; a time's records are forgotten once both inputs have passed it.
* :func:`join_latest`: each record of a stream with the latest value of its key
  in a table, as of the record's time.  The table is a keyed stream of updates
  (``None`` deletes a key).  A record at time ``t`` waits until the table's
  updates up to ``t`` are all in; the table moves past ``t`` only once no record
  at ``t`` or before can still arrive, so every record sees exactly the table
  as of its own time, whatever the interleaving.  Two different values for one
  key at one time are refused (:class:`~scopes.errors.ConflictingUpdates`):
  which is the latest would depend on the message order.  Values are one value
  when :func:`~scopes.key_equality.same_value` says so: NaN is NaN, but ``1``
  and ``1.0``, or ``0.0`` and ``-0.0``, are two.

Both sides are streams of ``(key, value)`` pairs routed by key, in the same scope; the results are
``(key, (left, right))`` pairs.  All NaN keys are one key (:mod:`scopes.key_equality`), as in pandas'
``merge``: a NaN key on one side joins a NaN key on the other.
"""

from __future__ import annotations

from typing import Any, TypeVar

from scopes.channels import Pipeline
from scopes.core import StreamCore
from scopes.errors import BuildError, ConflictingUpdates, ScopeBoundaryError
from scopes.generic_operators import binary
from scopes.key_equality import PLAIN_KEY_TYPES, canonical_key, same_value
from scopes.key_owners import record_key_check
from scopes.operator import Capability, OperatorInfo, OperatorInput, OperatorOutput
from scopes.progress.timestamp import IntegerType
from scopes.signatures import describe_operator
from scopes.state_registry import OperatorState, registry_of

S = TypeVar("S", bound=StreamCore)
"""The class of the streams read and made (for users, :class:`~scopes.stream.Stream`)."""

JOIN_KINDS = ("inner", "left")
"""What ``join_latest`` does with a record whose key has no table value: drop it, or keep it with ``None``."""


def check_same_scope(left: S, right: S, name: str) -> str:
    """The operator's description; :class:`ScopeBoundaryError` unless both streams are of one scope."""
    where = describe_operator(name, left.scope.path)
    if right.scope is not left.scope:
        raise ScopeBoundaryError(
            f"{where} joins streams of different scopes, {' > '.join(left.scope.path)!r} and "
            f"{' > '.join(right.scope.path)!r}: bring one into the other's scope with enter() or leave()"
        )
    return where


def join_per_time(left: S, right: S, name: str) -> S:
    """``(key, (l, r))`` for every pair of records with the same key at the same time."""
    check_same_scope(left, right, name)
    sides: dict[Any, tuple[dict[Any, list[Any]], dict[Any, list[Any]]]] = {}

    def constructor(capability: Capability, info: OperatorInfo) -> Any:
        capability.drop()

        def logic(input1: OperatorInput, input2: OperatorInput, output: OperatorOutput) -> None:
            for index, port in ((0, input1), (1, input2)):
                for ref, batch in port:
                    seen = sides.setdefault(ref.time, ({}, {}))
                    mine, theirs = seen[index], seen[1 - index]
                    matches = []
                    for key, value in batch:
                        values = mine.get(key)
                        if values is None:
                            if key.__class__ not in PLAIN_KEY_TYPES:  # NaN keys: one key, kept canonical
                                key = canonical_key(key)
                                values = mine.get(key)
                            if values is None:
                                values = mine[key] = []
                        values.append(value)
                        for other in theirs.get(key, ()):
                            matches.append((key, (value, other) if index == 0 else (other, value)))
                    if matches:
                        output.session(ref).give_batch(matches)
            output.flush()
            for time in [time for time in sides if _passed(input1, time) and _passed(input2, time)]:
                del sides[time]

        return logic

    return binary(left, right, (Pipeline, Pipeline), name, constructor, None, notify=True)


def _passed(port: OperatorInput, time: Any) -> bool:
    return not port.frontier.less_equal(time)


def join_latest(left: S, table: S, how: str, name: str) -> S:
    """``(key, (value, table_value))`` with the table as of each record's time; see the module."""
    where = check_same_scope(left, table, name)
    if how not in JOIN_KINDS:
        raise BuildError(f"{where}: how={how!r} is not one of {', '.join(JOIN_KINDS)}")
    scope = left.scope
    if not isinstance(scope.timestamp_type, IntegerType):
        raise BuildError(
            f"{where} needs integer timestamps (the table is kept in time order), not {scope.timestamp_type!r}"
        )
    joiner = LatestJoin(how == "left", where)

    def constructor(capability: Capability, info: OperatorInfo) -> Any:
        joiner.info = info
        capability.drop()
        return joiner.step

    out = binary(left, table, (Pipeline, Pipeline), name, constructor, None, notify=True)
    registry = registry_of(scope)
    if registry is not None:
        address = (*out.scope.address, out.source.node)
        misplaced = record_key_check(scope, lambda: joiner.table)  # the table's keys: its input is routed by key
        joiner.tracked = registry.register(address, name, where, joiner.snapshot, joiner.restore, [], None, misplaced)
    return out


class LatestJoin:
    """The state of :func:`join_latest`: records waiting for their time, updates waiting to apply, the table."""

    def __init__(self, keep_unmatched: bool, where: str = "join_latest") -> None:
        """A join that keeps records without a table value (with ``None``) when ``keep_unmatched``.

        ``where`` names the operator in errors.
        """
        self.keep_unmatched = keep_unmatched
        self.where = where
        self.table: dict[Any, Any] = {}
        self.records: dict[int, list[Any]] = {}
        self.capabilities: dict[int, Capability] = {}
        self.updates: dict[int, list[Any]] = {}
        self.tracked: OperatorState | None = None
        self.info: OperatorInfo | None = None
        """The operator's info, once built: an error while a complete time is joined names that time."""

    def step(self, records: OperatorInput, updates: OperatorInput, output: OperatorOutput) -> None:
        """Take what arrived, then join and apply, time by time, as far as both frontiers allow."""
        self.take(records, updates)
        self.advance(records, updates, output)

    def take(self, records: OperatorInput, updates: OperatorInput) -> None:
        """Hold what arrived, by time: records (with a capability for their time) and updates."""
        for ref, batch in records:
            if ref.time not in self.capabilities:
                self.capabilities[ref.time] = ref.retain()
            self.records.setdefault(ref.time, []).extend(batch)
        for ref, batch in updates:
            self.updates.setdefault(ref.time, []).extend(batch)

    def advance(self, records: OperatorInput, updates: OperatorInput, output: OperatorOutput) -> None:
        """Apply each time's updates and join its records, in time order, as far as both frontiers allow."""
        for time in sorted(set(self.records) | set(self.updates)):
            if updates.frontier.less_equal(time):
                break
            if self.info is not None:
                self.info.position = f"joining the records of time {time!r} with the table as of that time"
            if time in self.updates:
                if any(earlier < time for earlier in self.records) or records.frontier.less_than(time):
                    break
                if self.tracked is not None:  # every record before it is sent, every update before it applied
                    self.tracked.reached(time)
                self.apply(self.updates.pop(time), time)
            if time in self.records:
                self.send(time, self.records.pop(time), output)
        if self.info is not None:
            self.info.position = None
        for time in [time for time in self.capabilities if time not in self.records and _passed(records, time)]:
            self.capabilities.pop(time).drop()
        if self.tracked is not None:
            self.tracked.reached(self.settled_before(records, updates))

    def apply(self, updates: list[Any], time: int) -> None:
        """Apply one time's updates, refusing two different values for one key."""
        applied: dict[Any, Any] = {}
        for key, value in updates:
            if key not in applied and key.__class__ not in PLAIN_KEY_TYPES:  # NaN keys: one key, kept canonical
                key = canonical_key(key)
            if key in applied and not same_value(applied[key], value):  # a NaN value decoded twice is one value
                raise ConflictingUpdates(
                    f"{self.where}: the table got two different values for key {key!r} at time {time!r} "
                    f"({applied[key]!r} and {value!r}); which is the latest would depend on the order "
                    "messages arrive in, which differs between runs and worker counts. Send one update "
                    "per key and time (combine them first, for example with reduce)"
                )
            applied[key] = value
        for key, value in applied.items():
            if value is None:
                self.table.pop(key, None)
            else:
                self.table[key] = value

    def settled_before(self, records: OperatorInput, updates: OperatorInput) -> int | None:
        """The time before which every record is sent and every update applied (None: every time)."""
        waiting = [*self.records, *self.updates, *records.frontier.elements, *updates.frontier.elements]
        return min(waiting) if waiting else None

    def snapshot(self) -> Any:
        """The table, as plain values, for a checkpoint."""
        return list(self.table.items())

    def restore(self, saved: Any) -> None:
        """Put back a :meth:`snapshot`."""
        self.table = dict((canonical_key(key), value) for key, value in saved)  # a decoded NaN, canonical again

    def send(self, time: int, pairs: list[Any], output: OperatorOutput) -> None:
        """Join ``pairs`` at ``time`` against the table as it is now (as of ``time``)."""
        table = self.table
        joined = []
        for key, value in pairs:
            # a NaN key (or a tuple holding one) that misses is looked up again in its canonical form
            if key in table or (key.__class__ not in PLAIN_KEY_TYPES and (key := canonical_key(key)) in table):
                joined.append((key, (value, table[key])))
            elif self.keep_unmatched:
                joined.append((key, (value, None)))
        if joined:
            output.session(self.capabilities[time]).give_batch(joined)
            output.flush()
