"""Event-time windows over columnar batches: the forms of :mod:`scopes.windows` for Arrow tables.

``stream.window_batch(Tumbling(10), keys="user").aggregate([("amount", "sum")])``
aggregates each key's rows in the windows ``[0, 10)``, ``[10, 20)``, ... with the
functions of :func:`~scopes.columnar_ops.aggregate_batch` (``count``, ``sum``,
``min``, ``max``, ``mean``), computed by Arrow, never row by row in Python.  The
windows, their closing, lateness and late rows mean exactly what they mean for
the record-wise windows (:mod:`scopes.windows`):

* a window ending at ``end`` (exclusive) is sent at time ``end - 1 + lateness``,
  exactly when the input frontier passes that time;
* a row's event time is its epoch, or the integer column named by
  ``event_time=``; with a column, ``lateness`` bounds how far behind its epoch a
  row's windows may have closed;
* a row is *late* when its epoch is after the close time of a window it belongs
  in (for a session, of the session it would start alone); late rows go, as
  they came, to the ``late`` stream, and are still counted in the windows they
  are on time for.  The metrics count them as the records of output port 1 of
  the operator named as the window (``WindowCount`` by default).

Work happens in two steps, as for ``aggregate_batch``: each batch is reduced
where it is to partial aggregates per key and window (sessions: per key and
event time), the late rows are split off there, and only the partials are
exchanged by the key columns (:func:`~scopes.columnar_ops.key_contract`, the
stable hash of every worker count) to the worker owning the key, whose
operator (the window's name followed by ``Close``) keeps the open windows and
sends each once it closes.  The results are Arrow tables:
the key columns, ``window_start``, ``window_end``, then the aggregations.
A null key is a key of its own, with its own windows and sessions, as ``None``
is in the record-wise windows; the key column types taken are those of
:mod:`scopes.key_types` (``float16`` keys are sorted as ``float32``).

With checkpoints, the open windows (Arrow tables of partial aggregates) are the
operator's registered state (:mod:`scopes.state_registry`), written in the
checkpoint's framed and checksummed file as Arrow IPC.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from scopes.batches import filter_rows, is_arrow, take
from scopes.channels import Pipeline
from scopes.columnar_ops import (
    _COMBINE,
    AggregationPlan,
    _concat,
    _reduce_arrow,
    check_columns,
    combine_partials,
    finish,
    key_columns,
    key_contract,
    partial_name,
    plan_aggregation,
    prepare_arrow,
    to_arrow,
)
from scopes.core import StreamCore
from scopes.errors import BatchError, BuildError
from scopes.generic_operators import generic
from scopes.key_owners import column_key_check
from scopes.key_types import check_aggregated_columns, sortable
from scopes.lazy_import import lazy_module
from scopes.operator import Capability, OperatorInfo, OperatorInput, OperatorOutput
from scopes.signatures import describe_operator
from scopes.state_registry import OperatorState, registry_of
from scopes.windows import Session, Sliding, Windowed, check_window, earliest_complete, window_state_name

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

S = TypeVar("S", bound=StreamCore)
"""The class of the streams read and made (for users, :class:`~scopes.stream.Stream`)."""

START = "window_start"
"""The output column holding a window's first time."""
END = "window_end"
"""The output column holding a window's end (exclusive)."""
_START = "\x1fstart"
"""The partials' column: the window's start (a session's first event time)."""
_LAST = "\x1flast"
"""A session's last event time, in the owner's open sessions."""
_ROWS = "\x1frows"
"""A column of the rows' window starts, counted for ``count()``."""
_SEGMENT = "\x1fsegment"
"""The merged session a row of the owner's open sessions falls in."""


def _pyarrow() -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]

    return pa


