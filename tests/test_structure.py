"""The shape of the product: every import read, no import cycles, layers only downwards, public names kept.

Every import of the three packages is read with :mod:`ast`: at module level,
inside functions (an edge all the same: it runs when the function is called)
and under ``if TYPE_CHECKING:`` (an edge for the reader and the type checker).
The modules must import each other without a cycle, and the layers only one
way: ``viz`` -> ``runtime`` -> ``scopes`` (``scopes`` imports neither of the
others, ``runtime`` does not import ``viz``).

Any cycle fails, whatever kind of import closes it: an import under ``if
TYPE_CHECKING:`` is still one module needing another, so it is counted like any
other.  ``KNOWN_CYCLES`` could name a cycle to allow while work on it goes on; it
is empty.

``Stream`` and ``ScopeBuilder`` are a facade over one module per operator family;
the families are written against :mod:`scopes.core` (timely's plain ``Stream``
struct and its scope) and never name the facade, not even in annotations.  The
modules that build streams (``builder``, ``operator_builder``, ``stream``, ``core``
and the families) import nothing inside functions.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCOPES = ROOT / "scopes"
PACKAGES = ("scopes", "runtime", "viz")
"""The product's packages, lowest layer first: each may import only those before it (and itself)."""

STREAM_MODULES = [
    "builder",
    "core",
    "capture",
    "input_handle",
    "loops",
    "sources",
    "per_batch",
    "operator_builder",
    "operator",
    "stream",
    "per_record",
    "routing",
    "per_time",
    "generic_operators",
    "probes",
    "nesting",
    "signatures",
]

KNOWN_CYCLES: list[frozenset[str]] = []
"""Import cycles that exist today (each the set of its modules), allowed until the work named beside it."""


@dataclass(frozen=True)
class Import:
    """One import of a product module: who imports what, on which line, and where the statement sits."""

    importer: str
    imported: str
    line: int
    kind: str
    """``"module"`` (runs on import), ``"function"`` (runs when called) or ``"typing"`` (``if TYPE_CHECKING:``)."""


def product_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the product packages by dotted name (a package by its own name), with its file."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _typing_guard(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def read_imports(name: str, source: str, modules: Iterable[str], is_package: bool = False) -> list[Import]:
    """Every import of a module in ``modules`` that the module ``name`` (with ``source``) makes, wherever it sits.

    ``from P import a`` is an import of ``P.a`` when that is a module, else of
    ``P``; relative imports are resolved against ``name``.  Imports of
    anything outside ``modules`` (the standard library, third parties) are left out.
    """
    known = set(modules)
    found: list[Import] = []

    def target(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    def record(node: ast.Import | ast.ImportFrom, kind: str) -> None:
        if isinstance(node, ast.Import):
            targets = [target(alias.name) for alias in node.names]
        else:
            if node.level:
                base = name if is_package else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else target(base) for alias in node.names
            ]
        for imported in dict.fromkeys(targets):
            if imported is not None and imported != name:
                found.append(Import(name, imported, node.lineno, kind))

    def visit(node: ast.AST, kind: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                record(child, kind)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, "typing" if kind == "typing" else "function")
            elif isinstance(child, ast.If) and _typing_guard(child):
                for statement in child.body:
                    visit(ast.Module(body=[statement], type_ignores=[]), "typing")
                for statement in child.orelse:
                    visit(ast.Module(body=[statement], type_ignores=[]), kind)
            else:
                visit(child, kind)

    visit(ast.parse(source), "module")
    return found


def all_imports(root: Path = ROOT) -> list[Import]:
    """Every import between product modules."""
    modules = product_modules(root)
    found = []
    for name, path in modules.items():
        found.extend(read_imports(name, path.read_text(), modules, path.name == "__init__.py"))
    return found


