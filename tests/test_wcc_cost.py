"""examples/connected_components_cost.py: local components in C, representatives merged in a loop.

Checked against scipy's ``connected_components`` on random graphs (1 worker, 2
threads, 2 processes; scipy and the NumPy union-find on each worker) and on
the Debian graph; reading shares and hashing names checked on their own.
"""

from __future__ import annotations

import gzip
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers.example_loader import load_example
from hypothesis import example, given, settings
from hypothesis import strategies as st

from runtime import execute

cost = load_example("connected_components_cost")
scipy_sparse = pytest.importorskip("scipy.sparse")
csgraph = pytest.importorskip("scipy.sparse.csgraph")
STALL = 60.0


def expected_labels(src: np.ndarray, dst: np.ndarray) -> dict[int, int]:
    """scipy's components of any int ids, as node -> smallest id of its component (nodes on an edge)."""
    ids, inverse = np.unique(np.concatenate((src, dst)), return_inverse=True)
    local = inverse.reshape(2, -1)
    matrix = scipy_sparse.coo_matrix((np.ones(len(src)), (local[0], local[1])), shape=(len(ids), len(ids)))
    _, labels = csgraph.connected_components(matrix, directed=True, connection="weak")
    smallest = np.full(labels.max() + 1 if len(labels) else 0, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(smallest, labels, ids)
    return dict(zip(ids.tolist(), smallest[labels].tolist(), strict=True))


def found_labels(outputs: list[Any]) -> dict[int, int]:
    result: dict[int, int] = {}
    for nodes, labels, *_ in outputs:
        for node, label in zip(nodes, labels, strict=True):
            assert node not in result, f"node {node} labelled on two workers"
            result[node] = label
    return result


def edges_array(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    edges = np.empty(len(src), cost.EDGES)
    edges["src"], edges["dst"] = src, dst
    return edges


def threads_main(worker: Any, edges: np.ndarray, method: str) -> tuple[list[int], list[int]]:
    labels = cost.run_edges(worker, edges[worker.index :: worker.peers], method)
    return labels["node"].tolist(), labels["label"].tolist()


def random_graph(edges: int, nodes: int, seed: int, spread: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, nodes, edges) * spread, rng.integers(0, nodes, edges) * spread


@settings(max_examples=40, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=60),
    spread=st.sampled_from([1, 10**12, -3, -(10**12)]),
    workers=st.sampled_from([1, 2, 3]),
    method=st.sampled_from(cost.METHODS),
)
@example(pairs=[(0, 2), (0, 1)], spread=-3, workers=3, method="scipy")  # issue 28: a node -9 that is no node
def test_small_graphs_match_scipy(pairs: list[tuple[int, int]], spread: int, workers: int, method: str) -> None:
    """Dense ids, ids far apart (interned with np.unique), negative ids; any number of threads."""
    src = np.array([a for a, _ in pairs], np.int64) * spread
    dst = np.array([b for _, b in pairs], np.int64) * spread
    outputs = execute(partial(threads_main, edges=edges_array(src, dst), method=method), workers=workers)
    assert found_labels(outputs) == expected_labels(src, dst)


def test_representatives_of_non_negative_nodes_may_be_negative() -> None:
    """Node 0's local representatives -6 and -3 give the contracted edge -3 - -6 (not -9 - 0, as packed keys did)."""
    pairs = np.array([(0, -6), (0, -3)], cost.PAIRS)
    labels, contracted = cost.representatives(pairs, True)
    assert labels.tolist() == [(0, -6)]
    assert contracted.tolist() == [(-3, -6)]


@pytest.mark.parametrize("method", cost.METHODS)
def test_negative_ids_on_three_threads_match_scipy(method: str) -> None:
    """The hypothesis failure of issue 28, explicitly: edges 0 - -6 and 0 - -3 on 3 workers are one component."""
    src, dst = np.array([0, 0], np.int64), np.array([-6, -3], np.int64)
    outputs = execute(partial(threads_main, edges=edges_array(src, dst), method=method), workers=3)
    assert found_labels(outputs) == {-6: -6, -3: -6, 0: -6}


@pytest.mark.parametrize("method", cost.METHODS)
@pytest.mark.parametrize(("edges", "nodes"), [(20_000, 40_000), (60_000, 20_000), (200_000, 100_000)])
def test_random_graphs_on_two_threads_match_scipy(edges: int, nodes: int, method: str) -> None:
    src, dst = random_graph(edges, nodes, seed=edges)
    outputs = execute(partial(threads_main, edges=edges_array(src, dst), method=method), workers=2)
    assert found_labels(outputs) == expected_labels(src, dst)


def write_edges(path: Path, src: np.ndarray, dst: np.ndarray) -> None:
    path.write_text("".join(f"{a}\t{b}\n" for a, b in zip(src.tolist(), dst.tolist(), strict=True)))


@pytest.mark.parametrize("method", cost.METHODS)
def test_a_million_edges_read_by_two_processes_match_scipy(tmp_path: Path, method: str) -> None:
    src, dst = random_graph(1_000_000, 500_000, seed=28)
    path = tmp_path / "edges.tsv"
    write_edges(path, src, dst)
    outputs = execute(
        partial(cost.file_worker, path=str(path), method=method), workers=1, processes=2, stall_timeout=STALL
    )
    assert found_labels(outputs) == expected_labels(src, dst)
    assert all(len(nodes) for nodes, *_ in outputs), "both processes own nodes"


def test_the_debian_graph_matches_scipy_on_two_processes(capsys: pytest.CaptureFixture[str]) -> None:
    assert cost.main(["--check", "-n", "2", "-w", "1"]) == 0
    out = capsys.readouterr().out
    assert "203 components" in out and "check against scipy.sparse.csgraph.connected_components: OK" in out
    assert cost.main(["--check", "-w", "2", "--method", "numpy"]) == 0
    assert "numpy on each worker" in capsys.readouterr().out


def test_without_scipy_the_example_uses_the_union_find(monkeypatch: pytest.MonkeyPatch) -> None:
    real = cost.importlib.util.find_spec
    monkeypatch.setattr(cost.importlib.util, "find_spec", lambda name: None if name == "scipy" else real(name))
    assert cost.default_method() == "numpy"


@settings(max_examples=30, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.integers(0, 2_000), st.integers(0, 2_000)), max_size=300),
    nodes=st.integers(1, 2_001),
)
def test_union_find_gives_each_node_its_components_smallest_node(pairs: list[tuple[int, int]], nodes: int) -> None:
    src = np.array([a % nodes for a, _ in pairs], np.int64)
    dst = np.array([b % nodes for _, b in pairs], np.int64)
    assert np.array_equal(cost.union_find(src, dst, nodes), cost.smallest_mates(src, dst, nodes, "scipy"))


