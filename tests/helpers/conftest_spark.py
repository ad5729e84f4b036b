"""The one SparkSession shared by every Spark test (``local[2]``, small settings), started on first use.

``tests/conftest.py`` imports :func:`spark` from here so that pytest sees the
fixture; pyspark is imported only when a test asks for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

SETTINGS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "2000",
}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A ``local[2]`` SparkSession configured by :func:`runtime.spark.spark_session`, stopped at the end."""
    pytest.importorskip("pyspark", reason="the Spark tests need the spark extra: pip install -e '.[spark]'")
    from runtime.spark import spark_session

    session = spark_session("local[2]", "pytimely tests", SETTINGS)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