class ColumnarWindowBuilder(Generic[S]):
    """A stream of columnar batches with its key columns and windows chosen: pick the aggregations."""

    def __init__(
        self, stream: S, keys: str | Sequence[str], spec: Any, event_time: str | None, lateness: int, where: str
    ) -> None:
        """Windows of ``spec`` over ``stream``'s rows by the ``keys`` columns; see :mod:`scopes.windows_columnar`."""
        self.keys = key_columns(keys, where)
        scope = stream.scope
        check_window(scope, spec, lateness, f"{where}: ")
        check_spans(spec, lateness, where)
        if event_time is not None and not isinstance(event_time, str):
            raise BuildError(
                f"{where}: event_time= names the column of integer event times (a str), not {event_time!r}"
            )
        if event_time is None and lateness:
            raise BuildError(
                f"{where}: a lateness bound without event_time= has no effect: rows are windowed by their epoch, "
                "which is never late; pass event_time='column' to window by a time the rows carry"
            )
        if event_time in self.keys:
            raise BuildError(f"{where}: the event-time column {event_time!r} is also a key column")
        if importlib.util.find_spec("pyarrow") is None:
            raise BuildError(f"{where}: columnar windows compute with Arrow; install pyarrow")
        self.stream = stream
        self.spec = spec
        self.event_time = event_time
        self.lateness = lateness

    def aggregate(self, aggregations: Sequence[Sequence[str]], name: str = "WindowAggregate") -> Windowed[S]:
        """Per key and window, ``(column, function)`` or ``(column, function, name)`` aggregations.

        The functions are those of :func:`~scopes.columnar_ops.aggregate_batch`.
        """
        where = describe_operator(name, self.stream.scope.path)
        plan = plan_aggregation(self.keys, aggregations, where)
        return self._build(name, where, plan, counts=False)

    def count(self, column: str = "count", name: str = "WindowCount") -> Windowed[S]:
        """How many rows each key has in each window, in the column ``column``."""
        where = describe_operator(name, self.stream.scope.path)
        plan = plan_aggregation(self.keys, [("rows", "count", column)], where)
        plan = AggregationPlan(where, plan.keys, ((_ROWS, "count", column),))
        return self._build(name, where, plan, counts=True)

    def _build(self, name: str, where: str, plan: AggregationPlan, counts: bool) -> Windowed[S]:
        for output in (START, END):
            if output in plan.keys or any(output == named for _, _, named in plan.outputs):
                raise BuildError(f"{where}: {output!r} names the window's column in the output; rename yours")
        importlib.import_module("pyarrow")
        prepare_arrow()
        needed = tuple(dict.fromkeys(plan.keys + tuple(c for c, _, _ in plan.outputs if c != _ROWS)))
        needed += (self.event_time,) if self.event_time is not None else ()
        owner_plan = AggregationPlan(where, (*plan.keys, _START), plan.outputs)
        splitter = WindowSplitter(self.spec, self.event_time, self.lateness, owner_plan, needed, counts, where)
        partials, late = generic(self.stream.scope, name, [(self.stream, Pipeline)], 2, splitter.build)
        operator = ColumnarWindowOperator(self.spec, self.lateness, owner_plan, where)
        registry = registry_of(partials.scope)

        def constructor(capabilities: list[Capability], info: OperatorInfo) -> Any:
            operator.info = info
            if registry is not None:  # kept until the run knows whether it resumes: restored windows need it
                operator.initial = capabilities[0]
            else:
                capabilities[0].drop()
            return operator.step

        contract = key_contract(plan.keys, where)
        down = generic(partials.scope, f"{name}Close", [(partials, contract)], 1, constructor)[0]
        if registry is not None:
            address = (*down.scope.address, down.source.node)
            timed = "epochs" if self.event_time is None else f"event time {self.event_time!r}"
            state_name = window_state_name(name, self.spec, timed, self.lateness)
            misplaced = column_key_check(down.scope, contract, plan.keys, operator.tables)
            operator.tracked = registry.register(
                address, state_name, where, operator.snapshot, operator.restore, [], operator.settle, misplaced
            )
        return Windowed(down, late)


