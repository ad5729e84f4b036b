"""Classic and Spark Connect sessions alike: what :func:`~runtime.spark.run_dataflow` may ask of a session.

A Spark Connect session (Spark 4's ``SparkSession.builder.remote(...)``,
Databricks serverless and shared clusters) is a client of a server: it has no
``sparkContext``, no JVM and no status tracker.  Its DataFrames support
barrier ``mapInArrow``, ``localCheckpoint``, ``checkpoint`` and writes, and
``spark.conf`` reads the server's settings, which is all a gang needs.
"""

from __future__ import annotations

import weakref
from typing import Any


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (a client without a ``sparkContext``)."""
    module = type(spark).__module__
    return module.startswith("pyspark.sql.connect")


def setting(spark: Any, key: str, default: str | None = None) -> str | None:
    """The session's setting ``key`` (``default`` if unset), on classic and Connect sessions alike."""
    if not is_connect(spark):  # the context's own settings: a reused session's SQL conf may claim others
        value = context_settings(spark.sparkContext).get(key)
        return default if value is None else str(value)
    try:
        value = spark.conf.get(key, default)
    except Exception:  # noqa: BLE001 - a key the server refuses to show reads as unset
        return default
    return default if value is None else str(value)


def own_setting(spark: Any, key: str, default: str | None = None) -> str | None:
    """One of pytimely's own settings (``spark.pytimely.*``) as the session has it now.

    The session's runtime conf starts with the context's settings
    (``spark-defaults.conf``, ``--conf``, the builder's) and also holds what
    ``spark.conf.set`` gave it since, which is how a notebook sets a session's
    settings.  Spark's own settings are read from the context instead
    (:func:`setting`): a reused session's runtime conf may claim values its
    context never took.
    """
    if is_connect(spark):
        return setting(spark, key, default)
    try:
        value = spark.conf.get(key, None)
    except Exception:  # noqa: BLE001 - a session that cannot say reads as its context
        value = None
    return setting(spark, key, default) if value is None else str(value)


def session_key(spark: Any) -> str:
    """A name for the session that stays the same while it lives and differs from every other session's.

    A Connect session has an id of its own. A classic one is named by its
    application id and its context's start time: the application id alone is
    not unique, as a ``local-cluster`` or standalone master started for the
    session names its first application ``app-<the second it started>-0000``.
    """
    if is_connect(spark):
        return f"connect:{spark.session_id}"
    context = spark.sparkContext
    return f"classic:{context.applicationId}:{context.startTime}"


_CONTEXT_SETTINGS: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()
"""Each live SparkContext's settings, read once: a context's conf is fixed once it has started."""


def context_settings(context: Any) -> dict[str, str]:
    """Every setting of a started SparkContext, read from the JVM once for the context's life.

    ``getConf()`` clones the JVM's conf, and each read is a Py4J round trip:
    ``run_dataflow`` reads about ten settings, which cost 15–20 ms a run
    before this cache.  A context that cannot be remembered (no weak
    reference) is read every time.
    """
    try:
        found = _CONTEXT_SETTINGS.get(context)
    except TypeError:  # not weakly referable
        return dict(context.getConf().getAll())
    if found is None:
        found = dict(context.getConf().getAll())
        _CONTEXT_SETTINGS[context] = found
    return found
