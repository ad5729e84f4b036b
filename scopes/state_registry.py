"""Operator state to checkpoint at epoch boundaries: what each stateful operator registers, pure.

A checkpoint at epoch boundary ``E`` holds every stateful operator's state *as of
the times before* ``E``: every record at a time ``< E`` applied, none at a time
``>= E``.  Restarted from it, the inputs send again from epoch ``E`` and the
computation continues as if it had never stopped.  That is the cut Naiad took:
consistent because it is defined by timestamps, not by when things ran.

An operator that keeps state across times registers an :class:`OperatorState`
while the dataflow is built, and tells it, as it applies complete times in time
order, when its state is as of the times before some time (:meth:`OperatorState.reached`).
The registry encodes the state at every boundary ``E`` (a multiple of ``every``)
that it crosses there, with the ``encode`` function the runtime gave it: an
encoding taken at that moment is a true snapshot.  The runtime
(:mod:`runtime.checkpoints`) writes a worker's file for ``E`` once every
operator covers ``E`` and the dataflow has passed it everywhere.

No files here: the registry holds encoded snapshots in memory until the runtime
takes them.

Keyed state lives on the worker that owns its key, and each worker restores the
file it wrote.  A keyed operator therefore registers, with its state, a check of
the keys it restored (:mod:`scopes.key_owners`): a key that the current routing
sends to another worker (a checkpoint of a pytimely that routed keys
differently, or a file moved between workers) makes :meth:`StateRegistry.restore`
raise :class:`~scopes.errors.KeyNotOwned`, rather than resume with the key's
state where its records no longer arrive.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from scopes.errors import BuildError, KeyNotOwned, StateRestoreFailed
from scopes.progress.timestamp import IntegerType

Encode = Callable[[Any], bytes]
"""Turns an operator's state into bytes; raises for a state it cannot carry."""

Decode = Callable[[bytes], Any]
"""Turns bytes from :data:`Encode` back into the state."""

ENDED = 1 << 62
"""The boundary an operator covers once its input has ended: every later one."""

KEY_REPR = 120
"""At most this many characters of a misplaced key's ``repr`` are shown in an error."""


class Misplaced(NamedTuple):
    """A restored key that worker ``worker`` holds and the current routing sends to worker ``owner``."""

    key: Any
    worker: int
    owner: int


MisplacedCheck = Callable[[], Misplaced | None]
"""Run after an operator's restore: the first key it restored that this worker does not own, if any."""


class OperatorState:
    """One stateful operator's snapshots: encoded states, each covering a range of boundaries."""

    def __init__(
        self,
        key: str,
        where: str,
        registry: StateRegistry,
        snapshot: Callable[[], Any],
        restore: Callable[[Any], None],
        settle: Callable[[], None] | None = None,
        misplaced: MisplacedCheck | None = None,
    ) -> None:
        """The state of the operator described by ``where``, filed under ``key``.

        ``snapshot()`` returns the operator's state as plain values; ``restore(state)``
        puts such a state back when the run resumes from a checkpoint;
        ``settle()`` runs once the run knows whether it resumes (after any restore);
        ``misplaced()``, run after ``restore``, finds a restored key this worker
        does not own (``None`` for state that is not keyed, or a single worker).
        """
        self.key = key
        self.where = where
        self.registry = registry
        self.snapshot = snapshot
        self.restore = restore
        self.settle = settle
        self.misplaced = misplaced
        self.covered = 0
        self.snapshots: list[tuple[int, int | None, bytes]] = []

    def reached(self, before: int | None) -> None:
        """The operator's state is now as of the times before ``before`` (``None``: as of every time).

        ``snapshot()`` is called, and encoded, only when a boundary not yet
        covered lies at or before ``before``.
        """
        every = self.registry.every
        first = self.covered + every
        if before is not None and before < first:
            return
        last = None if before is None else before - before % every
        try:
            encoded = self.registry.encode(self.snapshot())
        except Exception as error:
            raise BuildError(
                f"{self.where} keeps state that a checkpoint cannot carry: {error}; keep state of plain values "
                "(numbers, strings, bytes, lists, tuples, dicts), or run without checkpoint="
            ) from error
        self.snapshots.append((first, last, encoded))
        self.covered = ENDED if last is None else last

    def covering(self, boundary: int) -> bytes | None:
        """The encoded state as of the times before ``boundary``, if this operator has it."""
        for first, last, encoded in self.snapshots:
            if first <= boundary and (last is None or boundary <= last):
                return encoded
        return None

    def latest(self) -> int | None:
        """The latest boundary covered (None: none yet; a huge number once the input has ended)."""
        return self.covered if self.snapshots else None

    def forget_before(self, boundary: int) -> None:
        """Drop snapshots that cover only boundaries before ``boundary``."""
        self.snapshots = [s for s in self.snapshots if s[1] is None or s[1] >= boundary]


