"""The exceptions raised by :mod:`runtime.spark`, all :class:`~runtime.errors.TimelyRuntimeError`."""

from __future__ import annotations

from runtime.errors import ArrowValueError, InvalidArrowBatch, TimelyRuntimeError

FATAL_MARKER = "[pytimely:no-retry]"
"""Put at the start of an error raised in a task that another attempt would raise again."""
RETRY_MARKER = "[pytimely:retry]"
"""Put at the start of an error raised in a task that another attempt may not meet (a lost peer, a socket)."""


class SparkError(TimelyRuntimeError):
    """Base class of the errors raised by :mod:`runtime.spark`."""


class SparkSetupError(SparkError):
    """Spark cannot run the dataflow as configured: Java, pyspark, the session's settings."""


class SlotsUnavailable(SparkSetupError):
    """The cluster has fewer free task slots than the gang of tasks needs.

    Attributes:
        needed: the number of tasks asked for.
        free: the number of slots found.
    """

    def __init__(self, message: str, needed: int, free: int) -> None:
        super().__init__(message)
        self.needed = needed
        self.free = free


class SchemaMismatch(SparkError, TypeError):
    """The dataflow produced a record that does not fit the output schema.

    Attributes:
        column: the column at fault (``None`` when the record's shape is wrong).
        expected: the schema's type for the column, as text.
        found: what the dataflow produced, as text.
    """

    def __init__(self, message: str, column: str | None, expected: str, found: str) -> None:
        super().__init__(message)
        self.column = column
        self.expected = expected
        self.found = found


class SparkValueError(SparkError, ArrowValueError):
    """A Spark input row holds a value that Arrow carries but Python cannot hold (a timestamp or date past year
    9999, say), and the dataflow takes rows as Python tuples; the message names the column, the row of the task's
    partition and the value in Arrow's text.  ``columnar=True`` takes the Arrow batches as they are."""


class InvalidOutputBatch(SparkError, InvalidArrowBatch):
    """A record batch a task would hand to Spark (or save under ``checkpoint=``) is not valid Arrow.

    pyarrow builds arrays from buffers or views without checking them, and Spark would take the batch as it is: a
    ``string`` that is not UTF-8 would come back as replacement characters, a time of day of 24 hours or more would
    fail whatever reads the result later.  The task refuses such a batch before Spark (or the output log) sees it,
    and the job is not retried: another attempt would build the same batch.

    Attributes:
        column, column_type, problem: as for :class:`~runtime.errors.InvalidArrowBatch`.
        epoch: the output's time (the epoch, with ``checkpoint=``), or ``None`` for rows gathered at the end.
        task: the index of the task (its worker) that produced the batch.
    """

    def __init__(self, message: str, column: str, column_type: str, problem: str, epoch: object, task: int) -> None:
        super().__init__(message, "pyarrow.RecordBatch", column, column_type, problem)
        self.epoch = epoch
        self.task = task


class DataflowFailed(SparkError):
    """Every attempt of the Spark job failed (or one failed in a way a retry cannot fix).

    Attributes:
        attempts: how many times the job ran.
        causes: one line per failed attempt.
        retryable: whether the last failure looked transient (a lost task) rather than deterministic.
        task_traceback: the Python traceback the failing task raised, as Spark reported it (``None`` if
            the task left none, e.g. its executor was lost).
    """

    def __init__(
        self, message: str, attempts: int, causes: list[str], retryable: bool, task_traceback: str | None = None
    ) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.causes = causes
        self.retryable = retryable
        self.task_traceback = task_traceback


class TaskFailed(SparkError):
    """A task could not run its part of the dataflow (the message says whether a retry may help)."""


class RendezvousFailed(SparkError):
    """A task could not learn its peers' addresses from the driver in time."""


class GateRefused(SparkError):
    """A driver's listener and a task did not prove the same token to each other, or the handshake failed."""
