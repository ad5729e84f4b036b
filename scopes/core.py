"""The plain data the operator families are written against: a scope being built, and a stream in it.

Timely dataflow's ``Stream`` is a plain struct (its scope, the port that makes
it, the channel its messages go through) and every operator family is written
against it; the methods users call come from the families.  This module is that
struct for pytimely, and the scope it lives in:

* :class:`StreamCore`: a stream's scope, :class:`~scopes.progress.location.Source`, tee and
  name.  :class:`~scopes.stream.Stream`, the class users call ``map`` or
  ``exchange`` on, derives from it and adds one method per operator.
* :class:`ScopeCore`: a scope while it is built: its subgraph, the worker's
  :class:`BuildContext`, its parent, and the checks that operators are added
  only to the scope whose body is running.  Its streams come from
  :meth:`ScopeCore.new_stream`, which :class:`~scopes.builder.ScopeBuilder` implements by
  making a :class:`~scopes.stream.Stream`.

The families (:mod:`scopes.per_record`, :mod:`scopes.routing`, ...) and
:mod:`scopes.operator_builder` import this module, never :mod:`scopes.stream` or
:mod:`scopes.builder`: each takes a stream of any class ``S`` and returns streams
of the same class, made by the stream's own scope (a ``ScopeCore[S]``).  So the
facade imports the families and nothing imports the facade back.

``ScopeCore`` was called ``Scope`` here before; that name now belongs to the
seed's *Scope* interface, :data:`scopes.Scope` (timely's ``Operate``).  The old
``scopes.core.Scope`` still imports, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from typing import Any, Generic, Protocol, Self, TypeVar

from scopes.channel_protocols import Allocator
from scopes.errors import ScopeBoundaryError
from scopes.input_handle import InputHandle
from scopes.local_channels import Tee
from scopes.progress.location import Source
from scopes.progress.subgraph import Subgraph
from scopes.progress.timestamp import TimestampType

__all__ = ["BuildContext", "ScopeCore", "StageChain", "StreamCore", "describe_stream"]

S_co = TypeVar("S_co", bound="StreamCore", covariant=True)
"""The class of the streams a scope makes (for users, :class:`~scopes.stream.Stream`)."""

Stage = Callable[[Iterable[Any]], Iterable[Any]]
"""A fused per-record stage: turns the records of one message into the records it passes on, lazily."""


class BuildContext:
    """Per-worker state shared by every scope being built: channels, inputs and probes."""

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
        # the state registry of the dataflow being built when it runs with checkpoints (scopes.state_registry)
        self.state_registry: Any = None
        self.probes: list[Any] = []
        """The :class:`~scopes.probes.ProbeHandle` objects of this worker's dataflows (the worker asks
        which ones a wait reads; typed loosely because :mod:`scopes.probes` builds on this module)."""
        # the scopes whose building function is running, outermost first; operators may
        # be added only to the last one (the others wait for it, as in timely's borrows)
        self.building: list[ScopeCore[StreamCore]] = []
        self.wake_from_outside: Callable[[tuple[int, ...]], None] | None = None
        """Activates the operator at an address from any thread, and wakes the worker if it is parked (the
        runtime sets it; ``None``: only the worker's own thread activates operators)."""
        self.woken_from_outside: set[tuple[int, ...]] = set()
        """The operators that wait for something outside the dataflow to wake them (:meth:`waits_outside`: a replay
        whose socket has nothing yet, a source given ``info.waker()``): while one of them lives, a worker whose
        dataflows cannot move waits for outside data, it is not stalled."""
        self.releases: dict[tuple[int, ...], Callable[[], None]] = {}
        """What each operator (by address) holds outside the dataflow and must give back if its dataflow is
        abandoned unfinished (:meth:`when_abandoned`): a replay's requests to the socket watcher."""
        self.timer: Callable[[tuple[int, ...], float, str], None] | None = None
        """Activates the operator at an address (named by the third argument, for errors) once some seconds have
        passed, the worker parking meanwhile (the runtime sets it; ``None``: no timers).  Only the thread stepping
        the worker may call it: the runtime refuses others with :class:`~scopes.errors.ActivationError`."""

    def waker(self, address: tuple[int, ...]) -> Callable[[], None] | None:
        """A function that any thread may call to activate the operator at ``address`` and wake its parked worker
        (a socket watcher, another worker's capture), or ``None`` if the runtime offers none."""
        wake = self.wake_from_outside
        return None if wake is None else partial(wake, address)

    def waits_outside(self, address: tuple[int, ...], waiting: bool = True) -> None:
        """Say whether the operator at ``address`` waits for something outside the dataflow to wake it (kept in
        :attr:`woken_from_outside` until it says otherwise or its dataflow completes)."""
        if waiting:
            self.woken_from_outside.add(address)
        else:
            self.woken_from_outside.discard(address)

    def dataflow_completed(self, index: int) -> None:
        """Forget what dataflow ``index``'s operators said they wait for, and what they would release if
        abandoned (it has completed: they have released it themselves)."""
        if any(address[0] == index for address in self.woken_from_outside):
            self.woken_from_outside = {address for address in self.woken_from_outside if address[0] != index}
        if any(address[0] == index for address in self.releases):
            self.releases = {address: release for address, release in self.releases.items() if address[0] != index}

    def when_abandoned(self, address: tuple[int, ...], release: Callable[[], None]) -> None:
        """Call ``release()`` if the dataflow of the operator at ``address`` is abandoned before it completes (an
        error ends its worker, or the worker is stopped): to give back what the operator holds outside the
        dataflow, which its own logic would release only by running to its end."""
        self.releases[address] = release

    def abandon(self) -> list[tuple[tuple[int, ...], BaseException]]:
        """Call every pending :meth:`when_abandoned` release, each once (the worker is ending with dataflows
        unfinished); return the errors they raised, with their operators' addresses, having called the others."""
        releases, self.releases = self.releases, {}
        errors: list[tuple[tuple[int, ...], BaseException]] = []
        for address, release in sorted(releases.items()):
            try:
                release()
            except Exception as error:  # noqa: BLE001 - the others must still be released; the caller reports it
                errors.append((address, error))
        return errors

    def activate_after(
        self, address: tuple[int, ...], seconds: float, activate: Callable[[], None], name: str = ""
    ) -> None:
        """Activate the operator at ``address`` (called ``name``) once ``seconds`` have passed, letting the worker
        park meanwhile; without timers, call ``activate`` (its activation on the worker's next step) at once."""
        timer = self.timer
        if timer is None:
            activate()
        else:
            timer(address, seconds, name)

    def next_channel(self) -> int:
        """A fresh channel identifier (the same sequence on every worker)."""
        channel = self._next_channel
        self._next_channel += 1
        return channel


class ScopeCore(ABC, Generic[S_co]):
    """One scope while its dataflow is built: where operators go, and which streams it makes.

    Subclasses say what a stream is by implementing :meth:`new_stream`
    (:class:`~scopes.builder.ScopeBuilder` makes :class:`~scopes.stream.Stream`).
    """

    def __init__(
        self,
        subgraph: Subgraph,
        context: BuildContext,
        parent: ScopeCore[S_co] | None = None,
        index_in_parent: int = 0,
    ) -> None:
        """Wrap ``subgraph``; ``parent`` is the enclosing scope (``None`` at top level)."""
        self.subgraph = subgraph
        self.context = context
        self.parent = parent
        self.index_in_parent = index_in_parent

    @abstractmethod
    def new_stream(self, source: Source, tee: Tee, name: str) -> S_co:
        """The stream in this scope produced at ``source``, whose messages go through ``tee``."""

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
        scope: ScopeCore[StreamCore] | None = self
        while scope is not None:
            names.append(scope.name)
            scope = scope.parent
        return tuple(reversed(names))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.timestamp_type!r}, address={self.address})"

    def dataflow_root(self) -> ScopeCore[S_co]:
        """The top-level scope of this scope's dataflow (the one ``worker.dataflow`` built)."""
        scope = self
        while scope.parent is not None:
            scope = scope.parent
        return scope

    @contextmanager
    def open(self) -> Iterator[Self]:
        """While the ``with`` block runs, this is the scope operators are built in."""
        building = self.context.building
        building.append(self)
        try:
            yield self
        finally:
            building.pop()

    def check_building(self, operator: str, stream: StreamCore | None = None) -> None:
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

    def boundary_message(self, operator: str, stream: StreamCore | None) -> str:
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
        if self.dataflow_root() is not current.dataflow_root():
            return (
                f"{subject} is used by new operator '{operator}' in scope {now}, which belongs to another "
                "dataflow: each worker.dataflow(build) is a graph of its own, and no stream crosses from one "
                "to another; build the operators that read it in the same dataflow, or record the stream "
                "with capture_into and replay it in the other"
            )
        return (
            f"{subject} is used by new operator '{operator}' in scope {now}, but its scope's "
            "body has already returned, and the stream never left it: take it out with "
            "stream.leave() (return stream.leave() from the body) and use the stream leave() returns"
        )


