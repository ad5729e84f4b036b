"""Checks before Spark starts a gang of tasks: Java, the session's settings, free task slots.

:func:`spark_session` builds a session configured for pytimely (the running
interpreter as ``PYSPARK_PYTHON``, a finite ``spark.barrier.sync.timeout``, one
string-hash seed everywhere, Python workers forked with pytimely already
imported: :mod:`runtime.spark.daemon`); :func:`check_session` and :func:`check_slots`
run before every job, so that a misconfigured cluster fails at once with what
to change instead of after Spark's own timeouts.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import warnings
from typing import Any

from runtime.spark.connect import is_connect, setting
from runtime.spark.errors import SlotsUnavailable, SparkSetupError
from runtime.spark.sessions import same_python, warn_lacking

JAVA_MINIMUM = 17
"""pyspark 4 runs on Java 17 or later."""
BARRIER_SYNC_TIMEOUT = 120
"""Seconds a task waits in ``allGather`` for the other tasks of its gang (``spark.barrier.sync.timeout``)."""
HASH_SEED = "0"
"""``PYTHONHASHSEED`` for every Python worker: exchange routes strings by ``hash``, alike everywhere."""

_INSTALL_JAVA = (
    "install Java {minimum} or later (Debian/Ubuntu: apt-get install openjdk-17-jre-headless; "
    "elsewhere: https://adoptium.net) and put it on PATH or set JAVA_HOME"
)


def java_version(java: str | None = None) -> int:
    """The major version of the Java that Spark will start (``$JAVA_HOME/bin/java`` or ``java`` on PATH)."""
    if java is None:
        home = os.environ.get("JAVA_HOME")
        java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    advice = _INSTALL_JAVA.format(minimum=JAVA_MINIMUM)
    if not java or not os.path.exists(java):
        where = f"JAVA_HOME={os.environ['JAVA_HOME']}" if os.environ.get("JAVA_HOME") else "PATH"
        raise SparkSetupError(f"Spark needs Java, but no java was found on {where}: {advice}")
    try:
        result = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SparkSetupError(f"cannot run {java} -version ({error}): {advice}") from None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if match is None:
        raise SparkSetupError(f"cannot tell the version of {java} from {result.stderr.strip()!r}: {advice}")
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0" is Java 8
        major = int(match.group(2))
    return major


def check_java(java: str | None = None) -> int:
    """Raise :class:`SparkSetupError`, saying what to install, unless Java 17+ is available."""
    major = java_version(java)
    if major < JAVA_MINIMUM:
        raise SparkSetupError(
            f"pyspark 4 needs Java {JAVA_MINIMUM} or later, but the java Spark would start is Java {major}: "
            + _INSTALL_JAVA.format(minimum=JAVA_MINIMUM)
        )
    return major


def session_settings(sync_timeout: int = BARRIER_SYNC_TIMEOUT) -> dict[str, str]:
    """The Spark settings that :func:`run_dataflow` relies on."""
    return {
        "spark.barrier.sync.timeout": str(sync_timeout),
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executorEnv.PYTHONHASHSEED": HASH_SEED,
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        "spark.speculation": "false",
        "spark.python.daemon.module": "runtime.spark.daemon",
    }


def spark_session(
    master: str = "local[*]",
    app_name: str = "pytimely",
    config: dict[str, str] | None = None,
    sync_timeout: int = BARRIER_SYNC_TIMEOUT,
) -> Any:
    """Start (or reuse) a SparkSession ready for :func:`~runtime.spark.run_dataflow`.

    Checks Java first, sets ``PYSPARK_PYTHON`` to this interpreter (so that
    executors import the same pytimely), and applies :func:`session_settings`
    then ``config`` (which wins).  A ``spark.pyspark.python`` in ``config``
    (``./env/bin/python`` beside ``spark.archives=env.tar.gz#env``, a packed
    environment) becomes ``PYSPARK_PYTHON`` instead: PySpark takes the
    executors' interpreter from that variable when the session starts, not
    from the setting.  A session already running in the process (made
    elsewhere, e.g. by a notebook) is returned as it is, with a warning that
    lists the settings it lacks (:mod:`runtime.spark.sessions`).
    """
    check_java()
    wanted = {**session_settings(sync_timeout), **(config or {})}
    python = wanted["spark.pyspark.python"]
    if "spark.executorEnv.PYSPARK_PYTHON" not in (config or {}):
        wanted["spark.executorEnv.PYSPARK_PYTHON"] = python
    os.environ["PYSPARK_PYTHON"] = python
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("PYTHONHASHSEED", HASH_SEED)
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    existing = SparkContext._active_spark_context is not None  # noqa: SLF001 - PySpark's one handle on it
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in wanted.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if existing:
        warn_lacking(spark, wanted)
    return spark


def check_session(spark: Any) -> None:
    """Refuse a session whose settings break gang scheduling; warn about a wrong interpreter.

    Works on classic and Spark Connect sessions alike (the settings are read
    through :func:`~runtime.spark.connect.setting`).  The barrier wait needs
    no ``spark.barrier.sync.timeout``: each task bounds it itself
    (``connect_timeout``, :mod:`runtime.spark.gang`).
    """
    if (setting(spark, "spark.speculation", "false") or "false").lower() == "true":
        raise SparkSetupError(
            "spark.speculation is on: a speculative copy of a task would join the dataflow twice; "
            "start the session with spark.speculation=false"
        )
    if (setting(spark, "spark.dynamicAllocation.enabled", "false") or "false").lower() == "true":
        raise SparkSetupError(
            "spark.dynamicAllocation.enabled is on, which Spark's barrier mode refuses; "
            "start the session with spark.dynamicAllocation.enabled=false"
        )
    if is_connect(spark):
        return
    python = getattr(spark.sparkContext, "pythonExec", None)
    found = shutil.which(python) if python else None  # a bare name ("python3") is looked up on PATH
    if found and not same_python(found, sys.executable):
        warnings.warn(
            f"Spark runs Python tasks with {python} ({found}), not this interpreter ({sys.executable}); "
            f"set PYSPARK_PYTHON={sys.executable} before the session starts so that tasks import the same "
            "pytimely",
            stacklevel=3,
        )


def total_slots(spark: Any) -> int:
    """How many tasks the cluster can run at once (Spark's own count for barrier stages)."""
    jsc = spark.sparkContext._jsc.sc()  # noqa: SLF001 - PySpark exposes the JVM context only so
    try:
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        return int(jsc.maxNumConcurrentTasks(profile))
    except Exception:  # noqa: BLE001 - an internal API; fall back to the default parallelism
        return int(spark.sparkContext.defaultParallelism)


def running_tasks(spark: Any) -> int:
    """Tasks running now in the cluster's active stages."""
    tracker = spark.sparkContext.statusTracker()
    running = 0
    for stage_id in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage_id)
        if info is not None:
            running += info.numActiveTasks
    return running


