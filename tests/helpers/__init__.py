"""Modules the tests share: recordings and pilots for the viewer, columnar batches, example loading,
and the programs some tests run in processes of their own.

The tests import them as ``helpers.NAME``: pytest puts ``tests/`` on the path,
and a cluster's processes inherit it.  Nothing here is collected as a test.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def eventually(condition: Callable[[], Any], timeout: float = 10.0, what: str = "the condition") -> Any:
    """Poll ``condition`` until it returns something true (returned), failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.01)


def start_program(script: Path) -> subprocess.Popen[str]:
    """Run ``python script`` in its own directory and session (so that a test can signal its whole process group),
    its output and errors piped as text."""
    return subprocess.Popen(
        [sys.executable, str(script)],
        cwd=script.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
