"""The README's code runs: every Python block as a script, and every file its commands name exists."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, flags=re.MULTILINE | re.DOTALL)


PYTHON_BLOCKS = blocks("python")


def run_script(tmp_path: Path, code: str, name: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / f"{name}.py"
    script.write_text(code)
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_the_readme_has_python_blocks() -> None:
    assert len(PYTHON_BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(PYTHON_BLOCKS)))
def test_each_python_block_runs_as_a_script(tmp_path: Path, index: int) -> None:
    done = run_script(tmp_path, PYTHON_BLOCKS[index], f"readme_block_{index}")
    assert done.returncode == 0, f"README block {index + 1} failed:\n{done.stdout}\n{done.stderr}"


def test_the_first_example_prints_its_counts(tmp_path: Path) -> None:
    done = run_script(tmp_path, PYTHON_BLOCKS[0], "ten_lines")
    counted = sorted(int(n) for n in re.findall(r"counted (\d+)", done.stdout))
    assert sum(counted) == 18, done.stdout  # each of 2 workers sends 3 words in each of 3 epochs


def test_the_first_example_runs_on_processes_as_its_comment_says(tmp_path: Path) -> None:
    code = PYTHON_BLOCKS[0].replace("execute(main, workers=2)", "execute(main, processes=2)")
    assert code != PYTHON_BLOCKS[0]
    done = run_script(tmp_path, code, "ten_lines_processes")
    assert done.returncode == 0, done.stderr
    assert sum(int(n) for n in re.findall(r"counted (\d+)", done.stdout)) == 18, done.stdout


def test_every_file_a_readme_command_runs_exists() -> None:
    named = set()
    for block in blocks("sh"):
        named.update(re.findall(r"\.venv/bin/python ((?:examples|docs|benchmarks)/[\w/.-]+\.py)", block))
    named.update(re.findall(r"`\.venv/bin/python ((?:examples|docs|benchmarks)/[\w/.-]+\.py)", README))
    assert named, "the README names no command"
    missing = sorted(path for path in named if "NAME" not in path and not (ROOT / path).is_file())
    assert missing == []


MEASURED = re.compile(r"\b\d[\d,]*(?:\.\d+ ?s|(?:\.\d+)? ?(?:µs|us|ms|×|%))(?![\w-])")
"""A measured figure: µs, ms, a ratio, a percentage, or seconds with a decimal (whole seconds are settings: 30 s)."""


def test_the_readmes_figures_are_those_of_benchmarks_md() -> None:
    """Every time, ratio or percentage the README quotes (outside code) appears in BENCHMARKS.md (issue 28)."""
    prose = re.sub(r"^```.*?^```", "", README, flags=re.MULTILINE | re.DOTALL)
    benchmarks = (ROOT / "BENCHMARKS.md").read_text()
    stale = [figure for figure in MEASURED.findall(prose) if figure not in benchmarks]
    assert stale == [], f"README figures not in BENCHMARKS.md (link to it instead of quoting): {stale}"


def test_the_figure_pattern_finds_times_and_ratios() -> None:
    text = "20.2 s, 13.3 µs against 19.8 µs, 2.5× faster, 40% less; not a 30 s warning, `-w 2` or 2 processes"
    assert MEASURED.findall(text) == ["20.2 s", "13.3 µs", "19.8 µs", "2.5×", "40%"]
