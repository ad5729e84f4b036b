"""``KeyedBatches``: a stream of columnar batches with its key columns named, and the columnar keyed operators.

Made by ``Stream.key_by_columns(keys)``.  The columnar counterpart of
:class:`~scopes.keyed.KeyedStream`: each operator exchanges rows by the key
columns (the stable hash of :func:`~scopes.columnar_ops.key_contract`, the same
at every worker count), so a key's state lives on one worker.  A facade: the
operators live in :mod:`scopes.windows_columnar`, :mod:`scopes.columnar_ops`
(``join_batch``) and :mod:`scopes.joins_columnar`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from scopes import columnar_ops, joins_columnar, windows_columnar
from scopes.core import StreamCore
from scopes.errors import BuildError
from scopes.joins import check_same_scope
from scopes.signatures import describe_operator
from scopes.windows import WindowSpec

S = TypeVar("S", bound=StreamCore)
"""The class of the streams read and made (for users, :class:`~scopes.stream.Stream`)."""


class KeyedBatches(Generic[S]):
    """A stream of NumPy structured arrays or Arrow batches, keyed by the columns ``keys``.

    Nothing moves until an operator is built on it; its operators return plain
    streams of Arrow tables.
    """

    __slots__ = ("keys", "stream")

    def __init__(self, stream: S, keys: str | Sequence[str], name: str = "KeyByColumns") -> None:
        """Key ``stream``'s rows by the columns ``keys`` (refused when none is given)."""
        self.keys = columnar_ops.key_columns(keys, describe_operator(name, stream.scope.path))
        self.stream = stream

    def __repr__(self) -> str:
        return f"KeyedBatches({self.stream!r}, keys={list(self.keys)})"

    def window(
        self, spec: WindowSpec, event_time: str | None = None, lateness: int = 0, name: str = "WindowBatch"
    ) -> windows_columnar.ColumnarWindowBuilder[S]:
        """Each key's rows in windows of ``spec``; pick ``aggregate([...])`` or ``count()`` on the result.

        ``event_time`` names an integer column of event times (default: the
        row's epoch) and ``lateness`` bounds how late rows may be (see
        :mod:`scopes.windows_columnar`).  Both return ``Windowed(down, late)``.
        """
        where = describe_operator(name, self.stream.scope.path)
        return windows_columnar.ColumnarWindowBuilder(self.stream, self.keys, spec, event_time, lateness, where)

    def join(
        self,
        other: KeyedBatches[S],
        join_type: str = "inner",
        suffixes: tuple[str, str] = ("", "_right"),
        name: str = "JoinBatch",
    ) -> S:
        """Per time, the equi-join of this stream's rows with ``other``'s on the key columns of each.

        The join of :meth:`~scopes.stream.Stream.join_batch` (``inner``, ``left
        semi`` or ``left anti``, with Arrow's ``Table.join``), sent once the time
        is complete on both inputs.
        """
        right = self._other(other, name)
        return columnar_ops.join_batch(self.stream, right.stream, self.keys, right.keys, join_type, suffixes, name)

    def join_latest(
        self,
        table: KeyedBatches[S],
        how: str = "inner",
        deletes: str | None = None,
        schema: Any = None,
        suffixes: tuple[str, str] = ("", "_right"),
        name: str = "JoinLatestBatch",
    ) -> S:
        """Each row with the latest row of its key in ``table`` as of the row's time (:mod:`scopes.joins_columnar`).

        ``table`` is a keyed stream of update batches; ``deletes`` names a
        boolean column whose true rows remove their key.  ``how="left"`` keeps
        rows without a table row (with nulls) and needs the table's ``schema``.
        """
        right = self._other(table, name)
        return joins_columnar.join_latest_batch(
            self.stream, right.stream, self.keys, right.keys, how, deletes, schema, suffixes, name
        )

    def _other(self, other: Any, name: str) -> KeyedBatches[S]:
        if not isinstance(other, KeyedBatches):
            raise BuildError(
                f"{describe_operator(name, self.stream.scope.path)} joins columnar keyed streams, not "
                f"{type(other).__name__}: key the other side with key_by_columns(keys) first"
            )
        check_same_scope(self.stream, other.stream, name)
        return other
