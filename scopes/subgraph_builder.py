"""The building half of a :class:`~scopes.subgraph.Subgraph`: its children, edges and ports.

While the user's function builds a dataflow, operators and nested scopes are
added here (:meth:`SubgraphBuilder.reserve_child`, :meth:`~SubgraphBuilder.connect`,
:meth:`~SubgraphBuilder.new_input`, ...).  When the dataflow is built,
:meth:`SubgraphBuilder.finish` closes the graph to changes and compiles it into
a :class:`~scopes.reachability.Tracker`; the subgraph then runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from scopes.batches import Batch
from scopes.callsite import user_site
from scopes.channels import Activator, Pusher, Tee
from scopes.errors import BuildError
from scopes.hooks import ProgressObserver
from scopes.location import Source, Target
from scopes.operate import ConnectivityLike, Operate
from scopes.reachability import Tracker, TrackerBuilder, sparse
from scopes.timestamp import Refinement, TimestampType


class _ScopeEntrance:
    """Receives parent-level messages at a scope input and forwards them inside."""

    __slots__ = ("_tee", "_counts", "_to_inner", "_activate")

    def __init__(self, tee: Tee, counts: dict[Any, int], to_inner: Callable[[Any], Any], activate: Activator) -> None:
        self._tee = tee
        self._counts = counts
        self._to_inner = to_inner
        self._activate = activate

    def push(self, time: Any, batch: Batch) -> None:
        inner = self._to_inner(time)
        counts = self._counts
        counts[inner] = counts.get(inner, 0) + len(batch)
        self._tee.push(inner, batch)
        self._activate()

    def flush(self) -> None:
        """Flush buffering pushers inside the scope (called by the sending operator's tee)."""
        self._tee.flush()


class _ScopeExit:
    """Receives inner messages at a scope output and forwards them to the parent's receivers."""

    __slots__ = ("_tee", "_to_outer")

    def __init__(self, tee: Tee, to_outer: Callable[[Any], Any]) -> None:
        self._tee = tee
        self._to_outer = to_outer

    def push(self, time: Any, batch: Batch) -> None:
        self._tee.push(self._to_outer(time), batch)

    def flush(self) -> None:
        """Flush buffering pushers in the parent (called by the sending operator's tee)."""
        self._tee.flush()


def _reach(summaries: ConnectivityLike) -> list[list[int]]:
    """For each input, the outputs it reaches (for the observer), from sparse or dense summaries."""
    return [[output for output, chain in sorted(row.items()) if len(chain)] for row in sparse(summaries)]


class Observed(Protocol):
    """The subgraph being built, as far as its builder needs it: whether an observer is attached."""

    observer: ProgressObserver | None


class SubgraphBuilder:
    """Collects one subgraph's children, edges and boundary ports until the dataflow is built.

    Children get indices from 1 (index 0 is the subgraph's own boundary): an
    operator builder reserves one with :meth:`reserve_child` and fills it with
    :meth:`set_child` once constructed.  Edges join a child's output (or a scope
    input, ``Source(0, i)``) to a child's input (or a scope output, ``Target(0, o)``).
    """

    def __init__(
        self,
        name: str,
        timestamp_type: TimestampType,
        refinement: Refinement | None,
        activate: Activator,
        owner: Observed,
    ) -> None:
        """Build scope ``name``; ``activate`` schedules it; ``owner`` is the subgraph (for its observer)."""
        self.name = name
        self.timestamp_type = timestamp_type
        self.refinement = refinement
        self._activate = activate
        self._owner = owner
        self.children: list[Operate | None] = [None]
        self.child_names: list[str] = ["scope boundary"]
        self.child_sites: dict[int, str | None] = {}
        """Where the user's code built each child (only recorded while an observer is attached)."""
        self.edges: list[tuple[Source, Target]] = []
        self.edge_contracts: list[str] = []
        self._copies: dict[tuple[Source, Target], int] = {}
        self.num_inputs = 0
        self.num_outputs = 0
        self.input_counts: list[dict[Any, int]] = []
        """Per scope input: records that entered at each (inner) time, counted by its entrance."""
        self.finished = False

    def check_open(self, what: str) -> None:
        """Refuse to ``what`` (add an operator, an edge, a port) once the dataflow is built."""
        if self.finished:
            raise BuildError(
                f"cannot {what} in scope '{self.name}': its dataflow has already been built; "
                "construct everything inside the function passed to worker.dataflow()"
            )

    def reserve_child(self, name: str) -> int:
        """Reserve the next child index, to be filled by :meth:`set_child`."""
        self.check_open(f"add operator '{name}'")
        self.children.append(None)
        self.child_names.append(name)
        if self._owner.observer is not None:
            self.child_sites[len(self.children) - 1] = user_site(2)
        return len(self.children) - 1

    def set_child(self, index: int, child: Operate) -> None:
        """Install ``child`` at a reserved index."""
        if self.children[index] is not None:
            raise BuildError(f"scope '{self.name}': child {index} is already set")
        self.children[index] = child

    def add_child(self, child: Operate, name: str | None = None) -> int:
        """Add a child scope and return its index (1, 2, ...)."""
        index = self.reserve_child(name or str(getattr(child, "name", "operator")))
        self.set_child(index, child)
        return index

    def connect(self, source: Source, target: Target, copies: int = 1, contract: str = "Pipeline") -> None:
        """Add an edge from ``source`` to ``target`` (index 0 is this scope's boundary).

        ``copies`` is how many records arrive at ``target`` (over all workers) for
        each record sent at ``source``: the number of workers for a broadcast.
        """
        self.check_open(f"connect {source!r} to {target!r}")
        self.edges.append((source, target))
        self.edge_contracts.append(contract)
        if copies != 1:
            self._copies[(source, target)] = copies

    def copies(self, source: Source, target: Target) -> int:
        """How many records arrive at ``target`` for each sent at ``source`` (the workers, for a broadcast)."""
        return self._copies.get((source, target), 1)

    def new_input(self) -> tuple[int, Pusher, Tee]:
        """Create a scope input.

        Returns its index, the pusher the parent's upstream output should push
        into, and the inner fan-out that inner operators attach to (``Source(0, i)``).
        """
        self.check_open("add an input")
        if self.refinement is None:
            raise BuildError(f"scope '{self.name}' is a top-level dataflow and has no parent to take input from")
        index = self.num_inputs
        self.num_inputs += 1
        tee = Tee()
        counts: dict[Any, int] = {}
        self.input_counts.append(counts)
        return index, _ScopeEntrance(tee, counts, self.refinement.to_inner, self._activate), tee

    def new_output(self) -> tuple[int, Pusher, Tee]:
        """Create a scope output.

        Returns its index, the pusher inner operators push into (``Target(0, o)``),
        and the parent-level fan-out that the parent's operators attach to.
        """
        self.check_open("add an output")
        if self.refinement is None:
            raise BuildError(f"scope '{self.name}' is a top-level dataflow and has no parent to send output to")
        index = self.num_outputs
        self.num_outputs += 1
        tee = Tee()
        return index, _ScopeExit(tee, self.refinement.to_outer), tee

    def finish(self) -> tuple[Tracker, list[tuple[Source, Any, int]]]:
        """Close the graph to changes and compile it: its tracker, and each child's initial capabilities.

        The capabilities, ``(output, time, diff)``, are not yet in the tracker:
        the subgraph applies them (and may report them) itself.
        """
        for index, child in enumerate(self.children[1:], start=1):
            if child is None:
                raise BuildError(
                    f"scope '{self.name}': operator '{self.child_names[index]}' (child {index}) was "
                    "started but never finished; its construction probably raised an error earlier"
                )
        builder = TrackerBuilder(self.timestamp_type, self.num_inputs, self.num_outputs)
        initial: list[tuple[Source, Any, int]] = []
        for index, child in enumerate(self.children[1:], start=1):
            assert child is not None
            summaries, capabilities = child.get_internal_summary()
            builder.add_node(index, child.inputs, child.outputs, summaries, name=self.child_names[index])
            for port, updates in enumerate(capabilities):
                for time, diff in updates:
                    initial.append((Source(index, port), time, diff))
        for source, target in self.edges:
            builder.add_edge(source, target)
        tracker = builder.build()
        self.finished = True
        return tracker, initial

    def log_structure(self, observer: ProgressObserver, address: tuple[int, ...], tracker: Tracker) -> None:
        """Report the scope at ``address``, its leaf children, its edges and its location numbering."""
        tracker.observer, tracker.observer_scope = observer, address
        reach = _reach(tracker.scope_summary())
        observer.operator_created(
            address, self.name, self.num_inputs, self.num_outputs, reach, self.timestamp_type.name
        )
        for index, child in enumerate(self.children[1:], start=1):
            if child is not None and child.local:  # a nested subgraph (not local) reports itself
                summaries = child.get_internal_summary()[0]
                observer.operator_created(
                    address + (index,),
                    self.child_names[index],
                    child.inputs,
                    child.outputs,
                    _reach(summaries),
                    None,
                    self.child_sites.get(index),
                )
        for (source, target), contract in zip(self.edges, self.edge_contracts, strict=True):
            observer.channel_created(
                address,
                (source.node, source.port),
                (target.node, target.port),
                contract,
                self.copies(source, target),
            )
        observer.locations(address, [(loc.node, loc.port, isinstance(loc, Source)) for loc in tracker.locations()])
