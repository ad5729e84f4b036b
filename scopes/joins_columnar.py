"""Columnar joins of Arrow streams by key columns: per time, and against a slowly changing table.

* Per time: :func:`~scopes.columnar_ops.join_batch` (``Stream.join_batch``, and
  ``KeyedBatches.join``), the equi-join of the rows of both streams at each
  time, computed by Arrow's ``Table.join`` on the worker owning the key.
* :func:`join_latest_batch`: each row of a stream with the latest row of its key
  in a table, as of the row's time.  The table is a stream of Arrow batches of
  updates: a row replaces its key's row (among the updates of one time, the
  last to arrive wins; send one per key and time for an answer that is the same
  at every worker count), and with ``deletes="column"`` a row whose boolean
  column is true removes its key.  As for the record-wise
  :func:`~scopes.joins.join_latest`, rows at time ``t`` wait until the table's
  updates up to ``t`` are applied; the table moves past ``t`` only once no row
  at ``t`` or before can still arrive, so each row sees the table exactly as of
  its own time, whatever the interleaving.

All NaN keys are one key (of any bits), and ``-0.0`` is the key ``0.0``, as
for the record-wise joins: Arrow matches float keys by their bits, so key
columns are given one NaN and one zero as they arrive
(:func:`~scopes.key_equality.canonical_arrow_keys`).  A null key joins a null
key (the table's row of the null key), as ``None`` does in the record-wise
``join_latest``; the key column types taken are those of
:mod:`scopes.key_types` (:func:`~scopes.arrow_joins.join_tables` joins them).

Both sides are exchanged by their key columns (the stable hash of
:func:`~scopes.columnar_ops.key_contract`).  The result is one Arrow table per
worker and time: the stream's columns, then the table's other columns (a
suffix telling apart names both have).  ``how="left"`` keeps rows without a
table row, with nulls; it needs the table's ``schema=`` (a worker that has not
seen a table row yet still knows the columns to fill).  With checkpoints the
table (an Arrow table) is the operator's registered state.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from scopes.arrow_joins import join_tables
from scopes.arrow_values import CONVERTIBLE, records, safe_as_py
from scopes.batches import filter_rows, take
from scopes.columnar_ops import _concat, check_columns, key_columns, key_contract, prepare_arrow, to_arrow
from scopes.core import StreamCore
from scopes.errors import BatchError, BuildError, ConflictingUpdates
from scopes.generic_operators import binary
from scopes.joins import LatestJoin, check_same_scope
from scopes.key_equality import canonical_arrow_keys, same_value
from scopes.key_owners import column_key_check
from scopes.lazy_import import lazy_module
from scopes.operator import Capability, OperatorInfo, OperatorInput, OperatorOutput
from scopes.state_registry import registry_of
from scopes.timestamp import IntegerType

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

S = TypeVar("S", bound=StreamCore)
"""The class of the streams read and made (for users, :class:`~scopes.stream.Stream`)."""

HOW = {"inner": "inner", "left": "left outer"}
"""What :func:`join_latest_batch` does with a row whose key has no table row, and Arrow's name for it."""

_SEQUENCE = "\x1fsequence"
"""The arrival order of the table's rows, to keep the latest per key."""


def join_latest_batch(
    stream: S,
    table: S,
    keys: str | Sequence[str],
    table_keys: str | Sequence[str] | None,
    how: str,
    deletes: str | None,
    schema: Any,
    suffixes: tuple[str, str],
    name: str,
) -> S:
    """Each row of ``stream`` with ``table``'s latest row of its key as of the row's time (see the module)."""
    where = check_same_scope(stream, table, name)
    left = key_columns(keys, where)
    right = left if table_keys is None else key_columns(table_keys, where, "table key")
    if len(right) != len(left):
        raise BuildError(f"{where}: {len(left)} key column(s) {list(left)} but {len(right)} table keys {list(right)}")
    if how not in HOW:
        raise BuildError(f"{where}: how={how!r} is not one of {', '.join(HOW)}")
    if not isinstance(stream.scope.timestamp_type, IntegerType):
        raise BuildError(f"{where} needs integer timestamps (the table is kept in time order)")
    if importlib.util.find_spec("pyarrow") is None:
        raise BuildError(f"{where}: columnar joins compute with Arrow; install pyarrow")
    if len(suffixes) != 2 or suffixes[0] == suffixes[1] or not all(isinstance(s, str) for s in suffixes):
        raise BuildError(f"{where}: suffixes must be two different strings, got {suffixes!r}")
    if deletes is not None and (not isinstance(deletes, str) or deletes in right):
        raise BuildError(f"{where}: deletes= names the table's boolean column (not a key), not {deletes!r}")
    empty = _empty_table(schema, right, deletes, how, where)
    importlib.import_module("pyarrow")
    prepare_arrow()
    joiner = LatestBatchJoin(where, left, right, HOW[how], deletes, empty, suffixes)

    def constructor(capability: Capability, info: OperatorInfo) -> Any:
        joiner.info = info
        capability.drop()
        return joiner.step

    contracts = (key_contract(left, where, objects=False), key_contract(right, where, objects=False))
    out = binary(stream, table, contracts, name, constructor, None, notify=True)
    registry = registry_of(stream.scope)
    if registry is not None:
        address = (*out.scope.address, out.source.node)
        misplaced = column_key_check(stream.scope, contracts[1], right, lambda: [joiner.table])
        joiner.tracked = registry.register(address, name, where, joiner.snapshot, joiner.restore, [], None, misplaced)
    return out


