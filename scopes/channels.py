"""Channels: how ``(time, batch)`` messages move from an output to an input.

The progress layer never sees data; it sees only counts.  This module defines
the data plane's vocabulary: a :class:`Pusher` accepts messages, a
:class:`Puller` yields them, and an :class:`Allocator` (supplied by the runtime)
creates channels between workers.  Channel contracts say how records are
distributed: :data:`Pipeline` keeps them on the worker that produced them,
:class:`Exchange` routes each record by key, :class:`ExchangeBatch` routes the
rows of columnar batches by a key column or a vectorised key function, and
:data:`Broadcast` sends each record to every worker.

A batch may be a list or a columnar batch (see :mod:`scopes.batches`); the
channels never iterate a columnar batch: fan-outs copy NumPy arrays with
``ndarray.copy()`` and share (immutable) Arrow batches.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from scopes.batches import (
    Batch,
    BatchError,
    KeyColumnError,
    batch_kind,
    column_names,
    concat_batches,
    copy_batch,
    describe_value,
    is_arrow,
    is_columnar,
    take,
)
from scopes.channel_protocols import Activator, Allocator, Puller, Pusher
from scopes.destinations import KeyRouter, check_keys
from scopes.errors import BuildError, OperatorFailed, UserFunctionError
from scopes.hashing import MASK64, stable_hash, stable_hash_array, stable_hash_arrow
from scopes.lazy_import import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

Message = tuple[Any, Batch]
"""A batch of records sharing one timestamp: ``(time, records)``."""


class LocalQueue:
    """A FIFO queue within one worker: both pusher and puller.  Pushing activates the reader."""

    __slots__ = ("_queue", "_activate")

    def __init__(self, activate: Activator | None = None) -> None:
        """Create a queue that calls ``activate`` whenever a message is pushed."""
        self._queue: deque[Message] = deque()
        self._activate = activate

    def push(self, time: Any, batch: Batch) -> None:
        """Enqueue a message and activate the reader."""
        self._queue.append((time, batch))
        if self._activate is not None:
            self._activate()

    def pull(self) -> Message | None:
        """Dequeue the oldest message, if any."""
        queue = self._queue
        return queue.popleft() if queue else None

    def __len__(self) -> int:
        return len(self._queue)


class Tee:
    """An output's fan-out: every message goes to every attached pusher.

    Pushers that buffer (they have a ``flush()`` method, like
    :class:`ExchangePusher` and the scope entrance and exit) are also kept in a
    second list, so that :meth:`flush` costs nothing for the common tee whose
    pushers all deliver at once.
    """

    __slots__ = ("pushers", "_flushers", "push")

    def __init__(self) -> None:
        """Start with no attached pushers."""
        self.pushers: list[Pusher] = []
        self._flushers: list[Callable[[], None]] = []
        #: ``push(time, batch)``: send the batch to each receiver; all but the last get
        #: their own copy.  With one receiver it *is* that receiver's ``push`` (no
        #: extra call per message); attach receivers only with :meth:`add`.
        self.push: Callable[[Any, Any], None] = self._push_all

    def add(self, pusher: Pusher) -> None:
        """Attach another receiver."""
        self.pushers.append(pusher)
        flush = getattr(pusher, "flush", None)
        if callable(flush):
            self._flushers.append(flush)
        self.push = pusher.push if len(self.pushers) == 1 else self._push_all

    @property
    def buffering(self) -> bool:
        """Whether some attached pusher buffers and needs :meth:`flush`."""
        return bool(self._flushers)

    def _push_all(self, time: Any, batch: Any) -> None:
        """Send the batch to each receiver; all but the last get their own copy."""
        pushers = self.pushers
        count = len(pushers)
        if count == 1:
            pushers[0].push(time, batch)
        elif count:
            last = count - 1
            for i, pusher in enumerate(pushers):
                if i == last:
                    pusher.push(time, batch)
                else:
                    pusher.push(time, list(batch) if batch.__class__ is list else copy_batch(batch))

    def flush(self) -> None:
        """Send whatever the buffering pushers hold."""
        for flush in self._flushers:
            flush()


class Receiver(NamedTuple):
    """The operator an exchange channel delivers to: what a failing key function is blamed on."""

    name: str
    scope_path: tuple[str, ...]
    address: tuple[int, ...]
    worker: int

    def key_failed(self, error: Exception, time: Any, key: Callable[[Any], Any], batch: Any) -> OperatorFailed:
        """Describe ``error``, raised by ``key`` on some record of ``batch`` at ``time``, as :class:`OperatorFailed`.

        Runs only after a failure: it finds the record by calling ``key`` again.
        """
        record = "one of the records"
        for candidate in batch if batch.__class__ is list else ():
            try:
                stable_hash(key(candidate))  # the key fails, or its value cannot be routed
            except Exception:  # noqa: BLE001 - looking for the record that fails, whatever it raises
                record = f"record {candidate!r}"
                break
        scope = " > ".join(repr(name) for name in self.scope_path) or "(none)"
        return OperatorFailed(
            f"operator '{self.name}' (address {self.address}, in scope {scope}) failed at time {time!r} "
            f"on worker {self.worker}: its exchange key function raised {type(error).__name__}: {error} "
            f"for {record}",
            self.name,
            self.address,
            self.scope_path,
            time,
            self.worker,
        )


EXCHANGE_BUFFER = 4096
"""An exchange sends a destination's buffered records early once it holds this many at one time."""