class StateRegistry:
    """Every stateful operator of one dataflow on one worker, and the state they resume from."""

    def __init__(self, every: int, encode: Encode, decode: Decode) -> None:
        """Snapshots at every ``every``-th epoch boundary, encoded by ``encode``."""
        if every.__class__ is not int or every < 1:
            raise BuildError(f"checkpoints need every >= 1 (an int), got {every!r}")
        self.every = every
        self.encode = encode
        self.decode = decode
        self.operators: dict[str, OperatorState] = {}
        self.settlers: list[Callable[[int], None]] = []
        self.claim_output: Callable[[str, bool], bool] | None = None
        """Set by the runtime's checkpoint store: ``claim_output(location, record)`` says whether an earlier run
        of this checkpointed job already wrote to ``location`` (and, with ``record``, remembers that this one does),
        so that a sink can tell its own crashed run's output from another job's."""

    def on_settle(self, prepare: Callable[[int], None]) -> None:
        """Call ``prepare(boundary)`` once the run knows the epoch it resumes from (0: a fresh start).

        For what must be ready before the run goes on (a file sink clears the
        epochs it will write again).
        """
        self.settlers.append(prepare)

    def register(
        self,
        address: tuple[int, ...],
        name: str,
        where: str,
        snapshot: Callable[[], Any],
        restore: Callable[[Any], None],
        initial: Any = None,
        settle: Callable[[], None] | None = None,
        misplaced: MisplacedCheck | None = None,
    ) -> OperatorState:
        """Track the state of the operator at ``address`` (see :class:`OperatorState`).

        ``initial``, a new key's state, is checked to be encodable now, so that
        state a checkpoint cannot carry is refused when the dataflow is built.
        """
        key = "/".join(str(part) for part in address) + ":" + name
        if key in self.operators:
            raise BuildError(f"{where} registered its state twice")
        if initial is not None:
            try:
                self.encode(initial)
            except Exception as error:
                raise BuildError(
                    f"{where} keeps state that a checkpoint cannot carry: its initial state is "
                    f"{type(initial).__name__} ({error}); keep state of plain values, or run without checkpoint="
                ) from error
        state = OperatorState(key, where, self, snapshot, restore, settle, misplaced)
        self.operators[key] = state
        return state

    def restore(self, boundary: int, states: Mapping[str, bytes]) -> None:
        """Put back every operator's state as of the times before ``boundary``, from its encoded form.

        :class:`~scopes.errors.KeyNotOwned` if an operator restored a key that
        the current routing sends to another worker.
        """
        states = _as_this_dataflow(states, self.operators)
        missing = sorted(set(self.operators) - set(states))
        extra = sorted(set(states) - set(self.operators))
        if missing or extra:
            raise BuildError(
                f"the checkpoint at epoch {boundary} does not fit this dataflow: it lacks the state of "
                f"{missing or 'nothing'} and holds state for {extra or 'nothing'} that no operator here keeps"
            )
        for key, operator in self.operators.items():
            try:
                operator.restore(self.decode(states[key]))
            except BuildError:
                raise
            except Exception as error:  # state of another shape than the operator keeps: say whose it was
                raise StateRestoreFailed(key, operator.where, error) from error
            operator.covered = boundary
            operator.snapshots = []
            found = operator.misplaced() if operator.misplaced is not None else None
            if found is not None:
                raise _not_owned(operator.where, found, boundary)

    def settle(self, boundary: int) -> None:
        """Tell every operator that restoring is over (it may release what it kept), and run the settlers.

        An operator's ``settle`` fails only on restored state it cannot resume
        from (a window that closes before ``boundary``, a timer at a time that
        is no timestamp): :class:`~scopes.errors.StateRestoreFailed` says whose.
        """
        for key, operator in self.operators.items():
            if operator.settle is not None:
                try:
                    operator.settle()
                except BuildError:
                    raise
                except Exception as error:
                    raise StateRestoreFailed(key, operator.where, error) from error
        for prepare in self.settlers:
            prepare(boundary)

    def common_boundary(self) -> int | None:
        """The latest boundary every operator covers, or None (an operator has no snapshot yet).

        With no stateful operator, every boundary is covered (:data:`ENDED`).
        """
        latest = ENDED
        for state in self.operators.values():
            covered = state.latest()
            if covered is None:
                return None
            latest = min(latest, covered)
        return latest


