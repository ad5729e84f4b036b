"""What the driver does before a dataflow's Spark job starts, as progress events and Spark UI labels.

:class:`DriverPhases` times the driver's own phases of ``run_dataflow``
(``arguments``: checking them and Spark's Arrow types, which imports pandas
on the first call; ``preflight``: the session, a warm-up still running, free
slots; ``plan``: choosing whether to repartition) and reports each to
``on_progress`` as ``{"event": "phase", "phase": ..., "seconds": ...,
"task": None}``, then ``{"event": "submitted", "attempt": n, "since_call":
...}`` when an attempt's job is handed to Spark.  After that the tasks' own
events follow (``started`` once a task's Python worker runs it).

:func:`job_labels` names the job in the Spark UI and the status tracker: the
job group ``pytimely:NAME`` (so ``sc.cancelJobGroup("pytimely:NAME")`` stops
it), a description naming the dataflow, its tasks and the attempt, and the
call site that labels its stage (``pytimely dataflow 'NAME'`` instead of
``localCheckpoint at NativeMethodAccessorImpl.java:0``).

:func:`partitions_without_running` reads the number of partitions from the
DataFrame's plan where that is certain.  ``df.rdd.getNumPartitions()`` would
give it always, but on a plan with a shuffle, adaptive query execution runs
the shuffle's stages to answer, and the dataflow's own job then runs them
again: on a first call that was seconds before the job started.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from runtime.spark.connect import is_connect

JOB_GROUP_PREFIX = "pytimely:"
"""The Spark job group of a dataflow is this prefix and its ``name=``."""
_LABELS = (
    "spark.jobGroup.id",
    "spark.job.description",
    "spark.job.interruptOnCancel",
    "callSite.short",
    "callSite.long",
)
_PASS_THROUGH = ("Project", "Filter", "SubqueryAlias")
"""Logical plan nodes that keep their child's partitions."""


def job_group(name: str) -> str:
    """The Spark job group of the dataflow called ``name``."""
    return f"{JOB_GROUP_PREFIX}{name}"


class DriverPhases:
    """Times the driver's phases and reports them, and other driver events, to ``on_progress`` (if any)."""

    def __init__(self, on_progress: Callable[[dict[str, Any]], None] | None) -> None:
        """Start the clock: ``since_call`` counts from here."""
        self.on_progress = on_progress
        self.started = time.monotonic()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the ``with`` block and report it as the phase ``name``."""
        start = time.monotonic()
        try:
            yield
        finally:
            self.event("phase", phase=name, seconds=round(time.monotonic() - start, 6))

    def event(self, kind: str, attempt: int | None = None, **fields: Any) -> None:
        """Report ``{"event": kind, "task": None, "attempt": attempt, "at": ..., "since_call": ..., **fields}``."""
        if self.on_progress is None:
            return
        since = round(time.monotonic() - self.started, 6)
        event = {"event": kind, "task": None, "attempt": attempt, "at": time.time(), "since_call": since}
        self.on_progress({**event, **fields})


@contextlib.contextmanager
def job_labels(spark: Any, name: str, workers: int, attempt: int, retries: int) -> Iterator[None]:
    """Label the Spark jobs started in the ``with`` block (this thread) as the dataflow ``name``; restore after.

    Over Spark Connect, which has no job groups, the jobs get the tag ``pytimely:NAME`` instead
    (``spark.interruptTag`` stops them).
    """
    if is_connect(spark):
        tag = job_group(name).replace(",", ";")
        spark.addTag(tag)
        try:
            yield
        finally:
            spark.removeTag(tag)
        return
    context = spark.sparkContext
    saved = {key: context.getLocalProperty(key) for key in _LABELS}
    label = f"pytimely dataflow '{name}'"
    values = {
        "spark.jobGroup.id": job_group(name),
        "spark.job.description": f"{label}: {workers} barrier task(s), attempt {attempt + 1} of {retries + 1}",
        "spark.job.interruptOnCancel": "true",
        "callSite.short": label,
        "callSite.long": f"{label}: runtime.spark.run_dataflow with {workers} barrier task(s)",
    }
    for key, value in values.items():
        context.setLocalProperty(key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            context.setLocalProperty(key, value)


def partitions_without_running(df: Any) -> int | None:
    """``df``'s number of partitions if its plan says so without running anything, else ``None``.

    Known: an explicit repartition, ``spark.range`` with ``numPartitions``, an
    RDD or checkpoint, seen through projections and filters.
    """
    try:
        plan = df._jdf.queryExecution().analyzed()  # noqa: SLF001 - PySpark exposes the JVM frame only so
        while plan.getClass().getSimpleName() in _PASS_THROUGH:
            plan = plan.child()
        kind = plan.getClass().getSimpleName()
        if kind in ("Repartition", "RepartitionByExpression"):
            return int(plan.numPartitions())
        if kind == "Range":
            slices = plan.numSlices()
            return int(slices.get()) if slices.isDefined() else None
        if kind == "LogicalRDD":
            return int(plan.rdd().getNumPartitions())
    except Exception:  # noqa: BLE001 - another Spark's plan classes: repartition to be sure
        return None
    return None
