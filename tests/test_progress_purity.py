"""The progress model (``scopes/progress/``) is a room of its own: it sees counts at locations, nothing more.

Every import in ``scopes/progress`` (at module level, inside functions, under
``if TYPE_CHECKING:``) is read with :mod:`ast`.  Of the rest of :mod:`scopes`
it may import only the channel protocols (:mod:`scopes.channel_protocols`:
its progress exchange travels on channels) and the package's exception classes
(:mod:`scopes.errors`, the one ``errors`` module of ``scopes``); both import
nothing from :mod:`scopes` themselves.  It imports nothing that reaches
sockets, files, threads or processes, and calls no ``open``.  The old flat
paths (``scopes.antichain``, ...) re-export the same objects.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROGRESS = ROOT / "scopes" / "progress"
ALLOWED = {"scopes.channel_protocols", "scopes.errors"}
"""What the progress model may import from the rest of :mod:`scopes`."""
IMPURE = {
    "socket",
    "ssl",
    "selectors",
    "threading",
    "_thread",
    "multiprocessing",
    "concurrent",
    "subprocess",
    "asyncio",
    "queue",
    "os",
    "io",
    "pathlib",
    "shutil",
    "tempfile",
    "mmap",
    "runtime",
    "viz",
}
"""Top-level modules the progress model may not import: sockets, files, threads, processes, the upper layers."""

OLD_PATHS = [
    "order",
    "timestamp",
    "antichain",
    "change_batch",
    "location",
    "location_index",
    "reachability",
    "visit_order",
    "operate",
    "subgraph",
    "subgraph_builder",
    "progcaster",
    "hooks",
]


def imported_modules(source: str, package: str = "scopes.progress") -> set[str]:
    """Every module ``source`` imports, wherever the import sits (relative imports resolved in ``package``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                found.add(f"{base}.{node.module}" if node.module else base)
            else:
                found.add(node.module or "")
    return found


def violations(source: str) -> list[str]:
    """What in ``source`` breaks the progress model's purity, as sentences (empty: pure)."""
    problems = []
    for module in sorted(imported_modules(source)):
        top = module.split(".")[0]
        if top == "scopes" and not (module.startswith("scopes.progress") or module in ALLOWED):
            problems.append(f"imports {module}: the progress model may import only {sorted(ALLOWED)} of scopes")
        elif top in IMPURE:
            problems.append(f"imports {module}: no sockets, files, threads, processes or upper layers")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
            problems.append(f"calls open() on line {node.lineno}")
    return problems


@pytest.mark.parametrize("path", sorted(PROGRESS.glob("*.py")), ids=lambda path: path.stem)
def test_the_progress_model_imports_only_itself_the_channel_protocols_and_errors(path: Path) -> None:
    assert violations(path.read_text()) == [], f"scopes/progress/{path.name}"


@pytest.mark.parametrize("module", sorted(ALLOWED))
def test_what_progress_may_import_imports_nothing_of_scopes(module: str) -> None:
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    assert not {name for name in imported_modules(path.read_text()) if name.split(".")[0] == "scopes"}
    assert not {name.split(".")[0] for name in imported_modules(path.read_text())} & IMPURE


def test_the_check_refuses_operators_channels_files_and_threads() -> None:
    source = (
        "from scopes.progress.antichain import Antichain\n"
        "from scopes.channel_protocols import Pusher\n"
        "from scopes.channels import Tee\n"
        "def later():\n"
        "    import threading\n"
        "    from scopes.operator import Operator\n"
        "    return open('x')\n"
    )
    found = violations(source)
    assert len(found) == 4, found
    assert any("scopes.channels" in problem for problem in found)
    assert any("scopes.operator" in problem for problem in found)
    assert any("threading" in problem for problem in found)
    assert any("open()" in problem for problem in found)


@pytest.mark.parametrize("name", OLD_PATHS)
def test_each_old_path_re_exports_the_same_objects(name: str) -> None:
    old = importlib.import_module(f"scopes.{name}")
    new = importlib.import_module(f"scopes.progress.{name}")
    assert old.__all__, name
    for public in old.__all__:
        assert getattr(old, public) is getattr(new, public), f"scopes.{name}.{public}"
    assert "old import path" in (old.__doc__ or "")
