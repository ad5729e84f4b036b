"""Leaf operators: :class:`Operator`, and :class:`OperatorInfo`, what its logic knows of itself.

An :class:`Operator` is a :class:`~scopes.progress.operate.Operate` whose work is a Python
function.  It holds explicit :class:`Capability` objects: to send at a time it
must hold a capability for a time at or before it, and as long as it holds one
the frontier downstream cannot pass that time.  Messages received at an input
come with a :class:`CapabilityRef` that can be retained.

The pieces live in their own modules and are re-exported here, their old home:
ports (:mod:`scopes.ports`), capabilities (:mod:`scopes.capability`), input and
output handles and sessions (:mod:`scopes.handles`), notifications
(:mod:`scopes.notificator`) and :class:`OperatorInfo` (:mod:`scopes.operator_info`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from scopes.capability import Capability, CapabilityRef, check_time, stop_sites_at
from scopes.channel_protocols import Activator
from scopes.channels import Tee
from scopes.errors import CapabilityError, OperatorFailed, describe_user_error, describe_when
from scopes.handles import OperatorInput, OperatorOutput, OutputBuffer, Session
from scopes.notificator import Notificator
from scopes.operator_info import OperatorInfo
from scopes.ports import InputPort, OutputPort, PortOwner
from scopes.progress.antichain import MutableAntichain
from scopes.progress.change_batch import ChangeBatch
from scopes.progress.mypyc_attrs import mypyc_attr
from scopes.progress.operate import ConnectivityLike, Operate, Updates
from scopes.progress.order import Time, less_equal
from scopes.progress.reachability import Connectivity, sparse
from scopes.progress.timestamp import TimestampType

SENDING = (
    "sending on what its logic gave, after the logic returned (records bound for other workers are buffered "
    "and sent at the end of each run; the error below names their time)"
)
"""What an operator was doing when an error was raised sending its output after its logic returned."""


@mypyc_attr(allow_interpreted_subclasses=True)
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
        self.site: str | None = None
        """Where the user's code built the operator (``file:line``), when known: failures name it."""
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

    def failure(self, error: BaseException, sending: bool = False) -> OperatorFailed:
        """Describe ``error``, raised by the user's code inside this operator, as :class:`OperatorFailed`.

        ``error`` may be :class:`SystemExit` (``sys.exit()``) or another
        :class:`BaseException`: see :func:`~scopes.errors.describe_user_error`.
        ``sending``: it was raised while the output the logic gave was sent on, after the logic returned.
        """
        scope = " > ".join(repr(name) for name in self.scope_path) or "(none)"
        position = self.info.position if self.info is not None else None
        position = SENDING if sending else None if position is None else str(position)
        built = "" if self.site is None else f", built at {self.site}"
        message = (
            f"operator '{self.name}' (address {self.address}, in scope {scope}{built}) failed "
            f"{describe_when(self.current_time, position)} on worker {self.worker_index}: "
            f"{describe_user_error(error)}"
        )
        return OperatorFailed(
            message, self.name, self.address, self.scope_path, self.current_time, self.worker_index, position, self.site
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
            sending = False
            try:
                logic()
                sending = True
                for handle in self._handles:
                    handle.flush()
                buffering = self._buffering
                if buffering is None:  # the graph is complete once operators run: find them once
                    buffering = self._buffering = [port.tee for port in self.output_ports if port.tee.buffering]
                for tee in buffering:  # buffering pushers (exchange): see ExchangePusher
                    tee.flush()
            except (OperatorFailed, KeyboardInterrupt):
                raise  # Ctrl-C stops the whole run (see runtime.execute)
            except BaseException as error:  # sys.exit() too: it cannot end the program from here
                failure = self.failure(error, sending)
                failure.__cause__ = error  # as well: mypyc compiles `raise ... from` without the cause
                raise failure from error
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
        check_time(self.output_ports[output], time, f"take a capability from a message at time {ref.time!r}")
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
        check_time(port, time, "send")
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


_RUNNER = getattr(Operator.pull_internal_progress, "__code__", None)  # None: compiled, without a frame
if _RUNNER is not None:
    stop_sites_at(_RUNNER)
"""Where the scheduler runs an operator's logic: a capability made below it by pytimely's own code has no user site."""

__all__ = [
    "Capability",
    "CapabilityRef",
    "InputPort",
    "Notificator",
    "Operator",
    "OperatorInfo",
    "OperatorInput",
    "OperatorOutput",
    "OutputBuffer",
    "OutputPort",
    "PortOwner",
    "Session",
]
