"""The strongly-connected-components example (examples/scc.py) against networkx."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import networkx as nx  # noqa: E402
import pytest
from helpers.example_loader import load_example

ROOT = Path(__file__).resolve().parent.parent
DEBIAN = ROOT / "examples" / "data" / "debian-bookworm-depends.tsv.gz"


scc = load_example("scc")

Edge = tuple[Any, Any]


def expected(edges: list[Edge]) -> set[frozenset[Any]]:
    graph = nx.DiGraph()
    graph.add_edges_from(edges)
    return {frozenset(c) for c in nx.strongly_connected_components(graph) if len(c) > 1}


def computed(edges: list[Edge], workers: int) -> list[frozenset[Any]]:
    found, _ = scc.run_scc(lambda index, peers: edges[index::peers], workers)
    return found


def check(edges: list[Edge], workers: int) -> None:
    found = computed(edges, workers)
    assert len(set(found)) == len(found), "a component was reported twice"
    members = [node for component in found for node in component]
    assert len(members) == len(set(members)), "components overlap"
    assert set(found) == expected(edges)


def random_graph(seed: int) -> list[Edge]:
    """A small random digraph with cycles, self-loops and repeated edges."""
    rng = random.Random(seed)
    nodes = rng.randint(1, 40)
    density = rng.choice([0.5, 1.0, 1.5, 2.5])
    edges = [(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(int(nodes * density) + 1)]
    for _ in range(rng.randint(0, 3)):  # self-loops
        node = rng.randrange(nodes)
        edges.append((node, node))
    for _ in range(rng.randint(0, 5)):  # repeated edges
        edges.append(rng.choice(edges))
    if rng.random() < 0.5:  # a planted cycle
        cycle = rng.sample(range(nodes), min(nodes, rng.randint(2, 8)))
        edges.extend(zip(cycle, cycle[1:] + cycle[:1], strict=True))
    rng.shuffle(edges)
    return edges


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("seed", range(25))
def test_random_graphs_match_networkx(seed: int, workers: int) -> None:
    check(random_graph(seed), workers)


SHAPES: dict[str, list[Edge]] = {
    "empty": [],
    "one edge": [(0, 1)],
    "self-loops only": [(0, 0), (1, 1), (1, 1)],
    "two-cycle with repeats": [(0, 1), (1, 0), (0, 1), (1, 0), (1, 1)],
    "directed path": [(i, i + 1) for i in range(30)],
    "long cycle": [(i, (i + 1) % 60) for i in range(60)],
    "cycles joined by a path": [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 5), (5, 6), (6, 4)],
    "cycle reached from small ids": [(0, 5), (1, 5), (5, 6), (6, 7), (7, 5), (7, 2), (2, 3)],
    "nested cycles": [(0, 1), (1, 2), (2, 0), (1, 3), (3, 4), (4, 1), (4, 5), (5, 6), (6, 5)],
    "two-way chain": [(i, i + 1) for i in range(20)] + [(i + 1, i) for i in range(0, 20, 2)],
    "string nodes": [("b", "a"), ("a", "c"), ("c", "b"), ("c", "d"), ("d", "e"), ("e", "d")],
}


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("name", list(SHAPES))
def test_shapes_match_networkx(name: str, workers: int) -> None:
    check(SHAPES[name], workers)


def test_rounds_stop_when_the_edge_set_is_stable() -> None:
    # A cycle with a tail: one round trims the tail, a second confirms nothing changes.
    edges = [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4)]
    found, rounds = scc.run_scc(lambda index, peers: edges[index::peers], 2)
    assert found == [frozenset({0, 1, 2})]
    assert rounds == [5, 3]


def test_debian_graph_has_55_dependency_cycles() -> None:
    edges = list(scc.read_edges(DEBIAN))
    assert len(edges) == 274_855
    found, _ = scc.run_scc(lambda index, peers: scc.read_edges(DEBIAN, index, peers), 2)
    assert len(found) == 55
    assert max(map(len, found)) == 7
    assert set(found) == expected(edges)


def test_command_line_reports_ok(capsys: pytest.CaptureFixture[str]) -> None:
    status = scc.main(["-w", "2", "--limit-edges", "3000"])
    output = capsys.readouterr().out
    assert status == 0
    assert "networkx.strongly_connected_components: OK" in output
