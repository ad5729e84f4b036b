"""Start-up: what ``execute`` costs before any work, on 1 and 2 processes.

* :func:`execute_seconds`: the wall time of ``execute(idle, workers=1,
  processes=P)`` from a parent that has imported ``runtime`` already: spawning
  the children, their interpreters and imports, connecting them, running a
  worker that returns at once, and shutting down.  Issue 18's goal: at most
  0.2 s on 2 processes.
* :func:`fresh_seconds`: the same from a fresh interpreter (``python -c``),
  less a bare ``python -c pass``: what a user's script pays, its own import of
  ``runtime`` included.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

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