ROUTE_WHOLE_BATCH = 128
"""Batches of at least this many records are routed by :class:`~scopes.destinations.KeyRouter` (keys hashed
and records split with C-level loops); smaller ones record by record, which costs less for a handful."""


class ExchangePusher:
    """Routes each record to worker ``route(key(record), peers)``, buffering until :meth:`flush`.

    Routing uses :func:`scopes.hashing.stable_hash`, so every process sends a key
    to the same worker; a batch of :data:`ROUTE_WHOLE_BATCH` records or more is
    routed as a whole by :class:`~scopes.destinations.KeyRouter` (the key function
    is still called once per record), to the same workers.  Records are gathered per ``(destination, time)`` for the
    whole invocation of the producing operator and sent as one message each when
    the operator is done (:meth:`flush`), as timely's buffers do; otherwise a loop
    with an exchange inside splits its batches a little more at every iteration
    until each message carries one record.  A destination's buffer for one time
    is sent early once it holds :data:`EXCHANGE_BUFFER` records, to bound memory.

    Why holding records until the end of the invocation is safe for progress:
    the operator reports the records it produced (``produced`` counts, which
    become message counts at the receiving input) in the same atomic progress
    batch as any capability it releases, and that batch is only assembled after
    :meth:`~scopes.operator.Operator.pull_internal_progress` has flushed every
    output tee, within the same invocation.  So by the time any worker can see the
    batch, the messages are in the receivers' channels.  And even in between, a
    positive count for messages not yet delivered only holds frontiers back,
    which can never make a worker believe a time is complete too early.  Records
    pushed from outside an invocation (an input handle's ``send`` from ``main``)
    activate their operator, whose next invocation flushes them.
    """

    __slots__ = ("_key", "_pushers", "_peers", "_buffers", "_columnar", "_router", "receiver")

    def __init__(self, key: Callable[[Any], Hashable], pushers: Sequence[Pusher]) -> None:
        """Route by ``key`` among ``pushers`` (one per worker)."""
        self.receiver: Receiver | None = None
        """The operator receiving the records, named if ``key`` fails (set by the operator builder)."""
        self._key = key
        self._pushers = list(pushers)
        self._peers = len(pushers)
        self._router = KeyRouter(self._peers)
        self._buffers: dict[Any, list[list[Any]]] = {}
        self._columnar: ExchangeBatchPusher | None = None

    def push(self, time: Any, batch: Batch) -> None:
        """Add each record of the batch to its destination's buffer for ``time``.

        A columnar batch stays columnar: ``key`` is called on each of its rows (a
        NumPy array's elements, an Arrow batch's rows as dicts) and the rows are
        partitioned as :class:`ExchangeBatchPusher` does.
        """
        if batch.__class__ is not list and is_columnar(batch):
            columnar = self._columnar
            if columnar is None:
                keys = BatchKeys(row_keys(self._key), "the Exchange channel (a record-wise key on a columnar batch)")
                columnar = self._columnar = ExchangeBatchPusher(keys, self._pushers)
            columnar.push(time, batch)
            return
        peers = self._peers
        key = self._key
        parts = self._buffers.get(time)
        if parts is None:
            parts = self._buffers[time] = [[] for _ in range(peers)]
        try:
            if batch.__class__ is not list or len(batch) < ROUTE_WHOLE_BATCH:
                appends = [part.append for part in parts]
                for record in cast(list[Any], batch):  # columnar batches returned above
                    k = key(record)
                    if k.__class__ is int:
                        appends[(k & MASK64) % peers](record)
                    else:
                        appends[stable_hash(k) % peers](record)
            else:
                split = self._router.split(batch, list(map(key, batch)))
                for index, chunk in enumerate(split):
                    if chunk:
                        if parts[index]:
                            parts[index].extend(chunk)
                        else:
                            parts[index] = chunk
        except Exception as error:
            if self.receiver is None:
                raise
            raise self.receiver.key_failed(error, time, key, batch) from error
        for index, part in enumerate(parts):
            if len(part) >= EXCHANGE_BUFFER:
                parts[index] = []
                self._pushers[index].push(time, part)

    def flush(self) -> None:
        """Send one message per destination and time with everything buffered."""
        if self._columnar is not None:
            self._columnar.flush()
        buffers = self._buffers
        if buffers:
            self._buffers = {}
            pushers = self._pushers
            for time, parts in buffers.items():
                for pusher, part in zip(pushers, parts, strict=True):
                    if part:
                        pusher.push(time, part)