def check_slots(spark: Any, needed: int, wait: float = 10.0) -> int:
    """Warn and raise :class:`SlotsUnavailable` if fewer than ``needed`` slots are free after ``wait`` s.

    Executors of a cluster register after the session starts, and tasks of
    another job may still be finishing, so the check polls for up to ``wait``
    seconds before giving up.  Returns the free slots found.
    """
    deadline = time.monotonic() + wait
    while True:
        total = total_slots(spark)
        free = total - running_tasks(spark)
        if free >= needed or time.monotonic() >= deadline:
            break
        time.sleep(0.25)
    if free >= needed:
        return free
    master = spark.sparkContext.master
    if master.startswith("local["):
        change = (
            f"use workers<={max(total, 1)}, or a local master with more threads (local[{needed}]; "
            "local[*] has one per core)"
        )
    elif master == "local":
        change = f"use workers=1, or master local[{needed}]"
    else:
        change = (
            f"use workers<={max(free, 1)}, or give the cluster more executor cores "
            "(spark.executor.instances, spark.executor.cores, or start more workers), "
            "with spark.task.cpus per task"
        )
    message = (
        f"run_dataflow needs {needed} task slots at once (one per pytimely process, gang-scheduled in "
        f"barrier mode), but the cluster at {master} has {total} slot(s) and {max(free, 0)} free: {change}"
    )
    warnings.warn(message, stacklevel=3)
    raise SlotsUnavailable(message, needed, max(free, 0))
