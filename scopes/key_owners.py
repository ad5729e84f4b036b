"""Which worker owns a restored key: the check that keyed state put back from a checkpoint is where its key lives.

Keyed state lives on the worker that owns its key, and a resumed worker restores
the file it wrote itself.  If the routing has changed since the file was written
(a pytimely that hashed some key otherwise, as it did NaN of other sign or
payload before all NaN keys were made one key), or the file was moved to another
worker's directory, a restored key's records now go to another worker: the key
would have two states, the restored one never updated again.  The checks made
here find such a key when the operator's state is restored
(:meth:`scopes.state_registry.StateRegistry.restore` raises
:class:`~scopes.errors.KeyNotOwned`), with the very function the exchange routes
by:

* record-wise keyed state: :class:`~scopes.destinations.KeyRouter`, the
  exchange's ``stable_hash(key) % peers`` for a whole list of keys, on the
  restored keys (kept in their canonical form, :mod:`scopes.key_equality`;
  every NaN hashes alike, so the route is the one of any NaN);
* columnar keyed state (Arrow tables of key columns): the columnar exchange's
  :meth:`~scopes.batch_keys.BatchKeys.destinations` of each restored table, one
  vectorised call per table, never a Python call per row.

Only restoring pays: a check runs once, after the restore, and with one worker
(where every key is owned) none is made.  Nothing on the per-record path changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from scopes.arrow_values import safe_as_py
from scopes.batch_keys import BatchKeys
from scopes.destinations import KeyRouter
from scopes.lazy_import import lazy_module
from scopes.state_registry import Misplaced, MisplacedCheck

if TYPE_CHECKING:
    import numpy as np

    from scopes.contracts import ExchangeBatch
    from scopes.core import ScopeCore
else:
    np = lazy_module("numpy")


def first_misplaced_key(keys: Sequence[Any], worker: int, peers: int) -> Misplaced | None:
    """The first of ``keys`` that the record-wise exchange among ``peers`` sends elsewhere than ``worker``."""
    if not keys:
        return None
    destinations = KeyRouter(peers).destinations(list(keys))
    if destinations.__class__ is bytes:
        assert isinstance(destinations, bytes)
        rest = destinations.lstrip(bytes((worker,)))  # C speed: the keys owned here, before the first that is not
        if not rest:
            return None
        index = len(destinations) - len(rest)
    else:
        found = next((at for at, owner in enumerate(destinations) if owner != worker), None)
        if found is None:
            return None
        index = found
    return Misplaced(keys[index], worker, int(destinations[index]))


def record_key_check(scope: ScopeCore[Any], keys: Callable[[], Iterable[Any]]) -> MisplacedCheck | None:
    """A check of the keys ``keys()`` of an operator of ``scope`` after its restore (``None`` for one worker)."""
    context = scope.context
    worker, peers = context.worker_index, context.peers
    if peers == 1:
        return None

    def check() -> Misplaced | None:
        return first_misplaced_key(list(keys()), worker, peers)

    return check


def first_misplaced_row(
    table: Any, routing: BatchKeys, columns: Sequence[str], worker: int, peers: int
) -> Misplaced | None:
    """The key of the first row of ``table`` that ``routing`` among ``peers`` sends elsewhere than ``worker``.

    The key is the value of the one key column, or a ``{column: value}`` dict of several.
    """
    if table is None or not table.num_rows:
        return None
    destinations = routing.destinations(table, "restore", peers)
    elsewhere = np.flatnonzero(destinations != worker)
    if not len(elsewhere):
        return None
    row = int(elsewhere[0])
    values = {column: safe_as_py(table.column(column)[row]) for column in columns}  # for a message: never raises
    key = values[columns[0]] if len(columns) == 1 else values
    return Misplaced(key, worker, int(destinations[row]))


def column_key_check(
    scope: ScopeCore[Any], contract: ExchangeBatch, columns: Sequence[str], tables: Callable[[], Iterable[Any]]
) -> MisplacedCheck | None:
    """A check of the Arrow tables ``tables()`` (key ``columns``, routed by ``contract``) after a restore.

    ``None`` for one worker.
    """
    context = scope.context
    worker, peers = context.worker_index, context.peers
    if peers == 1:
        return None
    routing = BatchKeys(contract.key, contract.where or "a columnar keyed operator")
    names = tuple(columns)

    def check() -> Misplaced | None:
        for table in tables():
            found = first_misplaced_row(table, routing, names, worker, peers)
            if found is not None:
                return found
        return None

    return check


__all__ = ["column_key_check", "first_misplaced_key", "first_misplaced_row", "record_key_check"]