class StageChain(Protocol[S_co]):
    """The fused per-record operator that made a stream (:class:`scopes.per_record.Chain`)."""

    def extend_after(self, stream: StreamCore, name: str, kind: str, apply: Stage) -> S_co | None:
        """A new last stage ``apply`` reading ``stream``, fused in; ``None`` if it cannot join."""
        ...


class StreamCore:
    """A stream of timestamped records produced by one operator output: where it comes from, nothing more."""

    __slots__ = ("scope", "source", "tee", "name", "chain")

    def __init__(self, scope: ScopeCore[Self], source: Source, tee: Tee, name: str) -> None:
        """Describe output ``source`` of ``scope``, whose messages go through ``tee``."""
        self.scope = scope
        self.source = source
        self.tee = tee
        self.name = name
        self.chain: StageChain[Self] | None = None
        """The fused per-record stages that made this stream, while more may join them."""

    def __repr__(self) -> str:
        return f"Stream({self.name!r} in scope {self.scope.name!r} at {self.source!r})"


def describe_stream(stream: StreamCore) -> str:
    """``stream 'name' (made by operator 'op' in scope 'outer' > 'inner')``, for error messages."""
    scope = stream.scope
    node = stream.source.node
    maker = f"operator '{scope.subgraph.child_names[node]}'" if node else "the scope's entrance"
    path = " > ".join(repr(part) for part in scope.path)
    return f"stream '{stream.name}' (made by {maker} in scope {path})"


def __getattr__(name: str) -> Any:
    """The old name ``Scope`` of :class:`ScopeCore`, still importable (with a :class:`DeprecationWarning`)."""
    if name == "Scope":
        import warnings

        warnings.warn(
            "scopes.core.Scope is now scopes.core.ScopeCore (the scope being built); "
            "scopes.Scope is the seed's Scope interface (Operate)",
            DeprecationWarning,
            stacklevel=2,
        )
        return ScopeCore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
