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
"""

from __future__ import annotations

from operator import is_
from typing import Any

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


def canonical_keys(keys: list[Any]) -> list[Any]:
    """:func:`canonical_key` of every key of ``keys`` (a list of keys of one batch)."""
    return list(map(canonical_key, keys))
