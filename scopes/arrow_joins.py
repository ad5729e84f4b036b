"""Arrow's hash join as the columnar joins need it: keys of one type, nulls that join, any column carried.

:func:`join_tables` is the join of :func:`~scopes.columnar_ops.join_batch` and
:func:`~scopes.joins_columnar.join_latest_batch`.  It differs from calling
``Table.join`` on the tables in three ways:

* the key columns of both sides are cast to their common type first (Arrow's
  permissive promotion: ``int32`` and ``int64`` join as ``int64``), or refused
  with a :class:`~scopes.errors.BatchError` naming both columns;
* a null key joins a null key, as ``None`` does in the record-wise joins (and
  as pandas' ``merge`` does; SQL, and Arrow, would match nothing): a key column
  with nulls on both sides is joined as two columns, whether the key is null
  and its value with the nulls filled;
* only the key columns and row numbers go through Arrow's join; the output
  columns are then taken from the sides by row number, so columns Arrow's join
  cannot carry (lists, structs, the ``null`` type) come out as they went in.

The output has the columns ``Table.join`` gives, in its order and with its
names: the left side's columns, then (for ``inner`` and ``left outer``) the
right side's other than its keys, a suffix added to the names both have.
``left semi`` and ``left anti`` give the left's rows with its key columns in
their own type, not the common one: a worker whose right side has no rows at a
time gives them so too, and the type must not depend on where rows went.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from scopes.batches import take
from scopes.errors import BatchError
from scopes.lazy_import import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

_LEFT = "\x1fleft"
"""The left side's row numbers, in the key tables joined."""
_RIGHT = "\x1fright"
"""The right side's row numbers."""


def _pyarrow() -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]

    return pa


def common_key_types(
    left: Any, right: Any, left_keys: Sequence[str], right_keys: Sequence[str], where: str
) -> tuple[Any, Any]:
    """``left`` and ``right`` with each pair of key columns cast to one type, or a :class:`BatchError`."""
    pa = _pyarrow()
    for left_key, right_key in zip(left_keys, right_keys, strict=True):
        have_left, have_right = left.schema.field(left_key).type, right.schema.field(right_key).type
        if have_left == have_right:
            continue
        try:
            schemas = [pa.schema([("k", have_left)]), pa.schema([("k", have_right)])]
            common = pa.unify_schemas(schemas, promote_options="permissive").field("k").type
            if common != have_left:
                values = left.column(left_key).cast(common)
                left = left.set_column(left.schema.get_field_index(left_key), left_key, values)
            if common != have_right:
                values = right.column(right_key).cast(common)
                right = right.set_column(right.schema.get_field_index(right_key), right_key, values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as error:
            raise BatchError(
                f"{where}: the left key column {left_key!r} is {have_left} but the right key column "
                f"{right_key!r} is {have_right}, which do not convert to one type ({error}); give both key "
                "columns one type"
            ) from error
    return left, right


def _key_tables(
    left: Any, right: Any, left_keys: Sequence[str], right_keys: Sequence[str]
) -> tuple[Any, Any, list[str]]:
    """The tables Arrow joins: each side's key columns (nulls made joinable) and row numbers; and the key names."""
    pa = _pyarrow()
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    left_columns: dict[str, Any] = {}
    right_columns: dict[str, Any] = {}
    for index, (left_key, right_key) in enumerate(zip(left_keys, right_keys, strict=True)):
        mine, theirs = left.column(left_key), right.column(right_key)
        name = f"\x1fkey{index}"
        if not (mine.null_count and theirs.null_count):  # a null on one side only matches nothing
            left_columns[name], right_columns[name] = mine, theirs
            continue
        null = f"\x1fnull{index}"
        left_columns[null], right_columns[null] = pc.is_null(mine), pc.is_null(theirs)
        valid = pc.drop_null(mine)
        if not len(valid):
            valid = pc.drop_null(theirs)
        if len(valid):  # the values too, nulls filled with one of them (told apart by the null column)
            left_columns[name], right_columns[name] = pc.fill_null(mine, valid[0]), pc.fill_null(theirs, valid[0])
    left_columns[_LEFT] = pa.array(np.arange(left.num_rows, dtype=np.int64))
    right_columns[_RIGHT] = pa.array(np.arange(right.num_rows, dtype=np.int64))
    keys = [name for name in left_columns if name != _LEFT]
    return pa.table(left_columns), pa.table(right_columns), keys


def join_tables(
    left: Any,
    right: Any,
    left_keys: Sequence[str],
    right_keys: Sequence[str],
    join_type: str,
    suffixes: tuple[str, str],
    where: str,
) -> Any:
    """The ``join_type`` join (``inner``, ``left outer``, ``left semi``, ``left anti``) of two Arrow tables.

    See the module: keys of one type, a null key joins a null key, every column
    type is carried.  Float keys must already be canonical
    (:func:`~scopes.key_equality.canonical_arrow_keys`).
    """
    given = left
    left, right = common_key_types(left, right, left_keys, right_keys, where)
    left_table, right_table, keys = _key_tables(left, right, left_keys, right_keys)
    joined = left_table.join(right_table, keys=keys, join_type=join_type, use_threads=False)
    rows = joined.column(_LEFT)
    if join_type in ("left semi", "left anti"):  # the left's rows as they came, whatever type the right's keys had
        return take(given, rows)
    kept = [name for name in right.column_names if name not in set(right_keys)]
    taken_left = take(left, rows)
    taken_right = take(right.select(kept), joined.column(_RIGHT))  # a null row number (no match) takes nulls
    both = set(left.column_names) & set(kept)
    left_suffix, right_suffix = suffixes
    names = [name + left_suffix if name in both else name for name in left.column_names]
    names += [name + right_suffix if name in both else name for name in kept]
    columns = list(taken_left.columns) + list(taken_right.columns)
    return _pyarrow().table(columns, names=names)