def _as_this_dataflow(states: Mapping[str, bytes], operators: Mapping[str, OperatorState]) -> Mapping[str, bytes]:
    """``states`` filed under this dataflow's keys when they differ from them only in the dataflow's index.

    A key starts with the operator's address, whose first part is the index of
    the dataflow among those its worker built.  A program that builds another
    dataflow before this one (named, so that its shape is the same) resumes it.
    """
    if states.keys() == operators.keys():
        return states
    theirs = {key.split("/", 1)[-1]: key for key in states}
    ours = {key.split("/", 1)[-1]: key for key in operators}
    if len(theirs) != len(states) or theirs.keys() != ours.keys():
        return states  # another dataflow: the caller says what differs
    return {ours[relative]: states[key] for relative, key in theirs.items()}


def _not_owned(where: str, found: Misplaced, boundary: int) -> KeyNotOwned:
    """:class:`KeyNotOwned` for the operator ``where``, which restored ``found`` from the checkpoint at ``boundary``."""
    shown = repr(found.key)
    if len(shown) > KEY_REPR:
        shown = shown[: KEY_REPR - 3] + "..."
    return KeyNotOwned(
        f"{where} restored state for key {shown} from the checkpoint at epoch {boundary} on worker "
        f"{found.worker}, but the key's records are routed to worker {found.owner}: the key would have two "
        "states, one restored and never updated, one started afresh",
        where,
        found.key,
        found.worker,
        found.owner,
        boundary,
    )


def registry_of(scope: Any) -> StateRegistry | None:
    """The state registry of the dataflow ``scope`` belongs to, when it runs with checkpoints."""
    registry = getattr(scope.context, "state_registry", None)
    return registry if isinstance(registry, StateRegistry) else None


def refuse_hand_written_under_checkpoints(scope: Any, name: str) -> None:
    """:class:`BuildError` for an operator written by hand in a dataflow with checkpoints.

    Its state lives in the user's closures, which a checkpoint cannot see:
    resumed, it would start empty and give a plausible wrong answer.
    """
    if registry_of(scope) is not None:
        path = " > ".join(repr(part) for part in scope.path)
        raise BuildError(
            f"operator {name!r} in scope {path} is written by hand, and a checkpoint cannot see the state it keeps: "
            "resumed, it would start empty. Keep its state in keyed operators (stateful_map, fold, process, windows), "
            "or build this dataflow without checkpoint="
        )


def refuse_later_times_under_checkpoints(scope: Any, name: str, what: str) -> None:
    """:class:`BuildError` for an operator that sends records at later epochs, in a dataflow with checkpoints.

    Records moved past a checkpoint's boundary from before it are in no
    operator's state and come from no input sent again: a resumed run would lose them.
    """
    if registry_of(scope) is not None:
        path = " > ".join(repr(part) for part in scope.path)
        raise BuildError(
            f"operator {name!r} in scope {path} {what}, and records on their way to a later epoch are in no "
            "checkpoint: a resumed run would lose them. Use windows or process() timers, which checkpoint what "
            "they hold for later, or build this dataflow without checkpoint="
        )


def refuse_state_in_loops_under_checkpoints(scope: Any, where: str) -> None:
    """:class:`BuildError` for keyed state in a scope whose times are not integers, in a dataflow with checkpoints.

    A checkpoint holds state as of an epoch boundary: inside a loop, the
    iterations of one epoch can still run after those of the next have been
    applied, so no moment holds the state as of the boundary (and the operator
    failed at its first time, comparing a ``Product`` with an epoch).
    """
    if registry_of(scope) is not None and not isinstance(scope.timestamp_type, IntegerType):
        raise BuildError(
            f"{where} keeps keyed state in a scope whose times are {scope.timestamp_type!r}, and checkpoints "
            "hold state as of epoch boundaries, which a loop's iterations cross in no fixed order. Keep the state "
            "outside the loop (leave() the stream first), or build this dataflow without checkpoint="
        )
