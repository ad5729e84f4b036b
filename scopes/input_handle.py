"""``InputHandle``: how records get into a dataflow from outside, at a time the handle holds.

:meth:`ScopeBuilder.new_input <scopes.builder.ScopeBuilder.new_input>` makes one
with the input operator's output and capability; the handle buffers what is sent
and releases it in messages of at most :data:`BATCH_SIZE` records.  It builds
nothing, so it sits below the modules that build operators.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from scopes.batches import TEXT_TYPES, BatchError, is_batch, is_columnar, text_as_records
from scopes.capability import Capability
from scopes.errors import ScopeError, TimestampError
from scopes.operator import Operator
from scopes.ports import OutputPort
from scopes.progress.hooks import ProgressObserver
from scopes.progress.order import Time, less_equal
from scopes.progress.timestamp import UINT64_MAX, IntegerType, TimestampType

__all__ = ["BATCH_SIZE", "InputHandle"]

BATCH_SIZE = 1024
"""Records per message for sources that emit from iterables."""


class InputHandle:
    """Feeds records into a dataflow input at the handle's current time.

    ``send`` and ``send_batch`` add records at :attr:`time`; ``advance_to`` moves
    to a later time (promising no more records at earlier ones); ``close`` ends
    the input.
    """

    def __init__(
        self,
        name: str,
        timestamp_type: TimestampType,
        capability: Capability,
        output: OutputPort,
        activate: Callable[[], None],
    ) -> None:
        """Created by :meth:`ScopeBuilder.new_input`."""
        self.name = name
        self._timestamp_type = timestamp_type
        self._capability: Capability | None = capability
        self._output = output
        self._activate = activate
        self._buffer: list[Any] = []
        self._time = capability.time
        self._integer_times = type(timestamp_type) is IntegerType
        self._observer: ProgressObserver | None = None
        self._address: tuple[int, ...] = ()
        self.site: str | None = None
        """Where the user's code made this input, as ``file.py:LINE`` (``None``: unknown)."""
        self.resumed_at: Any = None
        """The epoch a checkpoint advanced this input to when the dataflow resumed (``None``: it did not)."""

    def observe(self, observer: ProgressObserver, address: tuple[int, ...]) -> None:
        """Report advances and the close to ``observer``, as the input operator at ``address``."""
        self._observer = observer
        self._address = address

    @property
    def time(self) -> Any:
        """The time at which sent records are stamped."""
        return self._time

    @property
    def timestamp_type(self) -> TimestampType:
        """The type of this input's times."""
        return self._timestamp_type

    @property
    def operator(self) -> Operator | None:
        """The input operator this handle feeds."""
        owner = self._output.owner
        return owner if isinstance(owner, Operator) else None

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._capability is None

    def _check_open(self, action: str) -> None:
        if self._capability is None:
            raise ScopeError(f"input '{self.name}' is closed: cannot {action}; create a new input to send more")

    def send(self, record: Any) -> None:
        """Send one record at the current time."""
        if self._capability is None:
            self._check_open("send")
        buffer = self._buffer
        buffer.append(record)
        if len(buffer) == 1:
            self._activate()
        elif len(buffer) >= BATCH_SIZE:
            self.release()

    def send_batch(self, records: Iterable[Any]) -> None:
        """Send several records at the current time.

        A columnar batch (a NumPy array, or an Arrow record batch or table; see
        :mod:`scopes.batches`) is sent whole as one message, after the records
        buffered so far, and is not copied: do not change it afterwards.  Any
        other iterable is added record by record to the buffer, except a
        ``str``, ``bytes`` or ``bytearray``, which is refused with
        :class:`~scopes.errors.BatchError` (iterated, it would send one record per
        character or byte; ``send`` sends it as one record).
        """
        self._check_open("send")
        if records.__class__ is not list:  # a list, the usual batch, needs neither check
            if is_columnar(records):
                if not is_batch(records):
                    raise BatchError(
                        f"input '{self.name}': cannot send a 0-dimensional NumPy array as a batch at time "
                        f"{self._time!r}; a batch has rows: send a 1-D or structured array, or use send(record)"
                    )
                self.release()
                self._output.send(self._time, records)
                self._activate()
                return
            if isinstance(records, TEXT_TYPES):
                raise text_as_records(records, f"input '{self.name}': send_batch", self._time, "send(value)")
        buffer = self._buffer
        try:
            buffer.extend(records)
        except TypeError:
            if _iterable(records):
                raise  # raised by the records' own iteration (a generator's code, say): not ours to rename
            raise BatchError(
                f"input '{self.name}': send_batch takes an iterable of records (a list, a generator, an array), "
                f"not a value of type {type(records).__qualname__} ({records!r:.80}), at time {self._time!r}; "
                "use send(record) to send one record"
            ) from None
        if buffer:
            self._activate()
            if len(buffer) >= BATCH_SIZE:
                self.release()

    def release(self) -> None:
        """Send the buffered records downstream as messages of at most :data:`BATCH_SIZE` records, without
        waking the input operator (this is its logic).

        A large list sent at once travels in pieces, as timely's input buffers do:
        each piece then passes through the operators after it (a ``flat_map``, an
        exchange's routing and encoding) while its records are still in the CPU's
        caches.  Measured on 400,000-record batches, routing and encoding cost
        about twice as much per record as on pieces of a few thousand.
        """
        batch = self._buffer
        if not batch:
            return
        self._buffer = []
        send, time, size = self._output.send, self._time, len(batch)
        if size <= BATCH_SIZE:
            send(time, batch)
            return
        for start in range(0, size, BATCH_SIZE):
            send(time, batch[start : start + BATCH_SIZE])

    def advance_to(self, time: Time) -> None:
        """Move to ``time``: records sent from now on carry it.  Time may not go backwards."""
        capability = self._capability
        if capability is None:
            self._check_open(f"advance to {time!r}")
        current = self._time
        # integer times (the usual case) are checked inline: no validate/contains/less_equal calls
        if not (self._integer_times and time.__class__ is int and current <= time <= UINT64_MAX):
            self._timestamp_type.validate(time, f"input '{self.name}': time")
            if not less_equal(current, time):
                resumed = ""
                if self.resumed_at is not None and not less_equal(self.resumed_at, time):
                    resumed = (
                        f" (the dataflow resumed from its checkpoint at epoch {self.resumed_at!r}, which has every "
                        "record before it: send the inputs from the store's resume_epoch)"
                    )
                raise TimestampError(
                    f"input '{self.name}': cannot advance to time {time!r}, which is earlier than "
                    f"the current time {current!r}; input times may only move forward{resumed}"
                )
        if time == current:
            return
        if self._buffer:
            batch, self._buffer = self._buffer, []
            self._output.send(current, batch)
        assert capability is not None
        capability.downgrade(time)  # wakes the input operator to report it
        self._time = time
        if self._observer is not None:
            self._observer.input_event(self._address, self.name, "advanced", time)

    def flush(self) -> None:
        """Push buffered records downstream now."""
        self.release()
        self._activate()

    def close(self) -> None:
        """Send what is buffered and end the input.  Closing twice is harmless."""
        if self._capability is None:
            return
        self.release()
        self._capability.drop()  # wakes the input operator to report it
        self._capability = None
        if self._observer is not None:
            self._observer.input_event(self._address, self.name, "closed", self._time)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"time={self._time!r}"
        return f"InputHandle({self.name!r}, {state})"


def _iterable(value: Any) -> bool:
    """Whether ``iter(value)`` works."""
    try:
        iter(value)
    except TypeError:
        return False
    return True