EVENT_LIMIT = 2**62
"""Columnar event times lie in ``[-EVENT_LIMIT, EVENT_LIMIT)``: with spans of at most :data:`SPAN_LIMIT`, every window
start, end and close time, and every difference the sessions take between them, fits in ``int64``."""
SPAN_LIMIT = 2**60
"""The most a columnar window's size, step, gap, origin (either sign) or lateness may be."""


def check_spans(spec: Any, lateness: int, where: str) -> None:
    """Refuse, when the dataflow is built, a window whose size, step, gap, origin or lateness is past SPAN_LIMIT."""
    spans = {name: getattr(spec, name) for name in ("size", "step", "gap", "origin") if hasattr(spec, name)}
    spans["lateness"] = lateness
    for name, value in spans.items():
        if abs(value) > SPAN_LIMIT:
            raise BuildError(
                f"{where}: a columnar window's {name} is at most 2**60 (either sign), not {value}: its times are "
                "computed as 64-bit integers; use coarser units"
            )


def _integers(table: Any, column: str, where: str, time: Any) -> np.ndarray:
    """The integer event times of ``column`` as ``int64``, or a :class:`BatchError` naming the operator.

    Times outside ``[-EVENT_LIMIT, EVENT_LIMIT)`` are refused: in ``int64`` arithmetic
    their windows' ends and close times would wrap around (a ``uint64`` time past
    ``2**63`` would even be read as negative), and their rows would come out late.
    """
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    pa = _pyarrow()
    values = table.column(column)
    if not pa.types.is_integer(values.type) or values.null_count:
        raise BatchError(
            f"{where}: the event-time column {column!r} at time {time!r} must hold integers without nulls, "
            f"in the units of the epochs; it is {values.type} with {values.null_count} null(s)"
        )
    bounds = pc.min_max(values)
    for bound in (bounds["min"].as_py(), bounds["max"].as_py()):
        if not -EVENT_LIMIT <= bound < EVENT_LIMIT:
            raise BatchError(
                f"{where}: the event-time column {column!r} at time {time!r} holds {bound}, outside the event times "
                "a columnar window takes, -2**62 to 2**62 - 1 (its windows' ends and close times are computed as "
                "64-bit integers); use coarser units or subtract an offset, or window record-wise"
            )
    return values.to_numpy().astype(np.int64, copy=False)


