"""The building half of a :class:`~scopes.progress.subgraph.Subgraph`: its children, edges and ports.

While the user's function builds a dataflow, operators and nested scopes are
added here (:meth:`SubgraphBuilder.reserve_child`, :meth:`~SubgraphBuilder.connect`,
:meth:`~SubgraphBuilder.add_input`, ...).  When the dataflow is built,
:meth:`SubgraphBuilder.finish` closes the graph to changes and compiles it into
a :class:`~scopes.progress.reachability.Tracker`; the subgraph then runs it.
"""

from __future__ import annotations

from typing import Any

from scopes.channel_protocols import Activator
from scopes.errors import BuildError
from scopes.progress.hooks import ProgressObserver
from scopes.progress.location import Source, Target
from scopes.progress.operate import ConnectivityLike, Operate, unimplemented
from scopes.progress.reachability import Tracker, TrackerBuilder, sparse
from scopes.progress.timestamp import Refinement, TimestampType


def _reach(summaries: ConnectivityLike) -> list[list[int]]:
    """For each input, the outputs it reaches (for the observer), from sparse or dense summaries."""
    return [[output for output, chain in sorted(row.items()) if len(chain)] for row in sparse(summaries)]


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
    ) -> None:
        """Build scope ``name``; ``activate`` schedules it (its scope inputs call it when records enter)."""
        self.name = name
        self.timestamp_type = timestamp_type
        self.refinement = refinement
        self.activate = activate
        """Schedules the subgraph (a scope input's entrance calls it as records arrive)."""
        self.children: list[Operate | None] = [None]
        self.child_names: list[str] = ["scope boundary"]
        self.child_sites: dict[int, str | None] = {}
        """Where the user's code built each child (``file.py:LINE``), when the build came from the user's code."""
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

    def reserve_child(self, name: str, site: str | None = None) -> int:
        """Reserve the next child index, to be filled by :meth:`set_child`; ``site``: where the user built it."""
        self.check_open(f"add operator '{name}'")
        self.children.append(None)
        self.child_names.append(name)
        if site is not None:
            self.child_sites[len(self.children) - 1] = site
        return len(self.children) - 1

    def set_child(self, index: int, child: Operate) -> None:
        """Install ``child`` at a reserved index."""
        if self.children[index] is not None:
            raise BuildError(f"scope '{self.name}': child {index} is already set")
        missing = unimplemented(type(child))
        if missing:  # as pure Python refuses to instantiate it; compiled, only this check finds it
            raise TypeError(
                f"scope '{self.name}': child {index} ({type(child).__name__}) does not implement Operate's "
                f"abstract method(s) {', '.join(missing)}"
            )
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

    def add_input(self) -> tuple[int, dict[Any, int]]:
        """Add a scope input: its index, and the counts of records entering at each (inner) time.

        The data plane's half (the pusher the parent's stream feeds, and the fan-out inside)
        is :func:`scopes.nesting.scope_input`'s; only the counts belong to progress.
        """
        self.check_open("add an input")
        if self.refinement is None:
            raise BuildError(f"scope '{self.name}' is a top-level dataflow and has no parent to take input from")
        index = self.num_inputs
        self.num_inputs += 1
        counts: dict[Any, int] = {}
        self.input_counts.append(counts)
        return index, counts

    def add_output(self) -> int:
        """Add a scope output and return its index (its pushers are :func:`scopes.nesting.scope_output`'s)."""
        self.check_open("add an output")
        if self.refinement is None:
            raise BuildError(f"scope '{self.name}' is a top-level dataflow and has no parent to send output to")
        index = self.num_outputs
        self.num_outputs += 1
        return index

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
