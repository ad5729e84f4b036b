"""Leaf operators: ports, capabilities, input and output handles, notifications.

An :class:`Operator` is a :class:`~scopes.progress.operate.Operate` whose work is a Python
function.  It holds explicit :class:`Capability` objects: to send at a time it
must hold a capability for a time at or before it, and as long as it holds one
the frontier downstream cannot pass that time.  Messages received at an input
come with a :class:`CapabilityRef` that can be retained.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from scopes.batches import Batch, is_columnar
from scopes.callsite import user_site
from scopes.channels import Activator, Puller, Tee
from scopes.errors import CapabilityError, OperatorFailed, describe_when
from scopes.progress.antichain import MutableAntichain
from scopes.progress.change_batch import ChangeBatch
from scopes.progress.hooks import ProgressObserver
from scopes.progress.operate import ConnectivityLike, Operate, Updates
from scopes.progress.order import Time, in_time_order, less_equal
from scopes.progress.reachability import Connectivity, sparse
from scopes.progress.timestamp import TimestampType


class OperatorInfo:
    """What an operator knows about itself: its name, address, worker, and how to wake itself."""

    __slots__ = ("name", "index", "address", "worker_index", "peers", "position", "_activate")

    def __init__(
        self,
        name: str,
        index: int,
        address: tuple[int, ...],
        worker_index: int,
        peers: int,
        activate: Activator,
    ) -> None:
        """Describe operator ``name`` at child ``index`` of its scope."""
        self.name = name
        self.index = index
        self.address = address
        self.worker_index = worker_index
        self.peers = peers
        self._activate = activate
        self.position: object | None = None
        """What the operator's logic is doing, for an error it raises outside any batch: a source sets it to
        a text, or to an object whose ``str()`` gives one when asked (for example ``"reading 'part-1.parquet'
        (row 0, epoch 1 or later)"``); ``None``: nothing to add."""

    def activate(self) -> None:
        """Ask for the operator to be scheduled again, even without new input."""
        self._activate()

    def __repr__(self) -> str:
        return f"OperatorInfo({self.name!r}, address={self.address}, worker={self.worker_index})"


class OutputPort:
    """An operator output: its fan-out, produced-message counts, and capability changes."""

    __slots__ = ("operator", "port", "tee", "produced", "internal", "held", "timestamp_type", "owner", "observer")

    def __init__(self, operator: str, port: int, timestamp_type: TimestampType | None = None) -> None:
        """Create output ``port`` of the operator named ``operator``."""
        self.operator = operator
        self.port = port
        self.timestamp_type = timestamp_type
        self.tee = Tee()
        self.produced: dict[Any, int] = {}
        self.internal: ChangeBatch[Any] = ChangeBatch()
        self.held = 0
        self.owner: Operator | None = None
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
        self.owner: Operator | _Unowned = _Unowned()

    @property
    def frontier(self) -> MutableAntichain[Any]:
        """The times that may still arrive at this input.

        Reading it gives the operator a frontier interest: from then on its
        scope pushes every frontier change to it.
        """
        if self._implied is not None:
            owner = self.owner
            if isinstance(owner, Operator):
                owner.take_frontier_interest()
        return self._frontier

    def pull(self) -> tuple[Any, list[Any]] | None:
        """Take the next message and count it as consumed.

        Channels carry any :data:`~scopes.batches.Batch`; operator logic is
        typed for the record-wise case, a list, and receives a columnar batch
        exactly as it was sent (the columnar operators test ``is_columnar``).
        """
        # A channel's message holds a batch of any kind (``Message``, typed ``Any`` there); the logic
        # is typed for the record-wise case, so the batch is annotated as a list here.
        message: tuple[Any, list[Any]] | None = self.puller.pull()
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


class Capability:
    """The right to send messages at ``time`` (or later) on one output of one operator.

    While any worker holds a capability for time ``t``, no operator downstream can
    see ``t`` complete.  Downgrade it as time moves on, and drop it when done:
    :meth:`drop` (or letting the object be garbage collected) releases it.
    """

    __slots__ = ("_time", "_output", "_valid", "_token", "_site", "__weakref__")

    def __init__(self, time: Time, output: OutputPort) -> None:
        """Mint a capability; operators receive these from the runtime rather than create them."""
        self._time = time
        self._output = output
        self._valid = True
        self._token: list[bool] | None = None
        self._site: tuple[str, str] | None = None
        output.internal.update(time, 1)
        output.held += 1

    @classmethod
    def initial(cls, time: Time, output: OutputPort) -> Capability:
        """Adopt an operator's initial capability, already counted in its internal summary."""
        capability: Capability = cls.__new__(cls)
        capability._time = time
        capability._output = output
        capability._valid = True
        capability._token = None
        capability._site = None
        output.held += 1
        return capability

    def track(self, action: str) -> Capability:
        """Report where the user's code came to hold this capability (only called when logging is on).

        A capability made by pytimely's own operator logic has no such place
        and is not reported; the explainer names the operator's build site instead.
        """
        site = user_site(1, _LOGIC_RUNNER)
        if site is not None:
            self._site = (action, site)
            self._report(1)
        return self

    def _report(self, diff: int) -> None:
        output = self._output
        observer, site = output.observer, self._site
        if observer is not None and site is not None:
            owner = output.owner
            address = owner.address if owner is not None else ()
            observer.capability_site(address, output.port, self._time, diff, site[0], site[1])

    def session_token(self) -> list[bool]:
        """A flag that stays ``[True]`` until this capability is next dropped or downgraded (for sessions)."""
        token = self._token
        if token is None:
            token = self._token = [True]
        return token

    @property
    def time(self) -> Any:
        """The time this capability allows sending at."""
        return self._time

    @property
    def output(self) -> int:
        """The index of the output this capability belongs to."""
        return self._output.port

    @property
    def output_port(self) -> OutputPort:
        """The output this capability belongs to."""
        return self._output

    @property
    def valid(self) -> bool:
        """Whether the capability is still held (not dropped)."""
        return self._valid

    def _check(self, verb: str, time: Time) -> None:
        """Refuse to ``verb`` (downgrade, delay) a dropped capability, or to a time of the wrong type.

        The messages are only formatted when something is wrong: this runs on
        every downgrade, which is on the progress path.
        """
        if not self._valid:
            raise CapabilityError(
                f"operator '{self._output.operator}' output {self._output.port}: cannot {verb} to time "
                f"{time!r} with the capability for time {self._time!r}: it was already dropped"
            )
        timestamp_type = self._output.timestamp_type
        if timestamp_type is not None and not timestamp_type.contains(time):
            _check_time(self._output, time, f"{verb} to time {time!r} from the capability for time {self._time!r}")

    def downgrade(self, time: Time) -> None:
        """Move the capability to a later ``time``; raises if ``time`` is earlier."""
        self._check("downgrade", time)
        if not less_equal(self._time, time):
            raise CapabilityError(
                f"operator '{self._output.operator}' output {self._output.port}: cannot downgrade "
                f"the capability for time {self._time!r} to time {time!r}, which is not later; "
                "capabilities only move forward"
            )
        if time != self._time:
            output = self._output
            output.internal.shift(self._time, time)
            if output.observer is not None and self._site is not None:
                self._moved(time)
            self._time = time
            if self._token is not None:
                self._token[0] = False
                self._token = None
            output.capability_changed()

    def _moved(self, time: Time) -> None:
        """Report a downgrade to ``time``, from where the user's code made it (or where it was held before)."""
        self._report(-1)
        self._time = time
        site = user_site(1, _LOGIC_RUNNER)
        if site is not None:
            self._site = ("downgraded", site)
        self._report(1)

    def delayed(self, time: Time) -> Capability:
        """Return a new capability for the later ``time``; this one stays held."""
        self._check("delay", time)
        if not less_equal(self._time, time):
            raise CapabilityError(
                f"operator '{self._output.operator}' output {self._output.port}: cannot delay "
                f"the capability for time {self._time!r} to time {time!r}, which is earlier"
            )
        capability = Capability(time, self._output)
        if self._output.observer is not None:
            capability.track("delayed")
        return capability

    def drop(self) -> None:
        """Release the capability.  Dropping twice is harmless.

        Dropping it anywhere, also outside the operator's logic (for example in
        ``main`` between steps), wakes the operator so that the change is reported.
        """
        if self._valid:
            self._valid = False
            if self._token is not None:
                self._token[0] = False
                self._token = None
            output = self._output
            output.internal.update(self._time, -1)
            output.held -= 1
            if output.observer is not None and self._site is not None:
                self._report(-1)
            output.capability_changed()

    def __del__(self) -> None:
        if getattr(self, "_valid", False):
            self.drop()

    def __repr__(self) -> str:
        state = "" if self._valid else ", dropped"
        return f"Capability(time={self._time!r}, output={self._output.port}{state})"


def _check_time(port: OutputPort, time: Time, action: str) -> None:
    """Raise :class:`CapabilityError` unless ``time`` is a timestamp of the port's scope."""
    timestamp_type = port.timestamp_type
    if timestamp_type is not None and not timestamp_type.contains(time):
        raise CapabilityError(
            f"operator '{port.operator}' output {port.port}: cannot {action}: {time!r} is not a "
            f"{timestamp_type.name} timestamp (times in this scope look like {timestamp_type.minimum()!r})"
        )


class CapabilityRef:
    """The capability that comes with a message being processed; valid during this invocation.

    Sending at its time on an output that the input reaches is allowed without
    further ado; :meth:`retain` turns it into a :class:`Capability` to keep.
    """

    __slots__ = ("_time", "_operator", "_input", "_valid", "_token")

    def __init__(self, time: Time, operator: Operator, input_port: int) -> None:
        """Create the reference; the runtime does this for each received message."""
        self._time = time
        self._operator = operator
        self._input = input_port
        self._valid = True
        self._token: list[bool] | None = None

    def session_token(self) -> list[bool]:
        """A flag that stays ``[True]`` while this reference is valid (for sessions)."""
        token = self._token
        if token is None:
            token = self._token = [True]
        return token

    def invalidate(self) -> None:
        """End the reference's validity (its message's invocation is over)."""
        self._valid = False
        token = self._token
        if token is not None:
            token[0] = False

    @property
    def time(self) -> Any:
        """The time of the message."""
        return self._time

    @property
    def input(self) -> int:
        """The index of the input the message arrived at."""
        return self._input

    @property
    def valid(self) -> bool:
        """Whether the message's invocation is still running (the reference may be used)."""
        return self._valid

    def retain(self, output: int = 0) -> Capability:
        """Keep a capability for this time on ``output`` beyond this invocation."""
        port = self._operator.check_ref(self, output, self._time)
        capability = Capability(self._time, port)
        if port.observer is not None:
            capability.track("retained")
        return capability

    def delayed(self, time: Time, output: int = 0) -> Capability:
        """Keep a capability for a later ``time`` on ``output``."""
        port = self._operator.check_ref(self, output, time)
        capability = Capability(time, port)
        if port.observer is not None:
            capability.track("delayed")
        return capability

    def __repr__(self) -> str:
        return f"CapabilityRef(time={self._time!r}, input={self._input})"


class OperatorInput:
    """Reads messages from one operator input; iterate to get ``(capability_ref, batch)`` pairs."""

    __slots__ = ("_port", "_operator")

    def __init__(self, port: InputPort, operator: Operator) -> None:
        """Wrap input ``port`` of ``operator``."""
        self._port = port
        self._operator = operator

    def __iter__(self) -> Iterator[tuple[CapabilityRef, list[Any]]]:
        port = self._port
        operator = self._operator
        index = port.port
        while True:
            message = port.pull()
            if message is None:
                return
            yield operator.lend(message[0], index), message[1]

    def for_each(self, logic: Callable[[CapabilityRef, list[Any]], None]) -> None:
        """Call ``logic(capability_ref, batch)`` for every waiting message."""
        for ref, batch in self:
            logic(ref, batch)

    def batches(self) -> Iterator[tuple[Any, list[Any]]]:
        """Yield ``(time, batch)`` for every waiting message, without capability references."""
        port = self._port
        while True:
            message = port.pull()
            if message is None:
                return
            yield message

    @property
    def frontier(self) -> MutableAntichain[Any]:
        """The times that may still arrive at this input (read-only)."""
        return self._port.frontier


class OutputBuffer:
    """The records an output handle holds for one time, shared by the handle and its sessions.

    Records accumulate while they are at the same time; a change of time, or
    :meth:`flush`, sends what is held as one message.
    """

    __slots__ = ("port", "records", "time")

    NO_TIME: Any = object()
    """The time of an empty buffer: equal to no real time."""

    def __init__(self, port: OutputPort) -> None:
        """Buffer for output ``port``."""
        self.port = port
        self.records: list[Any] = []
        self.time: Any = OutputBuffer.NO_TIME  # a Time once switched to one; NO_TIME, a sentinel, before

    def switch(self, time: Time) -> None:
        """Send what is held, then hold records at ``time``."""
        self.flush()
        self.time = time

    def flush(self) -> None:
        """Push the held records downstream."""
        if self.records:
            batch, self.records = self.records, []
            self.port.send(self.time, batch)
        self.time = OutputBuffer.NO_TIME


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
        """Send several records; a columnar batch (see :mod:`scopes.batches`) is sent whole, as one message."""
        if not self._token[0]:
            self._recheck()
        buffer = self._buffer
        if records.__class__ is not list and is_columnar(records):
            buffer.flush()
            buffer.port.send(self.time, records)
            return
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

    def __init__(self, port: OutputPort, operator: Operator) -> None:
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

    __slots__ = ("_frontiers", "_pending", "_operator", "_requests", "_owner")

    def __init__(
        self, frontiers: Sequence[MutableAntichain[Any]], operator: str, owner: Operator | None = None
    ) -> None:
        """Watch the given input frontiers; ``owner`` (the operator) learns the time being delivered."""
        self._frontiers = list(frontiers)
        self._pending: dict[Any, list[Capability]] = {}
        self._operator = operator
        self._requests = 0
        self._owner = owner

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
        return in_time_order(time for time in self._pending if self._complete(time))

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
        return in_time_order(self._pending)

    def __len__(self) -> int:
        return len(self._pending)


class Operator(Operate):
    """A leaf :class:`~scopes.progress.operate.Operate` running a Python function when scheduled."""

    local = True

    def __init__(
        self,
        name: str,
        timestamp_type: TimestampType,
        peers: int,
        inputs: list[InputPort],
        outputs: list[OutputPort],
        connectivity: ConnectivityLike,
        notify: bool,
    ) -> None:
        """Create the operator's shell; :meth:`set_logic` installs what it does."""
        self.name = name
        self.timestamp_type = timestamp_type
        self.notify = notify
        self._peers = peers
        self.input_ports = inputs
        self.output_ports = outputs
        self.connectivity = connectivity  # normalized to the sparse form by the setter
        self.external_summaries: Connectivity = []
        self._logic: Callable[[], None] | None = None
        self._refs: list[CapabilityRef] = []
        self._handles: list[OperatorOutput] = []
        self._buffering: list[Tee] | None = None  # the output tees with buffering pushers, once known
        self.shut_down = False
        # Where the operator lives, for error messages and wake-ups; see locate().
        self.address: tuple[int, ...] = ()
        self.scope_path: tuple[str, ...] = ()
        self.worker_index = 0
        self._activate: Activator | None = None
        # Run-time state read by capabilities and failure reports.
        self.running = False
        self.current_time: Time | None = None
        self.info: OperatorInfo | None = None  # the logic's info, whose position a failure reports
        for port in inputs:
            port.owner = self
        for output in outputs:
            output.owner = self
        self._on_interest: Callable[[], None] | None = None
        cls = type(self)
        self.frontier_interest = (
            notify
            or cls.push_external_progress is not Operator.push_external_progress
            or cls.set_external_summary is not Operator.set_external_summary
        )

    def locate(
        self,
        address: tuple[int, ...],
        scope_path: tuple[str, ...],
        worker_index: int,
        activate: Activator,
    ) -> None:
        """Tell the operator where it lives and how to wake itself (done by the operator builder)."""
        self.address = address
        self.scope_path = scope_path
        self.worker_index = worker_index
        self._activate = activate

    def activate(self) -> None:
        """Ask to be scheduled again (for example, after a capability changed outside the logic)."""
        if self._activate is not None:
            self._activate()

    def adopt(self, port: InputPort | OutputPort) -> None:
        """Take ownership of a port added after the operator was created."""
        port.owner = self

    def failure(self, error: Exception) -> OperatorFailed:
        """Describe ``error``, raised by the user's code inside this operator, as :class:`OperatorFailed`."""
        scope = " > ".join(repr(name) for name in self.scope_path) or "(none)"
        position = self.info.position if self.info is not None else None
        position = None if position is None else str(position)
        message = (
            f"operator '{self.name}' (address {self.address}, in scope {scope}) failed "
            f"{describe_when(self.current_time, position)} on worker {self.worker_index}: "
            f"{type(error).__name__}: {error}"
        )
        return OperatorFailed(
            message, self.name, self.address, self.scope_path, self.current_time, self.worker_index, position
        )

    @property
    def connectivity(self) -> Connectivity:
        """Which inputs reach which outputs, sparse: ``connectivity[input][output]`` is an antichain of summaries."""
        return self._connectivity

    @connectivity.setter
    def connectivity(self, value: ConnectivityLike) -> None:
        self._connectivity = sparse(value)

    @property
    def inputs(self) -> int:
        """The number of inputs."""
        return len(self.input_ports)

    @property
    def outputs(self) -> int:
        """The number of outputs."""
        return len(self.output_ports)

    def flush_after(self, handles: Sequence[OperatorOutput]) -> None:
        """Flush ``handles`` each time the logic returns (replacing those given before)."""
        self._handles = list(handles)

    def set_logic(self, logic: Callable[[], None] | None, handles: Sequence[OperatorOutput] = ()) -> None:
        """Install the function to run when scheduled, and the output handles to flush after it."""
        self._logic = logic
        self._handles = list(handles)

    # Operate interface -----------------------------------------------------

    def get_internal_summary(self) -> tuple[Connectivity, list[Updates]]:
        """The declared connectivity, and one capability per worker at each output's minimum time."""
        minimum = self.timestamp_type.minimum()
        return self.connectivity, [[(minimum, self._peers)] for _ in self.output_ports]

    def set_external_summary(self, summaries: ConnectivityLike, frontier: Sequence[Updates]) -> None:
        """Record the initial frontier at each input."""
        self.external_summaries = sparse(summaries)
        for port, updates in zip(self.input_ports, frontier, strict=True):
            port.advance_frontier(updates)

    def push_external_progress(self, external: Sequence[Updates]) -> None:
        """Apply frontier changes at the inputs."""
        for port, updates in zip(self.input_ports, external, strict=True):
            if updates:
                port.advance_frontier(updates)

    def defer_frontiers(self, implied: Sequence[MutableAntichain[Any]], on_interest: Callable[[], None]) -> None:
        """Without a frontier interest, read input frontiers from ``implied`` (one per input) on demand.

        ``implied[i]`` is the frontier the scope's tracker maintains at input
        ``i``; the scope stops pushing changes here until
        :meth:`take_frontier_interest` (the first read of an input frontier),
        which calls ``on_interest()`` so that the scope reports them again.
        """
        if self.frontier_interest:
            return
        self._on_interest = on_interest
        for port, frontier in zip(self.input_ports, implied, strict=True):
            port.defer_to(frontier)

    def take_frontier_interest(self) -> None:
        """Catch the input frontiers up with the tracker's, and have frontier changes pushed from now on."""
        if self.frontier_interest:
            return
        self.frontier_interest = True
        on_interest, self._on_interest = self._on_interest, None
        if on_interest is not None:
            on_interest()
        for port in self.input_ports:
            port.catch_up()

    def pull_internal_progress(
        self,
        internal: Sequence[ChangeBatch[Any]],
        consumed: Sequence[ChangeBatch[Any]],
        produced: Sequence[ChangeBatch[Any]],
    ) -> bool:
        """Run the logic, then report consumed messages, capability changes and produced messages."""
        logic = self._logic
        if logic is not None:
            self.running = True
            self.current_time = None
            try:
                logic()
                for handle in self._handles:
                    handle.flush()
                buffering = self._buffering
                if buffering is None:  # the graph is complete once operators run: find them once
                    buffering = self._buffering = [port.tee for port in self.output_ports if port.tee.buffering]
                for tee in buffering:  # buffering pushers (exchange): see ExchangePusher
                    tee.flush()
            except OperatorFailed:
                raise
            except Exception as error:
                raise self.failure(error) from error
            finally:
                self.running = False
                if self._refs:
                    for ref in self._refs:
                        ref.invalidate()
                    self._refs.clear()
        # Hand each count over whole when the receiving batch is empty (the usual
        # case): the dicts change places, nothing is copied.
        index = 0
        for port in self.input_ports:
            if port.consumed:
                batch = consumed[index]
                if batch.counts:
                    batch.extend(port.consumed.items())
                    port.consumed.clear()
                else:
                    batch.counts, port.consumed = port.consumed, batch.counts
            index += 1
        index = 0
        for output in self.output_ports:
            if output.internal.counts:
                output.internal.drain_into(internal[index])
            if output.produced:
                batch = produced[index]
                if batch.counts:
                    batch.extend(output.produced.items())
                    output.produced.clear()
                else:
                    batch.counts, output.produced = output.produced, batch.counts
            index += 1
        return False

    # checks ------------------------------------------------------------------

    def lend(self, time: Time, input_port: int) -> CapabilityRef:
        """The capability reference for a message at ``time`` on ``input_port``, valid until the logic returns."""
        ref = CapabilityRef(time, self, input_port)
        self._refs.append(ref)
        return ref

    def check_ref(self, ref: CapabilityRef, output: int, time: Time) -> OutputPort:
        """The port of ``output`` if ``ref`` allows a capability for ``time`` there; raises otherwise."""
        if not ref.valid:
            raise CapabilityError(
                f"operator '{self.name}' input {ref.input}: the capability reference for time "
                f"{ref.time!r} is only valid while its message is being processed; "
                "retain() it during that invocation to keep it"
            )
        if not 0 <= output < len(self.output_ports):
            raise CapabilityError(
                f"operator '{self.name}': no output {output} (it has {len(self.output_ports)} outputs)"
            )
        _check_time(self.output_ports[output], time, f"take a capability from a message at time {ref.time!r}")
        if not less_equal(ref.time, time):
            raise CapabilityError(
                f"operator '{self.name}' output {output}: cannot take a capability for time "
                f"{time!r} from a message at time {ref.time!r}, which is later"
            )
        if not self._reaches(ref.input, output, ref.time, time):
            raise CapabilityError(
                f"operator '{self.name}': input {ref.input} does not connect to output {output} "
                f"in the operator's declared summary, so a message at time {ref.time!r} there "
                f"gives no capability for time {time!r} on output {output}"
            )
        return self.output_ports[output]

    def _reaches(self, input_port: int, output: int, time: Time, target: Time) -> bool:
        for summary in self._connectivity[input_port].get(output, ()):
            result = summary.results_in(time)
            if result is not None and less_equal(result, target):
                return True
        return False

    def check_send(self, capability: Capability | CapabilityRef, port: OutputPort, time: Time) -> None:
        """Raise :class:`CapabilityError` unless ``capability`` allows sending at ``time`` on ``port``."""
        _check_time(port, time, "send")
        if isinstance(capability, Capability):
            if capability.output_port is not port:
                owner = capability.output_port
                whose = (
                    f"output {owner.port}"
                    if owner.operator == self.name and any(p is owner for p in self.output_ports)
                    else f"output {owner.port} of operator '{owner.operator}'"
                )
                raise CapabilityError(
                    f"operator '{self.name}' output {port.port}: the capability for time "
                    f"{capability.time!r} belongs to {whose}; use a capability of this "
                    f"operator's output {port.port}"
                )
            if not capability.valid:
                raise CapabilityError(
                    f"operator '{self.name}' output {port.port}: cannot send at time {time!r}: "
                    f"the capability for time {capability.time!r} was already dropped"
                )
            if time is not capability.time and not less_equal(capability.time, time):
                raise CapabilityError(
                    f"operator '{self.name}' output {port.port}: cannot send at time {time!r} "
                    f"holding a capability for time {capability.time!r} only; "
                    "messages may only be sent at or after a held capability's time"
                )
        elif isinstance(capability, CapabilityRef):
            self.check_ref(capability, port.port, time)
        else:
            raise CapabilityError(
                f"operator '{self.name}' output {port.port}: sending needs a Capability or "
                f"CapabilityRef, got {capability!r}"
            )

    def held_capabilities(self) -> list[int]:
        """For diagnosis: how many capabilities this worker's operator holds on each output."""
        return [port.held for port in self.output_ports]


_LOGIC_RUNNER = Operator.pull_internal_progress.__code__
"""Where the scheduler runs an operator's logic: a capability made below it by pytimely's own code has no user site."""