class WindowSplitter:
    """The local step: split off late rows, reduce the rest to partial aggregates per key and window."""

    def __init__(
        self,
        spec: Any,
        event_time: str | None,
        lateness: int,
        plan: AggregationPlan,
        needed: tuple[str, ...],
        counts: bool,
        where: str,
    ) -> None:
        """Windows of ``spec``; ``plan`` aggregates by the keys and :data:`_START`."""
        self.spec = spec
        self.event_time = event_time
        self.lateness = lateness
        self.plan = plan
        self.needed = needed
        self.counts = counts
        self.where = where
        self.info: OperatorInfo | None = None
        """The operator's info, once built: a failure to combine one time's partials names that time."""

    def build(self, capabilities: list[Capability], info: OperatorInfo) -> Any:
        """The operator's constructor: nothing is held across invocations."""
        self.info = info
        for capability in capabilities:
            capability.drop()
        return self.step

    def step(self, inputs: list[OperatorInput], outputs: list[OperatorOutput]) -> None:
        """Each batch's late rows to output 1; one batch of partial aggregates per key and window per time to output 0.

        The partials of all the batches of one time in this invocation are
        combined before they are sent, so that a message holds each key and
        window once (the exchange joins the messages of one invocation that go
        to one worker, and the owner takes a single message as combined).
        """
        down, late = outputs
        found: dict[Any, tuple[Capability, list[Any]]] = {}
        for ref, batch in inputs[0]:
            if not len(batch):
                continue
            check_columns(batch, self.needed, self.where, ref.time, self.plan.keys[:-1])
            check_aggregated_columns(batch, self.plan.outputs, self.where, ref.time)
            table = to_arrow(batch, self.where)
            time = ref.time
            if self.event_time is not None:
                events = _integers(table, self.event_time, self.where, time)
            elif time >= EVENT_LIMIT:  # the epoch is the event time: its window's end must fit in int64 too
                raise BatchError(
                    f"{self.where}: the rows at time {time!r} are windowed by their epoch, which is past the event "
                    "times a columnar window takes, -2**62 to 2**62 - 1 (its windows' ends and close times are "
                    "computed as 64-bit integers); window record-wise, or by an event-time column of smaller times"
                )
            else:
                events = np.full(table.num_rows, time, np.int64)
            late_rows, rows, starts = self.assign(events, time)
            if late_rows is not None and late_rows.any():
                late_part = filter_rows(table, late_rows) if is_arrow(batch) else cast(Any, batch)[late_rows]
                late.session(ref).give_batch(late_part)
            if len(rows):
                whole = len(rows) == table.num_rows and np.array_equal(rows, np.arange(len(rows)))
                entry = found.get(time)
                if entry is None:
                    entry = found[time] = (ref.retain(), [])
                entry[1].append(self.partials(table if whole else take(table, rows), starts))
        for capability, partials in found.values():
            if self.info is not None:
                self.info.position = f"combining the partial aggregates of time {capability.time!r}"
            down.session(capability).give_batch(combine_partials(self.plan, partials))
            capability.drop()
        if self.info is not None:
            self.info.position = None
        down.flush()
        late.flush()

    def assign(self, events: np.ndarray, time: int) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
        """``(late mask, row of each on-time window, its start)`` for rows of ``events`` at epoch ``time``."""
        if isinstance(self.spec, Session):
            late = time > events + (self.spec.gap - 1 + self.lateness)
            rows = np.flatnonzero(~late)
            return late, rows, events[rows]
        size = self.spec.size
        step = self.spec.step if isinstance(self.spec, Sliding) else size
        origin = self.spec.origin
        last = events - (events - origin) % step
        earlier = (last - events + size - 1) // step  # how many windows before the last one hold the event
        first = last - earlier * step
        late = time > first + (size - 1 + self.lateness)
        counts = earlier + 1
        rows = np.repeat(np.arange(len(events)), counts)
        offsets = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)
        starts = last[rows] - offsets * step
        on_time = time <= starts + (size - 1 + self.lateness)
        return late, rows[on_time], starts[on_time]

    def partials(self, table: Any, starts: np.ndarray) -> Any:
        """``table``'s rows (one per window) reduced to partial aggregates by the keys and window start."""
        pa = _pyarrow()
        table = table.append_column(_START, pa.array(starts, pa.int64()))
        if self.counts:
            table = table.append_column(_ROWS, table.column(_START))
        parts = [(column, part, partial_name(column, part)) for column, part in self.plan.partials]
        return _reduce_arrow(table, self.plan.keys, parts)


