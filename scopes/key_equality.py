"""One key for every NaN: the rule that keyed operators and routing follow for float NaN keys.

Python's ``nan != nan``, so a ``dict`` keyed by NaN finds a NaN key only when the
lookup is given the very object that was stored (dict lookup tries identity
before equality).  Which NaN objects meet would then depend on how records
travelled: records of one process can share a NaN object, while every record
decoded from another process carries a NaN of its own.  The answer of a keyed
operator would change with the worker count.

The rule, the one pandas follows (``groupby(dropna=False)``, ``merge``): **all NaN
keys are one key**, whatever their sign or payload bits, and a tuple key holding
NaN equals another tuple with NaN in the same places (at any depth of nested
tuples).  Routing sends every NaN to one worker
(:func:`~scopes.hashing.stable_hash` hashes every NaN to one constant), and on
that worker the operators keep their per-key state under :func:`canonical_key`
of the key: every NaN in it replaced by the one :data:`NAN` object, which a
``dict`` finds by identity.  So the keys of an operator's output carry
:data:`NAN`.

No extra work per record on the common path: an operator looks a key up as it
is, and only when that lookup misses (a new key, or a NaN key not yet in its
canonical form) does it take :func:`canonical_key` and look again.  Every key
an operator stores is canonical, so a NaN key that missed always finds its
group the second time.  Restored checkpoints are canonicalised as they are put back.

Columnar batches follow the same rule: NumPy grouping treats NaN rows as one
group (:func:`differing_rows`), and Arrow key columns are given one NaN bit
pattern (and ``0.0`` for ``-0.0``) before Arrow groups or joins them
(:func:`canonical_arrow_keys`), since Arrow compares float keys by their bits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import is_
from typing import TYPE_CHECKING, Any

from scopes.lazy_import import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

NAN: float = float("nan")
"""The one NaN object that every NaN in a key is replaced by when operators store the key."""

PLAIN_KEY_TYPES: frozenset[type] = frozenset({int, str, bytes, bool, type(None)})
"""Key types that neither are NaN nor hold one: a lookup that misses with such a key needs no second try."""


def canonical_key(key: Any) -> Any:
    """``key`` with every float NaN in it replaced by :data:`NAN`; ``key`` itself when it holds no NaN.

    A NaN is any value that is not equal to itself (``float('nan')``, ``-nan``,
    NaN of any payload, NumPy float scalars holding NaN).  Tuples are searched
    at any depth and rebuilt only when they hold a NaN; a named tuple is
    rebuilt as the same named tuple.  Operators call this only when looking a
    key up as it is has missed (see the module's docstring).
    """
    if isinstance(key, tuple):
        for element in key:
            if isinstance(element, tuple) or element != element:
                break
        else:
            return key
        items = tuple(map(canonical_key, key))
        if all(map(is_, items, key)):  # only nested tuples without NaN: nothing to replace
            return key
        if key.__class__ is tuple:
            return items
        make = getattr(key, "_make", None)
        return make(items) if make is not None else items
    if key != key:
        return NAN
    return key


def same_value(one: Any, other: Any) -> bool:
    """Whether ``one`` and ``other`` are one value: equal, of one type, NaN counting as equal to NaN.

    Used where two values must agree (two updates of one key at one time), and
    either may be the one kept: a NaN value decoded from another process is
    another NaN object, and ``nan != nan``, but values ``==`` calls equal that
    print differently (``1``, ``1.0`` and ``True``; ``0.0`` and ``-0.0``) are
    two values, since which one is kept would depend on the message order.
    Tuples, lists and dicts are compared item by item, at any depth.
    """
    if one is other:
        return True
    if type(one) is not type(other):
        return False
    if isinstance(one, float):
        if one != one:
            return other != other
        return bool(one == other) and math.copysign(1.0, one) == math.copysign(1.0, other)
    if isinstance(one, (tuple, list)):
        return len(one) == len(other) and all(map(same_value, one, other))
    if isinstance(one, dict):
        return one.keys() == other.keys() and all(same_value(value, other[key]) for key, value in one.items())
    return bool(one == other)


def canonical_keys(keys: Sequence[Any]) -> list[Any]:
    """:func:`canonical_key` of every key of ``keys`` (a list of keys of one batch)."""
    return list(map(canonical_key, keys))


def canonical_scalar_keys(keys: Sequence[Any]) -> list[Any]:
    """:func:`canonical_keys` of keys none of which is a tuple, at a quarter of its cost: NaN becomes :data:`NAN`."""
    nan = NAN
    return [nan if key != key else key for key in keys]


def differing_rows(columns: Sequence[np.ndarray]) -> np.ndarray:
    """Where sorted key ``columns`` change key: ``True`` at ``i`` when row ``i + 1``'s key differs from row ``i``'s.

    The columns are sorted together (NaN and NaT sort last, so a key's NaN
    rows are adjacent).  Two NaN are the same key, so a float column's NaN rows
    next to each other do not differ; nor do two NaT of a ``datetime64`` or
    ``timedelta64`` column (NaT is the null of those, and a null is one key).
    """
    rows = len(columns[0])
    differ = np.zeros(max(rows - 1, 0), dtype=bool)
    for column in columns:
        later, earlier = column[1:], column[:-1]
        changed = later != earlier
        kind = column.dtype.kind
        if kind in "fc":
            changed &= ~(np.isnan(later) & np.isnan(earlier))
        elif kind in "mM":
            changed &= ~(np.isnat(later) & np.isnat(earlier))
        differ |= changed
    return differ


def canonical_arrow_keys(table: Any, keys: Sequence[str], zeros: bool = True) -> Any:
    """``table`` (an Arrow table) with its dictionary keys decoded and its floating keys given one NaN and one zero.

    Arrow groups and joins float keys by their bits: NaN of another sign or
    payload, and ``-0.0``, would each be a key of their own.  Every NaN becomes
    the NaN of :data:`NAN` and ``-0.0`` becomes ``0.0``, as ``stable_hash`` and
    Python's ``==`` treat them.  A dictionary-encoded key column becomes a column
    of its values (Arrow cannot combine batches whose dictionaries differ, nor a
    dictionary with plain values).  Other columns, and nulls, are left as they are.
    With ``zeros`` false, ``-0.0`` stays: values compared as values, not keys
    (:func:`same_value`), have one NaN but two zeros.
    """
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    for name in keys:
        column = table.column(name)
        kind = column.type
        if pa.types.is_dictionary(kind):
            column = column.cast(kind.value_type)
            kind = kind.value_type
            table = table.set_column(table.schema.get_field_index(name), name, column)
        if not pa.types.is_floating(kind):
            continue
        work = column.cast(pa.float32()) if pa.types.is_float16(kind) else column  # Arrow adds no float16
        nan = pa.scalar(NAN, pa.float64()).cast(work.type)
        zero = pa.scalar(0.0, pa.float64()).cast(work.type)
        fixed = pc.if_else(pc.is_nan(work), nan, pc.add(work, zero) if zeros else work)  # -0.0 + 0.0 is 0.0
        table = table.set_column(table.schema.get_field_index(name), name, fixed.cast(kind))
    return table
