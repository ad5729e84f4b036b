"""Capabilities: the right to send at a time, timely's ``capability.rs``.

A :class:`Capability` is held by an operator; a :class:`CapabilityRef` comes with a
message and may be retained as a capability.  While any is held for time ``t`` on an
output, no operator downstream sees ``t`` complete.
"""

from __future__ import annotations

from types import CodeType
from typing import Any, Protocol

from scopes.callsite import user_site
from scopes.errors import CapabilityError
from scopes.ports import OutputPort
from scopes.progress.order import Time, less_equal
from scopes.progress.timestamp import UINT64_MAX

_LOGIC_RUNNERS: set[CodeType] = set()
"""The code that runs operator logic: where a user's site is looked for no further.

:mod:`scopes.operator` adds its logic runner when it runs as Python; compiled, it
has no frame, and the first Python frame above the logic is the worker's step,
which :mod:`runtime.worker` adds.
"""


def stop_sites_at(code: CodeType) -> None:
    """Look for the user's line of a capability change no further up than ``code`` (a logic runner)."""
    _LOGIC_RUNNERS.add(code)


class Capability:
    """The right to send messages at ``time`` (or later) on one output of one operator.

    While any worker holds a capability for time ``t``, no operator downstream can
    see ``t`` complete.  Downgrade it as time moves on, and drop it when done:
    :meth:`drop` (or letting the object be garbage collected) releases it.
    """

    __slots__ = ("_time", "_output", "_valid", "_token", "_site", "__weakref__")

    def __init__(self, time: Time, output: OutputPort, _counted: bool = False) -> None:
        """Mint a capability; operators receive these from the runtime rather than create them.

        ``_counted``: the output's internal summary already counts it (see :meth:`initial`).
        """
        self._time = time
        self._output = output
        self._valid = True
        self._token: list[bool] | None = None
        self._site: tuple[str, str] | None = None
        if not _counted:
            output.internal.update(time, 1)
        output.held += 1

    @classmethod
    def initial(cls, time: Time, output: OutputPort) -> Capability:
        """Adopt an operator's initial capability, already counted in its internal summary."""
        return cls(time, output, True)

    def track(self, action: str) -> Capability:
        """Report where the user's code came to hold this capability (only called when logging is on).

        A capability made by pytimely's own operator logic has no such place
        and is not reported; the explainer names the operator's build site instead.
        """
        site = user_site(1, _LOGIC_RUNNERS)
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
        if self._valid and time.__class__ is int and self._output.integer_times and 0 <= time <= UINT64_MAX:
            return  # the usual case, checked inline: no call to the timestamp type's contains()
        if not self._valid:
            raise CapabilityError(
                f"operator '{self._output.operator}' output {self._output.port}: cannot {verb} to time "
                f"{time!r} with the capability for time {self._time!r}: it was already dropped"
            )
        timestamp_type = self._output.timestamp_type
        if timestamp_type is not None and not timestamp_type.contains(time):
            check_time(self._output, time, f"{verb} to time {time!r} from the capability for time {self._time!r}")

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
        site = user_site(1, _LOGIC_RUNNERS)
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


def check_time(port: OutputPort, time: Time, action: str) -> None:
    """Raise :class:`CapabilityError` unless ``time`` is a timestamp of the port's scope."""
    timestamp_type = port.timestamp_type
    if timestamp_type is not None and not timestamp_type.contains(time):
        raise CapabilityError(
            f"operator '{port.operator}' output {port.port}: cannot {action}: {time!r} is not a "
            f"{timestamp_type.name} timestamp (times in this scope look like {timestamp_type.minimum()!r})"
        )


class RefChecker(Protocol):
    """The operator that lent a :class:`CapabilityRef`, as far as the reference needs it."""

    def check_ref(self, ref: CapabilityRef, output: int, time: Time) -> OutputPort:
        """The port of ``output`` if ``ref`` allows a capability for ``time`` there; raises otherwise."""
        ...


class CapabilityRef:
    """The capability that comes with a message being processed; valid during this invocation.

    Sending at its time on an output that the input reaches is allowed without
    further ado; :meth:`retain` turns it into a :class:`Capability` to keep.
    """

    __slots__ = ("_time", "_operator", "_input", "_valid", "_token")

    def __init__(self, time: Time, operator: RefChecker, input_port: int) -> None:
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
