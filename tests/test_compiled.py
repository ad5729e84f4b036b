"""The optional compiled build (scopes.native, runtime.compiled): selected only when current, else pure Python.

``make test-audit`` runs the suite with the build made by ``make compiled``
and ``PYTIMELY_EXPECT_COMPILED=1``: :func:`test_the_expected_build_is_in_use`
then fails if the compiled modules did not load, so that pass cannot silently
test pure Python twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

import runtime
from scopes import native
from scopes.errors import StaleBuildWarning

ROOT = Path(__file__).resolve().parent.parent


def test_the_expected_build_is_in_use() -> None:
    running = runtime.compiled_modules()
    if os.environ.get("PYTIMELY_EXPECT_COMPILED") == "1":
        assert running == list(native.MODULES)
    else:
        assert running in ([], list(native.MODULES))
    for module in native.MODULES:
        path = sys.modules[module].__file__ or ""
        assert path.endswith(".py") == (module not in running)


def _fake_build(tmp_path: Path, sources: dict[str, str], tag: str | None = None) -> Path:
    build = tmp_path / "build"
    build.mkdir()
    (build / native.MANIFEST).write_text(
        json.dumps({"cache_tag": tag or sys.implementation.cache_tag, "sources": sources})
    )
    return build


def _current_hashes() -> dict[str, str]:
    return {module: native.source_hash(module, ROOT) for module in native.MODULES}


def test_no_manifest_means_no_build(tmp_path: Path) -> None:
    assert native.manifest_problem(tmp_path / "absent", ROOT) == "no compiled build"
    package = types.ModuleType("scopes")
    package.__path__ = []
    assert native.select(package, tmp_path / "absent") == []
    assert package.__path__ == []


def test_a_current_manifest_is_accepted(tmp_path: Path) -> None:
    assert native.manifest_problem(_fake_build(tmp_path, _current_hashes()), ROOT) is None


def test_an_edited_source_makes_the_build_stale(tmp_path: Path) -> None:
    hashes = _current_hashes()
    hashes["scopes.progress.reachability"] = "0" * 64
    problem = native.manifest_problem(_fake_build(tmp_path, hashes), ROOT)
    assert problem == "scopes.progress.reachability's source changed since it was built"


def test_a_build_for_another_interpreter_or_other_modules_is_stale(tmp_path: Path) -> None:
    other = native.manifest_problem(_fake_build(tmp_path, _current_hashes(), tag="cpython-27"), ROOT)
    assert other is not None and "cpython-27" in other
    fewer = dict(list(_current_hashes().items())[:1])
    (tmp_path / "build" / native.MANIFEST).write_text(
        json.dumps({"cache_tag": sys.implementation.cache_tag, "sources": fewer})
    )
    problem = native.manifest_problem(tmp_path / "build", ROOT)
    assert problem is not None and problem.startswith("it holds")


def test_a_stale_build_is_ignored_with_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(native.PURE_VARIABLE, raising=False)  # the suite may run with PYTIMELY_PURE=1
    hashes = _current_hashes()
    hashes["scopes.progress.antichain"] = "f" * 64
    build = _fake_build(tmp_path, hashes)
    package = types.ModuleType("scopes")
    package.__path__ = ["somewhere"]
    with pytest.warns(StaleBuildWarning, match="make compiled"):
        assert native.select(package, build) == []
    assert package.__path__ == ["somewhere"]


def test_pure_variable_ignores_any_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.PURE_VARIABLE, "1")
    package = types.ModuleType("scopes")
    package.__path__ = []
    assert native.select(package, _fake_build(tmp_path, {"garbage": 1})) == []  # not even read


_SELECT_IN_A_FRESH_INTERPRETER = """
import importlib.util, sys, types, warnings
from pathlib import Path
root, build = Path(sys.argv[1]), Path(sys.argv[2])
spec = importlib.util.spec_from_file_location("native_under_test", root / "scopes" / "native.py")
native = importlib.util.module_from_spec(spec)
spec.loader.exec_module(native)
package = types.ModuleType("scopes")
package.__path__ = [str(root / "scopes")]
sys.modules["scopes"] = package
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    used = native.select(package, build)
import scopes.progress.antichain
sources = str(root / "scopes" / "progress")
print(used, scopes.progress.antichain.__file__ == str(root / "scopes" / "progress" / "antichain.py"),
      sys.modules["scopes.progress"].__path__ == [sources] and package.__path__ == [str(root / "scopes")],
      [str(warning.message) for warning in caught])
"""


def _select_fresh(build: Path) -> str:
    env = {**os.environ, native.PURE_VARIABLE: "0"}
    done = subprocess.run(
        [sys.executable, "-c", _SELECT_IN_A_FRESH_INTERPRETER, str(ROOT), str(build)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_current_build_comes_before_the_sources(tmp_path: Path) -> None:
    build = _fake_build(tmp_path, _current_hashes())
    (build / "scopes" / "progress").mkdir(parents=True)
    for module in native.MODULES:  # in scopes.progress (the progress path) and in scopes (operators, channels)
        build.joinpath(*module.split(".")).with_suffix(".py").write_text("BUILT = True\n")
    out = _select_fresh(build)
    assert out.startswith(f"{list(native.MODULES)} False False []"), out


def test_a_build_that_fails_as_it_loads_falls_back_to_the_sources(tmp_path: Path) -> None:
    build = _fake_build(tmp_path, _current_hashes())
    (build / "scopes" / "progress").mkdir(parents=True)
    (build / "scopes" / "progress" / "antichain.py").write_text("raise TypeError('a broken build')\n")
    out = _select_fresh(build)
    assert out.startswith("[] True True ["), out
    assert "does not load (TypeError: a broken build)" in out


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"[" * 60_000, "unreadable (RecursionError"),  # deeper than json can recurse, within the size limit
        (b'{"cache_tag": "' + b"x" * ((1 << 16) + 1) + b'"}', "larger than"),
        (b"\xff\xfe{", "unreadable (UnicodeDecodeError"),
    ],
    ids=["deeply-nested", "too-large", "not-utf-8"],
)
def test_a_hostile_manifest_falls_back_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes, expected: str
) -> None:
    monkeypatch.delenv(native.PURE_VARIABLE, raising=False)
    build = tmp_path / "build"
    build.mkdir()
    (build / native.MANIFEST).write_bytes(content)
    problem = native.manifest_problem(build, ROOT)
    assert problem is not None and expected in problem
    package = types.ModuleType("scopes")
    package.__path__ = ["somewhere"]
    with pytest.warns(StaleBuildWarning, match=expected.replace("(", r"\(")):
        assert native.select(package, build) == []
    assert package.__path__ == ["somewhere"]