def row_keys(key: Callable[[Any], Hashable]) -> Callable[[Any], list[Any]]:
    """A batch key function calling the record-wise ``key`` once per row of a columnar batch."""

    def keys(batch: Any) -> list[Any]:
        rows = batch.to_pylist() if is_arrow(batch) else batch
        return [key(row) for row in rows]

    return keys


BatchKey = str | Callable[[Any], Any]
"""A columnar exchange key: a column (field) name, or a function ``batch -> keys`` (one key per row)."""


class BatchKeys:
    """Computes the destinations of a batch's rows for :class:`ExchangeBatch`, checking the key as it goes.

    ``where`` names the exchange operator (and its scope path) in error messages.
    """

    __slots__ = ("key", "where")

    def __init__(self, key: BatchKey, where: str) -> None:
        """Route by ``key`` (a column name or a vectorised key function) for the operator ``where``."""
        self.key = key
        self.where = where

    def check_kind(self, batch: Any, time: Any) -> str:
        """The batch's kind, or :class:`~scopes.batches.BatchError` if the exchange cannot route it."""
        kind = batch_kind(batch)
        if kind == "list":
            if isinstance(self.key, str):
                raise BatchError(
                    f"{self.where}: cannot route a list batch at time {time!r} by column {self.key!r}: lists have "
                    "no named columns; send a structured NumPy array or an Arrow batch, or give exchange_batch a "
                    "key function (batch -> keys), or use exchange(key) for records"
                )
            return kind
        if kind == "ndarray":
            if batch.ndim < 1:
                raise BatchError(
                    f"{self.where}: cannot route a 0-dimensional NumPy array at time {time!r}; a batch has rows"
                )
            return kind
        if is_arrow(batch):
            if isinstance(self.key, str) and self.key not in batch.schema.names:
                self.missing(batch, time)
            return kind
        raise BatchError(
            f"{self.where}: cannot route a batch of type {type(batch).__qualname__} at time {time!r}: "
            "exchange_batch knows lists, NumPy arrays and Arrow record batches and tables; convert the batch "
            "to one of these"
        )

    def missing(self, batch: Any, time: Any) -> None:
        """Raise :class:`BatchError`: ``batch`` at ``time`` lacks the key column."""
        available = column_names(batch)
        if available:
            has = f"its columns are {list(available)}; pass one of these to exchange_batch, or a key function"
        else:
            has = (
                f"it is a {batch_kind(batch)} of dtype {batch.dtype} without named columns; route it with a key "
                "function (batch -> keys, for example lambda batch: batch), or send structured arrays"
            )
        raise KeyColumnError(
            f"{self.where}: the batch at time {time!r} has no key column {self.key!r}; {has}",
            str(self.key),
            available,
        )

    def destinations(self, batch: Any, time: Any, peers: int) -> np.ndarray:
        """The worker (``stable_hash(key) % peers``) of each row, as an integer array with one entry per row.

        Integer keys among a power of two of workers need no hash at all: ``2**64``
        is a multiple of ``peers``, so ``(k & (2**64 - 1)) % peers`` is the key's low
        bits, ``k & (peers - 1)``, computed in the keys' own dtype (no widening
        copy, no 64-bit division: a tenth of the time on 4 million ``int32``).
        """
        keys = self.keys(batch, time)
        if keys.__class__ is np.ndarray and keys.dtype.kind in "iu" and keys.ndim == 1 and not peers & (peers - 1):
            return np.bitwise_and(keys, peers - 1)
        arrow = keys.__class__.__module__.startswith("pyarrow")  # an Arrow column (array or chunked array)
        hashes = stable_hash_arrow(keys) if arrow else stable_hash_array(keys)
        return hashes % np.uint64(peers)

    def keys(self, batch: Any, time: Any) -> Any:
        """Each row's key (the key column, or what the key function returned), checked to be one per row."""
        kind = self.check_kind(batch, time)
        key = self.key
        if isinstance(key, str):
            if kind == "ndarray":
                names = batch.dtype.names
                if names is None or key not in names:
                    self.missing(batch, time)
                return batch[key]
            return batch.column(key)
        keys = key(batch)
        rows = len(batch)
        try:
            count = len(keys)
        except TypeError:
            raise UserFunctionError(
                f"{self.where}: the key function returned {describe_value(keys)} for a {kind} batch of {rows} "
                f"rows at time {time!r}; it must return one key per row (a NumPy array or a sequence)"
            ) from None
        if count != rows:
            raise UserFunctionError(
                f"{self.where}: the key function returned {count} keys for a {kind} batch of {rows} rows at "
                f"time {time!r}; it must return exactly one key per row"
            )
        return keys


