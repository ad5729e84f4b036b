"""pytimely on Apache Spark: dataflows as gang-scheduled tasks (``pip install 'pytimely[spark]'``).

:func:`run_dataflow` runs a dataflow over a DataFrame with ``N`` barrier tasks,
each one pytimely process of a TCP mesh; :func:`spark_session` starts a
session configured for it; :func:`warm_up` starts its Python workers ahead of
the first dataflow; :func:`current_task` tells operators which task they run
in.  Errors derive from :class:`~runtime.spark.errors.SparkError`.
"""

from runtime.spark.arrow import register_arrow_codec, to_record_batches
from runtime.spark.driver import DEFAULT_RETRIES, arrow_schema, run_dataflow
from runtime.spark.errors import DataflowFailed, SchemaMismatch, SlotsUnavailable, SparkError, SparkSetupError
from runtime.spark.preflight import check_java, check_slots, java_version, session_settings, spark_session
from runtime.spark.progress import TaskEvent
from runtime.spark.task import TaskInfo, current_task
from runtime.spark.warmup import WarmUp, warm_up

__all__ = [
    "DEFAULT_RETRIES",
    "DataflowFailed",
    "TaskEvent",
    "SchemaMismatch",
    "SlotsUnavailable",
    "SparkError",
    "SparkSetupError",
    "TaskInfo",
    "WarmUp",
    "arrow_schema",
    "check_java",
    "check_slots",
    "current_task",
    "java_version",
    "register_arrow_codec",
    "run_dataflow",
    "session_settings",
    "spark_session",
    "to_record_batches",
    "warm_up",
]
