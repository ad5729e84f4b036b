"""Start-up: what ``execute`` costs before any work, on 1 and 2 processes.

* :func:`execute_seconds`: the wall time of ``execute(idle, workers=1,
  processes=P)`` from a parent that has imported ``runtime`` already: spawning
  the children, their interpreters and imports, connecting them, running a
  worker that returns at once, and shutting down.
* :func:`fresh_seconds`: the same from a fresh interpreter (``python -c``),
  less a bare ``python -c pass``: what a user's script pays, its own import of
  ``runtime`` included.
"""

from __future__ import annotations

import subprocess
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness import Log, Metric, Size, in_seconds, interleaved  # noqa: E402

from runtime import Worker, execute  # noqa: E402


def idle(worker: Worker) -> int:
    """A worker that does nothing: returns its index."""
    return worker.index


def execute_seconds(processes: int) -> float:
    """Wall seconds of ``execute(idle, workers=1, processes=processes)`` in this process."""
    start = time.perf_counter()
    indices = execute(idle, workers=1, processes=processes)
    seconds = time.perf_counter() - start
    if indices != list(range(processes)):
        raise RuntimeError(f"execute on {processes} process(es) returned {indices}")
    return seconds


def _python(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120, capture_output=True)
    return time.perf_counter() - start


def fresh_seconds(processes: int) -> tuple[float, float]:
    """(``import runtime``, ``import runtime`` and ``execute`` on ``processes``) in a fresh interpreter, in
    seconds beyond a bare interpreter's start."""
    bare = _python("pass")
    imported = _python("import runtime")
    code = (
        "import sys; sys.path.insert(0, 'benchmarks'); import startup; "
        f"startup.execute(startup.idle, workers=1, processes={processes})"
    )
    whole = _python(code)
    return imported - bare, whole - bare


def bench(size: Size, log: Log) -> dict[str, Metric]:
    """The workload for ``run.py``: ``execute`` of an idle worker on 1 and 2 processes, and in a fresh interpreter."""
    execute_seconds(2)  # untimed: the page cache holds the interpreter and the modules
    fresh: list[tuple[float, float]] = []

    def fresh_import() -> float:
        fresh.append(fresh_seconds(2))
        return fresh[-1][0]

    values = interleaved(
        {"one": partial(execute_seconds, 1), "two": partial(execute_seconds, 2), "import": fresh_import},
        size,
        log,
        "startup",
    )
    return {
        "one": in_seconds(values["one"], "`execute` on 1 process"),
        "two": in_seconds(values["two"], "`execute` on 2 processes"),
        "import": in_seconds(values["import"], "`import runtime` in a fresh interpreter"),
        "fresh": in_seconds([whole for _, whole in fresh], "a fresh interpreter's import and 2-process `execute`"),
    }
