"""Where each record of a record-wise batch goes, for the whole batch at once.

:class:`~scopes.channels.ExchangePusher` sends a record with key ``k`` to worker
``stable_hash(k) % peers`` (see :mod:`scopes.hashing`).  Calling
:func:`~scopes.hashing.stable_hash` once per record costs a Python call per
record on top of the user's key function; :class:`KeyRouter` finds the
destinations of a whole list of keys with C-level loops instead, and splits the
batch by destination the same way:

* **Integers** (and booleans): ``(k & (2**64 - 1)) % peers`` in one list
  comprehension, or, when the program has already imported NumPy and the batch
  is large, in one NumPy operation.  NumPy is never imported here.
* **Strings, bytes, floats, None, and flat tuples of these** (mixed freely): a
  bounded cache from key to destination, read with one ``map`` over the keys;
  only keys not seen before are hashed, one :func:`stable_hash` call per
  *distinct* new key.
* **Anything else** (nested tuples, subclasses, unsupported types): one
  :func:`stable_hash` call per record, as before, so the same keys are refused
  with the same :class:`~scopes.hashing.KeyHashError`.

The cache is safe because values of these exact types that compare equal also
have equal stable hashes (``1 == 1.0 == True``, ``(1, "a") == (1.0, "a")``):
whichever of them filled an entry, every key that finds it routes exactly as
:func:`stable_hash` would route it.  NaN keys, which equal nothing, are looked
up again as the one canonical NaN when they miss (:mod:`scopes.key_equality`),
so they share one entry, as they share one hash.  Types are checked exactly (a ``str``
subclass, whose ``str()`` may differ from its value, takes the per-record path).

The destinations are a ``bytes`` string (one byte per record) when there are at
most 256 workers, so that a destination's records are taken with one
``itertools.compress`` over a translated copy of it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from itertools import chain, compress
from typing import Any

from scopes.hashing import INT_KEY_TYPES, MASK64, int_key_hashes, stable_hash, through_cache
from scopes.key_equality import canonical_keys, canonical_scalar_keys

CACHE_LIMIT = 1 << 16
"""At most this many keys are remembered per router; when a batch's new keys would pass it, the cache starts over."""

NUMPY_MIN_INTS = 512
"""Integer batches at least this long use NumPy for the modulo, if (and only if) the program has imported NumPy."""

SPLIT_BY_MASK_PEERS = 16
"""Up to this many workers, each destination's records are taken with one ``compress`` pass; beyond, one loop."""

_CACHED_TYPES = frozenset({int, bool, float, str, bytes, type(None)})


def check_keys(keys: list[Any]) -> None:
    """Refuse ``keys`` as routing them among several workers would: :class:`~scopes.hashing.KeyHashError`.

    For one worker, where nothing is routed: the same type test as
    :meth:`KeyRouter.destinations` (one ``set(map(type, ...))`` over the keys),
    and :func:`stable_hash` per key only when some key is of another type.
    """
    types = set(map(type, keys))
    if types <= _CACHED_TYPES:
        return
    if types == {tuple} and set(map(type, chain.from_iterable(keys))) <= _CACHED_TYPES:
        return
    for key in keys:
        stable_hash(key)


def _select(index: int) -> bytes:
    """A table that translates a destinations string into a mask of the records bound for worker ``index``."""
    return bytes(index) + b"\x01" + bytes(255 - index)


