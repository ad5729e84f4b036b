"""The exceptions raised by :mod:`scopes`.

Every error the progress model and the graph-building layer raise derives from
:class:`ScopeError`, so a caller can catch the whole family at once.  Messages
name the operator, the port and the times involved wherever those exist.
"""

from __future__ import annotations


class TimelyError(Exception):
    """Base class of every error pytimely raises: catch it to catch them all.

    Each package has its own family below it: :class:`ScopeError` (the progress
    model and graph building), :class:`runtime.errors.TimelyRuntimeError` (workers,
    communication, files) and :class:`viz.errors.VizError` (diagrams and the TUI).
    It lives here, in the bottom package, so that all three can derive from it;
    ``runtime`` and ``viz`` export it too.
    """


class ScopeError(TimelyError):
    """Base class of every error raised by :mod:`scopes`."""


class TimestampError(ScopeError, TypeError):
    """A value is not a timestamp of the scope's timestamp type."""


class SummaryError(ScopeError):
    """A path summary broke its contract (for example, it moved a time backwards)."""


class GraphError(ScopeError):
    """The dataflow graph is malformed: unknown nodes or ports, bad summary shapes."""


class CycleError(GraphError):
    """The graph has a cycle along which timestamps do not strictly advance.

    Attributes:
        operators: the names of the operators on the offending cycle, in order.
    """

    def __init__(self, message: str, operators: list[str]) -> None:
        super().__init__(message)
        self.operators = operators


class ProgressError(ScopeError):
    """Progress information is inconsistent with what the scope can explain."""


class CapabilityError(ScopeError):
    """An operator misused a capability: wrong time, wrong output, or already dropped."""


class BuildError(ScopeError):
    """A dataflow was wired incorrectly while it was being built."""


class ActivationError(ScopeError, ValueError):
    """An operator asked to be run again in a way that cannot be honoured: a delay that is negative, not a
    number or infinite, or a wake-up from outside that the runtime cannot deliver."""


class ScopeBoundaryError(BuildError):
    """A stream or scope was used across a scope boundary without ``enter()``/``leave()``.

    Raised when an operator would be built in a scope that is not the one being
    built: a stream of a nested scope used after the scope's body returned (it
    must leave first), or a stream of an enclosing scope used inside a nested
    scope's body (it must enter first).
    """


class ConflictingUpdates(ScopeError, ValueError):
    """A table got two different values for one key at one time.

    Which of them is the latest would depend on the order messages arrive in,
    which differs between runs and worker counts, so the join refuses to choose.
    """


class UserFunctionError(ScopeError, TypeError):
    """A user function returned something its operator cannot use (for example, a
    ``flat_map`` function returned a value that is not iterable)."""


class OperatorFailed(ScopeError):
    """A user function running inside an operator raised an exception.

    The user's exception is chained as ``__cause__``, so its own frames stay in
    the traceback.  The runtime wraps this in its own failure report, which adds
    the worker.

    Attributes:
        operator: the operator's name.
        address: the operator's address in the worker's scope tree.
        scope_path: the names of the scopes that contain the operator, outermost first.
        time: the time of the batch being processed, or ``None`` when the operator
            was not processing a batch (for example, in a notification or a source).
        worker: the index of the worker the operator ran on.
        position: what a source was doing (the file or epoch it was reading), or ``None``.
        site: where the user's code built the operator (``file:line``), or ``None`` when unknown.
    """

    def __init__(
        self,
        message: str,
        operator: str,
        address: tuple[int, ...],
        scope_path: tuple[str, ...],
        time: object,
        worker: int,
        position: str | None = None,
        site: str | None = None,
    ) -> None:
        super().__init__(message)
        self.operator = operator
        self.address = address
        self.scope_path = scope_path
        self.time = time
        self.worker = worker
        self.position = position
        self.site = site

    @property
    def when(self) -> str:
        """When it failed, for messages: see :func:`describe_when`."""
        return describe_when(self.time, self.position)


def describe_when(time: object, position: str | None) -> str:
    """When an operator failed: at the batch's ``time``, else while doing ``position`` (a source), else neither."""
    if time is not None:
        return f"at time {time!r}"
    if position:
        return f"while {position}"
    return "outside any batch (no input message was being processed)"


def describe_user_error(error: BaseException) -> str:
    """What a user function raised, for the messages that name its operator.

    ``Type: message`` for an exception.  ``sys.exit()`` (:class:`SystemExit`)
    and other :class:`BaseException` that are not :class:`Exception` do not end
    the process from inside an operator, which runs among other workers and
    processes: the run fails as for an exception, and the message says so and
    what to do instead.
    """
    if isinstance(error, Exception):
        return f"{type(error).__name__}: {error}"
    if isinstance(error, SystemExit):
        call = "sys.exit()" if error.code is None else f"sys.exit({error.code!r})"
        return (
            f"SystemExit: the function called {call}, which cannot end the program from inside an operator; "
            "raise an exception to fail the run, or return and close the dataflow's inputs to end it"
        )
    return (
        f"{type(error).__name__}: {error} ({type(error).__name__} is a BaseException, not an Exception, and "
        "cannot end the program from inside an operator; raise an Exception to fail the run, or return and "
        "close the dataflow's inputs to end it)"
    )


