"""The exchange of a subgraph's progress batches between workers (timely's ``progcaster``).

Each worker's subgraph collects the progress statements of its local children
into one batch (:attr:`Progcaster.local`), compacts it, and broadcasts it whole
to the same subgraph on every other worker over FIFO channels; what arrives,
and this worker's own batches, are appended in order to :attr:`Progcaster.final`,
which the subgraph applies to its tracker.  Batches are never split, so every
worker's tracker accumulates prefixes of every worker's batches.
"""

from __future__ import annotations

from typing import Any, cast

from scopes.channel_protocols import Allocator, Puller, Pusher
from scopes.progress.hooks import ProgressObserver

ProgressBatch = list[tuple[int, Any, int]]
"""An atomic progress batch: ``(location index, time, diff)`` triples."""


def compact(batch: ProgressBatch) -> ProgressBatch:
    """Sum the changes of one progress batch per ``(location, time)`` and drop those that are zero."""
    if len(batch) < 2:
        return [update for update in batch if update[2]]
    totals: dict[tuple[int, Any], int] = {}
    for loc, time, diff in batch:
        key = (loc, time)
        totals[key] = totals.get(key, 0) + diff
    return [(loc, time, diff) for (loc, time), diff in totals.items() if diff]


class Progcaster:
    """Broadcasts one subgraph's progress batches to its peers and gathers theirs.

    Alone (one worker, or before :meth:`connect`) it sends nothing: the
    subgraph appends its changes straight to :attr:`final`.
    """

    __slots__ = ("local", "final", "broadcasting", "_pushers", "_puller", "_address")

    def __init__(self, address: tuple[int, ...]) -> None:
        """The exchange of the subgraph at ``address``."""
        self.local: ProgressBatch = []
        """This worker's changes since the last :meth:`send`: the subgraph appends to it."""
        self.final: ProgressBatch = []
        """Every worker's batches (this one's included), in the order to apply: the subgraph takes it."""
        self.broadcasting = False
        """Whether batches go to other workers (so local children's changes collect in :attr:`local`)."""
        self._pushers: list[Pusher] = []
        self._puller: Puller | None = None
        self._address = address

    def connect(self, allocator: Allocator, channel: int) -> None:
        """Open ``channel`` to the same subgraph on every other worker."""
        pushers, self._puller = allocator.allocate(channel, self._address)
        me = allocator.index
        # this worker's own batches are applied directly (see send)
        self._pushers = [pusher for peer, pusher in enumerate(pushers) if peer != me]
        self.broadcasting = bool(self._pushers)

    def receive(self) -> None:
        """Append every batch that has arrived from other workers to :attr:`final`."""
        puller = self._puller
        if puller is None:
            return
        final = self.final
        while True:
            message = puller.pull()
            if message is None:
                return
            final.extend(cast(list[tuple[int, Any, int]], message[1]))  # progress batches are lists

    def send(self, observer: ProgressObserver | None) -> None:
        """Compact this worker's batch and broadcast it whole; append it to :attr:`final` here.

        Compacting sums the changes at each ``(location, time)`` and drops those
        that cancel, within the one batch: the batch stays atomic, it is only
        smaller.  Other workers receive it over their FIFO channel from this one;
        this worker appends it to what it has received, after its own earlier
        batches, so every sender's batches are still applied in the order sent.
        """
        batch, self.local = self.local, []
        # Alone, nothing is sent, and the tracker sums the changes itself anyway.
        pushers = self._pushers
        compacted = compact(batch) if pushers else batch
        if not compacted:
            return
        if observer is not None and pushers:
            observer.local_pointstamps(self._address, compacted)
        for pusher in pushers:
            pusher.push(None, compacted)
        self.final.extend(compacted)