class ColumnarWindowOperator:
    """The owner's step: open windows kept as partial aggregates, applied and closed time by time.

    As :class:`~scopes.windows.WindowOperator`: each complete time ``t``, in
    order, has its partials applied and then the windows closing at ``t`` sent;
    before ``t`` is handled, the state is exactly the state as of the times before ``t``.
    """

    def __init__(self, spec: Any, lateness: int, plan: AggregationPlan, where: str) -> None:
        """Windows of ``spec`` whose partials ``plan`` combines (keys and :data:`_START`)."""
        self.spec = spec
        self.lateness = lateness
        self.plan = plan
        self.where = where
        self.keys = plan.keys[:-1]
        self.buckets: dict[int, list[Any]] = {}
        self.sessions: Any = None
        self.capabilities: dict[int, Capability] = {}
        self.pending: dict[int, list[Any]] = {}
        self.holds: dict[int, Capability] = {}
        self.initial: Capability | None = None
        self.tracked: OperatorState | None = None
        self.info: OperatorInfo | None = None
        """The operator's info, once built: an error while a complete time is applied names that time."""

    def step(self, inputs: list[OperatorInput], outputs: list[OperatorOutput]) -> None:
        """Gather partials per time; then apply every complete time and close the windows it passes."""
        for ref, batch in inputs[0]:
            if not len(batch):
                continue
            self.pending.setdefault(ref.time, []).append(batch)
            if ref.time not in self.holds:
                self.holds[ref.time] = ref.retain()
        frontier = inputs[0].frontier
        # applying a time may open windows that close at complete times too: look again
        info = self.info
        while (time := earliest_complete(self.holds, self.capabilities, frontier)) is not None:
            if info is not None:
                info.position = f"applying the complete time {time!r} and closing the windows it passes"
            if self.tracked is not None:
                self.tracked.reached(time)
            hold = self.holds.pop(time, None)
            if hold is not None:
                self.apply(self.pending.pop(time), time, hold)
                hold.drop()
            self.close_at(time, outputs[0])
        if info is not None:
            info.position = None
        if self.tracked is not None:
            elements = frontier.elements
            self.tracked.reached(min(elements) if elements else None)

    def apply(self, batches: list[Any], time: int, hold: Capability) -> None:
        """Fold the partials of complete time ``time`` into the open windows."""
        if isinstance(self.spec, Session):
            self.merge_sessions(batches, time, hold)
            return
        table = to_arrow(batches[0]) if len(batches) == 1 else combine_partials(self.plan, batches)
        closes = table.column(_START).to_numpy() + (self.spec.size - 1 + self.lateness)
        for close in np.unique(closes).tolist():
            part = table.filter(closes == close)
            self.buckets.setdefault(close, []).append(part)
            self.expect(close, hold)

    def expect(self, close: int, hold: Capability) -> None:
        """Hold a capability at ``close``, when windows close then."""
        if close not in self.capabilities:
            self.capabilities[close] = hold.delayed(close)

    def close_at(self, close: int, down: OperatorOutput) -> None:
        """Send the windows closing at ``close`` and release its capability."""
        capability = self.capabilities.pop(close, None)
        if capability is None:
            return
        result = self.closed_sessions(close) if isinstance(self.spec, Session) else self.closed_windows(close)
        if result is not None and result.num_rows:
            down.session(capability).give_batch(result)
            down.flush()
        capability.drop()

    def closed_windows(self, close: int) -> Any:
        """The tumbling or sliding windows closing at ``close``, finished, with their extent."""
        parts = self.buckets.pop(close, None)
        if not parts:
            return None
        return self.output(finish(self.plan, combine_partials(self.plan, parts)), self.spec.size)

    def output(self, finished: Any, length: Any) -> Any:
        """``finished`` (keys, :data:`_START`, aggregations) as keys, start, end, aggregations."""
        pa = _pyarrow()
        starts = finished.column(_START)
        ends = pa.array(starts.to_numpy() + length, pa.int64())
        columns = [finished.column(key) for key in self.keys] + [starts, ends]
        columns += [finished.column(named) for _, _, named in self.plan.outputs]
        names = [*self.keys, START, END] + [named for _, _, named in self.plan.outputs]
        return pa.table(columns, names=names)

    # ------------------------------------------------------------------ sessions

    def merge_sessions(self, batches: list[Any], time: int, hold: Capability) -> None:
        """Merge the partials of ``time`` (one row per key and event time) into the open sessions."""
        pa = _pyarrow()
        order = [*self.keys, _START, _LAST] + [partial_name(c, p) for c, p in self.plan.partials]
        new = [to_arrow(batch) for batch in batches]
        new = [table.append_column(_LAST, table.column(_START)).select(order) for table in new]
        if self.sessions is not None:
            new.insert(0, self.sessions.select(order))
        table = _concat(new, f"{self.where} (at time {time!r})")
        table = self.sorted(table)
        table = table.append_column(_SEGMENT, pa.array(self.segments(table), pa.int64()))
        parts = [(_START, "min", _START), (_LAST, "max", _LAST)]
        parts += [(partial_name(c, p), _COMBINE[p], partial_name(c, p)) for c, p in self.plan.partials]
        merged = _reduce_arrow(table, (*self.keys, _SEGMENT), parts)
        self.sessions = merged.drop_columns([_SEGMENT])
        for close in np.unique(self.session_closes(self.sessions)).tolist():
            self.expect(close, hold)

    def sorted(self, table: Any) -> Any:
        """``table`` sorted by the keys, then the session start; keys Arrow cannot sort go in their sortable form."""
        import pyarrow.compute as pc

        pa = _pyarrow()
        columns: dict[str, Any] = {}
        for index, key in enumerate(self.keys):
            column = sortable(table.column(key))  # float16 as float32; None for the null type, which orders nothing
            if column is not None:
                columns[f"\x1fkey{index}"] = column
        columns[_START] = table.column(_START)
        indices = pc.sort_indices(pa.table(columns), sort_keys=[(name, "ascending") for name in columns])
        return table.take(indices)

    def segments(self, table: Any) -> np.ndarray:
        """The merged session of each row of ``table`` (sorted by key and start): rows closer than the gap join."""
        import pyarrow.compute as pc

        pa = _pyarrow()
        rows = table.num_rows
        changed = np.zeros(rows, bool)
        changed[0] = True
        for key in self.keys:
            column = sortable(table.column(key))  # float16 compared as float32
            if column is None:  # the null type: every row is null, one key
                continue
            later, earlier = column.slice(1), column.slice(0, rows - 1)
            # a null key is one key, as in group_by: two nulls are the same key, a null and a value differ
            same = pc.and_(pc.is_null(later), pc.is_null(earlier))
            if pa.types.is_floating(column.type):  # all NaN are one key, as in group_by here (key_equality)
                same = pc.or_(same, pc.fill_null(pc.and_(pc.is_nan(later), pc.is_nan(earlier)), False))
            differs = pc.if_else(same, False, pc.fill_null(pc.not_equal(later, earlier), True))
            changed[1:] |= differs.to_numpy(zero_copy_only=False)
        groups = np.cumsum(changed) - 1
        lasts = table.column(_LAST).to_numpy()
        distinct, ranks = np.unique(lasts, return_inverse=True)
        shifted = groups * len(distinct) + ranks  # each key group above every earlier one: a running max per group
        reach = distinct[np.maximum.accumulate(shifted) - groups * len(distinct)]
        starts = table.column(_START).to_numpy()
        boundary = changed.copy()
        boundary[1:] |= starts[1:] - reach[:-1] >= self.spec.gap
        return np.cumsum(boundary)

    def session_closes(self, sessions: Any) -> np.ndarray:
        """Each open session's close time."""
        return sessions.column(_LAST).to_numpy() + (self.spec.gap - 1 + self.lateness)

    def closed_sessions(self, close: int) -> Any:
        """The sessions closing at ``close``, finished, and forgotten."""
        if self.sessions is None:
            return None
        closing = self.session_closes(self.sessions) == close
        if not closing.any():
            return None
        done = self.sessions.filter(closing)
        kept = self.sessions.filter(~closing)
        self.sessions = kept if kept.num_rows else None
        lengths = done.column(_LAST).to_numpy() + 1 - done.column(_START).to_numpy()
        return self.output(finish(self.plan, done), lengths)

    # ------------------------------------------------------------------ checkpoints

    def snapshot(self) -> Any:
        """The open windows as Arrow tables of partial aggregates, for a checkpoint."""
        return [[[close, parts] for close, parts in self.buckets.items()], self.sessions]

    def restore(self, saved: Any) -> None:
        """Put back a :meth:`snapshot`; the capabilities to send the windows come in :meth:`settle`."""
        buckets, sessions = saved
        self.buckets = {close: list(parts) for close, parts in buckets}
        self.sessions = sessions
        self.check_restored()

    def check_restored(self) -> None:
        """:class:`ValueError` unless the restored windows are tables of partials this operator makes.

        A checkpoint changed under a right checksum then fails when it is
        restored, naming its file, not when its windows close.
        """
        partials = [partial_name(column, part) for column, part in self.plan.partials]
        if self.buckets if isinstance(self.spec, Session) else self.sessions is not None:
            raise ValueError(f"windows of another kind than {self.spec!r}")
        for close, parts in self.buckets.items():
            if close.__class__ is not int:
                raise ValueError(f"windows closing at {close!r:.60}, which is no epoch")
            for part in parts:
                starts = self.restored_column(part, [*self.plan.keys, *partials], _START)
                if (starts + (self.spec.size - 1 + self.lateness) != close).any():
                    raise ValueError(
                        f"windows listed to close at {close} whose starts ({starts[:3]}...) close otherwise"
                    )
        if self.sessions is not None:
            names = [*self.keys, _START, _LAST, *partials]
            if (
                self.restored_column(self.sessions, names, _START) > self.restored_column(self.sessions, names, _LAST)
            ).any():
                raise ValueError("sessions that end before they start")

    def restored_column(self, table: Any, names: list[str], name: str) -> np.ndarray:
        """Column ``name`` of a restored ``table``, which must have the columns ``names``, as integers."""
        pa = _pyarrow()
        if not isinstance(table, pa.Table) or not set(names) <= set(table.column_names):
            shown = table.column_names if isinstance(table, pa.Table) else type(table).__name__
            raise ValueError(f"windows as {shown!r:.200}, not a table of the columns {names!r:.200}")
        column = table.column(name)
        if column.type != pa.int64() or column.null_count:
            raise ValueError(f"windows whose column {name!r} is {column.type}, not int64 without nulls")
        return cast(np.ndarray, column.to_numpy())

    def tables(self) -> Iterator[Any]:
        """The open windows' tables of partials and the open sessions, for the check of restored keys' owners."""
        return chain(chain.from_iterable(self.buckets.values()), [self.sessions])

    def settle(self) -> None:
        """Take a capability for every restored window's close from the initial one, then drop that."""
        initial, self.initial = self.initial, None
        if initial is None:
            return
        closes = set(self.buckets)
        if self.sessions is not None:
            closes.update(np.unique(self.session_closes(self.sessions)).tolist())
        boundary = self.tracked.covered if self.tracked is not None else 0
        if closes and min(closes) < boundary:  # sent before the checkpoint: only a changed file has it
            initial.drop()
            raise ValueError(
                f"a restored window closes at {min(closes)}, before the checkpoint's epoch {boundary}, so it was "
                "sent before the checkpoint was taken"
            )
        for close in closes:
            if close not in self.capabilities:
                self.capabilities[close] = initial.delayed(close)
        initial.drop()


def window_batch(
    stream: S,
    spec: Any,
    keys: str | Sequence[str] | None,
    event_time: str | None,
    lateness: int,
    name: str = "WindowBatch",
) -> ColumnarWindowBuilder[S]:
    """Columnar windows of ``spec`` over ``stream`` by the ``keys`` columns; refuses a stream with no key."""
    where = describe_operator(name, stream.scope.path)
    if keys is None:
        raise BuildError(
            f"{where} has no key columns: pass keys='column' (or a list of columns); windows keep their "
            "state per key, and a batch's rows are routed by their key columns"
        )
    return ColumnarWindowBuilder(stream, keys, spec, event_time, lateness, where)


__all__ = ["END", "START", "ColumnarWindowBuilder", "ColumnarWindowOperator", "WindowSplitter", "window_batch"]
