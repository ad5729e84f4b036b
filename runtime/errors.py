"""The exceptions raised by :mod:`runtime`.

Every error the runtime raises derives from :class:`TimelyRuntimeError`.
"""

from __future__ import annotations

from scopes.errors import ArrowValueError as ArrowValueError
from scopes.errors import TimelyError as TimelyError


class TimelyRuntimeError(TimelyError):
    """Base class of every error raised by :mod:`runtime`."""


class ConfigurationError(TimelyRuntimeError, ValueError):
    """The computation was configured incorrectly (for example, zero workers)."""


class MetricsUnavailable(ConfigurationError):
    """The ``--metrics`` endpoint (``PYTIMELY_METRICS``) cannot be served when the run starts: its port is taken
    (by something that took it after the flags were checked), its address is not this machine's, or
    prometheus_client is missing.  :func:`~runtime.cluster.execute_from_args` ends the program on it as on a bad
    flag (one line, status 2); a child process of the launcher reports it as such."""


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


STUCK_HEADER = "no worker can make progress (every worker is waiting and no message is in flight):"
"""The first line of a :class:`DataflowStuck` that combines the explanations of several workers (or processes)."""


def combined_stuck(explanations: list[str]) -> DataflowStuck:
    """One :class:`DataflowStuck` under :data:`STUCK_HEADER` for the explanations of several workers or processes.

    An explanation that is itself combined (a process's, under the header already) is added without its header,
    so the header appears once.
    """
    parts = [text.removeprefix(STUCK_HEADER).lstrip("\n") for text in explanations]
    return DataflowStuck(STUCK_HEADER + "\n" + "\n".join(parts))


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


class FileValueError(FileSourceError, ArrowValueError):
    """A file holds a value that Arrow reads but Python cannot hold, and the source was asked for records.

    A Parquet ``timestamp`` in year 10000 (a sentinel date), say: the message
    names the file, the row (and, for Parquet, the row group and the byte offset
    of the column chunk), the column, the value in Arrow's text and what to do
    (``columnar=True`` keeps Arrow's values).  See :class:`~scopes.errors.ArrowValueError`.
    """


class FileSinkValueError(FileSinkError, ArrowValueError):
    """A file sink was given an Arrow value that Python cannot hold, for a format written from Python values
    (JSON Lines); the message names the time, the column, the row and the value in Arrow's text."""


class AuditViolation(TimelyRuntimeError):
    """The progress audit (``PYTIMELY_AUDIT=1`` or ``execute(..., audit=True)``) found the ledger inconsistent.

    The message names the check that failed, the operator (name, scope path and
    address), the port or channel, the worker and the time.  This is a bug in
    pytimely or in an operator that bypasses its capabilities: please report it.
    """


class FrameDamage(DecodeError):
    """A frame fails its checksum or declares an impossible length.

    Attributes:
        offset: the byte offset of the frame from the start of the file or stream.
        problem: what is wrong with it, as a phrase ("fails its CRC-32 check").
    """

    def __init__(self, offset: int, problem: str) -> None:
        super().__init__(f"the frame at byte offset {offset} {problem}")
        self.offset = offset
        self.problem = problem


class EncodingError(TimelyRuntimeError, TypeError):
    """A value cannot be encoded (its type has no codec, or a columnar batch holds objects).

    Attributes:
        type_name: the qualified name of the type that could not be encoded.
    """

    def __init__(self, message: str, type_name: str) -> None:
        super().__init__(message)
        self.type_name = type_name


class InvalidArrowBatch(EncodingError, ValueError):
    """An Arrow batch that is not valid Arrow, refused before it leaves its process.

    pyarrow builds arrays without checking their values unless asked
    (``pyarrow.Array.from_buffers``, ``Array.view``,
    ``DictionaryArray.from_arrays(..., safe=False)``): a ``string`` that is not
    UTF-8, a ``time32`` of 24 hours or more, a dictionary index past its
    dictionary.  Every process validates the Arrow batches it receives and
    would refuse such a batch as damage on the wire; the sending process refuses
    it instead (:mod:`runtime.communication.arrow_validity`), naming the column
    and Arrow's own validation text.  Sent between processes, the message also
    names the worker, the time and the operator the channel leads to.

    Attributes:
        column: the name of the first column found invalid; ``""`` when every column is valid alone and the
            batch is not (its layout: the columns' lengths or schema).
        column_type: its Arrow type, as text (``""`` with no column).
        problem: what Arrow's ``validate(full=True)`` says of it.
    """

    def __init__(self, message: str, type_name: str, column: str, column_type: str, problem: str) -> None:
        super().__init__(message, type_name)
        self.column = column
        self.column_type = column_type
        self.problem = problem

    @property
    def part(self) -> str:
        """What is invalid, for messages: ``column 'name' (type)``, or the batch's layout."""
        if self.column:
            return f"column {self.column!r} ({self.column_type})"
        return "layout (the columns' lengths or schema; each column is valid alone)"


class CheckpointError(TimelyRuntimeError):
    """A checkpoint cannot be used: see :class:`CheckpointCorrupt` and :class:`CheckpointMismatch`."""


class CheckpointCorrupt(CheckpointError):
    """A checkpoint file is damaged; the message gives its path and the byte offset of the damage."""


class CheckpointMismatch(CheckpointError):
    """A checkpoint was written by another dataflow, worker count or format version, or routed keys otherwise.

    The last: a worker's file holds state for a key that the current routing sends
    to another worker (:class:`scopes.errors.KeyNotOwned` is its cause).
    """


