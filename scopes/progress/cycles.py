"""Finding a cycle in a graph of locations (the tracker builder's check that every cycle advances time)."""

from __future__ import annotations


def find_cycle(successors: list[list[int]]) -> list[int] | None:
    """Return the locations of some cycle in the graph, or ``None``; iterative DFS."""
    white, grey, black = 0, 1, 2
    color = [white] * len(successors)
    parent = [-1] * len(successors)
    for root in range(len(successors)):
        if color[root] != white:
            continue
        stack: list[tuple[int, int]] = [(root, 0)]
        color[root] = grey
        while stack:
            node, next_child = stack[-1]
            children = successors[node]
            if next_child < len(children):
                stack[-1] = (node, next_child + 1)
                child = children[next_child]
                if color[child] == white:
                    color[child] = grey
                    parent[child] = node
                    stack.append((child, 0))
                elif color[child] == grey:
                    cycle = [child]
                    walk = node
                    while walk != child:
                        cycle.append(walk)
                        walk = parent[walk]
                    cycle.reverse()
                    # rotate so the cycle starts at `child`
                    return [child] + [c for c in cycle if c != child]
            else:
                color[node] = black
                stack.pop()
    return None