def test_union_find_keeps_ids_that_fit_in_32_bits_as_int32() -> None:
    """Half the memory every random read of the parent array touches; the roots are the same as scipy's."""
    src, dst = np.array([5, 3, 9, 0], np.int64), np.array([3, 1, 8, 0], np.int64)
    roots = cost.union_find(src, dst, 10)
    assert roots.dtype == np.int32
    assert roots.tolist() == [0, 1, 2, 1, 4, 1, 6, 7, 8, 8]
    assert np.array_equal(roots, cost.smallest_mates(src, dst, 10, "scipy"))


@settings(max_examples=30, deadline=None)
@given(
    lines=st.lists(st.tuples(st.integers(0, 99), st.integers(0, 99)), max_size=40),
    peers=st.integers(1, 5),
    gz=st.booleans(),
)
@example(lines=[(0, 0)], peers=5, gz=True)  # a share whose range is empty at offset 0 took the first line too
def test_every_line_is_in_exactly_one_share(tmp_path_factory: Any, lines: list[Any], peers: int, gz: bool) -> None:
    text = "".join(f"{a}\t{b}\n" for a, b in lines).encode()
    path = tmp_path_factory.mktemp("share") / ("e.tsv.gz" if gz else "e.tsv")
    path.write_bytes(gzip.compress(text) if gz else text)
    shares = [cost.read_share(path, index, peers) for index in range(peers)]
    assert b"".join(shares) == text
    assert all(not share or share.endswith(b"\n") for share in shares)


def test_names_hash_alike_at_any_width_and_apart_when_different() -> None:
    names = np.array([b"libc6", b"python3", b"a-very-long-package-name-indeed"], dtype=np.bytes_)
    narrow = np.array([b"libc6", b"python3"], dtype=np.bytes_)
    assert cost.name_ids(names)[:2].tolist() == cost.name_ids(narrow).tolist()
    many = np.array([f"pkg{number}".encode() for number in range(50_000)], dtype=np.bytes_)
    ids = cost.name_ids(many)
    assert len(np.unique(ids)) == len(many) and (ids >= 0).all()


@pytest.mark.parametrize("workers", [2, 3])
def test_a_long_shuffled_path_needs_several_rounds_and_still_matches(workers: int) -> None:
    """A path's edges scattered over workers: local components are short, so the loop must merge for rounds."""
    order = np.random.default_rng(5).permutation(20_000)
    src, dst = order[:-1].astype(np.int64), order[1:].astype(np.int64)
    outputs = execute(partial(threads_main, edges=edges_array(src, dst), method="scipy"), workers=workers)
    assert set(found_labels(outputs).values()) == {0}
    assert len(found_labels(outputs)) == 20_000


def test_large_edge_sets_go_to_the_union_find_even_with_scipy(monkeypatch: pytest.MonkeyPatch) -> None:
    """scipy holds the GIL for its whole call: past SCIPY_EDGES the union-find (short NumPy steps) runs instead."""
    calls: list[int] = []
    real = cost.union_find
    monkeypatch.setattr(cost, "union_find", lambda src, dst, nodes: calls.append(len(src)) or real(src, dst, nodes))
    monkeypatch.setattr(cost, "SCIPY_EDGES", 100)
    src, dst = random_graph(1_000, 3_000, seed=3)
    pairs = cost.local_pairs(src, dst, "scipy")
    assert calls == [1_000]
    expected = expected_labels(src, dst)
    assert dict(zip(pairs["node"].tolist(), pairs["label"].tolist(), strict=True)) == expected
    cost.local_pairs(src[:50], dst[:50], "scipy")
    assert calls == [1_000], "a small edge set still goes to scipy"


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.integers(-(2**62), 2**62) | st.integers(-5, 5), max_size=80))
def test_distinct_and_intern_agree_with_np_unique(values: list[int]) -> None:
    """The sort-based helpers that replace np.unique (whose hash path is slow on 10^5 keys) give its answer."""
    array = np.array(values, np.int64)
    ids, inverse = cost.intern(array)
    expected_ids, expected_inverse = np.unique(array, return_inverse=True)
    assert ids.tolist() == expected_ids.tolist() and inverse.tolist() == expected_inverse.ravel().tolist()
    assert cost.distinct(array).tolist() == expected_ids.tolist()
    pairs = np.empty(len(array), cost.EDGES)
    pairs["src"], pairs["dst"] = array // 3, array % 3
    assert cost.distinct(pairs).tolist() == sorted(set(pairs.tolist()))