class InterleavingFailure(AssertionError, TimelyRuntimeError):
    """A dataflow gave another answer under some message order than it gives without interleaving.

    Attributes:
        seed: the smallest seed whose order changed the answer.
        schedule: the shrunk schedule of choices that changes it, for
            :func:`runtime.testing.replay_interleaving`.
        workers: how many simulated workers ran.
    """

    def __init__(self, message: str, seed: int, schedule: list[float | int], workers: int) -> None:
        super().__init__(message)
        self.seed = seed
        self.schedule = schedule
        self.workers = workers


class SimulationError(TimelyRuntimeError):
    """The simulation itself could not continue (a worker never yielded, or too many turns)."""


class EventLogError(TimelyRuntimeError):
    """Base class of event-log errors.

    Attributes:
        source: a description of the log (its file name, or the socket's peer).
    """

    def __init__(self, message: str, source: str) -> None:
        super().__init__(message)
        self.source = source


class EventLogFormatError(EventLogError):
    """The data is not a pytimely event log, or not one with the expected timestamp type."""


class EventLogVersionError(EventLogError):
    """The log is of a format version this reader does not read.

    Attributes:
        version: the version the log declares.
    """

    def __init__(self, message: str, source: str, version: object) -> None:
        super().__init__(message, source)
        self.version = version


class EventLogCorrupt(EventLogError):
    """A frame of the log is damaged (bad checksum, undecodable payload, impossible length).

    Attributes:
        offset: the byte offset of the damaged frame from the start of the log.
    """

    def __init__(self, message: str, source: str, offset: int) -> None:
        super().__init__(message, source)
        self.offset = offset


class EventLogTruncated(EventLogCorrupt):
    """The log ends in the middle of a frame (or before its header is complete)."""


class EventEncodeError(EventLogError):
    """An event holds a value the format cannot represent."""


class ClusterError(TimelyRuntimeError):
    """A fault in the cluster of processes: a peer lost, refused, or unreachable."""


class PeerLost(ClusterError):
    """The connection to another process ended before it finished.

    Attributes:
        process: the lost process's index.
        address: its ``host:port``.
    """

    def __init__(self, message: str, process: int, address: str) -> None:
        super().__init__(message)
        self.process = process
        self.address = address


class TamperedFrame(PeerLost):
    """Bytes from another process failed their authentication: changed, dropped, reordered or spliced in flight.

    A :class:`PeerLost` (the connection cannot be trusted any more) whose
    ``process`` and ``address`` name the peer the bytes claimed to come from.
    """


class ClusterStopped(ClusterError):
    """This process stopped because another process asked it to (interrupted, or lost a peer itself)."""


class HandshakeError(ClusterError):
    """A connection was refused: wrong token, protocol version, or cluster configuration."""


class SettingsMismatch(HandshakeError, ConfigurationError):
    """Two processes of a cluster were started with different values of a setting every process must share.

    Found by the handshake (the send window, the frame limit, the worker threads per process, string hashing);
    the message names the setting, both values and both processes.  Every process that differs from another
    refuses to form the cluster, once it has handshaken with every other; if some process never arrives, it
    raises this at the connect deadline, its message also naming the process awaited (a :class:`ConnectTimeout`
    is its cause).
    """


class ConnectTimeout(ClusterError):
    """A process could not reach (or was not reached by) its peers before the deadline."""


class SynchronizationTimeout(TimelyRuntimeError):
    """A barrier or sequencer wait took longer than its timeout.

    Attributes:
        worker: the index of the worker that gave up waiting.
    """

    def __init__(self, message: str, worker: int) -> None:
        super().__init__(message)
        self.worker = worker


class ColumnarEncodeError(TimelyRuntimeError, TypeError):
    """A columnar batch cannot be turned into bytes (an object dtype, say); the message says what to do."""


class ColumnarDecodeError(TimelyRuntimeError, ValueError):
    """Bytes do not hold the columnar batch they claim to (damaged), or pyarrow is missing to read one."""


class ColumnarUnavailable(ColumnarDecodeError):
    """An Arrow batch arrived in a process without pyarrow: nothing is damaged, a library is missing."""


class RecordingError(TimelyRuntimeError):
    """A recording cannot be read: missing, not a recording, a newer version, or corrupted."""


class RecordingCorrupt(RecordingError, DecodeError):
    """A recording is damaged: a frame fails its checksum, or holds something that is not events.

    Attributes:
        where: the file (or stream) name.
        offset: the byte offset of the damage from its start.
    """

    def __init__(self, message: str, where: str, offset: int) -> None:
        super().__init__(message)
        self.where = where
        self.offset = offset


class UncheckedRecordingWarning(TimelyRuntimeError, UserWarning):
    """A recording of format version 1 was read (on request): it has no checksums, so damage reads as other data."""


class RecordingTooLarge(RecordingError):
    """A reader's bound on unfinished data was passed: one event (or frame) needs more bytes than it may hold.

    Attributes:
        limit: the bound, in bytes.
    """

    def __init__(self, message: str, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class WireError(DecodeError):
    """Bytes received from a peer do not follow the wire protocol."""


class SealError(WireError):
    """A sealed record failed its keyed MAC (see :mod:`runtime.communication.seal`)."""


class FrameTooLarge(TimelyRuntimeError):
    """A message is larger than the frame limit (:data:`MAX_FRAME`), so no peer would accept it."""
