"""The columnar WCC and SCC examples (NumPy batches) against networkx: random graphs and the Debian graph.

The two-process test sends NumPy arrays between processes, so it needs the wire
encoding of arrays (branch wip-colio); the rest runs on colcore's columnar API alone.
"""

from __future__ import annotations

import gzip
import importlib
import importlib.util
import sys
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from helpers.example_loader import load_example
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import execute

nx: Any = importlib.import_module("networkx")
ROOT = Path(__file__).resolve().parent.parent
DEBIAN = ROOT / "examples" / "data" / "debian-bookworm-depends.tsv.gz"


wcc = load_example("connected_components_columnar")
scc = load_example("scc_columnar")


def interned(edges: list[tuple[int, int]]) -> Any:
    """The graph of ``edges`` through the examples' own reading path: names, then ``np.unique``."""
    flat = np.array([str(node).encode() for edge in edges for node in edge], dtype=np.bytes_)
    return wcc.intern(flat)


def expected(graph: Any, components: Any) -> set[frozenset[int]]:
    """networkx's components (``components(DiGraph)``) as sets of the graph's ids."""
    digraph = nx.DiGraph()
    digraph.add_edges_from(graph.name_pairs())
    return wcc.as_ids(components(digraph), graph)


def weak(graph: Any, workers: int) -> set[frozenset[int]]:
    labels = wcc.combine(execute(partial(wcc.wcc_worker, graph=graph), workers=workers), graph.nodes)
    assert (labels >= 0).all(), "a node got no label"
    return wcc.components_of(labels)


def strong(graph: Any, workers: int) -> set[frozenset[int]]:
    outputs = execute(partial(scc.scc_worker, graph=graph), workers=workers)
    reported = [node for nodes, _, _ in outputs for node in nodes]
    assert len(reported) == len(set(reported)), "a node was reported twice"
    labels, _ = scc.combine(outputs, graph.nodes)
    return wcc.components_of(labels)


graphs = st.integers(1, 25).flatmap(
    lambda nodes: st.lists(st.tuples(st.integers(0, nodes - 1), st.integers(0, nodes - 1)), min_size=1, max_size=60)
)


# ---------------------------------------------------------------------- small random graphs


@settings(max_examples=25, deadline=None)
@given(graphs, st.sampled_from([1, 2]))
def test_weakly_connected_components_equal_networkx(edges: list[tuple[int, int]], workers: int) -> None:
    graph = interned(edges)
    assert weak(graph, workers) == expected(graph, nx.weakly_connected_components)


@settings(max_examples=25, deadline=None)
@given(graphs, st.sampled_from([1, 2]))
def test_strongly_connected_components_equal_networkx(edges: list[tuple[int, int]], workers: int) -> None:
    graph = interned(edges)
    assert strong(graph, workers) == expected(graph, nx.strongly_connected_components)


def test_a_cycle_with_a_tail_and_a_self_loop() -> None:
    edges = [(0, 1), (1, 2), (2, 0), (2, 3), (3, 3), (4, 3), (5, 6)]
    graph = interned(edges)
    ids = {int(name): number for number, name in enumerate(graph.names.tolist())}
    cycle = frozenset(ids[v] for v in (0, 1, 2))
    singles = {frozenset([ids[v]]) for v in (3, 4, 5, 6)}
    for workers in (1, 2, 3):
        assert strong(graph, workers) == {cycle} | singles
        assert weak(graph, workers) == {cycle | {ids[3], ids[4]}, frozenset([ids[5], ids[6]])}


def test_reading_skips_lines_without_a_tab_and_extra_fields(tmp_path: Path) -> None:
    path = tmp_path / "edges.tsv"
    path.write_bytes(b"a\tb\nlonely\nb\tc\textra\nc\ta\n")
    graph = wcc.intern(wcc.read_names(path, None))
    assert graph.names.tolist() == [b"a", b"b", b"c"]
    assert list(zip(graph.src.tolist(), graph.dst.tolist(), strict=True)) == [(0, 1), (1, 2), (2, 0)]
    limited = wcc.intern(wcc.read_names(path, 2))
    assert limited.names.tolist() == [b"a", b"b"]


@pytest.mark.parametrize("bound", [1, 300, 1 << 16, (1 << 16) + 1, 1 << 20])
def test_sort_order_sorts_keys_below_any_bound(bound: int) -> None:
    keys = np.random.default_rng(bound).integers(0, bound, 5000).astype(np.int32)
    order = wcc.sort_order(keys, bound)
    assert sorted(order.tolist()) == list(range(len(keys)))
    assert (np.diff(keys[order]) >= 0).all()


def test_rows_gathers_csr_ranges() -> None:
    starts, stops = np.array([0, 5, 5, 2]), np.array([2, 5, 8, 3])
    assert wcc.rows(starts, stops).tolist() == [0, 1, 5, 6, 7, 2]
    assert wcc.rows(starts[:0], stops[:0]).tolist() == []


# ---------------------------------------------------------------------- the Debian graph


@pytest.fixture(scope="module")
def debian() -> tuple[Any, set[frozenset[int]], set[frozenset[int]]]:
    """The interned Debian graph and networkx's weakly and strongly connected components of it."""
    graph = wcc.load_graph(DEBIAN)
    digraph = nx.DiGraph()
    digraph.add_edges_from(graph.name_pairs())
    return (
        graph,
        wcc.as_ids(nx.weakly_connected_components(digraph), graph),
        wcc.as_ids(nx.strongly_connected_components(digraph), graph),
    )


