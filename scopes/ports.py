"""An operator's ports: an :class:`OutputPort` counts and fans out what it sends, an :class:`InputPort` reads.

Each keeps the counts its operator reports to the progress model; the operator owning them
is seen through :class:`PortOwner`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from scopes.batches import Batch
from scopes.channel_protocols import Puller
from scopes.local_channels import Tee
from scopes.progress.antichain import MutableAntichain
from scopes.progress.change_batch import ChangeBatch
from scopes.progress.hooks import ProgressObserver
from scopes.progress.operate import Updates
from scopes.progress.order import Time
from scopes.progress.timestamp import IntegerType, TimestampType


class PortOwner(Protocol):
    """The operator owning a port, as far as its ports, capabilities and notificator need it."""

    address: tuple[int, ...]
    running: bool
    current_time: Time | None

    def activate(self) -> None:
        """Ask for the operator to be scheduled."""
        ...

    def take_frontier_interest(self) -> None:
        """From now on, have the operator's scope push every frontier change to its inputs."""
        ...


class OutputPort:
    """An operator output: its fan-out, produced-message counts, and capability changes."""

    __slots__ = (
        "operator",
        "port",
        "tee",
        "produced",
        "internal",
        "held",
        "timestamp_type",
        "integer_times",
        "owner",
        "observer",
    )

    def __init__(self, operator: str, port: int, timestamp_type: TimestampType | None = None) -> None:
        """Create output ``port`` of the operator named ``operator``."""
        self.operator = operator
        self.port = port
        self.timestamp_type = timestamp_type
        self.integer_times = type(timestamp_type) is IntegerType
        """Whether the times are integers (capabilities check them inline)."""
        self.tee = Tee()
        self.produced: dict[Any, int] = {}
        self.internal: ChangeBatch[Any] = ChangeBatch()
        self.held = 0
        self.owner: PortOwner | None = None
        self.observer: ProgressObserver | None = None
        """Set when logging is on: capabilities of this output then report where the user's code holds them."""

    def capability_changed(self) -> None:
        """Wake the owning operator so that a capability change made outside its logic is reported.

        Changes made while the operator's logic runs are reported when it returns,
        so no wake-up is needed then.
        """
        owner = self.owner
        if owner is not None and not owner.running:
            owner.activate()

    def send(self, time: Time, batch: Batch) -> None:
        """Count and push a non-empty batch (no capability check: for the runtime's own operators)."""
        if len(batch):  # not `if batch:`, which a NumPy array refuses
            produced = self.produced
            produced[time] = produced.get(time, 0) + len(batch)
            self.tee.push(time, batch)


class _Unowned:
    """Stands in for the operator of an input port that belongs to none (yet)."""

    __slots__ = ("current_time",)

    def __init__(self) -> None:
        self.current_time: Time | None = None


class InputPort:
    """An operator input: its puller, consumed-message counts, and frontier.

    Each message pulled records its time in the owning operator's
    ``current_time`` (once per message, not per record), so that a failure can
    name the time of the batch being processed.
    """

    __slots__ = ("operator", "port", "puller", "consumed", "_frontier", "_implied", "owner")

    def __init__(self, operator: str, port: int, puller: Puller) -> None:
        """Create input ``port`` of the operator named ``operator``, reading from ``puller``."""
        self.operator = operator
        self.port = port
        self.puller = puller
        self.consumed: dict[Any, int] = {}
        self._frontier: MutableAntichain[Any] = MutableAntichain()
        # While the operator has no frontier interest: the frontier its scope's
        # tracker implies here, read on demand instead of being pushed.
        self._implied: MutableAntichain[Any] | None = None
        self.owner: PortOwner | _Unowned = _Unowned()

    @property
    def frontier(self) -> MutableAntichain[Any]:
        """The times that may still arrive at this input.

        Reading it gives the operator a frontier interest: from then on its
        scope pushes every frontier change to it.
        """
        if self._implied is not None:
            owner = self.owner
            if not isinstance(owner, _Unowned):
                owner.take_frontier_interest()
        return self._frontier

    def pull(self) -> tuple[Any, Sequence[Any]] | None:
        """Take the next message and count it as consumed.

        Channels carry any :data:`~scopes.batches.Batch`; operator logic is
        typed for the record-wise case, a list, and receives a columnar batch
        exactly as it was sent (the columnar operators test ``is_columnar``).
        """
        # A channel's message holds a batch of any kind (``Message``, typed ``Any`` there); the logic
        # is typed for the record-wise case, so the batch is annotated as a list here.
        message: tuple[Any, Sequence[Any]] | None = self.puller.pull()
        if message is not None:
            consumed = self.consumed
            time = message[0]
            consumed[time] = consumed.get(time, 0) + len(message[1])
            self.owner.current_time = time
        else:
            self.owner.current_time = None
        return message

    def advance_frontier(self, updates: Updates) -> None:
        """Apply changes to the times that may still arrive here (pushed by the operator's scope)."""
        self._frontier.update_iter(updates)

    def defer_to(self, implied: MutableAntichain[Any]) -> None:
        """Read the frontier from the scope's tracker (``implied``) until the operator takes an interest."""
        self._implied = implied

    def catch_up(self) -> None:
        """Stop deferring: copy the tracker's frontier into this port's own."""
        implied = self._implied
        if implied is not None:
            self._implied = None
            self._frontier = MutableAntichain((time, 1) for time in implied.elements)
