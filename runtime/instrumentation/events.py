"""The event schema: one dataclass per kind of event, and the ``K_*`` integers that name them on the wire.

On the wire every event is one msgpack array ``[kind, worker, seq, t, *fields]``:
``kind`` is one of the ``K_*`` integers below, ``worker`` the worker's index,
``seq`` a per-worker sequence number (1, 2, ...; gaps never occur in a sink that
has dropped nothing), ``t`` a ``time.monotonic()`` reading in seconds (one
clock for every process on a machine).  Decoded, each kind is the dataclass
named after it, with the fields that follow ``t`` in the order listed:

``K_OPERATOR`` :class:`OperatorCreated`
    ``address`` (path of child indices in the scope tree, the dataflow's index
    first), ``name``, ``inputs``, ``outputs`` (port counts), ``reach``
    (``reach[i]``: the outputs input ``i`` reaches inside the operator),
    ``scope_timestamp`` (the timestamp type's name when the operator is a
    scope, else ``None``), and optionally ``site``: where the user's code
    built the operator, ``file.py:LINE`` (absent when unknown).  A dataflow is
    the scope at address ``(index,)``.
``K_CHANNEL`` :class:`ChannelCreated`
    ``scope`` (address), ``source`` and ``target`` as ``(node, port)`` pairs
    (node 0 is the scope's boundary: its sources are the scope's inputs, its
    targets the scope's outputs), ``contract`` (``Pipeline``, ``Exchange``,
    ``Broadcast``).
``K_LOCATIONS`` :class:`LocationsDefined`
    ``scope``, ``table``: ``(node, port, is_source)`` for each dense location
    index used by the pointstamp and frontier events of that scope.
``K_SCHEDULE`` :class:`Scheduled`
    ``address``, ``start`` (``perf_counter``), ``duration`` (seconds).
``K_MESSAGES`` :class:`Messages`
    ``address``, ``consumed`` and ``produced``: per input (output) port, the
    ``(time, records)`` received (sent) during one scheduling.
``K_POINTSTAMPS`` :class:`PointstampsChanged`
    ``scope``, ``changes``: ``(location, time, diff)`` folded into the scope's
    tracker on this worker (capabilities at sources, messages at targets;
    every worker's tracker counts every worker's pointstamps, so these are
    what this worker *knows*, global counts).
``K_LOCAL_POINTSTAMPS`` :class:`LocalPointstampsChanged`
    ``scope``, ``changes``: the ``(location, time, diff)`` changes this worker
    *originated* (its own progress batch, as it broadcasts it, and its own
    share of the initial capabilities).  Every change is originated by exactly
    one worker, so summing these over the workers gives the global counts, and
    one worker's sum gives the capabilities that worker holds.  Changes at a
    nested scope's boundary locations (``node == 0``) stand for messages the
    worker consumed at the scope's input (``Source(0, i)``, diff < 0) or
    produced at its output (``Target(0, o)``); the parent counts them at the
    scope's input and at the targets of the scope's output.  Only logged
    when there are several workers: alone, a worker's tracker counts exactly
    the changes it originated, and ``K_POINTSTAMPS`` says it all.
``K_FRONTIERS`` :class:`FrontiersChanged`
    ``scope``, ``changes``: ``(location, time, diff)`` changes to the frontier
    the tracker implies at each location (+1: the time joined the frontier).
``K_INPUT`` :class:`InputChanged`
    ``address`` (of the input operator), ``name`` (as the user named it),
    ``action`` (``created``, ``advanced``, ``closed``), ``time`` (the handle's
    time after the action), and optionally ``site`` (``created`` only: where
    the user's code created the handle, ``file.py:LINE``).
``K_CAPABILITY`` :class:`CapabilitySite`
    ``address`` (of the operator), ``output`` (port), ``time``, ``diff`` (1:
    the capability came to be held at ``time``, -1: it was dropped or moved
    on), ``action`` (how: ``created``, ``retained``, ``delayed``,
    ``downgraded``, ``notify_at``) and ``site``: where the user's code did
    so, ``file.py:LINE``.  Only capabilities with such a place are logged
    (not those pytimely's own operators take); recordings made before this
    kind existed simply have none.
``K_DATAFLOW_DONE`` :class:`DataflowCompleted`
    ``index``, ``name``.
``K_SHUTDOWN`` :class:`WorkerShutdown`
    no fields: the worker stopped.
``K_DROPPED`` :class:`EventsDropped`
    ``count``: events a sink had to drop (worker ``-1``); sent when it can.
``K_MARK`` :class:`Mark`
    ``label``: a note from the program (``logger.mark("...")``).

Times are encoded as msgpack values by :mod:`runtime.codec` (the recording
dialect): :class:`~scopes.progress.timestamp.Product` as its extension type PRODUCT
holding ``[outer, inner]``, other non-msgpack times as REPR holding their
``repr``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.codec import shown
from runtime.errors import RecordingError
from scopes.progress.order import Time

K_OPERATOR = 1
K_CHANNEL = 2
K_LOCATIONS = 3
K_SCHEDULE = 4
K_MESSAGES = 5
K_POINTSTAMPS = 6
K_FRONTIERS = 7
K_INPUT = 8
K_DATAFLOW_DONE = 9
K_SHUTDOWN = 10
K_DROPPED = 11
K_MARK = 12
K_LOCAL_POINTSTAMPS = 13
K_CAPABILITY = 14


@dataclass(frozen=True, slots=True)
class Event:
    """Fields every event carries: the worker, its sequence number, and a monotonic time."""

    worker: int
    seq: int
    t: float


@dataclass(frozen=True, slots=True)
class OperatorCreated(Event):
    """An operator or scope was built (see the module's schema)."""

    address: tuple[int, ...]
    name: str
    inputs: int
    outputs: int
    reach: tuple[tuple[int, ...], ...]
    scope_timestamp: str | None
    site: str | None = None


@dataclass(frozen=True, slots=True)
class ChannelCreated(Event):
    """An edge inside a scope, with its channel contract."""

    scope: tuple[int, ...]
    source: tuple[int, int]
    target: tuple[int, int]
    contract: str
    copies: int = 1


@dataclass(frozen=True, slots=True)
class LocationsDefined(Event):
    """The dense location numbering of a scope's tracker."""

    scope: tuple[int, ...]
    table: tuple[tuple[int, int, bool], ...]


@dataclass(frozen=True, slots=True)
class Scheduled(Event):
    """An operator ran for ``duration`` seconds."""

    address: tuple[int, ...]
    start: float
    duration: float


@dataclass(frozen=True, slots=True)
class Messages(Event):
    """Records received and sent by an operator in one scheduling, per port and time."""

    address: tuple[int, ...]
    consumed: tuple[tuple[tuple[Any, int], ...], ...]
    produced: tuple[tuple[tuple[Any, int], ...], ...]


@dataclass(frozen=True, slots=True)
class PointstampsChanged(Event):
    """Pointstamp count changes folded into a scope's tracker."""

    scope: tuple[int, ...]
    changes: tuple[tuple[int, Any, int], ...]


@dataclass(frozen=True, slots=True)
class LocalPointstampsChanged(Event):
    """Pointstamp count changes this worker originated in a scope (its own progress batch)."""

    scope: tuple[int, ...]
    changes: tuple[tuple[int, Any, int], ...]


@dataclass(frozen=True, slots=True)
class FrontiersChanged(Event):
    """Frontier changes computed by a scope's tracker."""

    scope: tuple[int, ...]
    changes: tuple[tuple[int, Any, int], ...]


@dataclass(frozen=True, slots=True)
class InputChanged(Event):
    """An input handle was created, advanced or closed."""

    address: tuple[int, ...]
    name: str
    action: str
    time: Time
    site: str | None = None


@dataclass(frozen=True, slots=True)
class CapabilitySite(Event):
    """A capability the user's code holds came or went, with the place it was taken (see the module's schema)."""

    address: tuple[int, ...]
    output: int
    time: Time
    diff: int
    action: str
    site: str


@dataclass(frozen=True, slots=True)
class DataflowCompleted(Event):
    """A dataflow finished on this worker."""

    index: int
    name: str


@dataclass(frozen=True, slots=True)
class WorkerShutdown(Event):
    """The worker stopped."""


@dataclass(frozen=True, slots=True)
class EventsDropped(Event):
    """A sink dropped ``count`` events because its consumer could not keep up."""

    count: int


@dataclass(frozen=True, slots=True)
class Mark(Event):
    """A label the program attached to this moment."""

    label: str


_CLASSES: dict[int, type[Event]] = {
    K_OPERATOR: OperatorCreated,
    K_CHANNEL: ChannelCreated,
    K_LOCATIONS: LocationsDefined,
    K_SCHEDULE: Scheduled,
    K_MESSAGES: Messages,
    K_POINTSTAMPS: PointstampsChanged,
    K_FRONTIERS: FrontiersChanged,
    K_INPUT: InputChanged,
    K_DATAFLOW_DONE: DataflowCompleted,
    K_SHUTDOWN: WorkerShutdown,
    K_DROPPED: EventsDropped,
    K_MARK: Mark,
    K_LOCAL_POINTSTAMPS: LocalPointstampsChanged,
    K_CAPABILITY: CapabilitySite,
}


def _is_int(value: Any) -> bool:
    return value.__class__ is int


def _is_real(value: Any) -> bool:
    return value.__class__ is float or value.__class__ is int


def is_moment(value: Any) -> bool:
    """Whether ``value`` can be an event's time: an ``int``, or a finite ``float`` (a clock never reads inf or NaN)."""
    return value.__class__ is int or (value.__class__ is float and math.isfinite(value))


def _is_str(value: Any) -> bool:
    return value.__class__ is str


def _is_optional_str(value: Any) -> bool:
    return value is None or value.__class__ is str


def _is_ints(value: Any) -> bool:
    return value.__class__ is tuple and all(item.__class__ is int for item in value)


def _is_address(value: Any) -> bool:
    return value.__class__ is tuple and len(value) > 0 and all(item.__class__ is int for item in value)


def _is_port(value: Any) -> bool:
    return value.__class__ is tuple and len(value) == 2 and value[0].__class__ is int and value[1].__class__ is int


def _is_reach(value: Any) -> bool:
    return value.__class__ is tuple and all(_is_ints(ports) for ports in value)


def _is_table(value: Any) -> bool:
    return value.__class__ is tuple and all(
        row.__class__ is tuple
        and len(row) == 3
        and row[0].__class__ is int
        and row[1].__class__ is int
        and row[2].__class__ in (bool, int)
        for row in value
    )


def _is_time(value: Any) -> bool:
    """Whether ``value`` can be a time: anything hashable (a map inside an array is not)."""
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _is_changes(value: Any) -> bool:
    return value.__class__ is tuple and all(
        change.__class__ is tuple
        and len(change) == 3
        and change[0].__class__ is int
        and change[2].__class__ is int
        and _is_time(change[1])
        for change in value
    )


def _is_entries(value: Any) -> bool:
    return value.__class__ is tuple and all(
        entry.__class__ is tuple and len(entry) == 2 and entry[1].__class__ is int and _is_time(entry[0])
        for entry in value
    )


def _is_port_counts(value: Any) -> bool:
    return value.__class__ is tuple and all(_is_entries(entries) for entries in value)


_Check = Callable[[Any], bool]

_FIELDS: dict[type[Event], tuple[tuple[tuple[str, _Check], ...], tuple[tuple[str, _Check], ...]]] = {
    OperatorCreated: (
        (
            ("address", _is_address),
            ("name", _is_str),
            ("inputs", _is_int),
            ("outputs", _is_int),
            ("reach", _is_reach),
            ("scope_timestamp", _is_optional_str),
        ),
        (("site", _is_optional_str),),
    ),
    ChannelCreated: (
        (("scope", _is_address), ("source", _is_port), ("target", _is_port), ("contract", _is_str)),
        (("copies", _is_int),),
    ),
    LocationsDefined: ((("scope", _is_address), ("table", _is_table)), ()),
    Scheduled: ((("address", _is_address), ("start", _is_real), ("duration", _is_real)), ()),
    Messages: ((("address", _is_address), ("consumed", _is_port_counts), ("produced", _is_port_counts)), ()),
    PointstampsChanged: ((("scope", _is_address), ("changes", _is_changes)), ()),
    LocalPointstampsChanged: ((("scope", _is_address), ("changes", _is_changes)), ()),
    FrontiersChanged: ((("scope", _is_address), ("changes", _is_changes)), ()),
    InputChanged: (
        (("address", _is_address), ("name", _is_str), ("action", _is_str), ("time", _is_time)),
        (("site", _is_optional_str),),
    ),
    CapabilitySite: (
        (
            ("address", _is_address),
            ("output", _is_int),
            ("time", _is_time),
            ("diff", _is_int),
            ("action", _is_str),
            ("site", _is_str),
        ),
        (),
    ),
    DataflowCompleted: ((("index", _is_int), ("name", _is_str)), ()),
    WorkerShutdown: ((), ()),
    EventsDropped: ((("count", _is_int),), ()),
    Mark: ((("label", _is_str),), ()),
}
"""Per event class: its required fields after ``t`` and its optional trailing ones, each with the check of its type."""


def _shown(raw: Sequence[Any]) -> str:
    """The start of a raw event for an error message, never long (a hostile field may be huge or deep)."""
    return shown(tuple(raw)[:6], 200)


def problem(raw: Any) -> str | None:
    """What makes ``raw`` not an event array ``[kind, worker, seq, t, *fields]``, or ``None`` if it is one.

    Every field is checked to have its type (see the module's schema:
    addresses are non-empty tuples of ints, counts ints, names str, times
    hashable), so that a recording whose checksums are right but whose
    contents are not (a CRC-32 is no signature: anyone can recompute it) is
    refused when read, not met later as a crash of whatever uses the event.
    """
    if raw.__class__ is not tuple and raw.__class__ is not list:
        return f"a {type(raw).__name__}, not an array"
    kind = raw[0] if raw else None
    cls = _CLASSES.get(kind) if kind.__class__ is int else None
    if cls is None:
        return f"{_shown(raw)}: no event kind is {shown(kind, 40)}"
    required, optional = _FIELDS[cls]
    count = len(raw) - 4
    if not len(required) <= count <= len(required) + len(optional):
        return (
            f"{_shown(raw)}: a {cls.__name__} has {len(required)} to {len(required) + len(optional)} fields "
            f"after its time, not {count}"
        )
    if raw[1].__class__ is not int or raw[2].__class__ is not int or not is_moment(raw[3]):
        return f"{_shown(raw)}: its worker, sequence number or time is not a number"
    for position, (name, check) in enumerate((required + optional)[:count], 4):
        if not check(raw[position]):
            return f"{_shown(raw)}: the {name} of a {cls.__name__} is {shown(raw[position])}"
    return None


def decode(raw: Sequence[Any]) -> Event:
    """Turn one wire array ``[kind, worker, seq, t, *fields]`` into its event dataclass.

    Raises :class:`~runtime.errors.RecordingError` saying what is wrong if
    :func:`problem` finds anything.
    """
    wrong = problem(raw)
    if wrong is not None:
        raise RecordingError(f"not a pytimely event: {wrong}")
    return build(raw)


def build(raw: Sequence[Any]) -> Event:
    """The event dataclass of ``raw``, which :func:`problem` has found sound (nothing is checked again)."""
    return _CLASSES[raw[0]](*raw[1:])


def freeze(value: Any) -> Any:
    """Deep-convert lists to tuples (in-memory events look exactly like decoded ones)."""
    if value.__class__ is list or value.__class__ is tuple:
        return tuple(freeze(item) for item in value)
    return value
