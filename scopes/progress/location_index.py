"""Dense numbering of a subgraph's locations, for its progress path.

A :class:`~scopes.progress.reachability.Tracker` numbers every location of a graph
(:meth:`~scopes.progress.reachability.Tracker.index_of`).  A subgraph turns its children's
reports into ``(location, time, diff)`` triples with those numbers and hands
frontier changes back to children by them, so it keeps, per child and port,
the numbers it needs, and per number, what the location is.
"""

from __future__ import annotations

from collections.abc import Sequence

from scopes.progress.location import Source, Target
from scopes.progress.operate import Operate
from scopes.progress.reachability import Tracker

INNER = 0
"""The kind of a location of a child."""
SCOPE_INPUT = 1
"""The kind of ``Source(0, i)``: messages entering the scope."""
SCOPE_OUTPUT = 2
"""The kind of ``Target(0, o)``: messages leaving the scope."""


class LocationIndex:
    """The tracker's location numbers seen from the subgraph: by child and port, and back."""

    def __init__(
        self,
        tracker: Tracker,
        children: Sequence[Operate | None],
        scope_ports: tuple[int, int],
        edges: Sequence[tuple[tuple[Source, Target], int]],
    ) -> None:
        """Index ``tracker``'s locations for ``children`` (index 0 is the boundary, with ``scope_ports``
        ``(inputs, outputs)``), and the fan-out of ``edges``, each with its number of copies."""
        count = len(children)
        locations = tracker.locations()
        self.kind: list[int] = [INNER] * len(locations)
        """Per location: :data:`INNER`, :data:`SCOPE_INPUT` or :data:`SCOPE_OUTPUT`."""
        self.port: list[int] = [location.port for location in locations]
        """Per location: its port."""
        self.child: list[int] = [location.node for location in locations]
        """Per location: its child (0: the boundary)."""
        self.target_child: list[int] = [-1] * len(locations)
        """Per location: the child whose input it is, or -1 (outputs, and the boundary)."""
        for loc, location in enumerate(locations):
            if location.node == 0:
                self.kind[loc] = SCOPE_OUTPUT if isinstance(location, Target) else SCOPE_INPUT
            elif isinstance(location, Target):
                self.target_child[loc] = location.node
        inputs, outputs = scope_ports
        self.source_loc: list[list[int]] = [[tracker.index_of(Source(0, i)) for i in range(inputs)]]
        """Per child and output (for the boundary: per scope input), its location."""
        self.target_loc: list[list[int]] = [[tracker.index_of(Target(0, o)) for o in range(outputs)]]
        """Per child and input (for the boundary: per scope output), its location."""
        for index in range(1, count):
            child = children[index]
            assert child is not None
            self.target_loc.append([tracker.index_of(Target(index, p)) for p in range(child.inputs)])
            self.source_loc.append([tracker.index_of(Source(index, p)) for p in range(child.outputs)])
        self.edge_targets: list[list[list[tuple[int, int]]]] = [
            [[] for _ in self.source_loc[index]] for index in range(count)
        ]
        """Per child and output: ``(target location, copies)`` of every edge leaving it."""
        for (source, target), copies in edges:
            loc = self.target_loc[target.node][target.port]
            fanout = self.edge_targets[source.node][source.port]
            entry = (loc, copies)
            if entry not in fanout:
                fanout.append(entry)
