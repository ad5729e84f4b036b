"""Channel contracts: how an operator input wants its records distributed among workers.

:data:`Pipeline` keeps them on the worker that produced them, :class:`Exchange`
routes each record by key, :class:`ExchangeBatch` routes the rows of columnar
batches by a key column or a vectorised key function, and :data:`Broadcast`
sends each record to every worker.  A contract connects a channel for one
receiving operator, which it is told of (a :class:`~scopes.batch_keys.Receiver`),
so that a failing key names that operator.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from scopes.channel_protocols import Activator, Allocator, Puller, Pusher
from scopes.errors import BuildError
from scopes.lazy_import import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")
from scopes.batch_keys import BatchKey, BatchKeys, CheckBatchPusher, KeyCheckPusher, Receiver
from scopes.exchange import BroadcastPusher, ExchangeBatchPusher, ExchangePusher
from scopes.local_channels import LocalQueue


class ChannelContract(ABC):
    """How an operator input wants its records distributed among workers."""

    name = "contract"

    def copies(self, peers: int) -> int:
        """How many copies of each record sent into the channel are delivered (in all)."""
        return 1

    @abstractmethod
    def connect(
        self, allocator: Allocator, channel: int, receiver: Receiver, activate: Activator
    ) -> tuple[Pusher, Puller]:
        """Create the channel into ``receiver``'s input; return the pusher the upstream output uses and its puller.

        ``receiver`` names the operator (its address identifies the channel's
        destination); a pusher that calls user code (a key function) blames
        its failures on it.
        """

    def __repr__(self) -> str:
        return self.name


class _Pipeline(ChannelContract):
    """Records stay on the worker that produced them."""

    name = "Pipeline"

    def connect(
        self, allocator: Allocator, channel: int, receiver: Receiver, activate: Activator
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
        self, allocator: Allocator, channel: int, receiver: Receiver, activate: Activator
    ) -> tuple[Pusher, Puller]:
        if allocator.peers == 1:
            queue = LocalQueue(activate)
            return KeyCheckPusher(self.key, queue, receiver), queue
        pushers, puller = allocator.allocate(channel, receiver.address)
        return ExchangePusher(self.key, pushers, receiver), puller


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

    def __init__(self, key: BatchKey, where: str | None = None, objects: bool = True) -> None:
        """Route by ``key``; rows with equal keys meet on the same worker.

        ``where`` (for example ``"operator 'ByWord' in scope 'main'"``) is set by
        ``Stream.exchange_batch``; a contract given directly to a generic operator
        names the receiving operator by its address instead.  With
        ``objects=False`` a NumPy batch with ``object`` fields is refused on every
        worker count (its objects could not cross processes, see
        :meth:`~scopes.batch_keys.BatchKeys.check_kind`).
        """
        if not isinstance(key, str) and not callable(key):
            raise BuildError(
                f"{where or 'ExchangeBatch'}: the key must be a column name (str) or a function batch -> keys, "
                f"got {key!r}"
            )
        self.key = key
        self.where = where
        self.objects = objects

    def connect(
        self, allocator: Allocator, channel: int, receiver: Receiver, activate: Activator
    ) -> tuple[Pusher, Puller]:
        keys = BatchKeys(
            self.key,
            self.where or f"the ExchangeBatch channel into the operator at address {receiver.address}",
            self.objects,
            receiver,
        )
        if allocator.peers == 1:
            queue = LocalQueue(activate)
            return CheckBatchPusher(keys, queue), queue
        pushers, puller = allocator.allocate(channel, receiver.address)
        return ExchangeBatchPusher(keys, pushers), puller


class _Broadcast(ChannelContract):
    """Send every record to every worker."""

    name = "Broadcast"

    def copies(self, peers: int) -> int:
        """Every worker receives a copy."""
        return peers

    def connect(
        self, allocator: Allocator, channel: int, receiver: Receiver, activate: Activator
    ) -> tuple[Pusher, Puller]:
        if allocator.peers == 1:
            queue = LocalQueue(activate)
            return queue, queue
        pushers, puller = allocator.allocate(channel, receiver.address)
        return BroadcastPusher(pushers), puller


Broadcast: ChannelContract = _Broadcast()
"""Send every record to every worker."""
