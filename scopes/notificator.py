"""The :class:`Notificator`: timely's ``notificator.rs``, delivering requested times once complete, in order."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from scopes.capability import Capability
from scopes.errors import CapabilityError
from scopes.ports import PortOwner
from scopes.progress.antichain import MutableAntichain
from scopes.progress.order import Time, in_time_order, natural_order


class Notificator:
    """Delivers each requested time once, in time order, after all messages at or before it.

    Request with :meth:`notify_at`, passing a capability: the notificator keeps
    its own capability for that time on the same output, so what you do with
    yours afterwards (downgrade it, drop it, let it go) does not move the
    request.  Iterate to receive the notificator's capabilities of completed
    times, in time order; each is dropped after its turn unless you retain a
    delayed copy.  Times requested during the iteration that are already
    complete are delivered in the same iteration, in their place in time order.
    """

    __slots__ = ("_frontiers", "_pending", "_operator", "_requests", "_owner", "_key")

    def __init__(
        self, frontiers: Sequence[MutableAntichain[Any]], operator: str, owner: PortOwner | None = None
    ) -> None:
        """Watch the given input frontiers; ``owner`` (the operator) learns the time being delivered."""
        self._frontiers = list(frontiers)
        self._pending: dict[Any, list[Capability]] = {}
        self._operator = operator
        self._requests = 0
        self._owner = owner
        self._key: Callable[[Any], Any] | None = natural_order  # the times' sort key, from the first request

    def notify_at(self, capability: Capability) -> None:
        """Request a notification at ``capability.time``; the notificator holds a copy of the capability."""
        if not isinstance(capability, Capability):
            raise CapabilityError(
                f"operator '{self._operator}': notify_at needs a retained Capability "
                f"(use ref.retain()), got {capability!r}"
            )
        if not capability.valid:
            raise CapabilityError(
                f"operator '{self._operator}': cannot request a notification at time "
                f"{capability.time!r} with a dropped capability"
            )
        time = capability.time
        output = capability.output_port
        if not self._requests and output.timestamp_type is not None:
            self._key = output.timestamp_type.sort_key()
        held = self._pending.get(time)
        if held is None:
            held = self._pending[time] = [Capability(time, output)]
        elif all(other.output_port is not output for other in held):
            held.append(Capability(time, output))
        else:
            held = []
        if output.observer is not None and held:
            held[-1].track("notify_at")
        self._requests += 1

    def _complete(self, time: Time) -> bool:
        for frontier in self._frontiers:
            if frontier.less_equal(time):
                return False
        return True

    def ready(self) -> list[Any]:
        """The requested times that are complete, in time order."""
        return in_time_order((time for time in self._pending if self._complete(time)), self._key)

    def __iter__(self) -> Iterator[Capability]:
        times = self.ready()
        position = 0
        while position < len(times):
            time = times[position]
            position += 1
            held = self._pending.pop(time, None)
            if held is None:
                continue
            requests = self._requests
            owner = self._owner
            if owner is not None:  # a failure while handling it names this time
                owner.current_time = time
            yield held[0]
            if owner is not None:
                owner.current_time = None
            for capability in held:
                capability.drop()
            if self._requests != requests:
                # Requests made during the delivery may be complete already and
                # earlier than the rest: re-evaluate what is ready.
                times = self.ready()
                position = 0

    def for_each(self, logic: Callable[[Capability], None]) -> None:
        """Call ``logic(capability)`` for each completed time, in order."""
        for capability in self:
            logic(capability)

    def pending(self) -> list[Any]:
        """Every requested time not yet delivered."""
        return in_time_order(self._pending, self._key)

    def __len__(self) -> int:
        return len(self._pending)
