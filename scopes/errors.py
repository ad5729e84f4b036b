"""The exceptions raised by :mod:`scopes`.

Every error the progress model and the graph-building layer raise derives from
:class:`ScopeError`, so a caller can catch the whole family at once.  Messages
name the operator, the port and the times involved wherever those exist.
"""

from __future__ import annotations


class ScopeError(Exception):
    """Base class of every error raised by :mod:`scopes`."""


class TimestampError(ScopeError, TypeError):
    """A value is not a timestamp of the scope's timestamp type."""


class SummaryError(ScopeError):
    """A path summary broke its contract (for example, it moved a time backwards)."""


class GraphError(ScopeError):
    """The dataflow graph is malformed: unknown nodes or ports, bad summary shapes."""


class CycleError(GraphError):
    """The graph has a cycle along which timestamps do not strictly advance.

    Attributes:
        operators: the names of the operators on the offending cycle, in order.
    """

    def __init__(self, message: str, operators: list[str]) -> None:
        super().__init__(message)
        self.operators = operators


class ProgressError(ScopeError):
    """Progress information is inconsistent with what the scope can explain."""


class CapabilityError(ScopeError):
    """An operator misused a capability: wrong time, wrong output, or already dropped."""


class BuildError(ScopeError):
    """A dataflow was wired incorrectly while it was being built."""
