"""The example programs: each computes what its plain-Python (or networkx) reference does.

Every example is checked on seeded random inputs with 1, 2 and 3 workers, and
run once as a script (``python examples/NAME.py -w 2``).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest
from helpers.example_loader import load_example

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
NAMES = [
    "hello",
    "wordcount",
    "loopdemo",
    "pagerank",
    "bfs",
    "connected_components",
    "hashjoin",
    "distinct",
]
WORKERS = [1, 2, 3]


hello = load_example("hello")
wordcount = load_example("wordcount")
loopdemo = load_example("loopdemo")
pagerank = load_example("pagerank")
bfs = load_example("bfs")
connected_components = load_example("connected_components")
hashjoin = load_example("hashjoin")
distinct = load_example("distinct")


# ---------------------------------------------------------------------- hello


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize(("count", "per_epoch"), [(0, 3), (1, 1), (25, 4), (60, 7)])
def test_hello(workers: int, count: int, per_epoch: int) -> None:
    detailed = hello.run_detailed(count, per_epoch, workers)
    assert sorted(record for _, record in detailed) == hello.reference(count, per_epoch)
    for index, (_, number, _) in detailed:
        assert index == hash(number) % workers


# ---------------------------------------------------------------------- wordcount


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("lockstep", [True, False])
def test_wordcount(workers: int, seed: int, lockstep: bool) -> None:
    text = wordcount.random_text(epochs=5, lines=30, seed=seed)
    text[2] = []  # an epoch without input
    text[3] = ["", "  "]  # an epoch with lines but no words
    assert wordcount.run(text, workers, lockstep=lockstep) == wordcount.reference(text)


# ---------------------------------------------------------------------- loopdemo


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("lockstep", [True, False])
def test_loopdemo(workers: int, lockstep: bool) -> None:
    rng = random.Random(workers)
    numbers = [rng.randint(1, 3000) for _ in range(150)] + [1, 1, 2, 27]
    result = loopdemo.run(numbers, per_epoch=40, workers=workers, lockstep=lockstep)
    assert result == loopdemo.reference(numbers, per_epoch=40)


def test_loopdemo_known_values() -> None:
    result = loopdemo.run([1, 6, 27, 97], per_epoch=4, workers=2)
    assert result == [(0, 1, 0), (0, 6, 8), (0, 27, 111), (0, 97, 118)]


# ---------------------------------------------------------------------- pagerank


def close(a: dict[int, float], b: dict[int, float], tolerance: float) -> bool:
    return pagerank.max_difference(a, b) <= tolerance


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pagerank_matches_power_iteration(workers: int, seed: int) -> None:
    nodes = 40
    edges = [e for e in pagerank.random_graph(nodes, 120, seed) if e[0] % 7]  # 0, 7, ... dangle
    result = pagerank.run(nodes, edges, iterations=20, damping=0.85, workers=workers)
    expected = pagerank.reference(nodes, edges, iterations=20, damping=0.85)
    assert close(result, expected, 1e-9)
    assert abs(sum(result.values()) - 1.0) < 1e-9


@pytest.mark.parametrize("workers", WORKERS)
def test_pagerank_matches_networkx(workers: int) -> None:
    nodes = 30
    edges = set(pagerank.random_graph(nodes, 60, seed=workers))
    edges |= {(v, (v + 1) % nodes) for v in range(nodes)}  # no dangling nodes
    edge_list = sorted(edges)
    result = pagerank.run(nodes, edge_list, iterations=100, damping=0.85, workers=workers)
    assert close(result, pagerank.reference(nodes, edge_list, 100, 0.85), 1e-9)
    assert close(result, pagerank.networkx_pagerank(nodes, edge_list, 0.85), 1e-6)


@pytest.mark.parametrize("workers", WORKERS)
def test_pagerank_with_dangling_nodes_matches_networkx(workers: int) -> None:
    nodes = 25
    edges = pagerank.random_graph(nodes, 30, seed=7)
    result = pagerank.run(nodes, edges, iterations=100, damping=0.85, workers=workers)
    assert close(result, pagerank.networkx_pagerank(nodes, edges, 0.85), 1e-6)


@pytest.mark.parametrize("workers", WORKERS)
def test_pagerank_edge_cases(workers: int) -> None:
    assert close(pagerank.run(4, [], 5, 0.85, workers), {v: 0.25 for v in range(4)}, 1e-12)
    result = pagerank.run(3, [(0, 1)], iterations=0, workers=workers)
    assert close(result, {v: 1 / 3 for v in range(3)}, 1e-12)
    result = pagerank.run(5, [(0, 1), (1, 0)], iterations=7, damping=0.5, workers=workers)
    assert close(result, pagerank.reference(5, [(0, 1), (1, 0)], 7, 0.5), 1e-12)


# ---------------------------------------------------------------------- bfs


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize(("nodes", "edges", "seed"), [(60, 90, 1), (80, 240, 2), (50, 40, 3)])
def test_bfs(workers: int, nodes: int, edges: int, seed: int) -> None:
    graph_edges = bfs.random_graph(nodes, edges, seed)
    root = seed % nodes
    result = bfs.run(graph_edges, root, workers)
    assert result == bfs.reference(graph_edges, root)
    graph = nx.DiGraph()
    graph.add_nodes_from(range(nodes))
    graph.add_edges_from(graph_edges)
    assert result == dict(nx.single_source_shortest_path_length(graph, root))


@pytest.mark.parametrize("workers", WORKERS)
def test_bfs_edge_cases(workers: int) -> None:
    assert bfs.run([], 5, workers) == {5: 0}
    path = [(i, i + 1) for i in range(30)]
    assert bfs.run(path, 0, workers) == {i: i for i in range(31)}
    assert bfs.run(path + [(0, 30), (30, 30)], 0, workers) == bfs.reference(path + [(0, 30)], 0)


# ---------------------------------------------------------------------- connected components


def networkx_labels(nodes: int, edges: list[tuple[int, int]]) -> dict[int, int]:
    graph = nx.Graph()
    graph.add_nodes_from(range(nodes))
    graph.add_edges_from(edges)
    return {v: min(component) for component in nx.connected_components(graph) for v in component}


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize(("nodes", "edges", "seed"), [(80, 50, 1), (100, 90, 2), (60, 120, 3)])
def test_connected_components(workers: int, nodes: int, edges: int, seed: int) -> None:
    graph_edges = connected_components.random_graph(nodes, edges, seed)
    result = connected_components.run(nodes, graph_edges, workers)
    assert result == connected_components.reference(nodes, graph_edges)
    assert result == networkx_labels(nodes, graph_edges)


@pytest.mark.parametrize("workers", WORKERS)
def test_connected_components_edge_cases(workers: int) -> None:
    assert connected_components.run(4, [], workers) == {v: v for v in range(4)}
    path = [(i + 1, i) for i in range(25)]  # the smallest label has to travel the whole path
    assert connected_components.run(26, path, workers) == {v: 0 for v in range(26)}
    assert connected_components.run(3, [(2, 2), (2, 1)], workers) == {0: 0, 1: 1, 2: 1}


# ---------------------------------------------------------------------- hashjoin


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("lockstep", [True, False])
def test_hashjoin(workers: int, seed: int, lockstep: bool) -> None:
    left, right = hashjoin.random_inputs(epochs=4, per_epoch=25, keys=12, seed=seed)
    result = hashjoin.run(left, right, workers, lockstep=lockstep)
    assert result == hashjoin.reference(left, right)
    assert {epoch for epoch, *_ in result} == set(range(4))


@pytest.mark.parametrize("workers", WORKERS)
def test_hashjoin_uneven_inputs(workers: int) -> None:
    left = [[(1, "a"), (2, "b")], [], [(1, "c"), (1, "c")]]
    right = [[], [(1, "x")], [(3, "y")], [(2, "z"), (1, "w")]]
    result = hashjoin.run(left, right, workers, lockstep=False)
    assert result == hashjoin.reference(left, right)
    assert len(result) == 7


# ---------------------------------------------------------------------- distinct


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("lockstep", [True, False])
def test_distinct(workers: int, seed: int, lockstep: bool) -> None:
    data = distinct.random_records(epochs=5, per_epoch=150, values=40, seed=seed)
    data[1] = []
    data[3] = [7] * 20
    assert distinct.run(data, workers, lockstep=lockstep) == distinct.reference(data)


# ---------------------------------------------------------------------- as scripts


@pytest.mark.parametrize("name", NAMES)
def test_script_runs(name: str) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), "-w", "2"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "matches reference: True" in completed.stdout


@pytest.mark.parametrize(
    ("example", "argv", "message"),
    [
        ("hello", ["--per-epoch", "0"], "--per-epoch must be at least 1, got 0"),
        ("loopdemo", ["--per-epoch", "0"], "--per-epoch must be at least 1, got 0"),
        ("bfs", ["--nodes", "0"], "--nodes must be at least 1, got 0"),
        ("pagerank", ["--nodes", "-1"], "--nodes must be at least 1, got -1"),
        ("pagerank", ["--damping", "2"], "--damping must be between 0 and 1, got 2.0"),
        ("hashjoin", ["--keys", "0"], "--keys must be at least 1, got 0"),
        ("distinct", ["--values", "0"], "--values must be at least 1, got 0"),
    ],
)
def test_an_example_refuses_an_argument_out_of_range_as_a_usage_error(example, argv, message, capsys) -> None:
    """Found by the new-user audit: these failed with a bare traceback from inside the run ('empty range for
    randrange()', 'range() arg 3 must not be zero', a ZeroDivisionError in a worker)."""
    modules = {"hello": hello, "loopdemo": loopdemo, "bfs": bfs, "pagerank": pagerank}
    module = {**modules, "hashjoin": hashjoin, "distinct": distinct}[example]
    with pytest.raises(SystemExit) as exited:
        module.main(argv)
    assert exited.value.code == 2
    assert f"error: {message}" in capsys.readouterr().err