def test_debian_on_one_worker(debian: tuple[Any, set[frozenset[int]], set[frozenset[int]]]) -> None:
    graph, weakly, strongly = debian
    assert len(weakly) == 203
    assert weak(graph, 1) == weakly
    assert strong(graph, 1) == strongly
    assert sum(len(c) > 1 for c in strongly) == 55


def test_debian_on_two_processes(debian: tuple[Any, set[frozenset[int]], set[frozenset[int]]]) -> None:
    graph, weakly, strongly = debian
    run = partial(execute, processes=2, workers=1, stall_timeout=60)
    weak_labels = wcc.combine(run(partial(wcc.file_worker, path=str(DEBIAN), limit=None)), graph.nodes)
    assert wcc.components_of(weak_labels) == weakly
    strong_labels, rounds = scc.combine(run(partial(scc.file_worker, path=str(DEBIAN), limit=None)), graph.nodes)
    assert wcc.components_of(strong_labels) == strongly
    assert rounds == [274_855, 2_827, 178, 168]


# ---------------------------------------------------------------------- the benchmark's data structure


@pytest.mark.bench  # benchmarks/graphs.py against scipy and igraph: the bench extra
def test_benchmark_measures_every_variant_side_by_side() -> None:
    graphs_benchmark = load_benchmark()
    result = graphs_benchmark.measure(repeat=2, limit=3000)
    assert result["graph"]["edges"] == 3000 and result["repeat"] == 2
    assert result["agree"] == {
        "columnar wcc": True,
        "record-wise wcc": True,
        "columnar scc": True,
        "record-wise scc": True,
        "scipy wcc": True,
        "scipy scc": True,
        "igraph wcc": True,
        "igraph scc": True,
    }
    for row in result["rows"].values():
        assert len(row["seconds"]) == 2 and row["min"] <= row["median"] <= row["max"]
    for kind in ("wcc", "scc"):
        build = result["rows"][f"networkx {kind} + build"]["seconds"]
        rows = result["rows"]
        parts = zip(rows["networkx build"]["seconds"], rows[f"networkx {kind}"]["seconds"], strict=True)
        assert build == [a + b for a, b in parts]
        assert f"columnar {kind} + intern / networkx {kind} + build" in result["ratios"]
        for library in ("scipy", "igraph"):  # the single-threaded libraries a user with a static graph picks
            parts = zip(rows[f"{library} build"]["seconds"], rows[f"{library} {kind}"]["seconds"], strict=True)
            assert rows[f"{library} {kind} + build"]["seconds"] == [a + b for a, b in parts]
    assert "| columnar scc + intern |" in graphs_benchmark.table(result)


def load_benchmark() -> ModuleType:
    """Import ``benchmarks/graphs.py``."""
    spec = importlib.util.spec_from_file_location("benchmark_graphs", ROOT / "benchmarks" / "graphs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------- the command lines


@pytest.mark.parametrize("name", ["connected_components_columnar", "scc_columnar"])
def test_command_line_checks_against_networkx(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    example = load_example(name)
    assert example.main(["--check", "--limit-edges", "3000", "-w", "2"]) == 0
    out = capsys.readouterr().out
    assert "read " in out and "intern " in out and "compute " in out and "networkx build + " in out
    assert ": OK" in out
    assert example.main(["--check", "--limit-edges", "0"]) == 0, "an empty graph has no components"
    with pytest.raises(SystemExit) as exit_info:
        example.main(["--limit-edges", "-1"])
    assert exit_info.value.code == 2
    assert "--limit-edges must not be negative" in capsys.readouterr().err


def test_arrow_interning_gives_np_unique_s_ids_and_names(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyarrow")
    rng = np.random.default_rng(7)
    alphabet = [b"", b"a", b"b", b"\xff", b"\xc3\xa9", b"z9", b"-"]
    flat = np.array([b"".join(rng.choice(alphabet, 3)) for _ in range(4000)], dtype=np.bytes_)
    with_arrow = wcc.intern(flat)
    read = wcc.intern(wcc.pa.array(flat.tolist(), wcc.pa.binary()))  # what read_names gives with pyarrow
    monkeypatch.setattr(wcc, "ARROW", False)
    plain = wcc.intern(flat)
    for graph in (with_arrow, read):
        assert graph.names.dtype.kind == "S" and graph.names.tolist() == plain.names.tolist()
        assert graph.src.dtype == plain.src.dtype == np.int32
        assert np.array_equal(graph.src, plain.src) and np.array_equal(graph.dst, plain.dst)


@pytest.mark.parametrize("name", ["connected_components_columnar", "scc_columnar"])
def test_command_line_names_an_unreadable_input_in_one_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = load_example(name)
    for path, words in ((tmp_path / "missing.tsv.gz", "no such file"), (tmp_path, "not a file")):
        with pytest.raises(SystemExit) as exit_info:
            example.main(["--input", str(path)])
        assert exit_info.value.code == 2
        assert f"--input {path}: {words}" in capsys.readouterr().err
    whole = gzip.compress(b"a\tb\nb\tc\n" * 1000)
    damaged = {"truncated.gz": whole[: len(whole) // 2], "plain.gz": b"a\tb\n"}
    for file_name, data in damaged.items():
        path = tmp_path / file_name
        path.write_bytes(data)
        with pytest.raises(SystemExit) as exit_info:
            example.main(["--input", str(path)])
        assert exit_info.value.code == 1
        error = capsys.readouterr().err
        assert f"cannot read --input {path}: " in error and "Traceback" not in error
