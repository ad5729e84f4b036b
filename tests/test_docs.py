"""Every Python block of every page in docs/ runs as a script, as a reader would paste it; every link resolves.

A block fenced as plain ```` ```python ```` runs.  A block that cannot run in the
tests (it needs a real cluster or a Spark master) is fenced ```` ```python no-run ````:
it is shown, compiled (so it stays valid Python) but not run.  Keep those rare; any
other Python fence (```` ```py ````, ```` ```python3 ````, ...) is refused, so that no
block skips the tests by accident.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").rglob("*.md"))
BLOCKS = [
    (page, index, code)
    for page in PAGES
    for index, code in enumerate(re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.M | re.S))
]
NO_RUN = "python no-run"
"""The fence info string of a block that is shown and compiled but not run."""


def test_the_streaming_guide_has_code() -> None:
    assert sum(1 for page, _, _ in BLOCKS if page.name == "streaming.md") >= 3


@pytest.mark.parametrize(("page", "index", "code"), BLOCKS, ids=[f"{p.name}-{i + 1}" for p, i, _ in BLOCKS])
def test_each_python_block_runs(tmp_path: Path, page: Path, index: int, code: str) -> None:
    script = tmp_path / f"{page.stem}_{index}.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, f"{page.name} block {index + 1} failed:\n{done.stdout}\n{done.stderr}"


def fences(text: str) -> list[tuple[str, str]]:
    """``(info string, code)`` of every fenced block of ``text``."""
    return re.findall(r"^```([^\n`]*)\n(.*?)^```", text, flags=re.M | re.S)


def python_fences(text: str) -> list[tuple[str, str]]:
    return [(info, code) for info, code in fences(text) if info.strip().lower().startswith("py")]


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_a_python_block_runs_unless_marked_no_run(page: Path) -> None:
    for info, code in python_fences(page.read_text()):
        assert info in ("python", NO_RUN), f"{page.name}: fence ```{info} is neither ```python nor ```{NO_RUN}"
        if info == NO_RUN:
            compile(code, f"{page.name} (no-run block)", "exec")


def test_blocks_that_do_not_run_are_rare() -> None:
    shown = [page.name for page in [ROOT / "README.md", *PAGES] for info, _ in python_fences(page.read_text())]
    not_run = [
        page.name
        for page in [ROOT / "README.md", *PAGES]
        for info, _ in python_fences(page.read_text())
        if info == NO_RUN
    ]
    assert len(not_run) * 5 <= len(shown), f"{len(not_run)} of {len(shown)} Python blocks are not run: {not_run}"


def test_the_fence_reader_tells_run_blocks_from_the_others() -> None:
    text = "```python\nprint(1)\n```\n```python no-run\nspark()\n```\n```sh\nls\n```\n```py\nx\n```\n"
    assert [info for info, _ in python_fences(text)] == ["python", NO_RUN, "py"]
    assert re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S) == ["print(1)\n"]


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def heading_anchors(page: Path) -> set[str]:
    """GitHub's anchors for the headings of ``page``."""
    anchors = set()
    for title in re.findall(r"^#+ (.*)$", page.read_text(), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower().replace("`", "")).replace(" ", "-")
        anchors.add(slug)
    return anchors


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked here
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(target)
            continue
        if anchor and resolved.suffix == ".md" and anchor not in heading_anchors(resolved):
            broken.append(target)
    assert broken == [], f"{page.name}: links that lead nowhere: {broken}"
