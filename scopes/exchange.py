"""The pushers that route records between workers: by key (record-wise or columnar), or to every worker."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, cast

from scopes.batches import (
    Batch,
    concat_batches,
    copy_batch,
    is_columnar,
    take,
)
from scopes.channel_protocols import Pusher
from scopes.destinations import KeyRouter
from scopes.hashing import MASK64, stable_hash
from scopes.lazy_import import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")
from scopes.batch_keys import BatchKeys, Receiver, record_keys_of_rows

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

    __slots__ = ("_key", "_pushers", "_peers", "_buffers", "_columnar", "_router", "_receiver")

    def __init__(
        self, key: Callable[[Any], Hashable], pushers: Sequence[Pusher], receiver: Receiver | None = None
    ) -> None:
        """Route by ``key`` among ``pushers`` (one per worker); a failing ``key`` is blamed on ``receiver``."""
        self._receiver = receiver
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
                keys = record_keys_of_rows(self._key, self._receiver)
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
        except KeyboardInterrupt:
            raise
        except BaseException as error:  # sys.exit() too: see describe_user_error
            if self._receiver is None:
                raise
            raise self._receiver.key_failed(error, time, key, batch) from error
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
