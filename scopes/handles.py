"""What an operator's logic holds: input handles, output handles and the sessions that send at one time."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar, Final, Protocol

from scopes.batches import TEXT_TYPES, is_columnar, text_as_records
from scopes.bursts import burst
from scopes.capability import Capability, CapabilityRef
from scopes.errors import CapabilityError
from scopes.ports import InputPort, OutputPort
from scopes.progress.antichain import MutableAntichain
from scopes.progress.order import Time, less_equal


class HandleOwner(Protocol):
    """The operator whose logic holds the handles, as far as they need it."""

    def activate(self) -> None:
        """Ask to be scheduled again."""
        ...

    def lend(self, time: Time, input_port: int) -> CapabilityRef:
        """The capability reference that comes with a message at ``time`` on ``input_port``."""
        ...

    def check_send(self, capability: Capability | CapabilityRef, port: OutputPort, time: Time) -> None:
        """Raise :class:`~scopes.errors.CapabilityError` unless ``capability`` may send at ``time`` on ``port``."""
        ...


class OperatorInput:
    """Reads messages from one operator input; iterate to get ``(capability_ref, batch)`` pairs."""

    __slots__ = ("_port", "_operator")

    def __init__(self, port: InputPort, operator: HandleOwner) -> None:
        """Wrap input ``port`` of ``operator``."""
        self._port = port
        self._operator = operator

    def __iter__(self) -> Iterator[tuple[CapabilityRef, Sequence[Any]]]:
        """Yield ``(capability_ref, batch)`` for the waiting messages, up to :data:`~scopes.bursts.BURST` records'
        worth (:func:`~scopes.bursts.burst`)."""
        operator = self._operator
        lend = operator.lend
        index = self._port.port
        for time, batch in burst(self._port.pull, operator):
            yield lend(time, index), batch

    def for_each(self, logic: Callable[[CapabilityRef, Sequence[Any]], None]) -> None:
        """Call ``logic(capability_ref, batch)`` for the waiting messages, as iterating does."""
        for ref, batch in self:
            logic(ref, batch)

    def batches(self) -> Iterator[tuple[Any, Sequence[Any]]]:
        """Yield ``(time, batch)`` for the waiting messages (up to :data:`~scopes.bursts.BURST` records' worth),
        without capability references."""
        return burst(self._port.pull, self._operator)

    @property
    def frontier(self) -> MutableAntichain[Any]:
        """The times that may still arrive at this input (read-only)."""
        return self._port.frontier


_NO_TIME: Final[Any] = object()
"""The time of an empty :class:`OutputBuffer`: equal to no real time."""


class OutputBuffer:
    """The records an output handle holds for one time, shared by the handle and its sessions.

    Records accumulate while they are at the same time; a change of time, or
    :meth:`flush`, sends what is held as one message.
    """

    __slots__ = ("port", "records", "time")

    NO_TIME: ClassVar[Any] = _NO_TIME
    """The time of an empty buffer: equal to no real time."""

    def __init__(self, port: OutputPort) -> None:
        """Buffer for output ``port``."""
        self.port = port
        self.records: list[Any] = []
        self.time: Any = _NO_TIME  # a Time once switched to one; NO_TIME, a sentinel, before

    def switch(self, time: Time) -> None:
        """Send what is held, then hold records at ``time``."""
        self.flush()
        self.time = time

    def flush(self) -> None:
        """Push the held records downstream."""
        if self.records:
            batch, self.records = self.records, []
            self.port.send(self.time, batch)
        self.time = _NO_TIME


class Session:
    """Sends records at one time on one output; obtained from :meth:`OperatorOutput.session`.

    The session holds the capability it was opened with, and a flag the
    capability clears when it is dropped or downgraded (or, for a capability
    reference, when its invocation ends).  Each send reads only that flag; once
    it is cleared, the send checks the capability again and raises
    :class:`~scopes.errors.CapabilityError` if it was dropped or downgraded past
    the session's time.
    """

    __slots__ = ("_buffer", "time", "_capability", "_token")

    def __init__(self, buffer: OutputBuffer, time: Time, capability: Capability | CapabilityRef) -> None:
        """Send into ``buffer`` at ``time``, under ``capability``."""
        self._buffer = buffer
        self.time = time
        self._capability = capability
        self._token = capability.session_token()

    def give(self, record: Any) -> None:
        """Send one record."""
        if not self._token[0]:
            self._recheck()
        buffer = self._buffer
        if buffer.time != self.time:
            buffer.switch(self.time)
        buffer.records.append(record)

    def give_batch(self, records: Sequence[Any]) -> None:
        """Send several records; a columnar batch (see :mod:`scopes.batches`) is sent whole, as one message.

        A ``str``, ``bytes`` or ``bytearray`` is refused with :class:`~scopes.errors.BatchError`:
        iterated, it would send one record per character or byte (``give`` sends it as one record).
        """
        if not self._token[0]:
            self._recheck()
        buffer = self._buffer
        if records.__class__ is not list:
            if is_columnar(records):
                buffer.flush()
                buffer.port.send(self.time, records)
                return
            if isinstance(records, TEXT_TYPES):
                port = buffer.port
                raise text_as_records(
                    records, f"operator '{port.operator}' output {port.port}: give_batch", self.time, "give(value)"
                )
        if buffer.time != self.time:
            buffer.switch(self.time)
        buffer.records.extend(records)

    def _recheck(self) -> None:
        """The capability changed since the session was opened: allow the send only if it still covers it."""
        capability = self._capability
        port = self._buffer.port
        where = f"operator '{port.operator}' output {port.port}"
        if not capability.valid:
            if isinstance(capability, CapabilityRef):
                raise CapabilityError(
                    f"{where}: cannot send at time {self.time!r}: the session was opened with the "
                    f"capability reference for time {capability.time!r}, which is only valid while "
                    "its message is being processed; retain() it to send later"
                )
            raise CapabilityError(
                f"{where}: cannot send at time {self.time!r}: the session's capability for time "
                f"{capability.time!r} was dropped after the session was opened; open sessions "
                "only under capabilities you still hold"
            )
        if not less_equal(capability.time, self.time):
            raise CapabilityError(
                f"{where}: cannot send at time {self.time!r}: the session's capability was "
                f"downgraded to time {capability.time!r} after the session was opened; send "
                "before downgrading, or open a new session at a time the capability covers"
            )
        self._token = capability.session_token()


class OperatorOutput:
    """Sends records on one operator output, checked against the capabilities the operator holds."""

    __slots__ = ("_port", "_operator", "_buffer")

    def __init__(self, port: OutputPort, operator: HandleOwner) -> None:
        """Wrap output ``port`` of ``operator``."""
        self._port = port
        self._operator = operator
        self._buffer = OutputBuffer(port)

    def session(self, capability: Capability | CapabilityRef, time: Time | None = None) -> Session:
        """A session sending at ``time`` (default: the capability's time) under ``capability``."""
        send_time = capability.time if time is None else time
        self._operator.check_send(capability, self._port, send_time)
        return Session(self._buffer, send_time, capability)

    def give(self, capability: Capability | CapabilityRef, record: Any) -> None:
        """Send one record at the capability's time."""
        self.session(capability).give(record)

    def give_batch(self, capability: Capability | CapabilityRef, records: Sequence[Any]) -> None:
        """Send several records at the capability's time."""
        self.session(capability).give_batch(records)

    def flush(self) -> None:
        """Push buffered records downstream."""
        self._buffer.flush()
