"""Structural fingerprints of dataflows, to check that every worker built the same graph.

A fingerprint is plain data (lists, strings and integers, so that any
communicator can carry it): for each scope its name, timestamp type, children
(name, kind, number of inputs and outputs, and for nested scopes their own
fingerprint) and edges.
"""

from __future__ import annotations

from typing import Any

from scopes.progress.subgraph import Subgraph

Fingerprint = list[Any]
"""``[scope name, timestamp type, children, edges]``; see :func:`fingerprint`."""


def fingerprint(subgraph: Subgraph) -> Fingerprint:
    """The structure of ``subgraph`` and every scope nested in it."""
    children: list[Any] = []
    for index, child in enumerate(subgraph.children[1:], start=1):
        name = subgraph.child_names[index]
        inputs = child.inputs if child is not None else -1
        outputs = child.outputs if child is not None else -1
        if isinstance(child, Subgraph):
            children.append([name, "scope", inputs, outputs, fingerprint(child)])
        else:
            kind = getattr(child, "kind", None)
            children.append([name, kind if isinstance(kind, str) else type(child).__name__, inputs, outputs])
    edges = [[source.node, source.port, target.node, target.port] for source, target in subgraph.edges]
    return [subgraph.name, repr(subgraph.timestamp_type), children, edges]


def _child(entry: list[Any]) -> str:
    name, kind, inputs, outputs = entry[:4]
    what = "nested scope" if kind == "scope" else "operator"
    detail = f", {kind}" if kind.startswith("Replay") else ""
    return f"{what} '{name}' ({inputs} input(s), {outputs} output(s){detail})"


def _edge(names: list[str], edge: list[int]) -> str:
    source, out_port, target, in_port = edge

    def node(index: int) -> str:
        if index == 0:
            return "the scope boundary"
        return f"'{names[index - 1]}'" if 0 < index <= len(names) else f"child {index}"

    return f"output {out_port} of {node(source)} -> input {in_port} of {node(target)}"


def first_difference(mine: Fingerprint, theirs: Fingerprint, me: int, them: int) -> str | None:
    """Where ``mine`` (worker ``me``) and ``theirs`` (worker ``them``) first differ, or ``None``."""
    return _difference(mine, theirs, me, them, mine[0])


def _difference(mine: Fingerprint, theirs: Fingerprint, me: int, them: int, path: str) -> str | None:
    if mine[0] != theirs[0]:
        return f"scope '{path}' is named '{mine[0]}' on worker {me} but '{theirs[0]}' on worker {them}"
    if mine[1] != theirs[1]:
        return f"scope '{path}' has timestamps {mine[1]} on worker {me} but {theirs[1]} on worker {them}"
    ours, others = mine[2], theirs[2]
    for position in range(max(len(ours), len(others))):
        if position >= len(ours):
            return (
                f"in scope '{path}', worker {them} has an extra child {position + 1}: "
                f"{_child(others[position])}, which worker {me} does not have"
            )
        if position >= len(others):
            return (
                f"in scope '{path}', worker {me} has an extra child {position + 1}: "
                f"{_child(ours[position])}, which worker {them} does not have"
            )
        a, b = ours[position], others[position]
        if list(a[:4]) != list(b[:4]):
            return (
                f"in scope '{path}', child {position + 1} is {_child(a)} on worker {me} "
                f"but {_child(b)} on worker {them}"
            )
        if len(a) > 4:
            nested = _difference(a[4], b[4], me, them, f"{path} / {a[0]}")
            if nested is not None:
                return nested
    names = [entry[0] for entry in ours]
    mine_edges, their_edges = mine[3], theirs[3]
    for position in range(max(len(mine_edges), len(their_edges))):
        a = list(mine_edges[position]) if position < len(mine_edges) else None
        b = list(their_edges[position]) if position < len(their_edges) else None
        if a != b:
            left = _edge(names, a) if a is not None else "nothing"
            right = _edge(names, b) if b is not None else "nothing"
            return f"in scope '{path}', edge {position + 1} is {left} on worker {me} but {right} on worker {them}"
    return None
