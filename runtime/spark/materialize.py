"""The output of a barrier stage as an ordinary DataFrame, read from the blocks the stage left.

Spark marks every RDD computed from a barrier stage as barrier, for good
(``RDD.isBarrier`` is a lazy value, so it stays true even after the RDD is
checkpointed): ``show``, ``take``, ``limit``, ``union`` or ``coalesce`` on
such a DataFrame raise ``BarrierJobUnsupportedRDDChainException``, and any
later stage would again need every slot at once.  :func:`detach` reads the
stage's checkpointed partitions back through Spark's ``BlockRDD`` instead,
which is not barrier: the returned DataFrame has the same rows and
partitions, costs no copy, and behaves like any other.

``BlockRDD`` and ``SparkSession.internalCreateDataFrame`` are Spark's
internal (``private[spark]``/``private[sql]``) JVM API, reached through
Py4J.  If they are missing (another Spark version), :func:`detach` warns and
returns the checkpointed DataFrame as it is.
"""

from __future__ import annotations

import warnings
from typing import Any

INTERNAL_ROW = "org.apache.spark.sql.catalyst.InternalRow"


def detach(checkpointed: Any) -> Any:
    """``checkpointed`` (a DataFrame from ``localCheckpoint(eager=True)``) read back without the barrier mark.

    The blocks belong to the checkpointed RDD: the returned DataFrame keeps a
    reference to ``checkpointed`` (``_pytimely_blocks``) so that Spark's
    cleaner does not drop them while it is in use.
    """
    from pyspark.sql import DataFrame

    spark = checkpointed.sparkSession
    try:
        jvm = spark._jvm
        internal = checkpointed._jdf.queryExecution().analyzed().rdd()
        count = internal.getNumPartitions()
        block_id = jvm.org.apache.spark.storage.BlockId
        blocks = spark.sparkContext._gateway.new_array(block_id, count)
        for partition in range(count):
            blocks[partition] = jvm.org.apache.spark.storage.RDDBlockId(internal.id(), partition)
        tag = jvm.scala.reflect.ClassTag.apply(jvm.java.lang.Class.forName(INTERNAL_ROW))
        rdd = jvm.org.apache.spark.rdd.BlockRDD(spark._jsc.sc(), blocks, tag)
        schema = spark._jsparkSession.parseDataType(checkpointed.schema.json())
        frame = DataFrame(spark._jsparkSession.internalCreateDataFrame(rdd, schema, False), spark)
    except Exception as error:  # noqa: BLE001 - Py4J errors of a Spark without these internals
        warnings.warn(
            f"run_dataflow cannot read its output back without Spark's barrier mark ({type(error).__name__}: "
            f"{str(error)[:200]}); take(), limit(), union() and coalesce() on the result will fail: "
            "write it out (df.write.parquet) and read it back instead",
            stacklevel=3,
        )
        return checkpointed
    frame._pytimely_blocks = checkpointed  # type: ignore[attr-defined]
    return frame
