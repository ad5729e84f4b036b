"""``KeyedStream``: a stream of ``(key, value)`` pairs, each key on one worker, with the keyed operators.

Made by ``Stream.key_by(key)`` (pairs ``(key(record), record)``) or
``Stream.keyed()`` (records that are pairs already).  Both route every record
of a key to the one worker that owns it, by a hash that is the same in every
process, so per-key state lives in one place at every worker count.  A facade,
as :class:`~scopes.stream.Stream` is: the operators live in
:mod:`scopes.keyed_state`, :mod:`scopes.windows` and :mod:`scopes.joins`.
The columnar counterpart, keyed by columns of Arrow batches, is
:class:`~scopes.keyed_columnar.KeyedBatches` (``Stream.key_by_columns``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from scopes import joins, keyed_state, windows
from scopes.core import StreamCore
from scopes.errors import BuildError
from scopes.keyed_state import KeyContext
from scopes.signatures import describe_operator

S = TypeVar("S", bound=StreamCore)
"""The class of the streams read and made (for users, :class:`~scopes.stream.Stream`)."""


class KeyedStream(Generic[S]):
    """A stream of ``(key, value)`` pairs in which every key lives on one worker.

    Its operators return plain streams of ``(key, output)`` pairs (windows:
    ``(key, (start, end), output)``).  ``stream`` is the underlying stream of pairs.
    """

    __slots__ = ("stream",)

    def __init__(self, stream: S) -> None:
        """Wrap ``stream``, whose records are ``(key, value)`` pairs already routed by key as ``key_by`` routes them
        (``stable_hash(key) % peers``): a resume from a checkpoint refuses keyed state found on another worker."""
        self.stream = stream

    def __repr__(self) -> str:
        return f"KeyedStream({self.stream!r})"

    def stateful_map(
        self, initial: Callable[[], Any], function: Callable[[Any, Any], tuple[Any, Any]], name: str = "StatefulMap"
    ) -> S:
        """``state, out = function(state, value)`` per record, from ``initial()`` for a new key.

        Emits ``(key, out)`` at the record's time.  Returning ``None`` as the state
        forgets the key (its next record starts from ``initial()`` again).  Records
        are applied one complete time after another, in time order.
        """
        return keyed_state.stateful_map(self.stream, initial, function, name)

    def fold(self, initial: Callable[[], Any], function: Callable[[Any, Any], Any], name: str = "Fold") -> S:
        """A running ``acc = function(acc, value)`` per key, from ``initial()``.

        Once each time is complete, emits ``(key, acc)`` for every key that had
        records at that time: the running value as of that time.
        """
        return keyed_state.fold(self.stream, initial, function, name)

    def reduce(self, function: Callable[[Any, Any], Any], name: str = "Reduce") -> S:
        """A running ``acc = function(acc, value)`` per key from its first value; ``(key, acc)`` per complete time."""
        return keyed_state.reduce(self.stream, function, name)

    def process(
        self,
        on_record: Callable[[KeyContext, Any], None],
        on_timer: Callable[[KeyContext], None] | None = None,
        initial: Callable[[], Any] | None = None,
        name: str = "Process",
    ) -> S:
        """Per-record logic with state and timers per key.

        ``on_record(context, value)`` runs for each record and ``on_timer(context)``
        for each timer once the frontier has passed its time, both in time order.
        The context (:class:`~scopes.keyed_state.KeyContext`) has the ``key``, the
        ``time``, the key's ``state`` (assign to change it; ``None`` forgets it, and
        ``initial()`` makes a new key's), ``emit(output)`` to send ``(key, output)``
        at ``time``, and ``set_timer(time)`` for a call of ``on_timer`` then.
        """
        return keyed_state.process(self.stream, on_record, on_timer, initial, name)

    def window(
        self, spec: windows.WindowSpec, event_time: Callable[[Any], int] | None = None, lateness: int = 0
    ) -> windows.WindowBuilder[S]:
        """Each key's records in windows of ``spec`` (``Tumbling``, ``Sliding``, ``Session``; :mod:`scopes.windows`).

        Pick what to compute per window on the result: ``count()``, ``fold(...)``,
        ``reduce(...)`` or ``collect()``, each returning the results and the late records.
        """
        return windows.WindowBuilder(self.stream, spec, event_time, lateness)

    def join(self, other: KeyedStream[S], name: str = "Join") -> S:
        """``(key, (left, right))`` for every pair of records with the same key at the same time."""
        return joins.join_per_time(self.stream, self._other(other, name), name)

    def join_latest(self, table: KeyedStream[S], how: str = "inner", name: str = "JoinLatest") -> S:
        """Each record with the table's latest value for its key as of the record's time.

        ``table`` is a keyed stream of ``(key, value)`` updates (a value of ``None``
        deletes the key).  Emits ``(key, (value, table_value))``; with
        ``how="left"`` a record whose key has no value is kept, with ``None``.
        """
        return joins.join_latest(self.stream, self._other(table, name), how, name)

    def _other(self, other: Any, name: str) -> S:
        if not isinstance(other, KeyedStream):
            raise BuildError(
                f"{describe_operator(name, self.stream.scope.path)} joins keyed streams, not "
                f"{type(other).__name__}: key the other side with key_by(key) or keyed() first"
            )
        stream: S = other.stream
        return stream