def layer_violations(imports: Iterable[Import]) -> list[str]:
    """Imports against ``viz`` -> ``runtime`` -> ``scopes``, as ``file:line`` sentences."""
    rank = {package: index for index, package in enumerate(PACKAGES)}
    return [
        f"{i.importer} imports {i.imported} ({i.kind}-level import, line {i.line}): "
        f"{i.importer.split('.')[0]} may not import {i.imported.split('.')[0]}"
        for i in imports
        if rank[i.imported.split(".")[0]] > rank[i.importer.split(".")[0]]
    ]


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (each holds at least one cycle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        # iterative Tarjan: (node, its remaining successors)
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def unexpected_cycles(imports: Iterable[Import], known: Iterable[frozenset[str]] = KNOWN_CYCLES) -> list[str]:
    """What is wrong with the import graph's cycles: new ones, and allow-list entries that no longer hold.

    Every import is an edge, at module level, inside a function or under ``if TYPE_CHECKING:``.
    """
    imports = list(imports)
    problems = []
    graph: dict[str, set[str]] = {}
    for i in imports:
        graph.setdefault(i.importer, set()).add(i.imported)
    found = cycles(graph)
    allowed = list(known)
    for component in found:
        if component not in allowed:
            lines = sorted(
                f"{i.importer} -> {i.imported} ({i.kind}, line {i.line})"
                for i in imports
                if i.importer in component and i.imported in component
            )
            problems.append("import cycle among " + ", ".join(sorted(component)) + ": " + "; ".join(lines))
    for component in allowed:
        if component not in found:
            problems.append(
                "KNOWN_CYCLES lists " + ", ".join(sorted(component)) + ", which is no longer a cycle: remove it"
            )
    return problems


def test_every_product_module_imports_the_others_without_a_new_cycle() -> None:
    problems = unexpected_cycles(all_imports())
    assert problems == [], "\n".join(problems)


def test_layers_import_only_downwards_viz_runtime_scopes() -> None:
    violations = layer_violations(all_imports())
    assert violations == [], "\n".join(violations)


def test_the_reader_finds_imports_inside_functions_and_under_type_checking() -> None:
    source = (
        "from __future__ import annotations\n"
        "import os\n"
        "from typing import TYPE_CHECKING\n"
        "import runtime.communication.wire\n"
        "from scopes import order, Stream\n"
        "from . import codec\n"
        "if TYPE_CHECKING:\n"
        "    from viz.model import Model\n"
        "else:\n"
        "    from scopes.hooks import ProgressObserver\n"
        "def f():\n"
        "    from runtime.execute import execute\n"
        "    def g():\n"
        "        import viz\n"
        "class C:\n"
        "    def m(self):\n"
        "        from .errors import TimelyRuntimeError\n"
    )
    modules = [
        "scopes",
        "scopes.order",
        "scopes.hooks",
        "runtime",
        "runtime.communication.wire",
        "runtime.codec",
        "runtime.execute",
        "runtime.errors",
        "runtime.worker",
        "viz",
        "viz.model",
    ]
    found = {(i.imported, i.line, i.kind) for i in read_imports("runtime.worker", source, modules)}
    assert found == {
        ("runtime.communication.wire", 4, "module"),
        ("scopes.order", 5, "module"),
        ("scopes", 5, "module"),
        ("runtime.codec", 6, "module"),
        ("viz.model", 8, "typing"),
        ("scopes.hooks", 10, "module"),
        ("runtime.execute", 12, "function"),
        ("viz", 14, "function"),
        ("runtime.errors", 17, "function"),
    }
    assert [v.split(":")[0] for v in layer_violations(read_imports("runtime.worker", source, modules))] == [
        "runtime.worker imports viz.model (typing-level import, line 8)",
        "runtime.worker imports viz (function-level import, line 14)",
    ]


def _imports(*edges: tuple[str, str, str]) -> list[Import]:
    return [Import(a, b, 1, kind) for a, b, kind in edges]


def test_a_new_cycle_fails_and_a_known_one_passes_until_it_is_gone() -> None:
    known = [frozenset({"runtime.a", "runtime.b"})]
    base = _imports(
        ("runtime.a", "runtime.b", "function"),
        ("runtime.b", "runtime.a", "module"),
        ("runtime.b", "scopes.c", "module"),
    )
    assert unexpected_cycles(base, known) == []
    # a new cycle elsewhere, even through a TYPE_CHECKING import
    new = base + _imports(("scopes.c", "scopes.d", "typing"), ("scopes.d", "scopes.c", "module"))
    assert [p.split(":")[0] for p in unexpected_cycles(new, known)] == ["import cycle among scopes.c, scopes.d"]
    # the known cycle grown by one module is a new cycle, and the known one is then reported gone
    grown = base + _imports(("runtime.b", "runtime.e", "module"), ("runtime.e", "runtime.a", "function"))
    problems = unexpected_cycles(grown, known)
    assert len(problems) == 2 and problems[0].startswith("import cycle among runtime.a, runtime.b, runtime.e")
    assert "no longer a cycle" in problems[1]
    # the split removes the cycle: the allow-list entry must go too
    split = _imports(("runtime.a", "runtime.b", "function"))
    assert ["no longer a cycle" in p for p in unexpected_cycles(split, known)] == [True]


def test_a_cycle_closed_only_under_type_checking_is_reported() -> None:
    """A family naming the facade in annotations only, while the facade imports it, is still a cycle."""
    facade = _imports(("scopes.stream", "scopes.family", "module"), ("scopes.family", "scopes.stream", "typing"))
    [problem] = unexpected_cycles(facade, [])
    assert problem.startswith("import cycle among scopes.family, scopes.stream:")
    assert "scopes.family -> scopes.stream (typing, line 1)" in problem
    assert unexpected_cycles(facade[:1], []) == []


@pytest.mark.parametrize("module", STREAM_MODULES)
def test_stream_building_modules_import_nothing_inside_functions(module: str) -> None:
    nested = [i.line for i in all_imports() if i.importer == f"scopes.{module}" and i.kind == "function"]
    assert nested == [], f"scopes/{module}.py imports inside functions at lines {nested}"


@pytest.mark.parametrize(
    "statement",
    [
        "from scopes.builder import ProbeHandle, ProbeOperator, InputHandle, LoopHandle, ScopeBuilder",
        "from scopes.builder import source, to_stream, BuildContext",
        "from scopes.stream import Stream, generic, Operator, UnaryConstructor, BinaryConstructor",
        "from scopes.operator_builder import OperatorBuilder",
        "from scopes import Stream, ProbeHandle, generic, Notificator, Capability",
        "from scopes.probes import ProbeHandle",
        "import scopes.stream",
        "import scopes.operator_builder",
        "import scopes.builder",
        "import scopes.per_record, scopes.routing, scopes.per_time, scopes.generic_operators",
    ],
)
def test_public_names_import_in_a_fresh_interpreter(statement):
    """Each import works first thing in a new interpreter, whatever module is imported first."""
    result = subprocess.run(
        [sys.executable, "-c", statement],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=SCOPES.parent,
    )
    assert result.returncode == 0, result.stderr


def test_probe_handle_is_one_class_wherever_it_is_imported_from():
    from scopes import ProbeHandle as from_package
    from scopes.builder import ProbeHandle as from_builder
    from scopes.probes import ProbeHandle as from_probes

    assert from_package is from_builder is from_probes


def test_the_distribution_ships_every_package_and_subpackage() -> None:
    """pyproject's package list must reach subpackages (a plain list left runtime.spark out of wheels)."""
    import tomllib

    from setuptools import find_packages

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "packages" not in config or isinstance(config["packages"], dict), "list packages with packages.find"
    shipped = set(find_packages(str(ROOT), include=config["packages"]["find"]["include"]))
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("scopes", "runtime", "viz")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert on_disk <= shipped, f"not shipped: {sorted(on_disk - shipped)}"


IMPURE = {"threading", "socket", "selectors", "subprocess", "multiprocessing", "asyncio", "queue", "_thread"}


@pytest.mark.parametrize("path", sorted(SCOPES.rglob("*.py")), ids=lambda path: str(path.relative_to(SCOPES)))
def test_scopes_takes_no_threads_sockets_or_processes(path):
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert not imported & IMPURE, (
        f"{path.relative_to(ROOT)} imports {sorted(imported & IMPURE)}; the runtime hands them in"
    )


def test_a_recorder_made_by_stream_capture_is_locked_by_its_worker():
    """``Stream.capture`` asks its build context for a lock; a worker's context makes real locks."""
    import threading

    from runtime.execute import execute
    from scopes.capture import CaptureRecorder

    def main(worker):
        return worker.dataflow(lambda scope: scope.to_stream([1, 2]).capture())

    [recorder] = execute(main, workers=1)
    assert recorder.finished and recorder.batches() == [(0, [1, 2])]
    assert isinstance(recorder._lock, type(threading.Lock()))
    assert not isinstance(CaptureRecorder()._lock, type(threading.Lock()))  # alone, a recorder takes none


OPTIONAL_PACKAGES = {"pyspark", "pandas", "scipy", "bytewax", "igraph", "networkx", "prometheus_client"}
"""Top-level packages of the optional extras: a module that needs one is left out where it is not installed."""


def test_every_exception_class_derives_from_timely_error_and_lives_in_an_errors_module():
    import importlib
    import inspect
    import pkgutil

    import runtime
    import scopes
    import viz

    assert scopes.TimelyError is runtime.TimelyError is viz.TimelyError
    found = {}
    for package in (scopes, runtime, viz):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            try:
                module = importlib.import_module(info.name)
            except ModuleNotFoundError as missing:  # a module of an optional extra, in a checkout without it
                top = (missing.name or "").split(".")[0]
                assert top in OPTIONAL_PACKAGES, f"{info.name} cannot be imported: {missing}"
                continue
            for obj in vars(module).values():
                if (
                    inspect.isclass(obj)
                    and issubclass(obj, BaseException)
                    and obj.__module__.startswith(("scopes", "runtime", "viz"))
                ):
                    found[obj.__qualname__] = obj
    assert len(found) >= 60  # (60 when this test was written)
    for name, cls in found.items():
        assert issubclass(cls, scopes.TimelyError), f"{name} does not derive from TimelyError"
        assert cls.__module__.endswith(".errors"), f"{name} lives in {cls.__module__}, not its package's errors.py"