class KeyHashError(ScopeError, TypeError):
    """A routing key has a type whose hash is not stable across processes."""


class KeyNotOwned(ScopeError):
    """Keyed state restored from a checkpoint holds a key that the current routing sends to another worker.

    Restored there, the key's state would never be updated again, while the
    worker that now receives its records starts the key afresh: a silent wrong
    answer.  Raised by :meth:`scopes.state_registry.StateRegistry.restore`; the
    runtime reports it as :class:`runtime.errors.CheckpointMismatch`, naming the file.

    Attributes:
        operator: the operator, by name and scope path.
        key: the first key found that this worker does not own.
        worker: the worker that restored it.
        owner: the worker the key's records are routed to.
        epoch: the checkpoint's boundary.
    """

    def __init__(self, message: str, operator: str, key: object, worker: int, owner: int, epoch: int) -> None:
        super().__init__(message)
        self.operator = operator
        self.key = key
        self.worker = worker
        self.owner = owner
        self.epoch = epoch


class StateRestoreFailed(ScopeError):
    """An operator could not be restored from the state a checkpoint holds for it.

    Raised by :meth:`scopes.state_registry.StateRegistry.restore` (from the
    operator's own error); the runtime, which knows the checkpoint's file,
    reports it as :class:`runtime.errors.CheckpointCorrupt` naming the file and
    the state's offset.

    Attributes:
        key: the key the operator's state is filed under in the checkpoint.
        where: the operator, by name and scope path.
    """

    def __init__(self, key: str, where: str, error: Exception) -> None:
        """The state filed under ``key``, of the operator described by ``where``, raised ``error``."""
        super().__init__(f"{where}: {type(error).__name__}: {error!s:.200}")
        self.key = key
        self.where = where


class ReplayError(ScopeError):
    """A replayed event stream is inconsistent: it ended early, or broke the capability contract.

    Attributes:
        stream: the index of the offending stream among this worker's share of those given to
            :func:`replay_into`.
    """

    def __init__(self, message: str, stream: int) -> None:
        super().__init__(message)
        self.stream = stream


class BatchError(ScopeError, TypeError):
    """A value is not a batch, or batches of different kinds were mixed, or a batch lacks what was asked of it."""


class KeyColumnError(BatchError, KeyError):
    """A batch has no column (field) of the requested name.

    Attributes:
        key: the requested column name.
        available: the columns the batch has.
    """

    def __init__(self, message: str, key: str, available: tuple[str, ...]) -> None:
        super().__init__(message)
        self.key = key
        self.available = available

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class KeyTypeError(BatchError):
    """A key column has a type that a columnar keyed operator (or routing by key columns) cannot use.

    Raised when the first batch with such a column reaches the operator (or the
    exchange in front of it), at every worker count; the message names the
    operator, the column, its type and what to convert it to
    (:mod:`scopes.key_types`).

    Attributes:
        column: the key column's name.
        type: its type, as text (an Arrow type or a NumPy dtype).
    """

    def __init__(self, message: str, column: str, type: str) -> None:
        super().__init__(message)
        self.column = column
        self.type = type


class ArrowValueError(ScopeError, ValueError):
    """An Arrow value that is valid in Arrow but that Python cannot hold, met where records were made of it.

    A ``timestamp`` or ``date`` past year 9999 or before year 1 (Python's
    ``datetime``), a ``duration`` past ``timedelta.max``, a timestamp in a time
    zone this Python does not know, a string that is not UTF-8: ``to_pylist()``
    and ``as_py()`` raise a bare ``OverflowError``, ``ValueError`` or
    ``KeyError`` for them.  The message names the column, the row, the type and
    the value in Arrow's own text (:mod:`scopes.arrow_values`), and says what to
    do; the operator, worker and time are added by the operator's failure report
    (:class:`OperatorFailed`), the file by the file source's or sink's subclass.

    Attributes:
        column: the column's name (``None`` for a bare array).
        row: the row's index in the batch (for a file source: in the file), counting from 0.
        arrow_type: the column's Arrow type, as text.
        text: the value as Arrow writes it (never raises).
    """

    def __init__(self, message: str, column: str | None, row: int, arrow_type: str, text: str) -> None:
        super().__init__(message)
        self.column = column
        self.row = row
        self.arrow_type = arrow_type
        self.text = text


class StaleBuildWarning(TimelyError, UserWarning):
    """The compiled build does not match the sources (or this interpreter) and is ignored (a warning)."""
