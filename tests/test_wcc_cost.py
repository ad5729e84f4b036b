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
from scopes.hashing import stable_hash_array

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
    assert "numpy on each worker" in out, "the union-find is the default"
    assert cost.main(["--check", "-w", "2", "--method", "scipy"]) == 0
    assert "scipy on each worker" in capsys.readouterr().out


@pytest.mark.parametrize("shape", ["path", "reversed path", "shuffled path", "star", "two stars", "binary tree"])
def test_union_find_on_deep_shapes_matches_scipy(shape: str) -> None:
    """Shapes whose hooking leaves long chains of former roots, which the final passes must all flatten."""
    n = 5_000
    ids = np.arange(n, dtype=np.int64)
    order = np.random.default_rng(7).permutation(n) if shape == "shuffled path" else ids
    if shape in ("path", "shuffled path"):
        src, dst = order[:-1], order[1:]
    elif shape == "reversed path":
        src, dst = ids[:0:-1], ids[-2::-1]
    elif shape == "star":
        src, dst = np.full(n - 1, n - 1, np.int64), ids[:-1]
    elif shape == "two stars":
        src, dst = np.where(ids < n // 2, n - 1, n - 2)[:-2], ids[:-2]
    else:
        src, dst = ids[1:], (ids[1:] - 1) // 2
    roots = cost.union_find(src, dst, n)
    assert np.array_equal(roots, cost.smallest_mates(src, dst, n, "scipy"))
    assert np.array_equal(roots[roots], roots), "every node points at its root"


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


# ---------------------------------------------------------------------- dense label columns (issue 28's 2-process goal)


def union_find_labels(src: np.ndarray, dst: np.ndarray) -> dict[int, int]:
    """A plain dictionary union-find: node -> smallest id of its weak component (nodes on an edge)."""
    parent: dict[int, int] = {}

    def root(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for a, b in zip(src.tolist(), dst.tolist(), strict=True):
        parent.setdefault(a, a)
        parent.setdefault(b, b)
        low, high = sorted((root(a), root(b)))
        parent[high] = low
    return {node: root(node) for node in parent}


def shares_main(worker: Any, shares: list[np.ndarray], method: str) -> tuple[list[int], list[int]]:
    labels = cost.run_edges(worker, shares[worker.index], method)
    return labels["node"].tolist(), labels["label"].tolist()


SHAPES = ("uniform", "giant", "singletons", "self loops", "empty share", "outlier")


def skewed_shares(shape: str, workers: int, seed: int) -> list[np.ndarray]:
    """Edges of one skewed kind, split unevenly among ``workers`` (one share may be empty)."""
    rng = np.random.default_rng(seed)
    nodes = int(rng.integers(1, 3_000))
    count = int(rng.integers(0, 4_000))
    src, dst = rng.integers(0, nodes, count), rng.integers(0, nodes, count)
    if shape == "giant":  # a path through every node, shuffled: one component that needs rounds
        order = rng.permutation(nodes)
        src, dst = np.concatenate((src, order[:-1])), np.concatenate((dst, order[1:]))
    elif shape == "singletons":  # many self loops on their own: components of one node
        src = np.concatenate((src[: count // 10], np.arange(nodes, 3 * nodes)))
        dst = np.concatenate((dst[: count // 10], np.arange(nodes, 3 * nodes)))
    elif shape == "self loops":
        dst = np.where(rng.random(len(dst)) < 0.5, src, dst)
    elif shape == "outlier":  # one share with a negative or huge id goes the sparse way, the others dense
        src = np.append(src, rng.choice([-(2**62), -1, 2**40]))
        dst = np.append(dst, 0)
    cuts = np.sort(rng.integers(0, len(src) + 1, workers - 1))
    if shape == "empty share" and workers > 1:
        cuts[0] = 0
    bounds = [0, *cuts.tolist(), len(src)]
    order = np.arange(len(src)) if shape == "outlier" else rng.permutation(len(src))
    return [edges_array(src[order[a:b]], dst[order[a:b]]) for a, b in zip(bounds, bounds[1:], strict=False)]


@settings(max_examples=30, deadline=None)
@given(
    shape=st.sampled_from(SHAPES),
    workers=st.sampled_from([1, 2, 3]),
    seed=st.integers(0, 2**31),
    method=st.sampled_from(cost.METHODS),
)
def test_skewed_graphs_on_uneven_shares_match_a_plain_union_find(
    shape: str, workers: int, seed: int, method: str
) -> None:
    """Dense columns, pairs and both met at one owner: every node once, on its owner, with its component's
    smallest id."""
    shares = skewed_shares(shape, workers, seed)
    outputs = execute(partial(shares_main, shares=shares, method=method), workers=workers)
    edges = np.concatenate(shares)
    assert found_labels(outputs) == union_find_labels(edges["src"], edges["dst"])
    for index, (nodes, *_) in enumerate(outputs):
        owners = stable_hash_array(np.array(nodes, np.int64)) % np.uint64(workers)
        assert (owners == index).all(), "a node labelled away from its owner"


def test_a_share_with_an_outlier_id_meets_dense_shares_at_the_owner() -> None:
    """Worker 1's negative id makes its labels pairs; worker 0's stay dense columns: the owner merges both."""
    shares = [
        edges_array(np.array([0, 2, 4]), np.array([1, 3, 5])),
        edges_array(np.array([1, 3, -7]), np.array([2, 6, 5])),
    ]
    assert cost.dense_bound(shares[0]["src"], shares[0]["dst"]) == 6
    assert cost.dense_bound(shares[1]["src"], shares[1]["dst"]) is None
    outputs = execute(partial(shares_main, shares=shares, method="numpy"), workers=2)
    assert found_labels(outputs) == {0: 0, 1: 0, 2: 0, 3: 0, 6: 0, -7: -7, 4: -7, 5: -7}


@settings(max_examples=40, deadline=None)
@given(
    shares=st.lists(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=40), min_size=1, max_size=3),
    peers=st.integers(1, 4),
    first=st.booleans(),
)
def test_merging_dense_columns_gives_what_grouping_pairs_gives(
    shares: list[list[tuple[int, int]]], peers: int, first: bool
) -> None:
    """merge_dense (one minimum per column) against representatives (grouping pairs by node) for each owner."""
    columns: list[np.ndarray] = []
    for share in shares:
        src, dst = np.array([a for a, _ in share], np.int64), np.array([b for _, b in share], np.int64)
        bound = cost.dense_bound(src, dst)
        if bound is not None:
            found = cost.dense_columns(src, dst, bound, "numpy", peers)
            assert np.array_equal(
                np.sort(cost.concat([cost.dense_pairs(c) for c in found], cost.PAIRS)),
                cost.local_pairs(src, dst, "numpy"),
            )
            columns.extend(found)
    for dest in range(peers):
        mine = [column for column in columns if int(column["dest"][0]) == dest]
        if not mine:
            continue
        labels, contracted = cost.merge_dense(mine, first)
        pairs = cost.concat([cost.dense_pairs(column) for column in mine], cost.PAIRS)
        expected_labels_, expected_edges = cost.representatives(pairs, first)
        got = cost.dense_pairs(labels) if first else labels
        assert sorted(got.tolist()) == sorted(expected_labels_.tolist())
        assert sorted(contracted.tolist()) == sorted(expected_edges.tolist())


@settings(max_examples=40, deadline=None)
@given(
    pointers=st.lists(st.tuples(st.integers(-5, 300), st.integers(-5, 300)), max_size=30),
    values=st.lists(st.integers(-5, 300) | st.integers(2**40, 2**41), max_size=30),
)
def test_relabel_by_table_and_by_search_agree(pointers: list[tuple[int, int]], values: list[int]) -> None:
    """A label that is a pointer's node becomes its root; any other stays, whichever way it is looked up."""
    src, dst = np.array([a for a, _ in pointers], np.int64), np.array([b for _, b in pointers], np.int64)
    roots = cost.local_pairs(src, dst, "numpy")
    array = np.array(values, np.int64)
    mapping = dict(zip(roots["node"].tolist(), roots["label"].tolist(), strict=True))
    assert cost.relabel(array, roots).tolist() == [mapping.get(value, value) for value in values]
    small = array[(array >= 0) & (array < 2**31 - 1)]
    assert cost.relabel(small.astype(np.int32), roots).tolist() == [mapping.get(v, v) for v in small.tolist()]


def test_three_processes_on_a_skewed_file_match_scipy(tmp_path: Path) -> None:
    """A giant component, singletons and self loops read by three processes (dense columns cross processes)."""
    shares = skewed_shares("giant", 1, seed=11) + skewed_shares("singletons", 1, seed=12)
    edges = np.concatenate(shares)
    path = tmp_path / "edges.tsv"
    write_edges(path, edges["src"], edges["dst"])
    outputs = execute(
        partial(cost.file_worker, path=str(path), method="numpy"), workers=1, processes=3, stall_timeout=STALL
    )
    assert found_labels(outputs) == expected_labels(edges["src"], edges["dst"])


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.integers(0, 5_000), max_size=80))
def test_intern_by_range_agrees_with_intern(values: list[int]) -> None:
    """The mark-per-id interning of non-negative ids gives the sort's ids and inverse."""
    array = np.array(values, np.int64)
    ids, inverse = cost.intern_range(array, int(array.max()) if len(array) else 0)
    expected_ids, expected_inverse = cost.intern(array)
    assert ids.tolist() == expected_ids.tolist() and inverse.tolist() == expected_inverse.tolist()


def test_spread_ids_are_interned_by_range_and_match_scipy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ids spread over ten times their count (the contracted graphs, the pointers) skip the sort."""
    src, dst = random_graph(2_000, 2_000, seed=9, spread=20)
    monkeypatch.setattr(cost, "intern", lambda values: pytest.fail("sorted ids that a mark per id interns"))
    pairs = cost.local_pairs(src, dst, "numpy")
    assert dict(zip(pairs["node"].tolist(), pairs["label"].tolist(), strict=True)) == expected_labels(src, dst)


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("shape", ["giant", "outlier"])
def test_columns_longer_than_a_row_travel_in_pieces(monkeypatch: pytest.MonkeyPatch, workers: int, shape: str) -> None:
    """Dense columns cut into rows of 7 labels (64 MiB in the example) still give every node its label."""
    monkeypatch.setattr(cost, "COLUMN_ROWS", 7)
    shares = skewed_shares(shape, workers, seed=workers)
    src, dst = np.concatenate(shares)["src"], np.concatenate(shares)["dst"]
    small = (src >= 0) & (src < 2**31) & (dst >= 0) & (dst < 2**31)
    bound = cost.dense_bound(src[small], dst[small])
    assert bound is not None and bound > 7 * workers, "the columns need several rows"
    pieces = cost.dense_columns(src[small], dst[small], bound, "numpy", workers)
    assert len(pieces) > workers and {int(piece["start"][0]) for piece in pieces} > {0}
    outputs = execute(partial(shares_main, shares=shares, method="numpy"), workers=workers)
    assert found_labels(outputs) == union_find_labels(src, dst)


ARROW_OR_NOT = [pytest.param(True, id="arrow"), pytest.param(False, id="python")]


@pytest.mark.parametrize("arrow", ARROW_OR_NOT)
@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize(
    ("bad", "shown"),
    [
        (b"5 x\n", "5 x"),
        (b"5\t6\t7\n", "5\\t6\\t7"),
        (b"5\n", "5"),
        (b"1\t99999999999999999999\n", "1\\t9999"),
        (b"5\n6\t7\t8\n", "5"),  # two bad lines whose fields make whole pairs
    ],
)
def test_a_bad_line_of_a_numeric_edge_file_is_named_with_its_byte_offset(
    tmp_path: Path, gz: bool, bad: bytes, shown: str, arrow: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime.errors import FileSourceError

    monkeypatch.setattr(cost, "ARROW_CSV", arrow and cost.ARROW_CSV)

    text = b"1\t2\n3\t4\n" + bad + b"6\t7\n8\t9\n"
    path = tmp_path / ("edges.tsv.gz" if gz else "edges.tsv")
    path.write_bytes(gzip.compress(text) if gz else text)
    for peers in (1, 2, 3):
        refused = []
        for index in range(peers):
            try:
                cost.share_edges(path, index, peers)
            except FileSourceError as error:
                refused.append(str(error))
        assert refused, peers
        refused = [message for message in refused if "byte 8 " in message]
        assert len(refused) == 1, (peers, refused)  # only the share holding the line names it
        assert str(path) in refused[0] and "the line at byte 8 " in refused[0] and shown in refused[0]
        assert "two integers" in refused[0]


def test_dense_columns_of_two_owners_on_one_worker_are_refused() -> None:
    from scopes.errors import BatchError

    src, dst = np.array([0, 2], np.int64), np.array([1, 3], np.int64)
    columns = cost.dense_columns(src, dst, cost.dense_bound(src, dst), "numpy", 2)
    assert sorted(int(column["dest"][0]) for column in columns) == [0, 1]  # one column for each owner
    with pytest.raises(BatchError, match=r"several owners .* \[\(0, 2\), \(1, 2\)\]"):
        cost.dense_rows(columns)


@pytest.mark.parametrize("arrow", ARROW_OR_NOT)
@pytest.mark.parametrize(
    "text",
    [b"1\t2\n\n3\t4\n   \n5\t6", b"1\t2\n3  4\r\n5 6\n", b"-1\t2\n3\t-9223372036854775808\n5\t6\n"],
    ids=["blank lines", "spaces and CRLF", "negative"],
)
def test_numeric_edge_files_parse_alike_with_and_without_arrow(
    tmp_path: Path, text: bytes, arrow: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cost, "ARROW_CSV", arrow and cost.ARROW_CSV)
    path = tmp_path / "edges.tsv"
    path.write_bytes(text)
    edges = cost.share_edges(path, 0, 1)
    pairs = [line.split() for line in text.splitlines() if line.strip()]
    assert edges["src"].tolist() == [int(a) for a, _ in pairs] and edges["dst"].tolist() == [int(b) for _, b in pairs]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1)), max_size=30))
def test_arrow_and_python_parse_the_same_pairs(pairs: list[tuple[int, int]]) -> None:
    chunk = "".join(f"{a}\t{b}\n" for a, b in pairs).encode()
    expected = ([a for a, _ in pairs], [b for _, b in pairs])
    found = [cost.parse_ints(chunk)]  # with Arrow's reader when pyarrow is installed
    before, cost.ARROW_CSV = cost.ARROW_CSV, False
    try:
        found.append(cost.parse_ints(chunk))
    finally:
        cost.ARROW_CSV = before
    for src, dst in found:
        assert src.dtype == dst.dtype == np.int64
        assert (src.tolist(), dst.tolist()) == expected


def _reference_pairs(chunk: bytes) -> list[tuple[int, int]] | None:
    """The pairs of ``chunk`` read line by line, or ``None`` when some non-blank line is not two 64-bit integers."""
    pairs = []
    for line in chunk.splitlines():
        fields = line.split()
        if not fields:
            continue
        try:
            values = [int(field) for field in fields]
        except ValueError:
            return None
        if len(values) != 2 or not all(-(2**63) <= value < 2**63 for value in values):
            return None
        pairs.append((values[0], values[1]))
    return pairs


@settings(max_examples=300, deadline=None)
@example(pieces=[b"5", b"\n", b"6", b"\t", b"23", b"\t", b"1", b"\n"])  # two bad lines whose fields make two pairs
@example(pieces=[b"1_0", b"\t", b"+5", b"\r\n", b" ", b"-4", b"\t", b"23"])  # what int() accepts, CRLF, no last newline
@example(pieces=[b"0x1f", b"\t", b"1", b"\n"])  # hexadecimal: Arrow's reader took it for 31
@given(
    st.lists(
        st.sampled_from(
            [b"1", b"23", b"-4", b"9" * 20, b"x", b"+5", b"1_0", b"0x1f", b"1e3", b"-", b"\x0c", b"\t", b" ", b"\n"]
            + [b"\r\n"]
        )
    )
)
def test_any_bytes_parse_to_the_line_by_line_pairs_or_are_refused(pieces: list[bytes]) -> None:
    """Fuzz: whatever the bytes, the parser (with Arrow's reader and without) gives the pairs a line-by-line
    reading gives, or refuses with FileSourceError; it never crashes otherwise and never pairs across lines."""
    from runtime.errors import FileSourceError

    chunk = b"".join(pieces)
    expected = _reference_pairs(chunk)
    before = cost.ARROW_CSV
    try:
        for arrow in {before, False}:
            cost.ARROW_CSV = arrow
            try:
                src, dst = cost.parse_ints(chunk, "fuzz.tsv", 0)
            except FileSourceError as error:
                assert expected is None, (chunk, error)
                assert "fuzz.tsv: the line at byte " in str(error)
            else:
                assert expected is not None, chunk
                assert list(zip(src.tolist(), dst.tolist(), strict=True)) == expected, (arrow, chunk)
    finally:
        cost.ARROW_CSV = before


def test_the_command_names_a_bad_line_or_a_missing_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.tsv"
    # One bad line: whichever worker's share holds it, the error names the same line.
    # (With a bad line in each share, the first worker to fail would decide.)
    bad.write_bytes(b"1\t2\n5\n3\t4\n6\t7\n")
    assert cost.main(["--input", str(bad), "-w", "2"]) == 1
    error = capsys.readouterr().err
    assert error.startswith("connected_components_cost: worker ") and "FileSourceError" in error
    assert f"{bad}: the line at byte 4 is not two integers" in error and "Traceback" not in error
    with pytest.raises(SystemExit) as exit_:
        cost.main(["--input", str(tmp_path / "missing.tsv")])
    assert exit_.value.code == 2
    assert "missing.tsv: no such file" in capsys.readouterr().err
