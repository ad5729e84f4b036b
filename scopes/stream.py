"""``Stream``: the output of an operator, and the methods that build operators reading it.

Every method builds an operator in the stream's scope and returns the stream(s)
it produces.  ``Stream`` is a facade: the operators live in one module per
family, and the methods delegate to them.

* :mod:`scopes.per_record`: ``map``, ``flat_map``, ``filter``, ``inspect`` (fused),
  ``inspect_batch``.
* :mod:`scopes.per_batch`: ``map_batch`` (one call per batch; columnar batches).
* :mod:`scopes.routing`: ``exchange``, ``exchange_batch``, ``broadcast``, ``concat``,
  ``partition``, ``branch``, ``delay``.
* :mod:`scopes.per_time`: ``count``, ``accumulate``, ``accumulate_batch``.
* :mod:`scopes.generic_operators`: ``unary``, ``binary`` and their ``_frontier`` and
  ``_notify`` variants, and :func:`~scopes.generic_operators.generic`.
* :mod:`scopes.probes`: ``probe``, ``probe_with``, ``sink``.
* :mod:`scopes.nesting`: ``enter``, ``leave``.

Data moves as ``(time, batch)`` messages: the per-record operators call the
user's function once per record and do nothing else per record; the per-batch
operators call it once per batch.  A batch is a list, a NumPy array or an Arrow
record batch or table (:mod:`scopes.batches`); the per-record operators expect
lists, the per-batch ones take any kind.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from scopes import capture as _capture
from scopes import generic_operators as _generic
from scopes import nesting, per_batch, per_record, per_time, probes, routing
from scopes.channels import ChannelContract, Tee
from scopes.generic_operators import BinaryConstructor, UnaryConstructor, generic
from scopes.location import Source
from scopes.operator import Notificator, Operator, OperatorInput, OperatorOutput
from scopes.reachability import SummarySpec

if TYPE_CHECKING:
    from scopes.builder import LoopHandle, ScopeBuilder
    from scopes.per_record import Chain
    from scopes.probes import ProbeHandle


class Stream:
    """A stream of timestamped records produced by one operator output."""

    __slots__ = ("scope", "source", "tee", "name", "chain")

    def __init__(self, scope: ScopeBuilder, source: Source, tee: Tee, name: str) -> None:
        """Describe output ``source`` of ``scope``, whose messages go through ``tee``."""
        self.scope = scope
        self.source = source
        self.tee = tee
        self.name = name
        self.chain: Chain | None = None
        """The fused per-record stages that end at this stream, while more may join them."""

    def __repr__(self) -> str:
        return f"Stream({self.name!r} in scope {self.scope.name!r} at {self.source!r})"

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
        return _generic.unary(self, contract, name, constructor, summary, notify=False)

    def unary_frontier(
        self,
        contract: ChannelContract,
        name: str,
        constructor: UnaryConstructor,
        summary: SummarySpec = None,
    ) -> Stream:
        """Like :meth:`unary`, and also scheduled when the input frontier changes."""
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


__all__ = ["BinaryConstructor", "Operator", "Stream", "UnaryConstructor", "generic"]
