"""Spark's Python daemon with pytimely already imported: every Python worker it forks starts warm.

Spark starts one daemon per executor (``python -m pyspark.daemon``), which
forks a Python worker for each task.  A task's first job otherwise imports
NumPy, pyarrow and pytimely in every fresh worker (about a second);
:func:`runtime.spark.session_settings` makes Spark start this module instead
(``spark.python.daemon.module``), which imports them once, before forking.
"""

from __future__ import annotations

import numpy  # noqa: F401
import pyarrow  # type: ignore[import-untyped]  # noqa: F401
from pyspark import daemon

import runtime.cluster  # noqa: F401
import runtime.spark.task  # noqa: F401
import scopes  # noqa: F401

if __name__ == "__main__":
    daemon.manager()
