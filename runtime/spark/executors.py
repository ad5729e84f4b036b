"""Can the executors run pytimely?  A small Spark job that imports it and its dependencies in the tasks.

A session made elsewhere (a notebook's, a managed platform's, a plain
``SparkSession.builder`` one) starts its Python workers with whatever
interpreter the cluster has, which may lack pytimely or one of its
dependencies.  ``run_dataflow`` would then fail on the executors with a bare
``No module named 'msgpack'`` inside a barrier stage.  :func:`check_executors`
runs a plain (not barrier) ``mapInArrow`` job of a few tasks whose function is
shipped by value and imports nothing itself until it runs: each task tries
every module in :data:`REQUIRED_MODULES` and sends back what failed.  The
check passes once per session (:func:`~runtime.spark.connect.session_key`), so
a later ``run_dataflow`` pays nothing for it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

from runtime.spark.connect import session_key
from runtime.spark.errors import SparkSetupError
from runtime.spark.failures import summary

REQUIRED_MODULES = ("msgpack", "numpy", "pyarrow", "scopes", "runtime.cluster_member", "runtime.spark.task")
"""What a task of ``run_dataflow`` imports: pytimely's packages and the dependencies they need."""
MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")
"""What a Python worker that could not start (its daemon module, pyarrow) says it lacks."""
SHIPPING = (
    "ship pytimely to the executors: a packed virtual environment through spark.archives "
    "(a venv with pytimely installed, not editable, packed with venv-pack -p ENV -o env.tar.gz; "
    "spark.archives=env.tar.gz#env, spark.pyspark.python=./env/bin/python), "
    "a zip of its packages through --py-files / spark.submit.pyFiles / spark.sparkContext.addPyFile, "
    "or an executor image with pytimely installed (see docs/spark.md, 'Shipping pytimely to the executors')"
)

_lock = threading.Lock()
_checked: set[str] = set()


def _probe_function(modules: tuple[str, ...]) -> Any:
    """The task's function, made here so that cloudpickle ships it by value (it imports nothing of ours)."""

    def probe(batches: Iterator[Any]) -> Iterator[Any]:
        import importlib
        import socket
        import sys

        import pyarrow  # type: ignore[import-untyped]

        for _ in batches:
            pass
        missing = []
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as error:  # noqa: BLE001 - any failure to import is reported as it is
                missing.append(f"{name} ({type(error).__name__}: {error})")
        yield pyarrow.RecordBatch.from_pydict(
            {"host": [socket.gethostname()], "python": [sys.executable], "missing": ["; ".join(missing)]}
        )

    return probe


def check_executors(spark: Any, tasks: int) -> None:
    """Raise :class:`SparkSetupError`, naming what is missing, unless ``tasks`` tasks can import pytimely."""
    key = session_key(spark)
    with _lock:
        if key in _checked:
            return
    frame = spark.range(tasks, numPartitions=tasks)
    try:
        rows = frame.mapInArrow(_probe_function(REQUIRED_MODULES), "host string, python string, missing string")
        found = rows.collect()
    except Exception as error:  # noqa: BLE001 - Py4J and Connect errors alike: the tasks could not even start
        missing = sorted(set(MISSING_MODULE.findall(str(error))))
        named = f"; their Python cannot import {', '.join(missing)}" if missing else ""
        raise SparkSetupError(
            "the executors cannot run a Python Arrow task, so run_dataflow cannot run there "
            f"({summary(str(error)) if str(error).strip() else type(error).__name__}){named}; "
            "check spark.pyspark.python and that "
            f"pytimely and pyarrow are installed on the executors; {SHIPPING}"
        ) from error
    broken = sorted({(row["host"], row["python"], row["missing"]) for row in found if row["missing"]})
    if broken:
        listed = "\n".join(f"  on {host} ({python}): cannot import {missing}" for host, python, missing in broken)
        raise SparkSetupError(
            f"the executors' Python cannot import pytimely or its dependencies:\n{listed}\n{SHIPPING}"
        )
    with _lock:
        _checked.add(key)


def forget_checks() -> None:
    """Check every session again on its next ``run_dataflow`` (after shipping new files to it)."""
    with _lock:
        _checked.clear()
