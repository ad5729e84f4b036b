"""The hook-free copy of scopes and runtime used by the instrumentation benchmark (benchmarks/no_hooks.py)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str) -> ModuleType:
    """A benchmarks module under a name of its own (benchmarks/ is not a package)."""
    if str(ROOT / "benchmarks") not in sys.path:
        sys.path.append(str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


no_hooks = _load("no_hooks")
instrument = _load("instrument")


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, int]]]:
    """A hook-free copy, made once for this module."""
    directory = tmp_path_factory.mktemp("no_hooks")
    yield directory, no_hooks.make_hook_free(directory)


def test_removes_as_many_sites_as_a_text_scan_finds(copy: tuple[Path, dict[str, int]]) -> None:
    _, removed = copy
    found = no_hooks.text_scan(ROOT)
    assert removed == found
    assert sum(found.values()) >= 10  # the scan sees the hook sites at all (14 when this was written)
    assert "scopes/progress/subgraph.py" in removed and "runtime/worker.py" in removed


def test_the_copy_has_no_guard_left(copy: tuple[Path, dict[str, int]]) -> None:
    directory, _ = copy
    assert no_hooks.text_scan(directory) == {}
    for path in [*(directory / "scopes").rglob("*.py"), *(directory / "runtime").rglob("*.py")]:
        assert no_hooks.leftover_guards(ast.parse(path.read_text()), str(path)) == []
    subgraph = (directory / "scopes" / "progress" / "subgraph.py").read_text()
    assert "perf_counter() - start" not in subgraph  # the timed branch
    assert "tracker.report_only(" in subgraph  # `is None` body kept


def test_files_without_sites_are_copied_unchanged(copy: tuple[Path, dict[str, int]]) -> None:
    directory, removed = copy
    for package in no_hooks.PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            relative = str(path.relative_to(ROOT))
            if relative not in removed:
                assert (directory / relative).read_text() == path.read_text(), relative


def test_guard_shapes_removed() -> None:
    source = (
        "def f(self, x):\n"
        "    if self.observer is not None:\n"
        "        self.observer.event(x)\n"
        "    if self._observer is not None and x:\n"
        "        log(x)\n"
        "    if worker.logger is not None:\n"
        "        start = 1\n"
        "        work()\n"
        "    else:\n"
        "        work()\n"
        "    if self.observer is None:\n"
        "        quiet()\n"
        "    for y in x:\n"
        "        if logger is not None:\n"
        "            log(y)\n"
        "    return x\n"
    )
    text, lines = no_hooks.strip_source(source, "example.py")
    assert lines == [2, 4, 6, 11, 14]
    assert text == "def f(self, x):\n    work()\n    quiet()\n    for y in x:\n        pass\n    return x\n"


def test_a_file_without_guards_is_returned_as_it_is() -> None:
    source = "# a comment the rewrite would lose\nx = observer_scope is not None\n"
    assert no_hooks.strip_source(source, "plain.py") == (source, [])


@pytest.mark.parametrize(
    "source, line",
    [
        ("if x and self.observer is not None:\n    log()\n", 1),  # guard not first: x would no longer run
        ("if self.observer is not None or x:\n    log()\n", 1),
        ("if not self.observer is not None:\n    log()\n", 1),
        ("y = 1\nvalue = log() if self.logger is not None else 0\n", 2),
        ("while self._observer is not None:\n    log()\n", 1),
        ("if self.observer is None and x:\n    quiet()\n", 1),
        ("items = [i for i in range(3) if self.observer is not None]\n", 1),
    ],
)
def test_unknown_shapes_are_refused_by_file_and_line(source: str, line: int) -> None:
    with pytest.raises(no_hooks.HookShapeError, match=rf"strange\.py:{line}\b.*teach benchmarks/no_hooks\.py"):
        no_hooks.strip_source(source, "strange.py")


def test_asserts_are_not_hook_sites() -> None:
    source = "def f(observer):\n    assert observer is not None\n    return observer\n"
    assert no_hooks.strip_source(source, "a.py") == (source, [])


def test_the_copy_gives_the_same_answers_in_a_subprocess(copy: tuple[Path, dict[str, int]]) -> None:
    directory, _ = copy
    for measurement, size in (("record pipeline", 500), ("epoch latency", 50)):
        normal = instrument.run_in_subprocess(measurement, size, collect=True, timeout=60)
        bare = instrument.run_in_subprocess(measurement, size, packages=directory, collect=True, timeout=60)
        assert Path(bare["scopes"]).is_relative_to(directory) and Path(bare["runtime"]).is_relative_to(directory)
        assert Path(normal["scopes"]).is_relative_to(ROOT)
        assert bare["outputs"] and bare["outputs"] == normal["outputs"], measurement
        assert bare["seconds"] > 0


def test_a_package_imported_from_elsewhere_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="not from"):
        instrument.run_in_subprocess("epoch latency", 5, packages=tmp_path, timeout=60)


def test_within_noise_rule() -> None:
    assert instrument.within_noise([1.0, 1.02, 1.04], [1.0, 1.01, 1.0])[2]  # 2% apart, under the 5% floor
    value, band, inside = instrument.within_noise([1.2] * 5, [1.0] * 5)
    assert (round(value, 6), band, inside) == (1.2, 0.05, False)
    value, band, inside = instrument.within_noise([1.2, 0.8, 1.0, 1.6, 1.4], [1.0] * 5)
    assert band == pytest.approx(0.4 / 1.2) and inside  # a noisy run widens the band to its IQR
    value, band, inside = instrument.within_noise([1.1, 1.1, 1.1, 1.1, 9.0], [1.0] * 5)
    assert band == 0.05 and not inside  # one outlier does not widen it