SCAN_PEERS = 8
"""Up to this many workers, the columnar exchange finds each destination's rows with one comparison pass
per destination; beyond it, with one stable sort of the destinations."""


class ExchangeBatchPusher:
    """Routes the rows of each batch to worker ``stable_hash(key) % peers``, buffering until :meth:`flush`.

    The rows are never iterated in Python: the keys are hashed with
    :func:`~scopes.hashing.stable_hash_array` (or
    :func:`~scopes.hashing.stable_hash_arrow`), the destinations computed with
    one NumPy operation, and each destination's rows taken with one
    :func:`~scopes.batches.take` per batch.  The parts are gathered per
    ``(destination, time)`` for the whole invocation of the producing operator
    and concatenated at :meth:`flush` into one batch per destination and time,
    for the reasons :class:`ExchangePusher` gives.  A list batch is routed the
    same way, with its key function returning one key per record.
    """

    __slots__ = ("_keys", "_pushers", "_peers", "_buffers")

    def __init__(self, keys: BatchKeys, pushers: Sequence[Pusher]) -> None:
        """Route by ``keys`` among ``pushers`` (one per worker)."""
        self._keys = keys
        self._pushers = list(pushers)
        self._peers = len(pushers)
        self._buffers: dict[Any, list[list[Any]]] = {}

    def push(self, time: Any, batch: Any) -> None:
        """Split the batch by destination and add each part to its buffer for ``time``."""
        rows = len(batch)
        if not rows:
            return
        destinations = self._keys.destinations(batch, time, self._peers)
        parts = self._buffers.get(time)
        if parts is None:
            parts = self._buffers[time] = [[] for _ in range(self._peers)]
        if self._peers == 2:  # one mask, and its rows and the others'
            second = destinations.astype(bool)
            count = int(np.count_nonzero(second))
            if count in (0, rows):
                parts[1 if count else 0].append(batch)
            else:
                parts[0].append(take(batch, np.flatnonzero(~second)))
                parts[1].append(take(batch, np.flatnonzero(second)))
            return
        first = int(destinations[0])
        if (destinations == first).all():
            parts[first].append(batch)
            return
        if self._peers <= SCAN_PEERS:  # one pass per destination beats a sort
            for index in range(self._peers):
                rows_here = np.flatnonzero(destinations == index)
                if len(rows_here):
                    parts[index].append(take(batch, rows_here))
            return
        order = np.argsort(destinations, kind="stable")
        bounds = np.searchsorted(destinations[order], np.arange(self._peers + 1, dtype=np.uint64)).tolist()
        for index in range(self._peers):
            start, end = bounds[index], bounds[index + 1]
            if start < end:
                parts[index].append(take(batch, order[start:end]))

    def flush(self) -> None:
        """Send one batch per destination and time with everything buffered.

        Parts of different kinds, NumPy dtypes or Arrow schemas (a stream may
        change them from batch to batch) are not merged: each run of alike
        parts becomes one batch, so no value is ever converted.
        """
        buffers = self._buffers
        if buffers:
            self._buffers = {}
            pushers = self._pushers
            for time, parts in buffers.items():
                for pusher, part in zip(pushers, parts, strict=True):
                    if len(part) == 1:
                        pusher.push(time, part[0])
                    elif part:
                        for run in alike_runs(part):
                            pusher.push(time, concat_batches(run))


