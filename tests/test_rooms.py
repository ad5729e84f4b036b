"""The rooms of ``runtime`` and ``viz``: no import circles, imports only viz -> runtime -> scopes, short functions.

Every import counts: at module level, inside functions (it runs when the
function is called) and under ``if TYPE_CHECKING:`` (the type checker follows it).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("scopes", "runtime", "viz")
LONGEST = 80
"""The most lines a function in ``runtime`` or ``viz`` may span, docstring included."""
LONGEST_FILE = 800
"""The most lines a product module may have: a longer one does several jobs."""


def module_files() -> dict[str, Path]:
    """Every module of the three packages by dotted name (a package by its own name)."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def imported_modules(name: str, path: Path, known: dict[str, Path]) -> dict[str, int]:
    """The known modules ``name`` imports anywhere in its file, each with the first line that does."""
    found: dict[str, int] = {}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:  # ``from runtime import codec`` imports the module runtime.codec
                targets.append(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
        for target in targets:
            if target in known and target != name:
                found.setdefault(target, node.lineno)
    return found


def import_graph() -> dict[str, dict[str, int]]:
    """Each module's imports of the others."""
    known = module_files()
    return {name: imported_modules(name, path, known) for name, path in known.items()}


def circles(graph: dict[str, dict[str, int]], within: tuple[str, ...]) -> list[list[str]]:
    """Import circles among the modules of the packages ``within``, each as the path that closes it.

    A circle that left them would need an import against viz -> runtime -> scopes, which another test refuses.
    """
    graph = {
        module: {target: line for target, line in targets.items() if target.split(".")[0] in within}
        for module, targets in graph.items()
        if module.split(".")[0] in within
    }
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: finished

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                found.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


def test_runtime_and_viz_modules_import_each_other_without_circles():
    graph = import_graph()
    assert circles(graph, ("runtime", "viz")) == []


def test_the_circle_finder_finds_a_circle_through_a_function_level_import(tmp_path):
    graph = {"runtime.a": {"runtime.b": 1}, "runtime.b": {"runtime.c": 3}, "runtime.c": {"runtime.a": 9}}
    assert circles(graph, ("runtime",)) == [["runtime.a", "runtime.b", "runtime.c", "runtime.a"]]
    source = tmp_path / "c.py"
    source.write_text("def late():\n    from runtime.a import x\n")
    known = {"runtime.a": tmp_path / "a.py", "runtime.c": source}
    assert imported_modules("runtime.c", source, known) == {"runtime.a": 2}


@pytest.mark.parametrize(("package", "below"), [("scopes", ("runtime", "viz")), ("runtime", ("viz",))])
def test_imports_flow_from_viz_to_runtime_to_scopes_only(package, below):
    against = [
        f"{module} imports {target} (line {line})"
        for module, targets in import_graph().items()
        if module.split(".")[0] == package
        for target, line in targets.items()
        if target.split(".")[0] in below
    ]
    assert against == []


def long_functions(package: str) -> list[str]:
    """The functions of ``package`` that span more than :data:`LONGEST` lines."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > LONGEST:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    return found


@pytest.mark.parametrize("package", ["scopes", "runtime", "viz"])
def test_no_function_is_longer_than_80_lines(package):
    assert long_functions(package) == []


def long_files(package: str, limit: int = LONGEST_FILE) -> list[str]:
    """The modules of ``package`` longer than ``limit`` lines, each with its length."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        length = len(path.read_text().splitlines())
        if length > limit:
            found.append(f"{path.relative_to(ROOT)} ({length} lines)")
    return found


@pytest.mark.parametrize("package", ["scopes", "runtime", "viz"])
def test_no_module_is_longer_than_800_lines(package):
    assert long_files(package) == []


def test_the_file_length_check_finds_a_long_module():
    assert long_files("scopes", limit=100)  # scopes has modules over 100 lines: the check can fail


@pytest.mark.parametrize(
    "statement",
    [
        "import runtime.launcher",
        "import runtime.cluster_member",
        "import runtime.cluster",
        "from runtime.execute import execute, run_workers, INTERRUPT_GRACE",
        "from runtime.instrumentation.recorder import Recorder",
        "from runtime.instrument import Recorder, read_events, configure_from, _CLASSES",
        "from viz.tui.panes.stuck import StuckPane",
        "from viz.tui.app import TimelyApp, HelpScreen",
        "import runtime.communication.process_fabric",
        "import runtime.communication.fabric",
        "import runtime.communication.wire",
        "import runtime.communication.arraycodec",
        "import runtime.communication.simulation",
        "import runtime.communication.tcp",
    ],
)
def test_each_room_imports_first_thing_in_a_fresh_interpreter(statement):
    result = subprocess.run([sys.executable, "-c", statement], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 0, result.stderr
