"""The ``Operate`` interface: how a parent scope sees one element of its dataflow graph.

This is timely's ``Operate``, and the *Scope* interface of the design (seed 003:
"Subgraphs implement a Scope interface"): :data:`Scope` here, and
:data:`scopes.Scope`, are this class under that name.  It is not what users call
a scope while building (that is the :class:`~scopes.builder.ScopeBuilder`
passed to ``worker.dataflow``'s function).
A child is a vertex with some inputs and outputs.  At construction it
summarizes itself to its parent (:meth:`Operate.get_internal_summary`) and learns
about the world around it (:meth:`Operate.set_external_summary`).  At run time the
parent pushes progress made elsewhere, projected to the scope's inputs
(:meth:`Operate.push_external_progress`), and pulls progress made inside, projected
to the scope's outputs (:meth:`Operate.pull_internal_progress`).

Leaf operators and :class:`~scopes.progress.subgraph.Subgraph` both implement it, so
subgraphs nest to any depth.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from scopes.progress.antichain import Antichain
from scopes.progress.change_batch import ChangeBatch
from scopes.progress.mypyc_attrs import mypyc_attr
from scopes.progress.timestamp import PathSummary

Updates = list[tuple[Any, int]]
"""A list of ``(time, diff)`` count changes."""

ConnectivityLike = Sequence[Any]
"""Summaries per row, each row either sparse, ``{column: antichain}`` (as
:data:`scopes.progress.reachability.Connectivity`), or dense, one antichain per column (empty:
no path).  Scopes return the sparse form and accept both."""


@mypyc_attr(allow_interpreted_subclasses=True)
class Operate(ABC):
    """One vertex of a dataflow graph, as seen from its parent scope: a leaf operator or a subgraph."""

    name: str = "scope"
    local: bool = True
    """Whether the parent must broadcast this scope's progress statements to all workers.

    Leaf operators report only their own worker's actions, so they are local.  A
    subgraph already sees the progress of every worker inside it, so it is not.
    """
    notify: bool = True
    """Whether the scope wants to run when the frontiers at its inputs change."""

    frontier_interest: bool = True
    """Whether the parent must push frontier changes at the inputs (timely's ``FrontierInterest``).

    A leaf operator whose logic never looks at its input frontiers clears it;
    it may set it again at any time (see :meth:`scopes.operator.Operator.take_frontier_interest`).
    """

    def defer_frontiers(self, implied: Sequence[Any], on_interest: Callable[[], None]) -> None:
        """Without a frontier interest: read input frontiers from ``implied`` (the parent tracker's) on demand.

        Called by the parent once the scope is set up, only if :attr:`frontier_interest`
        is false; ``implied[i]`` is the frontier the parent's tracker maintains at
        input ``i``.  The scope calls ``on_interest()`` when it takes an interest,
        before it expects pushes again.  Scopes that always want pushes ignore it.
        """
        return None

    @property
    @abstractmethod
    def inputs(self) -> int:
        """The number of inputs."""

    @property
    @abstractmethod
    def outputs(self) -> int:
        """The number of outputs."""

    @abstractmethod
    def get_internal_summary(self) -> tuple[list[dict[int, Antichain[PathSummary]]], list[Updates]]:
        """Summarize the scope to its parent.

        Returns ``(summaries, capabilities)``: ``summaries[i]`` maps each output
        ``o`` that input ``i`` reaches to the antichain of path summaries from ``i``
        to ``o`` (sparse: an absent output is not reachable, so a one-to-one shape
        costs one entry per input), and ``capabilities[o]`` lists the initial
        capability counts at output ``o``.
        """

    @abstractmethod
    def set_external_summary(self, summaries: ConnectivityLike, frontier: Sequence[Updates]) -> None:
        """Learn about the outside world.

        ``summaries[o]`` summarizes the paths from output ``o`` back to each input
        ``i`` it reaches through the parent (sparse ``{i: antichain}``; the dense
        form, one antichain per input, is accepted too); ``frontier[i]`` is the
        initial count of times that may arrive at input ``i``.
        """

    @abstractmethod
    def push_external_progress(self, external: Sequence[Updates]) -> None:
        """Receive changes, one list per input, to the frontier of times that may arrive there."""

    @abstractmethod
    def pull_internal_progress(
        self,
        internal: Sequence[ChangeBatch[Any]],
        consumed: Sequence[ChangeBatch[Any]],
        produced: Sequence[ChangeBatch[Any]],
    ) -> bool:
        """Do work, then report progress made since the last pull, all in one call.

        Fills ``internal[o]`` with changes to capabilities at output ``o``,
        ``consumed[i]`` with messages consumed at input ``i`` and ``produced[o]``
        with messages produced at output ``o``, counted in records.  Consuming and
        the capabilities it creates, or producing and the capabilities it retires,
        are always reported together.  Returns whether work remains that is not
        visible as capabilities at the outputs.
        """


_REQUIRED = (
    "inputs",
    "outputs",
    "get_internal_summary",
    "set_external_summary",
    "push_external_progress",
    "pull_internal_progress",
)


def unimplemented(kind: type) -> list[str]:
    """The abstract members of :class:`Operate` that class ``kind`` leaves unimplemented.

    Pure Python refuses to instantiate such a class; compiled (:mod:`scopes.native`),
    a Python subclass of the compiled ``Operate`` can be instantiated, so a
    scope checks each child it is given with this instead.
    """
    return [name for name in _REQUIRED if getattr(kind, name, None) is getattr(Operate, name)]


Scope = Operate
"""The seed's *Scope* interface: a vertex of the dataflow graph as its parent sees it.

The same class as :class:`Operate` (timely's name); leaf operators and
:class:`~scopes.progress.subgraph.Subgraph` implement it."""
