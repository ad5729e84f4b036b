"""Every Python block of every page in docs/ runs as a script, as a reader would paste it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md"))
BLOCKS = [
    (page, index, code)
    for page in PAGES
    for index, code in enumerate(re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.M | re.S))
]


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
