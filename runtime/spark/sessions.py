"""Sessions made elsewhere: what an existing SparkSession lacks of the settings pytimely asks for.

``SparkSession.builder...getOrCreate()`` returns the session that already runs
in the process (a notebook's, a managed platform's, one the user made with a
plain builder), and most of the settings passed to it then do not apply:
``spark.pyspark.python``, ``spark.executorEnv.*``, the Python daemon module
and the barrier settings are read once, when the SparkContext starts.
:func:`lacking` compares the session's settings with the wanted ones, and
:func:`warn_lacking` says which ones the session lacks and what that costs.
"""

from __future__ import annotations

import os
import shutil
import warnings
from typing import Any

from runtime.spark.connect import is_connect, setting

CONSEQUENCES = {
    "spark.barrier.sync.timeout": "run_dataflow bounds its own barrier wait (connect_timeout), so this only "
    "affects other barrier jobs",
    "spark.pyspark.python": "executors may start another Python, which may lack pytimely (run_dataflow checks)",
    "spark.executorEnv.PYSPARK_PYTHON": "executors may start another Python, which may lack pytimely",
    "spark.python.daemon.module": "each task's Python worker imports pytimely itself (about a second more per "
    "first task)",
    "spark.speculation": "a speculative copy of a task would join the dataflow twice (run_dataflow refuses it)",
}


def lacking(spark: Any, wanted: dict[str, str]) -> dict[str, tuple[str, str | None]]:
    """The wanted settings the session does not have: ``{key: (wanted, actual or None)}``."""
    differing: dict[str, tuple[str, str | None]] = {}
    for key, value in wanted.items():
        actual = setting(spark, key)
        if key == "spark.pyspark.python" and _python_matches(spark, value):
            continue
        if actual != value:
            differing[key] = (value, actual)
    return differing


def warn_lacking(spark: Any, wanted: dict[str, str]) -> dict[str, tuple[str, str | None]]:
    """Warn, listing each wanted setting the existing session lacks and what that means; return them."""
    differing = lacking(spark, wanted)
    if differing:
        lines = []
        for key, (value, actual) in sorted(differing.items()):
            shown = "unset" if actual is None else f"{actual!r}"
            consequence = CONSEQUENCES.get(key)
            lines.append(f"  {key}: {shown}, not {value!r}" + (f" ({consequence})" if consequence else ""))
        warnings.warn(
            "spark_session() found a SparkSession already running in this process and returned it; its "
            "settings were fixed when it started, and it lacks:\n"
            + "\n".join(lines)
            + "\nto get them, call spark.stop() on it before spark_session(), or start it with "
            "runtime.spark.session_settings() in its builder (or --conf on spark-submit)",
            stacklevel=3,
        )
    return differing


def _python_matches(spark: Any, wanted: str) -> bool:
    """Whether a classic session's workers run ``wanted`` anyway (``PYSPARK_PYTHON`` when it started)."""
    if is_connect(spark):
        return False
    python = getattr(spark.sparkContext, "pythonExec", None)
    found = shutil.which(python) if python else None
    return bool(found) and same_python(str(found), wanted)


def same_python(one: str, other: str) -> bool:
    """Whether two interpreter paths run the same Python with the same packages.

    Two virtual environments' ``python`` are links to one interpreter, so their
    real paths agree although their packages differ: the environment (the
    directory holding ``pyvenv.cfg``) must be the same too.
    """
    return _environment(one) == _environment(other)


def _environment(python: str) -> tuple[str, str | None]:
    """The interpreter's real path and its virtual environment's directory (``None`` outside one)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(python)))
    return os.path.realpath(python), root if os.path.isfile(os.path.join(root, "pyvenv.cfg")) else None