class KeyRouter:
    """Destinations (``stable_hash(key) % peers``) of whole lists of keys, and the split of a batch by them."""

    __slots__ = ("peers", "_cache", "_power_of_two", "_small", "_masks")

    def __init__(self, peers: int) -> None:
        """Route among ``peers`` workers (at least 1)."""
        self.peers = peers
        self._cache: dict[Any, int] = {}
        self._power_of_two = peers & (peers - 1) == 0
        self._small = peers <= 256
        self._masks = [_select(index) for index in range(peers)] if peers <= SPLIT_BY_MASK_PEERS else []

    def destinations(self, keys: list[Any]) -> bytes | list[int]:
        """The worker of each key, in order: ``bytes`` for at most 256 workers, otherwise a list.

        Raises :class:`~scopes.hashing.KeyHashError` for the first key that
        :func:`stable_hash` refuses, as routing record by record would.
        """
        if keys and keys[0].__class__ is str and list(map(type, keys)).count(str) == len(keys):
            found = self._cached(keys, None)  # all exact str, the common case: tested without building a set
        else:
            found = self._of_types(keys)
        if found is not None:
            return found
        peers = self.peers
        hashes = [stable_hash(key) % peers for key in keys]
        return bytes(hashes) if self._small else hashes

    def _of_types(self, keys: list[Any]) -> bytes | list[int] | None:
        """The destinations by the keys' types: integers computed, other scalars (and flat tuples of them) through
        the cache; ``None`` for keys of other types, or too many new ones to cache (each is then hashed)."""
        types = set(map(type, keys))
        if types <= INT_KEY_TYPES:
            return self._of_ints(keys)
        canonical = canonical_scalar_keys
        if types == {tuple}:
            types = set(map(type, chain.from_iterable(keys)))
            canonical = canonical_keys
        if types <= _CACHED_TYPES:
            return self._cached(keys, canonical if float in types else None)
        return None

    def _of_ints(self, keys: list[Any]) -> bytes | list[int]:
        peers = self.peers
        numpy = sys.modules.get("numpy")
        if numpy is not None and self._small and len(keys) >= NUMPY_MIN_INTS:
            hashes = int_key_hashes(keys, numpy)  # None beyond 64 bits: the exact Python arithmetic below
            if hashes is not None:
                return bytes((hashes % numpy.uint64(peers)).astype(numpy.uint8).tobytes())
        if self._power_of_two:  # 2**64 is a multiple of peers, so (k & MASK64) % peers == k & (peers - 1)
            mask = peers - 1
            found = [key & mask for key in keys]
        else:
            found = [(key & MASK64) % peers for key in keys]
        return bytes(found) if self._small else found

    def _cached(
        self, keys: list[Any], canonical: Callable[[Sequence[Any]], list[Any]] | None
    ) -> bytes | list[int] | None:
        """Destinations through the cache; a batch that misses is looked up again as ``canonical`` of its keys.

        A NaN key finds a ``dict`` entry only by identity, and each decoded record
        carries a NaN object of its own: looked up as they are, NaN keys would
        miss every time and fill the cache with one entry per record.  Their
        canonical form (:func:`~scopes.key_equality.canonical_keys`) is one
        object; batches without float keys pass no ``canonical``.
        """
        peers = self.peers
        collect: Callable[[Iterator[int]], bytes | list[int]] = bytes if self._small else list
        return through_cache(self._cache, keys, lambda key: stable_hash(key) % peers, CACHE_LIMIT, collect, canonical)

    def split(self, records: list[Any], keys: list[Any]) -> list[list[Any]]:
        """``records`` split by the destinations of ``keys`` (one key per record): one list per worker, in order."""
        peers = self.peers
        if keys and keys[0].__class__ is int:
            return self._split_ints(records, keys)
        destinations = self.destinations(keys)
        if peers <= SPLIT_BY_MASK_PEERS and destinations.__class__ is bytes:
            assert isinstance(destinations, bytes)
            if peers == 2:  # the destinations (0 or 1) are worker 1's mask as they are: one translation, not two
                first = list(compress(records, destinations.translate(self._masks[0])))
                return [first, list(compress(records, destinations))]
            return [list(compress(records, destinations.translate(mask))) for mask in self._masks]
        parts: list[list[Any]] = [[] for _ in range(peers)]
        appends = [part.append for part in parts]
        for record, destination in zip(records, destinations, strict=True):
            appends[destination](record)
        return parts

    def _split_ints(self, records: list[Any], keys: list[Any]) -> list[list[Any]]:
        """Split by keys that are (mostly) ints: one loop, the int arithmetic inline, :func:`stable_hash` for the rest.

        Measured: for int keys this beats computing the destinations first, because the
        arithmetic costs less than a lookup and the loop has to run anyway.
        """
        peers = self.peers
        parts: list[list[Any]] = [[] for _ in range(peers)]
        appends = [part.append for part in parts]
        if self._power_of_two:  # 2**64 is a multiple of peers, so (k & MASK64) % peers == k & (peers - 1)
            mask = peers - 1
            for record, key in zip(records, keys, strict=True):
                if key.__class__ is int:
                    appends[key & mask](record)
                else:
                    appends[stable_hash(key) % peers](record)
        else:
            for record, key in zip(records, keys, strict=True):
                if key.__class__ is int:
                    appends[(key & MASK64) % peers](record)
                else:
                    appends[stable_hash(key) % peers](record)
        return parts
