"""Weakly and strongly connected components of the Debian graph: pytimely columnar beside networkx, scipy, igraph.

:func:`measure` times every variant ``repeat`` times, interleaved, on
``examples/data/debian-bookworm-depends.tsv.gz`` (274,855 edges, 63,597 packages):
``read`` (gunzip and split into names, in no total), ``networkx build`` (a ``DiGraph``
of the name pairs), ``networkx wcc``/``scc``, ``intern`` (``np.unique`` over the names:
pytimely's "build"), ``columnar wcc``/``scc`` (``examples/connected_components_columnar.py``
and ``examples/scc_columnar.py`` on 1 worker, ``execute`` included), ``scipy``/``igraph``
``build``, ``wcc`` and ``scc`` on the interned ids when installed, and, unless
``record_wise=False``, ``examples/connected_components.py`` and ``examples/scc.py``
record-wise.  ``X + build`` / ``X + intern`` rows sum the two per repetition.

The result is plain data (JSON-serialisable): ``{"graph": {"path", "edges", "nodes"},
"repeat", "rows": {name: {"seconds": [...], "median", "min", "max", "spread"}},
"ratios": {name: float}, "agree": {name: bool}, "goal": {"wcc": bool, "scc": bool}}``;
``agree`` says whether each variant's components equal networkx's.  ``python
benchmarks/graphs.py`` prints a table (``--repeat``, ``--no-record-wise``,
``--limit-edges``, ``--json``).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import json
import statistics
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from time import perf_counter
from types import ModuleType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing pytimely
    sys.path.insert(0, str(ROOT))
if str(ROOT / "benchmarks") not in sys.path:  # the harness, when this module is loaded from a file
    sys.path.append(str(ROOT / "benchmarks"))

from harness import Log, Metric, Size, Skip, WrongAnswer, measured, median  # noqa: E402

from runtime.execute import execute  # noqa: E402

DEFAULT_INPUT = ROOT / "examples" / "data" / "debian-bookworm-depends.tsv.gz"
KINDS = ("wcc", "scc")


def _example(name: str) -> ModuleType:
    """Import ``examples/NAME.py`` as ``example_NAME`` (as the tests do)."""
    module_name = f"example_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _summary(seconds: list[float]) -> dict[str, Any]:
    median = statistics.median(seconds)
    return {
        "seconds": seconds,
        "median": median,
        "min": min(seconds),
        "max": max(seconds),
        "spread": (max(seconds) - min(seconds)) / median if median else 0.0,
    }


def measure(
    repeat: int = 5, path: Path | str = DEFAULT_INPUT, limit: int | None = None, record_wise: bool = True
) -> dict[str, Any]:
    """Time every variant ``repeat`` times, interleaved; return the plain data the module docstring describes."""
    if repeat < 1:
        raise ValueError(f"measure needs repeat >= 1, got {repeat}")
    nx = importlib.import_module("networkx")
    wcc = _example("connected_components_columnar")
    scc = _example("scc_columnar")
    records = {"wcc": _example("connected_components"), "scc": _example("scc")} if record_wise else {}
    algorithms = {"wcc": nx.weakly_connected_components, "scc": nx.strongly_connected_components}
    others = _other_libraries()

    times: dict[str, list[float]] = {}
    agree: dict[str, bool] = {}
    built: dict[str, Any] = {}

    def timed(name: str, function: Callable[[], Any], plus: str | None = None) -> Any:
        def once() -> tuple[float, Any]:
            gc.collect()
            start = perf_counter()
            found = function()
            return perf_counter() - start, found

        seconds, result = measured(once)
        times.setdefault(name, []).append(seconds)
        if plus is not None:
            times.setdefault(f"{name} + {plus.split()[-1]}", []).append(seconds + times[plus][-1])
        return result

    def run_kind(kind: str, first: bool, graph: Any, digraph: Any, edges: Any, pairs: Any) -> None:
        expected = timed(f"networkx {kind}", lambda: list(algorithms[kind](digraph)), "networkx build")
        found = timed(f"columnar {kind}", lambda: _columnar(kind, graph, wcc, scc), "intern")
        expected_ids = wcc.as_ids(expected, graph) if first else set()
        if first:
            agree[f"columnar {kind}"] = wcc.components_of(found) == expected_ids
        for library, (build_name, components) in others.items():
            labels = timed(f"{library} {kind}", partial(components, built[library], kind), build_name)
            if first:
                agree[f"{library} {kind}"] = wcc.components_of(labels) == _with_singletons(expected_ids, graph.nodes)
        if kind in records:
            example = records[kind]
            found = timed(f"record-wise {kind}", lambda: _record_wise(kind, example, graph, edges, pairs))
            if first:
                agree[f"record-wise {kind}"] = _record_wise_agrees(kind, found, expected_ids, graph, wcc)

    def run_once(first: bool) -> Any:
        flat = timed("read", lambda: wcc.read_names(Path(path), limit))
        graph = timed("intern", lambda: wcc.intern(flat))
        pairs = graph.name_pairs()
        edges = list(zip(graph.src.tolist(), graph.dst.tolist(), strict=True))
        digraph = timed("networkx build", lambda: _networkx_graph(nx, pairs))
        for library, (build_name, _) in others.items():
            built[library] = timed(build_name, partial(_BUILDERS[library], graph))
        for kind in KINDS:
            run_kind(kind, first, graph, digraph, edges, pairs)
        return graph

    graph = run_once(True)
    for _ in range(repeat - 1):
        run_once(False)

    rows = {name: _summary(seconds) for name, seconds in times.items()}
    medians = {name: row["median"] for name, row in rows.items()}
    ratios: dict[str, float] = {}
    for kind in KINDS:
        ratios[f"columnar {kind} + intern / networkx {kind} + build"] = (
            medians[f"columnar {kind} + intern"] / medians[f"networkx {kind} + build"]
        )
        ratios[f"columnar {kind} / networkx {kind}"] = medians[f"columnar {kind}"] / medians[f"networkx {kind}"]
        if kind in records:
            ratios[f"record-wise {kind} / networkx {kind} + build"] = (
                medians[f"record-wise {kind}"] / medians[f"networkx {kind} + build"]
            )
    return {
        "graph": {"path": str(path), "edges": len(graph.src), "nodes": graph.nodes},
        "repeat": repeat,
        "rows": rows,
        "ratios": ratios,
        "agree": agree,
        "goal": {kind: ratios[f"columnar {kind} + intern / networkx {kind} + build"] <= 1.0 for kind in KINDS},
    }


def _scipy_matrix(graph: Any) -> Any:
    from scipy.sparse import csr_matrix  # type: ignore[import-untyped]

    return csr_matrix((np.ones(len(graph.src), np.int8), (graph.src, graph.dst)), shape=(graph.nodes, graph.nodes))


def _scipy_components(matrix: Any, kind: str) -> np.ndarray:
    from scipy.sparse.csgraph import connected_components  # type: ignore[import-untyped]

    return connected_components(matrix, directed=True, connection="weak" if kind == "wcc" else "strong")[1]


def _igraph_graph(graph: Any) -> Any:
    igraph = importlib.import_module("igraph")
    return igraph.Graph(n=graph.nodes, edges=np.column_stack([graph.src, graph.dst]), directed=True)


def _igraph_components(built: Any, kind: str) -> np.ndarray:
    return np.asarray(built.connected_components(mode="weak" if kind == "wcc" else "strong").membership)


_BUILDERS: dict[str, Callable[[Any], Any]] = {"scipy": _scipy_matrix, "igraph": _igraph_graph}


def _other_libraries() -> dict[str, tuple[str, Callable[[Any, str], np.ndarray]]]:
    """The installed single-threaded libraries beside networkx: name -> (build row name, components function)."""
    found: dict[str, tuple[str, Callable[[Any, str], np.ndarray]]] = {}
    for library, components, module in (
        ("scipy", _scipy_components, "scipy.sparse.csgraph"),
        ("igraph", _igraph_components, "igraph"),
    ):
        try:
            importlib.import_module(module)
        except ImportError:
            continue
        found[library] = (f"{library} build", components)
    return found


def missing_libraries() -> list[str]:
    """The baselines beside networkx that are not installed (``make bench`` installs them)."""
    return [library for library in ("scipy", "igraph") if library not in _other_libraries()]


def _with_singletons(components: set[frozenset[int]], nodes: int) -> set[frozenset[int]]:
    """``components`` plus a component of its own for every node in none of them (scipy and igraph label all)."""
    covered = set().union(*components) if components else set()
    return components | {frozenset([node]) for node in range(nodes) if node not in covered}


def _networkx_graph(nx: ModuleType, pairs: list[tuple[str, str]]) -> Any:
    graph = nx.DiGraph()
    graph.add_edges_from(pairs)
    return graph


def _columnar(kind: str, graph: Any, wcc: ModuleType, scc: ModuleType) -> Any:
    """The component label of every node, by the columnar example on 1 worker."""
    if kind == "wcc":
        return wcc.combine(execute(partial(wcc.wcc_worker, graph=graph), workers=1), graph.nodes)
    return scc.combine(execute(partial(scc.scc_worker, graph=graph), workers=1), graph.nodes)[0]


def _record_wise(kind: str, example: ModuleType, graph: Any, edges: list[tuple[int, int]], pairs: Any) -> Any:
    """``examples/connected_components.py`` on the interned ids, or ``examples/scc.py`` on the names; 1 worker."""
    if kind == "wcc":
        return example.run(graph.nodes, edges)
    return example.run_scc(lambda index, peers: pairs[index::peers], 1)[0]


def _record_wise_agrees(kind: str, found: Any, expected: set[frozenset[int]], graph: Any, wcc: ModuleType) -> bool:
    if kind == "wcc":
        labels = np.array([found[node] for node in range(graph.nodes)])
        return bool(wcc.components_of(labels) == expected)
    ids = {name.decode(): number for number, name in enumerate(graph.names.tolist())}
    cycles = {frozenset(ids[name] for name in component) for component in found}
    return cycles == {component for component in expected if len(component) > 1}


def table(result: dict[str, Any]) -> str:
    """The result of :func:`measure` as a Markdown table, with its ratios."""
    graph = result["graph"]
    lines = [
        f"Debian graph: {graph['edges']:,} edges, {graph['nodes']:,} nodes; "
        f"median of {result['repeat']} repetitions, 1 worker",
        "",
        "| variant | median s | min s | max s | spread | agrees with networkx |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, row in result["rows"].items():
        agrees = result["agree"].get(name, "")
        lines.append(
            f"| {name} | {row['median']:.3f} | {row['min']:.3f} | {row['max']:.3f} | {row['spread']:.0%} | {agrees} |"
        )
    lines += ["", "| ratio | value |", "| --- | ---: |"]
    lines += [f"| {name} | {value:.2f} |" for name, value in result["ratios"].items()]
    goal = result["goal"]
    lines += [
        "",
        "goal (columnar + intern <= networkx + build): "
        + ", ".join(f"{kind} {'met' if met else 'MISSED'}" for kind, met in goal.items()),
    ]
    return "\n".join(lines)


def bench(size: Size, log: Log) -> dict[str, Metric]:
    """The workload for ``run.py``: :func:`measure` without the record-wise examples; every variant's answer
    checked against networkx; each row as a metric (``columnar_wcc_intern`` for ``columnar wcc + intern``)."""
    try:
        importlib.import_module("networkx")
    except ImportError:
        raise Skip("networkx is not installed (`make bench` installs it)") from None
    log("  networkx, scipy, igraph and pytimely columnar on the Debian graph ...")
    result = measure(size.repeat, record_wise=False, limit=20_000 if size.quick else None)
    disagree = [name for name, same in result["agree"].items() if not same]
    if disagree:
        raise WrongAnswer(f"connected components: {', '.join(disagree)} disagree with networkx")
    edges = result["graph"]["edges"]
    found = {
        name.replace(" + ", " ").replace(" ", "_"): Metric(row["median"], "s", f"{name}, {edges:,} edges")
        for name, row in result["rows"].items()
    }
    for kind in KINDS:
        read = [
            sum(pair)
            for pair in zip(
                result["rows"]["read"]["seconds"], result["rows"][f"columnar {kind} + intern"]["seconds"], strict=True
            )
        ]
        found[f"columnar_{kind}_read"] = Metric(median(read), "s", f"columnar {kind}, reading and interning included")
    return found


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: print the table (or the JSON); exit status 1 if a variant disagrees with networkx."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="repetitions of every variant (default 5)")
    parser.add_argument("--input", type=Path, default=DEFAULT_INPUT, help="gzip TSV of 'package<TAB>dependency'")
    parser.add_argument("--limit-edges", type=int, default=None, help="read only the first K lines")
    parser.add_argument("--no-record-wise", action="store_true", help="skip the record-wise examples")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    result = measure(args.repeat, args.input, args.limit_edges, not args.no_record_wise)
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0 if all(result["agree"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
