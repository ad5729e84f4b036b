"""A SparkContext's settings are read from the JVM once for the context's life (runtime.spark.connect)."""

from __future__ import annotations

from typing import Any

from runtime.spark.connect import context_settings, setting


class FakeConf:
    """What ``SparkContext.getConf()`` returns: a copy of the settings, read whole with ``getAll``."""

    def __init__(self, pairs: dict[str, str]) -> None:
        self.pairs = pairs

    def getAll(self) -> list[tuple[str, str]]:  # noqa: N802 - PySpark's name
        return list(self.pairs.items())


class FakeContext:
    """A started SparkContext that counts how often its conf is cloned."""

    def __init__(self, pairs: dict[str, str]) -> None:
        self.pairs = pairs
        self.clones = 0

    def getConf(self) -> FakeConf:  # noqa: N802 - PySpark's name
        self.clones += 1
        return FakeConf(dict(self.pairs))


class FakeSession:
    """A classic session (not Spark Connect): its settings are its context's."""

    def __init__(self, context: Any) -> None:
        self.sparkContext = context


class SlottedContext:
    """A context that cannot be weakly referenced: read every time."""

    __slots__ = ("clones",)

    def __init__(self) -> None:
        self.clones = 0

    def getConf(self) -> FakeConf:  # noqa: N802 - PySpark's name
        self.clones += 1
        return FakeConf({"spark.driver.host": "10.0.0.2"})


def test_a_contexts_settings_are_read_once_and_a_new_context_is_read_again() -> None:
    first = FakeContext({"spark.driver.host": "10.0.0.1", "spark.speculation": "false"})
    session = FakeSession(first)
    assert setting(session, "spark.driver.host") == "10.0.0.1"
    assert setting(session, "spark.speculation", "true") == "false"
    assert setting(session, "spark.checkpoint.dir") is None
    assert setting(session, "spark.checkpoint.dir", "/tmp/x") == "/tmp/x"
    assert first.clones == 1
    second = FakeContext({"spark.driver.host": "10.0.0.9"})  # a session made after the first was stopped
    assert setting(FakeSession(second), "spark.driver.host") == "10.0.0.9"
    assert second.clones == 1 and first.clones == 1


def test_a_context_that_cannot_be_remembered_is_read_every_time() -> None:
    context = SlottedContext()
    assert context_settings(context) == {"spark.driver.host": "10.0.0.2"}
    assert setting(FakeSession(context), "spark.driver.host") == "10.0.0.2"
    assert context.clones == 2


def unchanged(scope: Any, batches: Any) -> Any:
    return batches


def test_pytimely_settings_set_on_a_running_session_are_taken(spark: Any) -> None:
    """``spark.conf.set("spark.pytimely.ports", ...)``, as a notebook sets a session's settings, pins the mesh."""
    import sys

    import pytest
    from helpers.ports import free_port
    from pyspark import cloudpickle

    from runtime.errors import ConfigurationError
    from runtime.spark import run_dataflow

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    frame = spark.range(0, 10, numPartitions=2)
    low = free_port()
    joined: list[str] = []
    try:
        spark.conf.set("spark.pytimely.ports", f"{low}-{low + 40}")
        result = run_dataflow(
            frame,
            unchanged,
            "id long",
            workers=2,
            on_progress=lambda event: joined.append(str(event["address"])) if event["event"] == "joined" else None,
        )
        assert result.count() == 10
        ports = sorted(int(address.rpartition(":")[2]) for address in joined)
        assert len(ports) == 2 and all(low <= port <= low + 40 for port in ports), (low, joined)
        spark.conf.set("spark.pytimely.rendezvous", "carrier-pigeon")
        with pytest.raises(ConfigurationError, match="carrier-pigeon"):
            run_dataflow(frame, unchanged, "id long", workers=2)
    finally:
        spark.conf.unset("spark.pytimely.ports")
        spark.conf.unset("spark.pytimely.rendezvous")
