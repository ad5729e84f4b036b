"""The output of a barrier stage as an ordinary DataFrame: its checkpoint without the barrier mark.

Spark marks every RDD computed from a barrier stage as barrier, and keeps the
mark after the RDD is checkpointed: ``RDD.isBarrier_`` is a lazy value,
computed (true) when the barrier job ran, although the checkpointed RDD no
longer depends on the barrier RDD.  So ``show``, ``take``, ``limit``,
``union`` or ``coalesce`` on such a DataFrame raise
``BarrierJobUnsupportedRDDChainException``, and any later stage would again
need every slot at once.  :func:`detach` clears that stale mark on the
checkpointed RDD (through Java reflection, via Py4J), which is then what it
is: an RDD read from the executors' blocks.  The DataFrame keeps its plan,
rows and partitions; nothing is copied.

``isBarrier_`` is a private field of Spark's ``RDD`` classes; if it is missing
(another Spark version), :func:`detach` warns and returns the DataFrame as it
is.
"""

from __future__ import annotations

import warnings
from typing import Any

BARRIER_FIELD = "isBarrier_"


def detach(checkpointed: Any) -> Any:
    """``checkpointed`` (a DataFrame from ``localCheckpoint(eager=True)``) with its RDD's stale barrier mark cleared."""
    try:
        rdd = checkpointed._jdf.queryExecution().analyzed().rdd()  # noqa: SLF001 - PySpark exposes the JVM frame only so
        if not rdd.isCheckpointed():
            raise ValueError("the DataFrame's RDD is not checkpointed")
        field = _declared_field(rdd.getClass(), BARRIER_FIELD)
        field.setAccessible(True)
        field.setBoolean(rdd, False)
        if rdd.isBarrier():
            raise ValueError("the RDD is still marked barrier")
    except Exception as error:  # noqa: BLE001 - Py4J errors of a Spark without this field
        warnings.warn(
            f"run_dataflow cannot clear Spark's barrier mark on its output ({type(error).__name__}: "
            f"{str(error)[:200]}); take(), limit(), union() and coalesce() on the result will fail: "
            "write it out (df.write.parquet) and read it back instead",
            stacklevel=3,
        )
    return checkpointed


def _declared_field(cls: Any, name: str) -> Any:
    """The Java field ``name`` declared by ``cls`` or the nearest superclass that declares it."""
    while cls is not None:
        for field in cls.getDeclaredFields():
            if field.getName() == name:
                return field
        cls = cls.getSuperclass()
    raise ValueError(f"no field {name} in the RDD's classes")
