"""Where ``run_dataflow``'s result lives: executor memory (the default), a reliable checkpoint, or files.

The barrier stage's output is first ``localCheckpoint`` ed: its blocks stay in
the executors' block managers, which is the fastest, but an executor lost
*after* the job (autoscaling, preemption, a crash) takes its blocks along and
every later action fails with ``CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND``, since a
checkpointed result cannot be recomputed.  ``durable=`` asks for more:

``durable=True``
    a reliable checkpoint into the session's checkpoint directory
    (``spark.sparkContext.setCheckpointDir(...)`` or ``spark.checkpoint.dir``),
    which must be on storage every executor reaches (HDFS, S3, a shared file
    system).  The DataFrame keeps its schema; its rows are read back from
    those files from then on.
``durable="PATH"``
    the result is written as Parquet to ``PATH`` (replacing what is there) and
    read back from it: the files outlive the session too.

The durable copy is made inside the attempt, so an executor lost between the
dataflow and the copy makes the attempt fail and run again.

On Spark Connect the barrier mark of the local checkpoint cannot be cleared
(:mod:`runtime.spark.materialize` needs the JVM), so :func:`unmarked` moves the
rows once through a shuffle into a second local checkpoint instead, unless the
result goes to files anyway.
"""

from __future__ import annotations

import os
from typing import Any

from runtime.errors import ConfigurationError
from runtime.spark.connect import is_connect, setting
from runtime.spark.materialize import detach

Durable = bool | str | os.PathLike[str] | None
"""``run_dataflow(durable=...)``: ``None``/``False``, ``True`` (a reliable checkpoint) or a path to write to."""


def check_durable(spark: Any, durable: Durable) -> None:
    """Refuse, before any work, a ``durable=`` that cannot be honoured, saying what to do instead."""
    if durable is None or durable is False:
        return
    if durable is True:
        if checkpoint_dir(spark) is None:
            raise ConfigurationError(
                "run_dataflow(durable=True) writes a reliable checkpoint into the session's checkpoint "
                "directory, and this session has none: call spark.sparkContext.setCheckpointDir(DIR) (or set "
                "spark.checkpoint.dir) with a DIR every executor reaches (HDFS, S3, a shared file system), or "
                "pass durable='PATH' to write the result as Parquet there"
            )
        return
    if not isinstance(durable, str | os.PathLike) or not os.fspath(durable):
        raise ConfigurationError(
            f"run_dataflow(durable=...) takes True (a reliable checkpoint) or a path to write Parquet to, "
            f"got {durable!r}"
        )


def checkpoint_dir(spark: Any) -> str | None:
    """The session's reliable checkpoint directory, or ``None`` if it has none."""
    if not is_connect(spark):
        found = spark.sparkContext._jsc.sc().getCheckpointDir()  # noqa: SLF001 - PySpark exposes it only so
        if found.isDefined():
            return str(found.get())
    return setting(spark, "spark.checkpoint.dir")


def unmarked(checkpointed: Any, workers: int) -> Any:
    """The local checkpoint of the barrier stage as an ordinary DataFrame (see the module docstring)."""
    if not is_connect(checkpointed.sparkSession):
        return detach(checkpointed)
    return checkpointed.repartition(workers).localCheckpoint(eager=True)


def finish(checkpointed: Any, workers: int, durable: Durable) -> Any:
    """The result ``run_dataflow`` returns: from ``checkpointed`` (the barrier stage's local checkpoint)."""
    if durable is None or durable is False:
        return unmarked(checkpointed, workers)
    if durable is True:
        return unmarked(checkpointed, workers).checkpoint(eager=True)
    path = os.fspath(durable)
    source = checkpointed if is_connect(checkpointed.sparkSession) else detach(checkpointed)
    source.write.mode("overwrite").parquet(path)  # a whole-partition job: allowed on a barrier-marked RDD
    return checkpointed.sparkSession.read.parquet(path)
