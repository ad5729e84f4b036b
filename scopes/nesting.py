"""Moving streams between nested scopes: ``enter`` and ``leave``, and the data plane at a scope's boundary.

A scope input counts the records entering at each time (the progress model's
half, kept by :meth:`~scopes.progress.subgraph_builder.SubgraphBuilder.add_input`)
and forwards them inside; a scope output forwards records out, changing their
times (timely's ``enterleave``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from scopes.batches import Batch
from scopes.callsite import user_site
from scopes.channel_protocols import Activator, Pusher
from scopes.core import ScopeCore, StreamCore, describe_stream
from scopes.errors import BuildError, ScopeBoundaryError
from scopes.local_channels import Tee
from scopes.progress.location import Source, Target
from scopes.progress.subgraph import Subgraph

S = TypeVar("S", bound=StreamCore)
"""The class of the streams read and made (for users, :class:`~scopes.stream.Stream`)."""


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


def reserve_child(subgraph: Subgraph, name: str) -> int:
    """Reserve a child index in ``subgraph`` for ``name``, noting where the user's code built it.

    The site is recorded for every operator and scope, logging or not: a stuck
    dataflow's error names it (about a microsecond per operator, once, at build).
    """
    return subgraph.graph.reserve_child(name, user_site(2))


def scope_input(subgraph: Subgraph) -> tuple[int, Pusher, Tee]:
    """Create an input of ``subgraph``.

    Returns its index, the pusher the parent's upstream output should push
    into, and the inner fan-out that inner operators attach to (``Source(0, i)``).
    """
    graph = subgraph.graph
    index, counts = graph.add_input()
    assert graph.refinement is not None  # add_input refuses a top-level dataflow
    tee = Tee()
    return index, _ScopeEntrance(tee, counts, graph.refinement.to_inner, graph.activate), tee


def scope_output(subgraph: Subgraph) -> tuple[int, Pusher, Tee]:
    """Create an output of ``subgraph``.

    Returns its index, the pusher inner operators push into (``Target(0, o)``),
    and the parent-level fan-out that the parent's operators attach to.
    """
    graph = subgraph.graph
    index = graph.add_output()
    assert graph.refinement is not None  # add_output refuses a top-level dataflow
    tee = Tee()
    return index, _ScopeExit(tee, graph.refinement.to_outer), tee


def enter(stream: S, scope: ScopeCore[S]) -> S:
    """Bring ``stream`` into ``scope``, nested (at any depth) inside the stream's scope.

    ``scope`` must be the scope being built (its body is running).
    """
    building = scope.context.building
    if not building or building[-1] is not scope:
        now = " > ".join(repr(part) for part in building[-1].path) if building else "none"
        raise ScopeBoundaryError(
            f"cannot enter stream '{stream.name}' into scope "
            f"{' > '.join(repr(part) for part in scope.path)}: a stream enters only the scope "
            f"being built (whose body is running; now: {now}); call stream.enter(scope) "
            "inside that scope's body"
        )
    return _enter(stream, scope)


def _enter(stream: S, scope: ScopeCore[S]) -> S:
    if scope is stream.scope:
        return stream
    parent = scope.parent
    if parent is None:
        raise BuildError(
            f"cannot enter stream '{stream.name}' into top-level scope '{scope.name}'; "
            "enter() moves a stream into a scope nested inside its own"
        )
    if parent is not stream.scope:
        if not is_ancestor(stream.scope, parent):
            if _root(stream.scope) is _root(scope):  # a scope beside this one, whose body has returned
                raise ScopeBoundaryError(
                    f"{describe_stream(stream)} cannot enter scope {_path(scope)} (address {scope.address}): it is "
                    f"in scope {_path(stream.scope)} (address {stream.scope.address}), whose body has already "
                    "returned; take it out with stream.leave() (return stream.leave() from that body) and enter "
                    "the stream leave() returns"
                )
            raise BuildError(
                f"cannot enter stream '{stream.name}' from scope {_path(stream.scope)} into "
                f"scope {_path(scope)}, which is not nested inside it"
            )
        return _enter(_enter(stream, parent), scope)
    port, entrance, inner_tee = scope_input(scope.subgraph)
    stream.scope.subgraph.graph.connect(stream.source, Target(scope.index_in_parent, port))
    stream.tee.add(entrance)
    return scope.new_stream(Source(0, port), inner_tee, f"{stream.name}>enter")


def leave(stream: S) -> S:
    """Take ``stream`` out of its nested scope into the parent scope."""
    scope = stream.scope
    parent = scope.parent
    if parent is None:
        raise BuildError(f"stream '{stream.name}' is in top-level scope '{scope.name}'; there is no scope to leave to")
    building = scope.context.building
    current = building[-1] if building else None
    if current is not scope and current is not parent:  # inside the body, or on the stream it returned
        raise ScopeBoundaryError(scope.boundary_message(f"{stream.name}>leave", stream))
    port, exit_pusher, outer_tee = scope_output(scope.subgraph)
    scope.subgraph.graph.connect(stream.source, Target(0, port))
    stream.tee.add(exit_pusher)
    return parent.new_stream(Source(scope.index_in_parent, port), outer_tee, f"{stream.name}>leave")


def is_ancestor(ancestor: ScopeCore[StreamCore], scope: ScopeCore[StreamCore] | None) -> bool:
    """Whether ``ancestor`` is ``scope`` or encloses it."""
    while scope is not None:
        if scope is ancestor:
            return True
        scope = scope.parent
    return False


def _root(scope: ScopeCore[StreamCore]) -> ScopeCore[StreamCore]:
    """The top-level scope of ``scope``'s dataflow."""
    while scope.parent is not None:
        scope = scope.parent
    return scope


def _path(scope: ScopeCore[StreamCore]) -> str:
    """``scope``'s path of names, for messages."""
    return " > ".join(repr(part) for part in scope.path)
