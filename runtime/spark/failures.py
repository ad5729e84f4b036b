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
killed) may not.  The markers are for the driver alone: :func:`without_markers`
takes them out of everything shown to users.

A task stopped only because another task failed ("process 0 stopped because
worker 1 failed") may reach Spark first, and its traceback lacks the user's
line.  So every task also reports its own failure to the driver's progress
channel as soon as it happens (:data:`FAILED_EVENT`), and
:class:`FailureReports` lets the driver prefer the failing task's own
traceback over the one Spark chose.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

from runtime.spark.errors import FATAL_MARKER, RETRY_MARKER

TRACEBACK_START = "Traceback (most recent call last):"
MAX_TRACEBACK = 20_000
"""Characters of a task's traceback kept (its end, where the exception is)."""
FAILED_EVENT = "failed"
"""The progress event a task sends when it fails (fields ``error``, ``elsewhere``, ``retry``, ``traceback``)."""
OWN_FAILURE_WAIT = 5.0
"""Seconds the driver waits for the failing task's own report when Spark shows another task's error."""
_INFRASTRUCTURE = ("Python worker exited unexpectedly", "ExecutorLostFailure", "PeerLost", "ClusterStopped")
_PY4J_HEADER = "An error occurred while calling "
"""How Py4J's error starts (``... o841.collectToPython.``): it names the Java call, never why it failed."""
_STAGE_FAILURE = "Job aborted due to stage failure"
_CANCELLED = re.compile(r"SPARK_JOB_CANCELLED|\bJob \d+ cancelled\b")
"""How Spark says a job was cancelled (``cancelJobGroup``, ``cancelAllJobs``, the UI's kill link)."""


def without_markers(text: str) -> str:
    """``text`` without the internal retry markers (which are for the driver, not for users)."""
    for marker in (FATAL_MARKER, RETRY_MARKER):
        text = text.replace(f"{marker} ", "").replace(marker, "")
    return text


def task_traceback(text: str) -> str | None:
    """The Python traceback in a Spark job failure's text (the first; Spark repeats it), without the Java stack.

    The internal markers are taken out (:func:`without_markers`).
    """
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
    return without_markers("\n".join(lines))[-MAX_TRACEBACK:]


def exception_line(traceback: str) -> str:
    """The line of a traceback that names the exception (its last line that does not start with a space)."""
    for line in reversed(traceback.splitlines()):
        if line and not line[0].isspace() and line != TRACEBACK_START:
            return line.strip()
    return traceback.strip().splitlines()[-1] if traceback.strip() else ""


def summary(text: str) -> str:
    """The most telling line of a Spark job failure: the task's Python exception if it raised one."""
    lines = [line.strip() for line in without_markers(text).splitlines() if line.strip()]
    telling = [line for line in lines if not line.startswith(_PY4J_HEADER)]
    for line in telling:  # cancelled: whatever the killed tasks said, the cancel is why
        if _CANCELLED.search(line) and not line.startswith("at "):
            return line[:600]
    traceback = task_traceback(text)
    if traceback is not None:
        return exception_line(traceback)[:600]
    for marker in (*_INFRASTRUCTURE, _STAGE_FAILURE):
        for line in telling:
            if marker in line:
                return line[:600]
    for line in telling:
        if "Error" in line or "error" in line or "exited" in line or "crashed" in line:
            return line[:600]
    return (telling or lines or ["the Spark job failed"])[0][:600]


def cancelled(text: str) -> bool:
    """Whether a Spark job failure's text says the job was cancelled (by the user: never retried)."""
    return _CANCELLED.search(text) is not None


def should_retry(text: str) -> bool:
    """Whether another attempt may succeed, from a Spark job failure's text (see the module's docstring).

    A cancelled job is not retried: whoever cancelled it wants it stopped.
    """
    if FATAL_MARKER in text or cancelled(text):
        return False
    if RETRY_MARKER in text:
        return True
    return task_traceback(text) is None


def stopped_by_another(traceback: str | None) -> bool:
    """Whether a task's traceback only says that another task failed (``... stopped because worker N failed``)."""
    if traceback is None:
        return False
    line = exception_line(traceback)
    return "stopped because" in line and " failed" in line


class FailureReports:
    """The failures the tasks of one attempt reported to the driver themselves (their ``failed`` events).

    :meth:`note` takes every progress event (on the progress server's
    threads); :meth:`own_failure` returns the report of a task that failed on
    its own (not stopped by another's failure), waiting for one a little.
    """

    def __init__(self) -> None:
        """No report yet."""
        self._reports: dict[int, list[dict[str, Any]]] = {}
        self._condition = threading.Condition()

    def note(self, event: dict[str, Any]) -> None:
        """Keep ``event`` if it is a task's failure report."""
        if event.get("event") != FAILED_EVENT or not isinstance(event.get("attempt"), int):
            return
        with self._condition:
            self._reports.setdefault(event["attempt"], []).append(event)
            self._condition.notify_all()

    def own_failure(self, attempt: int, wait: float) -> dict[str, Any] | None:
        """The first report of attempt ``attempt`` whose task failed on its own, waiting up to ``wait`` s."""
        deadline = time.monotonic() + wait
        with self._condition:
            while True:
                for report in self._reports.get(attempt, []):
                    if report.get("elsewhere") is False and isinstance(report.get("traceback"), str):
                        return report
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._condition.wait(remaining)
