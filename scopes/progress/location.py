"""Names for locations in a dataflow graph.

From the progress tracker's point of view an operator's output port is a
:class:`Source` of timestamped data and its input port is a :class:`Target`.
The two are distinct types so that one can never be mistaken for the other:
``Source(1, 0) != Target(1, 0)``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class Source:
    """An output port: ``port`` of the operator with index ``node`` in its scope."""

    node: int
    port: int

    def __repr__(self) -> str:
        return f"Source({self.node}, {self.port})"


@dataclass(frozen=True, slots=True, order=True)
class Target:
    """An input port: ``port`` of the operator with index ``node`` in its scope."""

    node: int
    port: int

    def __repr__(self) -> str:
        return f"Target({self.node}, {self.port})"


Location = Source | Target
"""Either kind of port."""
