"""Refusing decoded sets and maps whose keys were crafted to share one hash value (hash flooding).

Python's ``hash`` of ints, floats and tuples is not randomized: ``hash(k)``
is ``k`` modulo ``2**61 - 1`` for an ``int``, and a tuple's hash is an
invertible mix of its items' hashes, so anyone can craft as many distinct
keys with one hash value as they like.  Putting ``k`` such keys into a
``set``, ``frozenset`` or ``dict`` compares each with all the ones before it:
about ``k**2 / 2`` comparisons, so 20,000 of them in a 327 KB capture log
took seconds to decode, and a few megabytes minutes.

:func:`check_keys` refuses such keys in time linear in their number, before
anything is built of them; :mod:`runtime.codec` calls it for every set and
frozenset it decodes and (through :func:`pairs_hook`) every map longer than
:data:`MAX_SHARED_HASH`.  Strings and bytes hash with a keyed hash (SipHash),
for which crafting even two keys with one full hash value is out of reach.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from runtime.errors import DecodeError

MAX_SHARED_HASH = 64
"""The most distinct keys of one decoded set, frozenset or map that may share one hash value.

Genuine keys share a full hash value only by rare accident (``hash(-1) ==
hash(-2)``, ints ``2**61 - 1`` apart): a handful at most, so no genuine value
comes near 64, while a value at the bound costs at most 64 comparisons per key
to build (against ``k / 2`` per key for ``k`` crafted keys).  A map of at most
this many keys needs no check at all.
"""

_first = itemgetter(0)


def check_keys(keys: Sequence[Any], what: str) -> None:
    """Raise :class:`DecodeError` if more than :data:`MAX_SHARED_HASH` distinct ``keys`` share one hash value.

    ``what`` names the value in the message (``"a set in a capture log"``).
    Linear in ``len(keys)``: each key is hashed once (twice in a value that
    repeats keys or was crafted), and its hash value counted in a set (and
    then a dict) of ints.  Those cannot be flooded in turn: a
    hash value is a 64-bit int, and an int's own hash is the int modulo
    ``2**61 - 1`` (sign kept), so at most 9 distinct hash values share one
    (the values ``2**61 - 1`` apart; those of ints and floats are below
    ``2**61 - 1`` in size and share none, those of tuples and strings span all
    64 bits).  Only keys of a hash value shared more than the bound are then
    compared, each with at most the bound of others.  An unhashable key raises
    ``TypeError``, as building the set or dict would.
    """
    count = len(keys)
    if count <= MAX_SHARED_HASH or count - len(set(map(hash, keys))) < MAX_SHARED_HASH:
        return  # no hash value is shared by more than MAX_SHARED_HASH keys, equal or not
    hashes = list(map(hash, keys))  # hashed again, only for values that repeat keys or were crafted
    crowded = {value for value, times in Counter(hashes).items() if times > MAX_SHARED_HASH}
    distinct: dict[int, set[Any]] = {value: set() for value in crowded}
    for key, value in zip(keys, hashes, strict=True):
        group = distinct.get(value)
        if group is not None:
            group.add(key)  # at most MAX_SHARED_HASH keys in it to compare with
            if len(group) > MAX_SHARED_HASH:
                raise DecodeError(
                    f"{what} holds more than {MAX_SHARED_HASH} distinct keys with one hash value ({value}), "
                    "which genuine data never does: it was crafted to make decoding it take quadratic time "
                    "(hash flooding), and is refused as damaged"
                )


def pairs_hook(what: str) -> Callable[[list[tuple[Any, Any]]], dict[Any, Any]]:
    """msgpack's ``object_pairs_hook`` building a ``dict`` of a map's pairs once :func:`check_keys` passes them.

    ``what`` names the map in errors (``"a map in the wire"``).
    """

    def build(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
        count = len(pairs)
        if count > MAX_SHARED_HASH and count - len(set(map(hash, map(_first, pairs)))) >= MAX_SHARED_HASH:
            check_keys(list(map(_first, pairs)), what)  # a map of repeated keys, or crafted
        return dict(pairs)

    return build


__all__ = ["MAX_SHARED_HASH", "check_keys", "pairs_hook"]
