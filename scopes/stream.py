"""``Stream`` and ``ScopeBuilder``: the classes users build dataflows with, a facade over the operator families.

Every method of :class:`Stream` builds an operator in the stream's scope and
returns the stream(s) it produces; every method of :class:`ScopeBuilder` builds
an input, a source, a loop or a nested scope.  Both are facades: the data is
:class:`~scopes.core.StreamCore`'s and :class:`~scopes.core.ScopeCore`'s, the
operators live in one module per family, written against those, and the
methods delegate to them.  ``Stream`` and ``ScopeBuilder`` name each other (a
stream's scope, the streams a scope makes), so they share this module;
:mod:`scopes.builder` gathers ``ScopeBuilder`` with the rest of the building names.

* :mod:`scopes.per_record`: ``map``, ``flat_map``, ``filter``, ``inspect`` (fused),
  ``inspect_batch``.
* :mod:`scopes.per_batch`: ``map_batch`` (one call per batch; columnar batches).
* :mod:`scopes.columnar_ops`: ``aggregate_batch``, ``join_batch`` (per-key aggregation
  and equi-join of columnar batches, computed by NumPy or Arrow).
* :mod:`scopes.keyed_columnar`, :mod:`scopes.windows_columnar`: ``key_by_columns``,
  ``window_batch`` (windows and joins of columnar batches by key columns).
* :mod:`scopes.routing`: ``exchange``, ``exchange_batch``, ``broadcast``, ``concat``,
  ``partition``, ``branch``, ``delay``.
* :mod:`scopes.per_time`: ``count``, ``accumulate``, ``accumulate_batch``.
* :mod:`scopes.generic_operators`: ``unary``, ``binary`` and their ``_frontier`` and
  ``_notify`` variants, and :func:`~scopes.generic_operators.generic`.
* :mod:`scopes.probes`: ``probe``, ``probe_with``, ``sink``.
* :mod:`scopes.nesting`: ``enter``, ``leave``.
* :mod:`scopes.capture`: ``capture``, ``capture_into`` and ``ScopeBuilder.replay``.
* :mod:`scopes.sources`: ``ScopeBuilder.new_input``, ``to_stream``, ``source``.
* :mod:`scopes.loops`: ``ScopeBuilder.loop_variable``, ``connect_loop``.

Data moves as ``(time, batch)`` messages: the per-record operators call the
user's function once per record and do nothing else per record; the per-batch
operators call it once per batch.  A batch is a list, a NumPy array or an Arrow
record batch or table (:mod:`scopes.batches`); the per-record operators expect
lists, the per-batch ones take any kind.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

from scopes import capture as _capture
from scopes import columnar_ops, loops, nesting, per_batch, per_record, per_time, probes, routing, sources
from scopes import generic_operators as _generic
from scopes import keyed_state as _keyed_state
from scopes import windows_columnar as _windows_columnar
from scopes.capability import Capability
from scopes.contracts import ChannelContract
from scopes.core import BuildContext, ScopeCore, StreamCore
from scopes.errors import BuildError
from scopes.generic_operators import BinaryConstructor, GenericLogic, UnaryConstructor
from scopes.handles import OperatorInput, OperatorOutput
from scopes.input_handle import InputHandle
from scopes.keyed import KeyedStream
from scopes.keyed_columnar import KeyedBatches
from scopes.local_channels import Tee
from scopes.loops import LoopHandle
from scopes.notificator import Notificator
from scopes.operator import Operator, OperatorInfo
from scopes.probes import ProbeHandle
from scopes.progress.location import Source
from scopes.progress.reachability import SummarySpec
from scopes.progress.subgraph import Subgraph
from scopes.progress.timestamp import (
    INTEGER,
    IdentityRefinement,
    PathSummary,
    ProductRefinement,
    ProductType,
    Refinement,
    TimestampType,
)
from scopes.signatures import describe_operator
from scopes.state_registry import refuse_hand_written_under_checkpoints
from scopes.windows import WindowBuilder

R = TypeVar("R")


class Stream(StreamCore):
    """A stream of timestamped records produced by one operator output, with a method per operator."""

    __slots__ = ()

    scope: ScopeBuilder

    def __init__(self, scope: ScopeBuilder, source: Source, tee: Tee, name: str) -> None:
        """Output ``source`` of ``scope``, whose messages go through ``tee``; see :meth:`ScopeBuilder.new_stream`."""
        super().__init__(scope, source, tee, name)

    # ------------------------------------------------------------------ per-record operators

    def map(self, function: Callable[[Any], Any], name: str = "Map") -> Stream:
        """Replace each record ``x`` by ``function(x)``."""
        return per_record.map_records(self, function, name)

    def flat_map(self, function: Callable[[Any], Iterable[Any]], name: str = "FlatMap") -> Stream:
        """Replace each record ``x`` by the records of ``function(x)``, which must be iterable."""
        return per_record.flat_map(self, function, name)

    def filter(self, predicate: Callable[[Any], bool], name: str = "Filter") -> Stream:
        """Keep the records for which ``predicate`` is true."""
        return per_record.filter_records(self, predicate, name)

    def inspect(self, function: Callable[[Any], None], name: str = "Inspect") -> Stream:
        """Call ``function(record)`` on each record and pass the records on unchanged."""
        return per_record.inspect(self, function, name)

    def inspect_batch(self, function: Callable[[Any, Any], None], name: str = "InspectBatch") -> Stream:
        """Call ``function(time, batch)`` on each message and pass it on unchanged.

        ``batch`` is the message's batch itself: a list, or a columnar batch as it is.
        """
        return per_record.inspect_batch(self, function, name)

    # ------------------------------------------------------------------ per-batch operators

    def map_batch(self, function: Callable[[Any], Any], name: str = "MapBatch") -> Stream:
        """Replace each batch ``b`` by ``function(b)``, one call per message (see :mod:`scopes.per_batch`).

        ``function`` gets the batch (a list, NumPy array or Arrow batch) and must
        return a batch of any kind; empty results are not sent.
        """
        return per_batch.map_batch(self, function, name)

    def aggregate_batch(
        self,
        keys: str | Sequence[str],
        aggregations: Sequence[Sequence[str]],
        name: str = "AggregateBatch",
    ) -> Stream:
        """Per key and time: ``count``, ``sum``, ``min``, ``max`` or ``mean`` of columns (:mod:`scopes.columnar_ops`).

        ``keys`` names the key column(s) of NumPy structured arrays or Arrow
        batches; each aggregation is ``(column, function)`` (output ``column_function``)
        or ``(column, function, name)``.  Each batch is reduced to partial
        aggregates where it is, only the partials are exchanged by key, and one
        batch per worker and time (keys, then the aggregations) is emitted when
        the time is complete.
        """
        return columnar_ops.aggregate_batch(self, keys, aggregations, name)

    def join_batch(
        self,
        other: Stream,
        keys: str | Sequence[str],
        right_keys: str | Sequence[str] | None = None,
        join_type: str = "inner",
        suffixes: tuple[str, str] = ("", "_right"),
        name: str = "JoinBatch",
    ) -> Stream:
        """Per time, the equi-join of this stream's rows with ``other``'s on key columns (:mod:`scopes.columnar_ops`).

        Both sides are exchanged by key and joined with Arrow's ``Table.join``
        (``join_type``: ``inner``, ``left semi`` or ``left anti``) once the time is
        complete on both; ``right_keys`` names ``other``'s key columns when they
        differ, and ``suffixes`` tell apart the other columns both sides have.
        Emits Arrow tables.
        """
        return columnar_ops.join_batch(self, other, keys, right_keys, join_type, suffixes, name)

    # ------------------------------------------------------------------ routing

    def exchange(self, key: Callable[[Any], Hashable], name: str = "Exchange") -> Stream:
        """Move each record to the worker selected by ``key(record)`` (see :class:`~scopes.channels.Exchange`).

        A columnar batch stays columnar: ``key`` is called once per row and the rows
        are partitioned with NumPy; :meth:`exchange_batch` does the same with a key
        column or a vectorised key function, without a Python call per row.
        """
        return routing.exchange(self, key, name)

    def exchange_batch(self, key: str | Callable[[Any], Any], name: str = "ExchangeBatch") -> Stream:
        """Move each row of each batch to the worker selected by its key, without iterating the batch.

        ``key`` is a column (structured-array field) name, or a vectorised function
        ``batch -> keys`` returning one key per row (a NumPy array; for a list batch
        any sequence).  A row goes to worker ``stable_hash(key) % peers``, exactly where
        :meth:`exchange` sends a record with the same key; each worker receives one
        batch per time and invocation of the upstream operator (see
        :class:`~scopes.channels.ExchangeBatch`).
        """
        return routing.exchange_batch(self, key, name)

    def broadcast(self, name: str = "Broadcast") -> Stream:
        """Send every record to every worker."""
        return routing.broadcast(self, name)

    def concat(self, *others: Stream, name: str = "Concat") -> Stream:
        """Merge this stream with ``others`` into one stream."""
        return routing.concat(self, others, name)

    def partition(self, parts: int, route: Callable[[Any], int], name: str = "Partition") -> list[Stream]:
        """Split into ``parts`` streams; record ``x`` goes to stream ``route(x)``."""
        return routing.partition(self, parts, route, name)

    def branch(self, predicate: Callable[[Any], bool], name: str = "Branch") -> tuple[Stream, Stream]:
        """Split by ``predicate``: returns ``(records where false, records where true)``."""
        return routing.branch(self, predicate, name)

    def delay(self, new_time: Callable[[Any, Any], Any], name: str = "Delay") -> Stream:
        """Move each record to the later time ``new_time(record, time)``."""
        return routing.delay(self, new_time, name)

    # ------------------------------------------------------------------ per-time aggregation

    def accumulate(self, initial: Any, fold: Callable[[Any, Any], Any], name: str = "Accumulate") -> Stream:
        """Fold the records of each time, ``acc = fold(acc, record)``, from a deep copy of ``initial``.

        Each time starts from its own ``copy.deepcopy(initial)``, so mutable
        initial values (``{"counts": {}}``) are never shared between times.
        Emits one record per time, once the time is complete.
        """
        return per_time.accumulate(self, initial, fold, name)

    def accumulate_batch(self, initial: Any, fold: Callable[[Any, Any], Any], name: str = "AccumulateBatch") -> Stream:
        """Fold the batches of each time, ``acc = fold(acc, batch)`` once per batch, from a deep copy of ``initial``.

        The fold gets each batch as it is (list, NumPy array or Arrow batch).
        Emits one record per time, once the time is complete.
        """
        return per_time.accumulate_batch(self, initial, fold, name)

    def count(self, name: str = "Count") -> Stream:
        """Emit the number of records (rows of columnar batches) at each time, once the time is complete."""
        return per_time.count(self, name)

    # ------------------------------------------------------------------ keyed state, windows and joins

    def key_by(self, key: Callable[[Any], Hashable], name: str = "KeyBy") -> KeyedStream[Stream]:
        """``(key(record), record)`` pairs, each on the worker owning its key (see :mod:`scopes.keyed`)."""
        return KeyedStream(_keyed_state.key_by(self, key, name))

    def keyed(self, name: str = "Keyed") -> KeyedStream[Stream]:
        """This stream's ``(key, value)`` pairs as a keyed stream, each on the worker owning its key."""
        return KeyedStream(_keyed_state.keyed(self, name))

    def window(
        self,
        spec: Any,
        key: Callable[[Any], Hashable] | None = None,
        event_time: Callable[[Any], int] | None = None,
        lateness: int = 0,
    ) -> WindowBuilder[Stream]:
        """Windows of ``spec`` (:mod:`scopes.windows`) over the records keyed by ``key``.

        A window needs a key: pass ``key=`` (``lambda record: None`` for one global
        window per interval), or call it on ``key_by(key)``'s keyed stream.
        """
        if key is None:
            raise BuildError(
                f"{describe_operator('Window', self.scope.path)} has no key: pass key=... (a function of the record), "
                "or call key_by(key).window(...); windows keep their state per key"
            )
        return self.key_by(key).window(spec, event_time, lateness)

    def key_by_columns(self, keys: str | Sequence[str], name: str = "KeyByColumns") -> KeyedBatches[Stream]:
        """This stream's columnar batches keyed by the columns ``keys`` (see :mod:`scopes.keyed_columnar`).

        Its operators (``window``, ``join``, ``join_latest``) exchange rows by the key columns.
        """
        return KeyedBatches(self, keys, name)

    def window_batch(
        self,
        spec: Any,
        keys: str | Sequence[str] | None = None,
        event_time: str | None = None,
        lateness: int = 0,
        name: str = "WindowBatch",
    ) -> _windows_columnar.ColumnarWindowBuilder[Stream]:
        """Columnar windows of ``spec`` over the rows keyed by the ``keys`` columns (:mod:`scopes.windows_columnar`).

        Pick ``aggregate([(column, function), ...])`` or ``count()`` on the result.
        """
        return _windows_columnar.window_batch(self, spec, keys, event_time, lateness, name)

    # ------------------------------------------------------------------ probes and sinks

    def capture_into(self, pusher: _capture.EventPusher, name: str = "Capture") -> None:
        """Record this stream's frontier changes and messages into ``pusher`` (see :mod:`scopes.capture`)."""
        _capture.capture_into(self, pusher, name)

    def capture(self, name: str = "Capture") -> _capture.CaptureRecorder:
        """Record this stream in memory; returns this worker's :class:`~scopes.capture.CaptureRecorder`."""
        return _capture.capture(self, name)

    def probe(self, name: str = "Probe") -> ProbeHandle:
        """Consume the stream and return a handle that reports its frontier."""
        return probes.probe(self, name)

    def probe_with(self, handle: ProbeHandle, name: str = "Probe") -> Stream:
        """Add this stream's frontier to ``handle``; returns the stream, unchanged."""
        return probes.probe_with(self, handle, name)

    def sink(
        self,
        contract: ChannelContract,
        name: str,
        logic: Callable[[OperatorInput], None],
    ) -> None:
        """Consume the stream with ``logic(input)``, run on new data and frontier changes."""
        probes.sink(self, contract, name, logic)

    # ------------------------------------------------------------------ generic operators

    def unary(
        self,
        contract: ChannelContract,
        name: str,
        constructor: UnaryConstructor,
        summary: SummarySpec = None,
    ) -> Stream:
        """A one-input, one-output operator; ``constructor(capability, info)`` returns ``logic(input, output)``."""
        refuse_hand_written_under_checkpoints(self.scope, name)
        return _generic.unary(self, contract, name, constructor, summary, notify=False)

    def unary_frontier(
        self,
        contract: ChannelContract,
        name: str,
        constructor: UnaryConstructor,
        summary: SummarySpec = None,
    ) -> Stream:
        """Like :meth:`unary`, and also scheduled when the input frontier changes."""
        refuse_hand_written_under_checkpoints(self.scope, name)
        return _generic.unary(self, contract, name, constructor, summary, notify=True)

    def unary_notify(
        self,
        contract: ChannelContract,
        name: str,
        logic: Callable[[OperatorInput, OperatorOutput, Notificator], None],
        notify_at: Sequence[Any] = (),
    ) -> Stream:
        """A one-input operator with a :class:`~scopes.operator.Notificator`.

        ``logic(input, output, notificator)`` runs on new data and on frontier
        changes; times in ``notify_at`` are requested at the start.
        """
        refuse_hand_written_under_checkpoints(self.scope, name)
        return _generic.unary_notify(self, contract, name, logic, notify_at)

    def binary(
        self,
        other: Stream,
        contract1: ChannelContract,
        contract2: ChannelContract,
        name: str,
        constructor: BinaryConstructor,
        summary: SummarySpec = None,
    ) -> Stream:
        """A two-input operator; ``constructor(capability, info)`` returns ``logic(input1, input2, output)``."""
        refuse_hand_written_under_checkpoints(self.scope, name)
        return _generic.binary(self, other, (contract1, contract2), name, constructor, summary, notify=False)

    def binary_frontier(
        self,
        other: Stream,
        contract1: ChannelContract,
        contract2: ChannelContract,
        name: str,
        constructor: BinaryConstructor,
        summary: SummarySpec = None,
    ) -> Stream:
        """Like :meth:`binary`, and also scheduled when either input frontier changes."""
        refuse_hand_written_under_checkpoints(self.scope, name)
        return _generic.binary(self, other, (contract1, contract2), name, constructor, summary, notify=True)

    def binary_notify(
        self,
        other: Stream,
        contract1: ChannelContract,
        contract2: ChannelContract,
        name: str,
        logic: Callable[[OperatorInput, OperatorInput, OperatorOutput, Notificator], None],
        notify_at: Sequence[Any] = (),
    ) -> Stream:
        """A two-input operator with a notificator watching both input frontiers."""
        refuse_hand_written_under_checkpoints(self.scope, name)
        return _generic.binary_notify(self, other, (contract1, contract2), name, logic, notify_at)

    # ------------------------------------------------------------------ scopes and loops

    def enter(self, scope: ScopeBuilder) -> Stream:
        """Bring this stream into ``scope``, nested (at any depth) inside the stream's scope."""
        return nesting.enter(self, scope)

    def leave(self) -> Stream:
        """Take this stream out of its nested scope into the parent scope."""
        return nesting.leave(self)

    def connect_loop(self, handle: LoopHandle) -> None:
        """Feed this stream back to the loop variable ``handle`` (closing the loop)."""
        handle.connect(self)


