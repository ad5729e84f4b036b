"""``execute(..., processes=P)`` without a ``__main__`` guard fails at once and never starts more than P processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

MAIN = """
import sys
sys.path.insert(0, {root!r})
from runtime import execute

def main(worker):
    return worker.index
"""

UNGUARDED = {
    # refused in the launching process: the call is plainly at the top level
    "top level": "print(execute(main, processes=2))\n",
    "inside with": "import contextlib\nwith contextlib.suppress(KeyError):\n    print(execute(main, processes=2))\n",
    # an `if` the launcher cannot judge: the started processes refuse it while importing main
    "inside an if": "if sys.argv:\n    print(execute(main, processes=2))\n",
    "execute_from_args": "from runtime import execute_from_args\nif sys.argv:\n    print(execute_from_args(main))\n",
}


def descendants(root: int) -> set[int]:
    """Every live process below ``root``."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != "Z":
                parents[int(entry)] = int(fields[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def run_counting(script: Path, args: list[str], seconds: float) -> tuple[int | None, str, int]:
    """Run ``script``: its status (None if it had to be killed), its error output, the most processes seen."""
    process = subprocess.Popen(
        [sys.executable, str(script), *args],
        cwd=script.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    most = 1
    deadline = time.monotonic() + seconds
    try:
        while process.poll() is None and time.monotonic() < deadline:
            most = max(most, 1 + len(descendants(process.pid)))
            if most > 3:
                break  # a fork bomb: stop it now
            time.sleep(0.005)
        status = process.poll()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    _, err = process.communicate(timeout=30)
    return status, err, most


@pytest.mark.parametrize("shape", sorted(UNGUARDED))
def test_an_unguarded_execute_fails_at_once_showing_the_guard(tmp_path: Path, shape: str) -> None:
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent(MAIN.format(root=str(ROOT))) + UNGUARDED[shape])
    args = ["-n", "2"] if shape == "execute_from_args" else []
    started = time.monotonic()
    status, err, most = run_counting(script, args, 20.0)
    assert most <= 3, f"{most} processes: {err[-2000:]}"
    assert status not in (None, 0), err[-2000:]
    assert time.monotonic() - started < 10.0
    assert 'if __name__ == "__main__":' in err and "guard" in err, err[-2000:]


def test_the_launcher_refuses_a_plainly_unguarded_call_before_starting_anything(tmp_path: Path) -> None:
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent(MAIN.format(root=str(ROOT))) + UNGUARDED["top level"])
    status, err, most = run_counting(script, [], 20.0)
    assert most == 1 and status == 1
    assert "ConfigurationError" in err and f"called at the top level of {script}, line 8" in err, err


def test_a_guarded_execute_still_runs(tmp_path: Path) -> None:
    script = tmp_path / "guarded.py"
    body = 'if __name__ == "__main__":\n    print(execute(main, processes=2, workers=2))\n'
    script.write_text(textwrap.dedent(MAIN.format(root=str(ROOT))) + body)
    completed = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "[0, 1, 2, 3]\n"


def test_main_defined_under_the_guard_is_named_with_the_fix(tmp_path: Path) -> None:
    """The new processes import the script without running its guarded block, so main is not there."""
    script = tmp_path / "defined_under_guard.py"
    script.write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nfrom runtime import execute\n\n"
        'if __name__ == "__main__":\n'
        "    def main(worker):\n"
        "        return worker.index\n\n"
        "    print(execute(main, processes=2))\n"
    )
    completed = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 1, completed.stderr
    assert "ConfigurationError: main (main) is not defined when" in completed.stderr, completed.stderr
    assert "outside the guard" in completed.stderr
    assert "AttributeError" not in completed.stderr
