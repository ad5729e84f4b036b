"""Channels: how ``(time, batch)`` messages move from an output to an input.

The progress layer never sees data; it sees only counts.  The data plane's
vocabulary is gathered here from the modules that define it:

* :mod:`scopes.channel_protocols`: a :class:`Pusher` accepts messages, a
  :class:`Puller` yields them, and an :class:`Allocator` (supplied by the
  runtime) creates channels between workers.
* :mod:`scopes.local_channels`: :class:`LocalQueue` and :class:`Tee`, channels within one worker.
* :mod:`scopes.contracts`: channel contracts say how records are distributed:
  :data:`Pipeline` keeps them on the worker that produced them, :class:`Exchange`
  routes each record by key, :class:`ExchangeBatch` routes the rows of columnar
  batches by a key column or a vectorised key function, and :data:`Broadcast`
  sends each record to every worker.
* :mod:`scopes.exchange`: the pushers that route between workers.
* :mod:`scopes.batch_keys`: computing and checking keys, the single-worker
  exchanges that check them, and blaming a failing key on its operator (:class:`Receiver`).

A batch may be a list or a columnar batch (see :mod:`scopes.batches`); the
channels never iterate a columnar batch: fan-outs copy NumPy arrays with
``ndarray.copy()`` and share (immutable) Arrow batches.
"""

from __future__ import annotations

from scopes.batch_keys import BatchKey, BatchKeys, CheckBatchPusher, KeyCheckPusher, Receiver, row_keys
from scopes.channel_protocols import Activator, Allocator, Puller, Pusher
from scopes.contracts import Broadcast, ChannelContract, Exchange, ExchangeBatch, Pipeline
from scopes.exchange import (
    EXCHANGE_BUFFER,
    ROUTE_WHOLE_BATCH,
    SCAN_PEERS,
    BroadcastPusher,
    ExchangeBatchPusher,
    ExchangePusher,
    alike_runs,
)
from scopes.local_channels import LocalQueue, Message, Tee

__all__ = [
    "EXCHANGE_BUFFER",
    "ROUTE_WHOLE_BATCH",
    "SCAN_PEERS",
    "Activator",
    "Allocator",
    "BatchKey",
    "BatchKeys",
    "Broadcast",
    "BroadcastPusher",
    "ChannelContract",
    "CheckBatchPusher",
    "Exchange",
    "ExchangeBatch",
    "ExchangeBatchPusher",
    "ExchangePusher",
    "KeyCheckPusher",
    "LocalQueue",
    "Message",
    "Pipeline",
    "Puller",
    "Pusher",
    "Receiver",
    "Tee",
    "alike_runs",
    "row_keys",
]
