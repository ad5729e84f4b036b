"""The shape of the ``scopes`` package: no import cycles, and the public names stay where they were.

``Stream`` is a facade over one module per operator family; the modules that
build streams (``builder``, ``operator_builder``, ``stream`` and the families)
import each other only one way, with no imports hidden inside functions.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SCOPES = Path(__file__).resolve().parent.parent / "scopes"

STREAM_MODULES = [
    "builder", "operator_builder", "operator", "stream", "per_record", "routing", "per_time",
    "generic_operators", "probes", "nesting", "signatures",
]


def runtime_imports(module: str) -> tuple[set[str], list[int]]:
    """The ``scopes`` modules ``module`` imports at run time, and the lines of imports inside functions.

    Imports under ``if TYPE_CHECKING:`` are for the type checker only and are not counted.
    """
    tree = ast.parse((SCOPES / f"{module}.py").read_text())
    imported: set[str] = set()
    nested: list[int] = []

    def record(node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.ImportFrom):
            if node.module == "scopes":
                imported.update(alias.name for alias in node.names if (SCOPES / f"{alias.name}.py").exists())
            elif node.module and node.module.startswith("scopes."):
                imported.add(node.module.split(".")[1])
        else:
            for alias in node.names:
                if alias.name.startswith("scopes."):
                    imported.add(alias.name.split(".")[1])

    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            record(node)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    record(inner)  # runs when the function is called: an edge all the same
                    nested.append(inner.lineno)
    return imported, nested


def test_scopes_modules_import_each_other_without_cycles():
    modules = sorted(path.stem for path in SCOPES.glob("*.py") if path.stem != "__init__")
    graph = {module: runtime_imports(module)[0] for module in modules}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                cycle = path[path.index(target):] + [target] if target in path else [module, target]
                pytest.fail(f"import cycle: {' -> '.join(cycle)}")
            if state.get(target) is None:
                visit(target, path + [target])
        state[module] = 2

    for module in modules:
        if state.get(module) is None:
            visit(module, [module])


@pytest.mark.parametrize("module", STREAM_MODULES)
def test_stream_building_modules_import_nothing_inside_functions(module):
    _, nested = runtime_imports(module)
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


IMPURE = {"threading", "socket", "selectors", "subprocess", "multiprocessing", "asyncio", "queue", "_thread"}


@pytest.mark.parametrize("path", sorted(SCOPES.glob("*.py")), ids=lambda path: path.stem)
def test_scopes_takes_no_threads_sockets_or_processes(path):
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert not imported & IMPURE, f"scopes/{path.name} imports {sorted(imported & IMPURE)}; the runtime hands them in"


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
            module = importlib.import_module(info.name)
            for obj in vars(module).values():
                if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__.startswith(
                    ("scopes", "runtime", "viz")
                ):
                    found[obj.__qualname__] = obj
    assert len(found) >= 60  # (60 when this test was written)
    for name, cls in found.items():
        assert issubclass(cls, scopes.TimelyError), f"{name} does not derive from TimelyError"
        assert cls.__module__.endswith(".errors"), f"{name} lives in {cls.__module__}, not its package's errors.py"