class ScopeBuilder(ScopeCore[Stream]):
    """Builds operators in one scope.  Passed to the function given to ``worker.dataflow``.

    The scope's data and build-time checks are :class:`~scopes.core.ScopeCore`'s; this
    class makes its streams :class:`~scopes.stream.Stream` objects and adds inputs,
    sources, loops and nested scopes.
    """

    def __init__(
        self,
        subgraph: Subgraph,
        context: BuildContext,
        parent: ScopeBuilder | None = None,
        index_in_parent: int = 0,
    ) -> None:
        """Wrap ``subgraph``; ``parent`` is the enclosing scope's builder (``None`` at top level)."""
        super().__init__(subgraph, context, parent, index_in_parent)
        self.parent: ScopeBuilder | None = parent
        self.children: list[ScopeBuilder] = []
        self.loops: list[LoopHandle] = []

    def new_stream(self, source: Source, tee: Tee, name: str) -> Stream:
        """The stream in this scope produced at ``source``, whose messages go through ``tee``."""
        return Stream(self, source, tee, name)

    # ------------------------------------------------------------------ inputs

    def new_input(self, name: str = "Input") -> tuple[InputHandle, Stream]:
        """A stream fed from outside: returns ``(handle, stream)``."""
        return sources.new_input(self, name)

    def to_stream(self, records: Iterable[Any], name: str = "ToStream") -> Stream:
        """A stream of ``records`` at the minimum time, emitted in batches."""
        return sources.to_stream(records, self, name)

    def replay(self, recordings: Iterable[Any], name: str = "Replay") -> Stream:
        """Replay all ``recordings`` (the same list on every worker), each on one worker.

        Worker ``i`` takes recordings ``i``, ``i + peers``, ...; see
        :func:`scopes.capture.replay_into`.
        """
        return _capture.replay_into(recordings, self, name)

    def source(
        self,
        name: str,
        constructor: Callable[[Capability, OperatorInfo], Callable[[OperatorOutput], None]],
    ) -> Stream:
        """A programmable input: ``constructor(capability, info)`` returns ``logic(output)``."""
        return sources.source(self, name, constructor)

    # ------------------------------------------------------------------ nested scopes

    def _nested(
        self,
        name: str,
        timestamp_type: TimestampType,
        refinement: Refinement,
        body: Callable[[ScopeBuilder], R],
    ) -> R:
        self.check_building(name)
        index = nesting.reserve_child(self.subgraph, name)
        parent_subgraph = self.subgraph
        child = Subgraph(
            name,
            self.subgraph.address + (index,),
            timestamp_type,
            refinement,
            self.context.allocator,
            self.context.next_channel(),
            lambda: parent_subgraph.activate_child(index),
        )
        child.observer = parent_subgraph.observer
        parent_subgraph.graph.set_child(index, child)
        inner = ScopeBuilder(child, self.context, self, index)
        self.children.append(inner)
        with inner.open():
            return body(inner)

    def scoped(self, name: str, body: Callable[[ScopeBuilder], R], inner: TimestampType = INTEGER) -> R:
        """Run ``body`` in a nested scope whose times are ``Product(outer, inner)``."""
        product = ProductType(self.timestamp_type, inner)
        return self._nested(name, product, ProductRefinement(product), body)

    def iterative(self, body: Callable[[ScopeBuilder], R], name: str = "Iterative") -> R:
        """Run ``body`` in a nested loop scope with an integer loop counter."""
        return self.scoped(name, body, INTEGER)

    def region(self, body: Callable[[ScopeBuilder], R], name: str = "Region") -> R:
        """Run ``body`` in a nested scope with this scope's own timestamps (for structure only)."""
        return self._nested(name, self.timestamp_type, IdentityRefinement(self.timestamp_type), body)

    def loop_variable(self, summary: int | PathSummary = 1, name: str = "Feedback") -> tuple[LoopHandle, Stream]:
        """A stream fed back from later in this scope, each time advanced by ``summary``.

        ``summary`` may be an int (advance the loop counter by that much), an
        :class:`~scopes.progress.timestamp.IntegerSummary` (with a ``limit`` for a bounded loop),
        or a full path summary for this scope's timestamps.  Close the loop with
        ``stream.connect_loop(handle)``.
        """
        handle, stream = loops.loop_variable(self, summary, name)
        self.loops.append(handle)
        return handle, stream

    def check_complete(self) -> None:
        """Raise :class:`~scopes.errors.BuildError` if a loop in this scope (or below) is open."""
        for loop in self.loops:
            if not loop.connected:
                raise BuildError(
                    f"loop variable '{loop.name}' in scope '{self.name}' was never connected; "
                    "close the loop with stream.connect_loop(handle)"
                )
        for child in self.children:
            child.check_complete()


__all__ = ["BinaryConstructor", "Operator", "ScopeBuilder", "Stream", "UnaryConstructor", "generic"]


def generic(
    scope: ScopeBuilder,
    name: str,
    inputs: Sequence[tuple[Stream, ChannelContract]],
    outputs: int,
    constructor: Callable[..., GenericLogic],
    summary: SummarySpec = None,
    notify: bool = True,
    frontiers: bool = False,
) -> list[Stream]:
    """An operator with any number of inputs and outputs, written by hand (:func:`scopes.generic_operators.generic`).

    Refused in a dataflow with checkpoints, whose state it would hide.
    """
    refuse_hand_written_under_checkpoints(scope, name)
    return _generic.generic(scope, name, inputs, outputs, constructor, summary, notify, frontiers)
