"""Flat DDL schemas (``"package string, size int"``) parsed in Python, without a round trip to Spark's JVM.

PySpark parses a DDL string with Spark's SQL parser in the JVM; on a
session's first call that loads the parser (seconds on a busy machine), and
every later call is still a Py4J round trip.  :func:`simple_ddl` handles the
common case, ``name type`` pairs of primitive types, and returns ``None`` for
anything else (nested or parameterized types, quoted names, comments,
``NOT NULL``), which PySpark's parser then handles as before.
"""

from __future__ import annotations

import re
from typing import Any

_FIELD = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?::\s*|\s+)([A-Za-z]+)\s*")
_TYPES = {
    "string": "StringType",
    "long": "LongType",
    "bigint": "LongType",
    "int": "IntegerType",
    "integer": "IntegerType",
    "short": "ShortType",
    "smallint": "ShortType",
    "byte": "ByteType",
    "tinyint": "ByteType",
    "double": "DoubleType",
    "float": "FloatType",
    "real": "FloatType",
    "boolean": "BooleanType",
    "binary": "BinaryType",
    "date": "DateType",
}
"""DDL names of the primitive types whose meaning depends on no setting (``timestamp`` does: it is left to Spark)."""


def simple_ddl(text: str) -> Any | None:
    """The ``StructType`` of a flat DDL schema of primitive types (all nullable), or ``None`` to let Spark parse it."""
    from pyspark.sql import types

    fields = []
    for part in text.split(","):
        match = _FIELD.fullmatch(part)
        if match is None:
            return None
        kind = _TYPES.get(match.group(2).lower())
        if kind is None:
            return None
        fields.append(types.StructField(match.group(1), getattr(types, kind)(), True))
    return types.StructType(fields) if fields else None