def _empty_table(schema: Any, keys: tuple[str, ...], deletes: str | None, how: str, where: str) -> Any:
    """The table before any update: empty, of ``schema`` (``None`` when not given, refused for a left join)."""
    if schema is None:
        if how == "left":
            raise BuildError(
                f"{where}: how='left' needs the table's schema= (a pyarrow.Schema): a worker that has seen no "
                "table row yet must still give the rows the table's columns, as nulls"
            )
        return None
    pa = importlib.import_module("pyarrow")
    if not isinstance(schema, pa.Schema):
        raise BuildError(f"{where}: schema= must be a pyarrow.Schema, not {type(schema).__name__}")
    for column in (*keys, *((deletes,) if deletes else ())):
        if column not in schema.names:
            raise BuildError(f"{where}: the table's schema has no column {column!r}; its columns are {schema.names}")
    # not schema.empty_table(), which raises ArrowNotImplementedError for a union column (pyarrow 26)
    return pa.Table.from_arrays([pa.nulls(0, field.type) for field in schema], schema=schema)


class LatestBatchJoin(LatestJoin):
    """The state of :func:`join_latest_batch`: rows waiting for their time, updates waiting, the table.

    The order of work is :class:`~scopes.joins.LatestJoin`'s; rows, updates and the table are Arrow tables.
    """

    def __init__(
        self,
        where: str,
        left: tuple[str, ...],
        right: tuple[str, ...],
        join_type: str,
        deletes: str | None,
        empty: Any,
        suffixes: tuple[str, str],
    ) -> None:
        """A join on ``left`` = ``right`` key columns, of Arrow's ``join_type``."""
        super().__init__(join_type == "left outer", where)
        self.left = left
        self.right = right
        self.join_type = join_type
        self.deletes = deletes
        self.table: Any = empty
        self.empty = empty
        self.suffixes = suffixes

    def take(self, rows: OperatorInput, updates: OperatorInput) -> None:
        """Hold what arrived, by time, as Arrow tables: rows (with a capability for their time) and updates."""
        for ref, batch in rows:
            if len(batch):
                check_columns(batch, self.left, self.where, ref.time, self.left)
                if ref.time not in self.capabilities:
                    self.capabilities[ref.time] = ref.retain()
                table = canonical_arrow_keys(to_arrow(batch, self.where), self.left)
                self.records.setdefault(ref.time, []).append(table)
        for ref, batch in updates:
            if len(batch):
                needed = self.right + ((self.deletes,) if self.deletes else ())
                check_columns(batch, needed, self.where, ref.time, self.right)
                table = canonical_arrow_keys(to_arrow(batch, self.where), self.right)
                self.updates.setdefault(ref.time, []).append(table)

    def apply(self, batches: list[Any], time: int) -> None:
        """The table with the updates of ``time``: each key's last row kept, deleted keys dropped."""
        pa = importlib.import_module("pyarrow")
        tables = ([self.table] if self.table is not None else []) + batches
        try:
            table = pa.concat_tables(tables, promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as error:
            raise BatchError(
                f"{self.where}: the table's updates at time {time!r} do not have the table's columns and types "
                f"({error}); give every update batch one schema"
            ) from error
        self.check_one_row_per_key(pa, table.slice(0 if self.table is None else self.table.num_rows), time)
        table = table.append_column(_SEQUENCE, pa.array(np.arange(table.num_rows), pa.int64()))
        latest = table.group_by(list(self.right), use_threads=False).aggregate([(_SEQUENCE, "max")])
        table = take(table, np.sort(latest.column(f"{_SEQUENCE}_max").to_numpy())).drop_columns([_SEQUENCE])
        if self.deletes is not None:
            import pyarrow.compute as pc  # type: ignore[import-untyped]

            table = filter_rows(table, pc.invert(pc.fill_null(table.column(self.deletes), False)))
        self.table = table

    def check_one_row_per_key(self, pa: Any, updates: Any, time: int) -> None:
        """Refuse two different rows for one key among the updates of ``time``."""
        import pyarrow.compute as pc

        keys = list(self.right)
        per_key = updates.group_by(keys, use_threads=False).aggregate([([], "count_all")])
        if per_key.num_rows == updates.num_rows:
            return
        floats = [field.name for field in updates.schema if pa.types.is_floating(field.type)]
        rows = canonical_arrow_keys(updates, floats, zeros=False)  # one NaN, as same_value has: -NaN is NaN
        try:
            distinct = rows.group_by(rows.column_names, use_threads=False).aggregate([([], "count_all")])
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):  # columns Arrow cannot group by
            self.check_repeated_rows(pa, updates, time)
            return
        per_distinct_key = distinct.group_by(keys, use_threads=False).aggregate([([], "count_all")])
        clashing = per_distinct_key.filter(pc.greater(per_distinct_key.column("count_all"), 1))
        if clashing.num_rows:
            self.conflict({name: safe_as_py(clashing.column(name)[0]) for name in keys}, time)

    def check_repeated_rows(self, pa: Any, updates: Any, time: int) -> None:
        """:meth:`check_one_row_per_key` for updates with columns Arrow cannot group by (lists, structs).

        Only the rows of keys given more than once are compared, as Python values.
        """
        import pyarrow.compute as pc

        numbered = updates.append_column(_SEQUENCE, pa.array(np.arange(updates.num_rows), pa.int64()))
        groups = numbered.group_by(list(self.right), use_threads=False).aggregate([(_SEQUENCE, "list")])
        rows = groups.column(f"{_SEQUENCE}_list")
        repeated = groups.filter(pc.greater(pc.list_value_length(rows), 1)).column(f"{_SEQUENCE}_list")
        for indices in repeated.to_pylist():
            first, *others = records(
                take(updates, np.asarray(indices)),
                f"{self.where}: comparing the table's updates given for one key at time {time!r} (as Python "
                "values, since Arrow cannot group by their columns)",
                f"send one update per key and time, or {CONVERTIBLE}",
            )
            if not all(same_value(other, first) for other in others):  # NaN is NaN, as in the record-wise form
                self.conflict({name: first[name] for name in self.right}, time)

    def conflict(self, key: dict[str, Any], time: int) -> None:
        """Raise :class:`ConflictingUpdates` for ``key`` at ``time``."""
        raise ConflictingUpdates(
            f"{self.where}: the table got different rows for key {key} at time {time!r}; which is the "
            "latest would depend on the order messages arrive in, which differs between runs and worker "
            "counts. Send one update per key and time (combine them first, for example with aggregate)"
        )

    def send(self, time: int, batches: list[Any], output: OperatorOutput) -> None:
        """Join the rows of ``time`` against the table as it is now (as of ``time``)."""
        if self.table is None:  # an inner join with no table row yet: nothing matches
            return
        rows = _concat(batches, f"{self.where} (rows at time {time!r})")
        table = self.table if self.deletes is None else self.table.drop_columns([self.deletes])
        joined = join_tables(rows, table, self.left, self.right, self.join_type, self.suffixes, self.where)
        if joined.num_rows:
            output.session(self.capabilities[time]).give_batch(joined)
            output.flush()

    def snapshot(self) -> Any:
        """The table, an Arrow table, for a checkpoint."""
        return [self.table]

    def restore(self, saved: Any) -> None:
        """Put back a :meth:`snapshot`, checked to be a table this operator keeps (of its ``schema=``, if given)."""
        (table,) = saved
        pa = importlib.import_module("pyarrow")
        if table is None and self.empty is None:  # no update yet, and no schema to start from
            self.table = None
            return
        needed = self.right + ((self.deletes,) if self.deletes else ())
        if self.empty is not None:  # the updates may add columns, never drop the schema's
            needed = tuple(dict.fromkeys(needed + tuple(self.empty.column_names)))
        if not isinstance(table, pa.Table) or not set(needed) <= set(table.column_names):
            shown = table.column_names if isinstance(table, pa.Table) else type(table).__name__
            raise ValueError(f"a table as {shown!r:.200}, not one with the columns {list(needed)!r:.200}")
        self.table = table
