"""What a failed Spark job says about its tasks: the Python traceback, one telling line, and whether to retry.

Spark reports a failed barrier job as one long Java error whose text embeds
the Python traceback of the task that failed first (``PythonException:
Traceback (most recent call last): ...``).  :func:`task_traceback` cuts that
traceback out; :func:`should_retry` decides from the markers the task put on
its error (:data:`~runtime.spark.errors.FATAL_MARKER`,
:data:`~runtime.spark.errors.RETRY_MARKER`): a Python error without a marker
was raised before the task's body ran (the user's module is not importable on
the executor, the ``build`` function cannot be unpickled) and would repeat; a
failure without any Python traceback (an executor lost, a Python worker
killed) may not.
"""

from __future__ import annotations

from runtime.spark.errors import FATAL_MARKER, RETRY_MARKER

TRACEBACK_START = "Traceback (most recent call last):"
MAX_TRACEBACK = 20_000
"""Characters of a task's traceback kept (its end, where the exception is)."""
_INFRASTRUCTURE = ("Python worker exited unexpectedly", "ExecutorLostFailure", "PeerLost", "ClusterStopped")


def task_traceback(text: str) -> str | None:
    """The Python traceback in a Spark job failure's text (the first; Spark repeats it), without the Java stack."""
    start = text.find(TRACEBACK_START)
    if start < 0:
        return None
    lines: list[str] = []
    for line in text[start:].splitlines():
        if line.startswith("\tat ") or line.startswith("\t... ") or (lines and line.startswith("Caused by: ")):
            break
        lines.append(line)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)[-MAX_TRACEBACK:]


def exception_line(traceback: str) -> str:
    """The line of a traceback that names the exception (its last line that does not start with a space)."""
    for line in reversed(traceback.splitlines()):
        if line and not line[0].isspace() and line != TRACEBACK_START:
            return line.strip()
    return traceback.strip().splitlines()[-1] if traceback.strip() else ""


def summary(text: str) -> str:
    """The most telling line of a Spark job failure: the task's Python exception if it raised one."""
    traceback = task_traceback(text)
    if traceback is not None:
        return exception_line(traceback)[:600]
    for marker in _INFRASTRUCTURE:
        for line in text.splitlines():
            if marker in line:
                return line.strip()[:600]
    for line in text.splitlines():
        if "Error" in line or "error" in line or "exited" in line or "crashed" in line:
            return line.strip()[:600]
    return (text.splitlines() or ["the Spark job failed"])[0][:600]


def should_retry(text: str) -> bool:
    """Whether another attempt may succeed, from a Spark job failure's text (see the module's docstring)."""
    if FATAL_MARKER in text:
        return False
    if RETRY_MARKER in text:
        return True
    return task_traceback(text) is None