def _shape(batch: Any) -> Any:
    """What must agree for two batches to be concatenated without converting a value."""
    if batch.__class__ is list:
        return list
    if isinstance(batch, np.ndarray):
        return (np.ndarray, batch.dtype, batch.shape[1:])
    return (batch.__class__, batch.schema)


def alike_runs(parts: list[Any]) -> list[list[Any]]:
    """Split ``parts`` into maximal runs of consecutive batches of the same kind, dtype (or schema) and row shape."""
    runs: list[list[Any]] = []
    previous: Any = None
    for part in parts:
        shape = _shape(part)
        if runs and shape == previous:
            runs[-1].append(part)
        else:
            runs.append([part])
            previous = shape
    return runs


class CheckBatchPusher:
    """The columnar exchange on a single worker: every row stays, but the batch kind and the keys are checked.

    Checking on one worker too means a misused key fails the same way whatever
    the number of workers.  A key function is called once per batch, as on
    several workers, and its keys are checked as routing would: one per row,
    of a type that hashes stably.  Keys of a plain dtype (numbers, strings) or
    an Arrow column are not hashed, since nothing is routed; other keys (an
    object array, a list) are, as routing would, to refuse what cannot be hashed.
    """

    __slots__ = ("_keys", "_queue")

    def __init__(self, keys: BatchKeys, queue: LocalQueue) -> None:
        """Check batches with ``keys`` before queueing them on ``queue``."""
        self._keys = keys
        self._queue = queue

    def push(self, time: Any, batch: Any) -> None:
        """Check the batch, then queue it."""
        keys = self._keys
        kind = keys.check_kind(batch, time)
        if kind == "ndarray" and isinstance(keys.key, str):
            names = batch.dtype.names
            if names is None or keys.key not in names:
                keys.missing(batch, time)
        elif not isinstance(keys.key, str):
            found = keys.keys(batch, time)
            plain = found.__class__ is np.ndarray and found.ndim == 1 and found.dtype.kind in "biufUS"
            if not plain and not found.__class__.__module__.startswith("pyarrow"):
                stable_hash_array(found)  # raises KeyHashError as routing would
        self._queue.push(time, batch)


class KeyCheckPusher:
    """The record-wise exchange on a single worker: every record stays, but its key is computed and checked.

    The key's value is not needed to route anything, but calling it and
    checking that it hashes stably (:func:`~scopes.destinations.check_keys`)
    means a key that fails, or returns a value no worker count could route (a
    list, a dict), fails the same way whatever the number of workers.
    """

    __slots__ = ("_key", "_queue", "receiver")

    def __init__(self, key: Callable[[Any], Hashable], queue: LocalQueue) -> None:
        """Call ``key`` on each record before queueing its batch on ``queue``."""
        self._key = key
        self._queue = queue
        self.receiver: Receiver | None = None

    def push(self, time: Any, batch: Any) -> None:
        """Compute every record's key, then queue the batch."""
        if batch.__class__ is list:
            try:
                check_keys(list(map(self._key, batch)))  # every key, at C speed, and their types
            except Exception as error:
                if self.receiver is None:
                    raise
                raise self.receiver.key_failed(error, time, self._key, batch) from error
        self._queue.push(time, batch)


class BroadcastPusher:
    """Sends every record to every worker."""

    __slots__ = ("_pushers",)

    def __init__(self, pushers: Sequence[Pusher]) -> None:
        """Broadcast among ``pushers`` (one per worker)."""
        self._pushers = list(pushers)

    def push(self, time: Any, batch: Batch) -> None:
        """Push a copy of the batch to each worker."""
        last = len(self._pushers) - 1
        for i, pusher in enumerate(self._pushers):
            if i == last:
                pusher.push(time, batch)
            else:
                pusher.push(time, list(batch) if batch.__class__ is list else copy_batch(batch))


