"""The exceptions raised by :mod:`runtime`.

Every error the runtime raises derives from :class:`TimelyRuntimeError`.
"""

from __future__ import annotations


class TimelyRuntimeError(Exception):
    """Base class of every error raised by :mod:`runtime`."""


class ConfigurationError(TimelyRuntimeError, ValueError):
    """The computation was configured incorrectly (for example, zero workers)."""


class WorkerFailed(TimelyRuntimeError):
    """A worker raised an exception; every other worker was stopped.

    Attributes:
        worker: the index of the worker that failed first.
    """

    def __init__(self, message: str, worker: int) -> None:
        super().__init__(message)
        self.worker = worker


class WorkerAborted(TimelyRuntimeError):
    """Raised inside a worker that is stopped because another worker failed."""


class DataflowStuck(TimelyRuntimeError):
    """Every worker is waiting for dataflows that can no longer make progress.

    The message lists the capabilities and messages that hold the frontiers back.
    """


class DataflowMismatch(TimelyRuntimeError):
    """Workers built different dataflows; every worker must build the same ones in the same order.

    Attributes:
        dataflow: the name of the dataflow that differs.
        workers: the two workers whose graphs were compared.
    """

    def __init__(self, message: str, dataflow: str, workers: tuple[int, int]) -> None:
        super().__init__(message)
        self.dataflow = dataflow
        self.workers = workers


class DecodeError(TimelyRuntimeError):
    """Bytes from outside (a peer, a file) cannot be decoded: malformed, or past one of the decoder's limits.

    Raised by :func:`runtime.codec.decode`, which bounds size, lengths and
    nesting depth; the wire, capture logs and recordings wrap it in their own
    errors (with the peer or file and the byte offset) where they know more.
    """


class FileSourceError(TimelyRuntimeError):
    """A file source could not read its files: a missing path, no files, a schema conflict or an unreadable file.

    The message names the file (and, where the reader says, what in it is wrong).
    """


class FileSinkError(TimelyRuntimeError):
    """A file sink could not write an epoch's file; nothing half-written is left where a reader would take it."""


class AuditViolation(TimelyRuntimeError):
    """The progress audit (``PYTIMELY_AUDIT=1`` or ``execute(..., audit=True)``) found the ledger inconsistent.

    The message names the check that failed, the operator (name, scope path and
    address), the port or channel, the worker and the time.  This is a bug in
    pytimely or in an operator that bypasses its capabilities: please report it.
    """
