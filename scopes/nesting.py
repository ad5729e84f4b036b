"""Moving streams between nested scopes: ``enter`` and ``leave``."""

from __future__ import annotations

from typing import TypeVar

from scopes.core import Scope, StreamCore
from scopes.errors import BuildError, ScopeBoundaryError
from scopes.location import Source, Target

S = TypeVar("S", bound=StreamCore)
"""The class of the streams read and made (for users, :class:`~scopes.stream.Stream`)."""


def enter(stream: S, scope: Scope[S]) -> S:
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


def _enter(stream: S, scope: Scope[S]) -> S:
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
            raise BuildError(
                f"cannot enter stream '{stream.name}' from scope '{stream.scope.name}' into "
                f"scope '{scope.name}', which is not nested inside it"
            )
        return _enter(_enter(stream, parent), scope)
    port, entrance, inner_tee = scope.subgraph.graph.new_input()
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
    port, exit_pusher, outer_tee = scope.subgraph.graph.new_output()
    scope.subgraph.graph.connect(stream.source, Target(0, port))
    stream.tee.add(exit_pusher)
    return parent.new_stream(Source(scope.index_in_parent, port), outer_tee, f"{stream.name}>leave")


def is_ancestor(ancestor: Scope[StreamCore], scope: Scope[StreamCore] | None) -> bool:
    """Whether ``ancestor`` is ``scope`` or encloses it."""
    while scope is not None:
        if scope is ancestor:
            return True
        scope = scope.parent
    return False
