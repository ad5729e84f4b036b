"""A ``SPARK_HOME`` of a test's own for its ``local-cluster``, so that side-by-side clusters share nothing on disk.

A ``local-cluster`` runs its executors in ``$SPARK_HOME/work/APP/ID``, and its
application id APP is ``app-<the second it started>-0000``. The Spark tests run
side by side under pytest-xdist, so two clusters that start in the same second
get the same id: with the shared installation they would run their executors
in the same directories (unpack archives over each other, remove each other's
directories), and their processes cannot be told apart by the application id.

:func:`private_spark_home` makes pyspark's installation again out of symbolic
links, with an empty ``work`` directory of its own; a test sets ``SPARK_HOME``
to it for its child process.
"""

from __future__ import annotations

from pathlib import Path


def private_spark_home(where: Path) -> Path:
    """Make ``where`` a ``SPARK_HOME`` linking to pyspark's installation, with a ``work`` directory of its own."""
    import pyspark

    installed = Path(pyspark.__file__).resolve().parent
    where.mkdir(parents=True)
    for entry in installed.iterdir():
        if entry.name != "work":
            (where / entry.name).symlink_to(entry)
    (where / "work").mkdir()
    return where
