"""``ScopeBuilder``: the handle a dataflow is built with, plus inputs, probes and loops.

``worker.dataflow(build)`` calls ``build(scope)`` with a :class:`ScopeBuilder` for a
new top-level scope.  Nested scopes (:meth:`ScopeBuilder.iterative`,
:meth:`ScopeBuilder.scoped`, :meth:`ScopeBuilder.region`) are
:class:`~scopes.subgraph.Subgraph` objects of their own, with builders of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from itertools import islice
from typing import Any, TypeVar

from scopes import capture as _capture
from scopes.antichain import Antichain
from scopes.batches import BatchError, is_batch, is_columnar
from scopes.callsite import user_site
from scopes.channels import Allocator, Pipeline, Tee
from scopes.errors import BuildError, ScopeBoundaryError, ScopeError, TimestampError
from scopes.hooks import ProgressObserver
from scopes.location import Source
from scopes.operator import Capability, Operator, OperatorInfo, OperatorOutput, OutputPort
from scopes.operator_builder import OperatorBuilder
from scopes.order import less_equal
from scopes.probes import ProbeHandle, ProbeOperator
from scopes.signatures import check_function, check_logic, describe_operator, describe_stream
from scopes.stream import Stream
from scopes.subgraph import Subgraph
from scopes.timestamp import (
    INTEGER,
    UINT64_MAX,
    IdentityRefinement,
    IntegerSummary,
    IntegerType,
    PathSummary,
    ProductRefinement,
    ProductType,
    Refinement,
    TimestampType,
)

R = TypeVar("R")

__all__ = [
    "BATCH_SIZE",
    "BuildContext",
    "InputHandle",
    "LoopHandle",
    "ProbeHandle",
    "ProbeOperator",
    "ScopeBuilder",
    "source",
    "to_stream",
]

BATCH_SIZE = 1024
"""Records per message for sources that emit from iterables."""


class BuildContext:
    """Per-worker state shared by every scope being built: channels and open inputs."""

    def __init__(self, allocator: Allocator, new_lock: Callable[[], AbstractContextManager[Any]] = nullcontext) -> None:
        """Build with channels from ``allocator``.

        ``new_lock()`` makes a lock for state that other threads read (a
        :class:`~scopes.capture.CaptureRecorder`); the runtime passes
        ``threading.Lock``, and the default, which does not lock, suits one thread.
        """
        self.allocator = allocator
        self.new_lock = new_lock
        self.worker_index = allocator.index
        self.peers = allocator.peers
        self._next_channel = 0
        self.inputs: list[InputHandle] = []
        # the scopes whose building function is running, outermost first; operators may
        # be added only to the last one (the others wait for it, as in timely's borrows)
        self.building: list[ScopeBuilder] = []

    def next_channel(self) -> int:
        """A fresh channel identifier (the same sequence on every worker)."""
        channel = self._next_channel
        self._next_channel += 1
        return channel


class ScopeBuilder:
    """Builds operators in one scope.  Passed to the function given to ``worker.dataflow``."""

    def __init__(
        self,
        subgraph: Subgraph,
        context: BuildContext,
        parent: ScopeBuilder | None = None,
        index_in_parent: int = 0,
    ) -> None:
        """Wrap ``subgraph``; ``parent`` is the enclosing scope's builder (``None`` at top level)."""
        self.subgraph = subgraph
        self.context = context
        self.parent = parent
        self.index_in_parent = index_in_parent
        self.children: list[ScopeBuilder] = []
        self.loops: list[LoopHandle] = []

    @property
    def name(self) -> str:
        """The scope's name."""
        return self.subgraph.name

    @property
    def timestamp_type(self) -> TimestampType:
        """The type of this scope's timestamps."""
        return self.subgraph.timestamp_type

    @property
    def index(self) -> int:
        """This worker's index."""
        return self.context.worker_index

    @property
    def peers(self) -> int:
        """The number of workers."""
        return self.context.peers

    @property
    def address(self) -> tuple[int, ...]:
        """This scope's address among the worker's scopes."""
        return self.subgraph.address

    @property
    def path(self) -> tuple[str, ...]:
        """The names of this scope and the scopes enclosing it, outermost first."""
        names: list[str] = []
        scope: ScopeBuilder | None = self
        while scope is not None:
            names.append(scope.name)
            scope = scope.parent
        return tuple(reversed(names))

    def __repr__(self) -> str:
        return f"ScopeBuilder({self.name!r}, {self.timestamp_type!r}, address={self.address})"

    @contextmanager
    def open(self) -> Iterator[ScopeBuilder]:
        """While the ``with`` block runs, this is the scope operators are built in."""
        building = self.context.building
        building.append(self)
        try:
            yield self
        finally:
            building.pop()

    def check_building(self, operator: str, stream: Stream | None = None) -> None:
        """Refuse to build ``operator`` here unless this is the scope being built now.

        A stream of a nested scope whose body has returned must ``leave()`` first
        (timely enforces this with its types; progress tracking relies on it).
        Operators of a scope enclosing the one being built may still be built (they
        stay in that scope: their streams must ``enter()`` to be used inside, which
        :meth:`~scopes.operator_builder.OperatorBuilder.new_input` checks).
        ``stream`` is the stream the operator reads, named in the error.
        """
        building = self.context.building
        if building and building[-1] is self:
            return
        if self in building:
            return  # an operator of an enclosing scope, built from inside a nested body: it stays outside
        raise ScopeBoundaryError(self.boundary_message(operator, stream))

    def boundary_message(self, operator: str, stream: Stream | None) -> str:
        """Why ``operator``, reading ``stream`` of this scope, may not be built now."""
        building = self.context.building
        here = " > ".join(repr(part) for part in self.path)
        subject = f"scope {here}" if stream is None else describe_stream(stream)
        if not building:
            return (
                f"{subject} is used by new operator '{operator}' after its dataflow was built; "
                "build every operator inside the function given to worker.dataflow"
            )
        current = building[-1]
        now = " > ".join(repr(part) for part in current.path)
        if self in building:
            return (
                f"{subject} is used by new operator '{operator}' inside nested scope {now}, "
                "without enter(): bring the stream into the nested scope with "
                f"stream.enter(scope) and build '{operator}' there"
            )
        return (
            f"{subject} is used by new operator '{operator}' in scope {now}, but its scope's "
            "body has already returned, and the stream never left it: take it out with "
            "stream.leave() (return stream.leave() from the body) and use the stream leave() returns"
        )

    def new_stream(self, source: Source, tee: Tee, name: str) -> Stream:
        """The stream in this scope produced at ``source``, whose messages go through ``tee``."""
        return Stream(self, source, tee, name)

    # ------------------------------------------------------------------ inputs

    def new_input(self, name: str = "Input") -> tuple[InputHandle, Stream]:
        """A stream fed from outside: returns ``(handle, stream)``."""
        builder = OperatorBuilder(self, name)
        output, stream = builder.new_output()
        operator = builder.build(None)
        capability = builder.initial_capabilities(track=False)[0]
        handle = InputHandle(name, self.timestamp_type, capability, output, builder.activate)
        operator.set_logic(handle.release)
        self.context.inputs.append(handle)
        if self.subgraph.observer is not None:
            handle.observe(self.subgraph.observer, builder.address)
            self.subgraph.observer.input_event(builder.address, name, "created", handle.time, user_site())
        return handle, stream

    def to_stream(self, records: Iterable[Any], name: str = "ToStream") -> Stream:
        """A stream of ``records`` at the minimum time, emitted in batches."""
        return to_stream(records, self, name)

    def replay(self, recordings: Iterable[Any], name: str = "Replay") -> Stream:
        """Replay all ``recordings`` (the same list on every worker), each on one worker.

        Worker ``i`` takes recordings ``i``, ``i + peers``, ...; see
        :func:`scopes.capture.replay_into`.
        """
        return _capture.replay_into(recordings, self, name)

    def source(
        self,
        name: str,
        constructor: Callable[[Capability, OperatorInfo], Callable[[OperatorOutput], None]],
    ) -> Stream:
        """A programmable input: ``constructor(capability, info)`` returns ``logic(output)``."""
        return source(self, name, constructor)

    # ------------------------------------------------------------------ nested scopes

    def _nested(
        self,
        name: str,
        timestamp_type: TimestampType,
        refinement: Refinement,
        body: Callable[[ScopeBuilder], R],
    ) -> R:
        self.check_building(name)
        index = self.subgraph.graph.reserve_child(name)
        parent_subgraph = self.subgraph
        child = Subgraph(
            name,
            self.subgraph.address + (index,),
            timestamp_type,
            refinement,
            self.context.allocator,
            self.context.next_channel(),
            lambda: parent_subgraph.activate_child(index),
        )
        child.observer = parent_subgraph.observer
        parent_subgraph.graph.set_child(index, child)
        inner = ScopeBuilder(child, self.context, self, index)
        self.children.append(inner)
        with inner.open():
            return body(inner)

    def scoped(self, name: str, body: Callable[[ScopeBuilder], R], inner: TimestampType = INTEGER) -> R:
        """Run ``body`` in a nested scope whose times are ``Product(outer, inner)``."""
        product = ProductType(self.timestamp_type, inner)
        return self._nested(name, product, ProductRefinement(product), body)

    def iterative(self, body: Callable[[ScopeBuilder], R], name: str = "Iterative") -> R:
        """Run ``body`` in a nested loop scope with an integer loop counter."""
        return self.scoped(name, body, INTEGER)

    def region(self, body: Callable[[ScopeBuilder], R], name: str = "Region") -> R:
        """Run ``body`` in a nested scope with this scope's own timestamps (for structure only)."""
        return self._nested(name, self.timestamp_type, IdentityRefinement(self.timestamp_type), body)

    def loop_variable(self, summary: int | PathSummary = 1, name: str = "Feedback") -> tuple[LoopHandle, Stream]:
        """A stream fed back from later in this scope, each time advanced by ``summary``.

        ``summary`` may be an int (advance the loop counter by that much), an
        :class:`~scopes.timestamp.IntegerSummary` (with a ``limit`` for a bounded loop),
        or a full path summary for this scope's timestamps.  Close the loop with
        ``stream.connect_loop(handle)``.
        """
        timestamp_type = self.timestamp_type
        resolved: PathSummary
        if isinstance(summary, (int, IntegerSummary)):
            step = summary if isinstance(summary, IntegerSummary) else IntegerSummary(summary)
            if isinstance(timestamp_type, ProductType) and isinstance(timestamp_type.inner, IntegerType):
                resolved = timestamp_type.feedback(step.step, step.limit)
            elif isinstance(timestamp_type, IntegerType):
                resolved = step
            else:
                raise BuildError(
                    f"loop_variable in scope '{self.name}': an integer summary does not fit "
                    f"{timestamp_type!r} timestamps; pass a PathSummary for them"
                )
        elif isinstance(summary, PathSummary):
            resolved = summary
        else:
            raise BuildError(f"loop_variable in scope '{self.name}': {summary!r} is not a summary")
        if not resolved.advances():
            raise BuildError(
                f"loop_variable '{name}' in scope '{self.name}': summary {resolved!r} does not "
                "advance time, so records could circulate forever; use a step of at least 1"
            )
        builder = OperatorBuilder(self, name)
        output, stream = builder.new_output()
        builder.set_summary({})
        operator = builder.build(None)
        for capability in builder.initial_capabilities():
            capability.drop()
        handle = LoopHandle(self, builder, operator, output, resolved, name)
        self.loops.append(handle)
        return handle, stream

    def check_complete(self) -> None:
        """Raise :class:`~scopes.errors.BuildError` if a loop in this scope (or below) is open."""
        for loop in self.loops:
            if not loop.connected:
                raise BuildError(
                    f"loop variable '{loop.name}' in scope '{self.name}' was never connected; "
                    "close the loop with stream.connect_loop(handle)"
                )
        for child in self.children:
            child.check_complete()


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
        return self._output.owner

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
        other iterable is added record by record to the buffer.
        """
        self._check_open("send")
        if records.__class__ is not list and is_columnar(records):
            if not is_batch(records):
                raise BatchError(
                    f"input '{self.name}': cannot send a 0-dimensional NumPy array as a batch at time "
                    f"{self._time!r}; a batch has rows: send a 1-D or structured array, or use send(record)"
                )
            self.release()
            self._output.send(self._time, records)
            self._activate()
            return
        buffer = self._buffer
        buffer.extend(records)
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

    def advance_to(self, time: Any) -> None:
        """Move to ``time``: records sent from now on carry it.  Time may not go backwards."""
        capability = self._capability
        if capability is None:
            self._check_open(f"advance to {time!r}")
        current = self._time
        # integer times (the usual case) are checked inline: no validate/contains/less_equal calls
        if not (self._integer_times and time.__class__ is int and current <= time <= UINT64_MAX):
            self._timestamp_type.validate(time, f"input '{self.name}': time")
            if not less_equal(current, time):
                raise TimestampError(
                    f"input '{self.name}': cannot advance to time {time!r}, which is earlier than "
                    f"the current time {current!r}; input times may only move forward"
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


class LoopHandle:
    """The open end of a loop variable; close it with ``stream.connect_loop(handle)``."""

    def __init__(
        self,
        scope: ScopeBuilder,
        builder: OperatorBuilder,
        operator: Operator,
        output: OutputPort,
        summary: PathSummary,
        name: str,
    ) -> None:
        """Created by :meth:`ScopeBuilder.loop_variable`."""
        self.scope = scope
        self.name = name
        self.summary = summary
        self._builder = builder
        self._operator = operator
        self._output = output
        self.connected = False

    def connect(self, stream: Stream) -> None:
        """Feed ``stream`` back into the loop."""
        if self.connected:
            raise BuildError(f"loop variable '{self.name}' in scope '{self.scope.name}' is already connected")
        if stream.scope is not self.scope:
            raise ScopeBoundaryError(
                f"loop variable '{self.name}' belongs to scope '{self.scope.name}' but stream "
                f"'{stream.name}' is in scope '{stream.scope.name}'; move streams between scopes "
                "with stream.enter(scope) and stream.leave()"
            )
        self.scope.check_building(self.name, stream)
        port = self._builder.new_input(stream, Pipeline)
        operator = self._operator
        operator.connectivity = [[Antichain([self.summary])]]
        summary = self.summary
        output = self._output

        def logic() -> None:
            while (message := port.pull()) is not None:
                later = summary.results_in(message[0])
                if later is not None:
                    output.send(later, message[1])

        operator.set_logic(logic)
        self.connected = True


def to_stream(records: Iterable[Any], scope: ScopeBuilder, name: str = "ToStream") -> Stream:
    """A stream of ``records`` at the scope's minimum time, emitted in batches as it is scheduled."""
    iterator = iter(records)

    def constructor(capability: Capability, info: OperatorInfo) -> Callable[[OperatorOutput], None]:
        held: list[Capability] = [capability]

        def logic(output: OperatorOutput) -> None:
            if not held:
                return
            session = output.session(held[0])
            for _ in range(64):
                chunk = list(islice(iterator, BATCH_SIZE))
                if chunk:
                    session.give_batch(chunk)
                if len(chunk) < BATCH_SIZE:
                    held.pop().drop()
                    return
            info.activate()

        return logic

    return source(scope, name, constructor)


def source(
    scope: ScopeBuilder,
    name: str,
    constructor: Callable[[Capability, OperatorInfo], Callable[[OperatorOutput], None]],
) -> Stream:
    """A programmable input: ``constructor(capability, info)`` returns ``logic(output)``.

    The logic runs when the operator is first scheduled and whenever it is
    activated (``info.activate()``); it sends under capabilities it holds, and
    must downgrade or drop them for downstream operators to make progress.
    """
    where = describe_operator(name, scope.path)
    check_function(constructor, ("capability", "info"), "the source constructor", where)
    builder = OperatorBuilder(scope, name)
    output_port, stream = builder.new_output()
    operator = builder.build(None)
    _, outputs = builder.handles(operator)
    capability = builder.initial_capabilities()[0]
    logic = constructor(capability, builder.info)
    check_logic(logic, ("output",), where)
    handle = outputs[0]
    operator.set_logic(lambda: logic(handle), outputs)
    return stream