class ChannelContract(ABC):
    """How an operator input wants its records distributed among workers."""

    name = "contract"

    def copies(self, peers: int) -> int:
        """How many copies of each record sent into the channel are delivered (in all)."""
        return 1

    @abstractmethod
    def connect(
        self, allocator: Allocator, channel: int, address: tuple[int, ...], activate: Activator
    ) -> tuple[Pusher, Puller]:
        """Create the channel; return the pusher the upstream output uses and this input's puller."""

    def __repr__(self) -> str:
        return self.name


class _Pipeline(ChannelContract):
    """Records stay on the worker that produced them."""

    name = "Pipeline"

    def connect(
        self, allocator: Allocator, channel: int, address: tuple[int, ...], activate: Activator
    ) -> tuple[Pusher, Puller]:
        queue = LocalQueue(activate)
        return queue, queue


Pipeline: ChannelContract = _Pipeline()
"""Keep records on the worker that produced them (no communication)."""


class Exchange(ChannelContract):
    """Route each record to the worker ``stable_hash(key(record)) % peers`` (see :mod:`scopes.hashing`)."""

    name = "Exchange"

    def __init__(self, key: Callable[[Any], Hashable]) -> None:
        """Route by ``key``; records with equal keys meet on the same worker."""
        if not callable(key):
            raise TypeError(f"Exchange needs a callable key function, got {key!r}")
        self.key = key

    def connect(
        self, allocator: Allocator, channel: int, address: tuple[int, ...], activate: Activator
    ) -> tuple[Pusher, Puller]:
        if allocator.peers == 1:
            queue = LocalQueue(activate)
            return KeyCheckPusher(self.key, queue), queue
        pushers, puller = allocator.allocate(channel, address)
        return ExchangePusher(self.key, pushers), puller


class ExchangeBatch(ChannelContract):
    """Route the rows of columnar (or list) batches by a key column or a vectorised key function.

    Each row goes to worker ``stable_hash(key) % peers``, exactly where
    :class:`Exchange` sends a record with the same key; each destination receives
    one batch per time and invocation of the producing operator (see
    :class:`ExchangeBatchPusher`).  ``key`` is a column (structured-array field)
    name, or a function ``batch -> keys`` returning a NumPy array (or, for a list
    batch, any sequence) with one key per row.  ``where`` names the operator in
    error messages.
    """

    name = "ExchangeBatch"

    def __init__(self, key: BatchKey, where: str | None = None) -> None:
        """Route by ``key``; rows with equal keys meet on the same worker.

        ``where`` (for example ``"operator 'ByWord' in scope 'main'"``) is set by
        ``Stream.exchange_batch``; a contract given directly to a generic operator
        names the receiving operator by its address instead.
        """
        if not isinstance(key, str) and not callable(key):
            raise BuildError(
                f"{where or 'ExchangeBatch'}: the key must be a column name (str) or a function batch -> keys, "
                f"got {key!r}"
            )
        self.key = key
        self.where = where

    def connect(
        self, allocator: Allocator, channel: int, address: tuple[int, ...], activate: Activator
    ) -> tuple[Pusher, Puller]:
        keys = BatchKeys(self.key, self.where or f"the ExchangeBatch channel into the operator at address {address}")
        if allocator.peers == 1:
            queue = LocalQueue(activate)
            return CheckBatchPusher(keys, queue), queue
        pushers, puller = allocator.allocate(channel, address)
        return ExchangeBatchPusher(keys, pushers), puller


class _Broadcast(ChannelContract):
    """Send every record to every worker."""

    name = "Broadcast"

    def copies(self, peers: int) -> int:
        """Every worker receives a copy."""
        return peers

    def connect(
        self, allocator: Allocator, channel: int, address: tuple[int, ...], activate: Activator
    ) -> tuple[Pusher, Puller]:
        if allocator.peers == 1:
            queue = LocalQueue(activate)
            return queue, queue
        pushers, puller = allocator.allocate(channel, address)
        return BroadcastPusher(pushers), puller


Broadcast: ChannelContract = _Broadcast()
"""Send every record to every worker."""
