"""Keys of an exchange: computing and checking them, and blaming a failing key function on its operator.

:class:`BatchKeys` computes and checks the keys of columnar (or list) batches for
:class:`~scopes.contracts.ExchangeBatch`; :class:`KeyCheckPusher` and
:class:`CheckBatchPusher` are the exchanges of a single worker, which route nothing
but check keys exactly as routing would, so a misused key fails the same way at
every worker count.  A :class:`Receiver` names the operator an exchange delivers to,
so that a failing key function's error names it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, NamedTuple

from scopes.arrow_values import CONVERTIBLE, records
from scopes.batches import (
    BatchError,
    KeyColumnError,
    batch_kind,
    column_names,
    describe_value,
    is_arrow,
    is_columnar,
    refuse_repeated_names,
)
from scopes.destinations import check_keys
from scopes.errors import (
    ArrowValueError,
    KeyHashError,
    OperatorFailed,
    TimelyError,
    UserFunctionError,
    describe_user_error,
)
from scopes.hashing import stable_hash, stable_hash_array, stable_hash_arrow
from scopes.key_text import refuse_invalid_text, unhashable_error
from scopes.key_types import check_key_type, key_type_problem
from scopes.lazy_import import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")
from scopes.local_channels import LocalQueue


class Receiver(NamedTuple):
    """The operator an exchange channel delivers to: what a failing key function is blamed on."""

    name: str
    scope_path: tuple[str, ...]
    address: tuple[int, ...]
    worker: int
    site: str | None = None
    """Where the user's code built the operator (``file:line``), or ``None`` when unknown."""

    def key_failed(
        self, error: BaseException, time: Any, key: Callable[[Any], Any], batch: Any, record: str = "one of the records"
    ) -> OperatorFailed:
        """Describe ``error``, raised by ``key`` on some record of ``batch`` at ``time``, as :class:`OperatorFailed`.

        Runs only after a failure: it finds the record of a list batch by calling
        ``key`` again; ``record`` says what failed otherwise.  ``error`` may be
        ``sys.exit()``'s :class:`SystemExit` (see :func:`~scopes.errors.describe_user_error`).
        """
        for candidate in batch if batch.__class__ is list else ():
            try:
                stable_hash(key(candidate))  # the key fails, or its value cannot be routed
            except KeyboardInterrupt:
                raise
            except BaseException:  # noqa: BLE001 - looking for the record that fails, whatever it raises
                record = f"record {candidate!r}"
                break
        scope = " > ".join(repr(name) for name in self.scope_path) or "(none)"
        built = "" if self.site is None else f", built at {self.site}"
        return OperatorFailed(
            f"operator '{self.name}' (address {self.address}, in scope {scope}{built}) failed at time {time!r} "
            f"on worker {self.worker}: its exchange key function failed for {record}: {describe_user_error(error)}",
            self.name,
            self.address,
            self.scope_path,
            time,
            self.worker,
            site=self.site,
        )


class RowKeys:
    """A batch key function calling the record-wise ``key`` once per row of a columnar batch.

    An Arrow batch's rows are made with ``to_pylist()``; a value Python cannot
    hold (a timestamp past year 9999, say) is an
    :class:`~scopes.errors.ArrowValueError` naming the exchange's receiver, the
    time, the column and the row (:meth:`keys_at`, which :class:`BatchKeys` calls
    with the time), not a failure of ``key``.
    """

    __slots__ = ("key", "where")

    def __init__(self, key: Callable[[Any], Hashable], where: str) -> None:
        """Call ``key`` on each row; ``where`` names the exchange in error messages."""
        self.key = key
        self.where = where

    def __call__(self, batch: Any) -> list[Any]:
        """Each row's key."""
        return self.keys_at(batch, None)

    def keys_at(self, batch: Any, time: Any) -> list[Any]:
        """Each row's key, for the batch at ``time``."""
        if is_arrow(batch):
            rows = records(
                batch,
                f"{self.where} at time {time!r}",
                "route Arrow batches by a column (exchange_batch('column')) or a vectorised key function, which "
                f"keep Arrow's values, or {CONVERTIBLE}",
            )
        else:
            rows = batch
        key = self.key
        return [key(row) for row in rows]


def row_keys(key: Callable[[Any], Hashable], where: str = "a record-wise exchange key on a columnar batch") -> RowKeys:
    """A batch key function calling the record-wise ``key`` once per row of a columnar batch (:class:`RowKeys`)."""
    return RowKeys(key, where)


BatchKey = str | Callable[[Any], Any]
"""A columnar exchange key: a column (field) name, or a function ``batch -> keys`` (one key per row)."""


class BatchKeys:
    """Computes the destinations of a batch's rows for :class:`ExchangeBatch`, checking the key as it goes.

    ``where`` names the exchange operator (and its scope path) in error messages.
    With ``objects=False``, NumPy batches with ``object`` fields are refused.
    """

    __slots__ = ("key", "objects", "where", "receiver")

    def __init__(self, key: BatchKey, where: str, objects: bool = True, receiver: Receiver | None = None) -> None:
        """Route by ``key`` (a column name or a vectorised key function) for the operator ``where``.

        A key function that raises is blamed on ``receiver``, the operator the exchange delivers to.
        """
        self.key = key
        self.where = where
        self.objects = objects
        self.receiver = receiver

    def check_kind(self, batch: Any, time: Any) -> str:
        """The batch's kind, or :class:`~scopes.batches.BatchError` if the exchange cannot route it."""
        kind = batch_kind(batch)
        if kind == "list":
            if isinstance(self.key, str):
                raise BatchError(
                    f"{self.where}: cannot route a list batch at time {time!r} by column {self.key!r}: lists have "
                    "no named columns; send a structured NumPy array or an Arrow batch, or give exchange_batch a "
                    "key function (batch -> keys), or use exchange(key) for records"
                )
            return kind
        if kind == "ndarray":
            if batch.ndim < 1:
                raise BatchError(
                    f"{self.where}: cannot route a 0-dimensional NumPy array at time {time!r}; a batch has rows"
                )
            if not self.objects and batch.dtype.hasobject:
                self.refuse_objects(batch, time)
            if batch.ndim > 1 and isinstance(self.key, str):
                raise BatchError(
                    f"{self.where}: cannot route a NumPy array of shape {batch.shape} at time {time!r} by column "
                    f"{self.key!r}: its column has {batch.shape[1:]} values per row, not one key; send a 1-D "
                    "structured array (np.array(rows, dtype) makes one from a list of tuples, not of lists)"
                )
            return kind
        if is_arrow(batch):
            if isinstance(self.key, str) and self.key not in batch.schema.names:
                self.missing(batch, time)
            return kind
        raise BatchError(
            f"{self.where}: cannot route a batch of type {type(batch).__qualname__} at time {time!r}: "
            "exchange_batch knows lists, NumPy arrays and Arrow record batches and tables; convert the batch "
            "to one of these"
        )

    def refuse_objects(self, batch: Any, time: Any) -> None:
        """Raise :class:`~scopes.batches.BatchError`: ``batch`` has ``object`` fields, which this exchange refuses.

        Whole rows travel to the worker of their key, and Python objects cannot
        cross processes (pytimely never pickles), so such a batch would pass on
        threads and fail on processes: it is refused on every worker count.
        """
        fields = batch.dtype.fields or {}
        found = [name for name, (dtype, *_) in fields.items() if dtype.hasobject] or ["(the array itself)"]
        raise BatchError(
            f"{self.where}: the NumPy batch at time {time!r} has fields of Python objects ({', '.join(found)}), "
            "which cannot travel between processes to the worker of their key (pytimely never pickles); convert "
            "them first (strings: astype('U'), numbers: astype of a number dtype), or send Arrow tables"
        )

    def missing(self, batch: Any, time: Any) -> None:
        """Raise :class:`BatchError`: ``batch`` at ``time`` lacks the key column."""
        available = column_names(batch)
        if available:
            has = f"its columns are {list(available)}; pass one of these to exchange_batch, or a key function"
        elif is_arrow(batch):  # Arrow allows a batch of rows and no columns
            has = (
                f"it is an Arrow {batch_kind(batch)} of {batch.num_rows} rows and no columns; give it the key "
                "column, or route it with a key function (batch -> keys)"
            )
        else:
            has = (
                f"it is a {batch_kind(batch)} of dtype {batch.dtype} without named columns; route it with a key "
                "function (batch -> keys, for example lambda batch: batch), or send structured arrays"
            )
        raise KeyColumnError(
            f"{self.where}: the batch at time {time!r} has no key column {self.key!r}; {has}",
            str(self.key),
            available,
        )

    def arrow_field(self, batch: Any, time: Any) -> Any:
        """The key column's field in an Arrow ``batch`` at ``time``; a :class:`BatchError` if the batch has no column
        of that name, or more than one (pyarrow's ``KeyError`` says "does not exist" for a name it holds twice)."""
        names = batch.schema.names
        count = names.count(self.key)
        if count != 1:
            if count:
                refuse_repeated_names(batch, names, self.where, f" at time {time!r}")
            self.missing(batch, time)
        return batch.schema.field(self.key)

    def destinations(self, batch: Any, time: Any, peers: int) -> np.ndarray:
        """The worker (``stable_hash(key) % peers``) of each row, as an integer array with one entry per row.

        Integer keys among a power of two of workers need no hash at all: ``2**64``
        is a multiple of ``peers``, so ``(k & (2**64 - 1)) % peers`` is the key's low
        bits, ``k & (peers - 1)``, computed in the keys' own dtype (no widening
        copy, no 64-bit division: a tenth of the time on 4 million ``int32``).
        """
        keys = self.keys(batch, time)
        if keys.__class__ is np.ndarray and keys.dtype.kind in "iu" and keys.ndim == 1 and not peers & (peers - 1):
            return np.bitwise_and(keys, peers - 1)
        arrow = keys.__class__.__module__.startswith("pyarrow")  # an Arrow column (array or chunked array)
        try:
            hashes = stable_hash_arrow(keys) if arrow else stable_hash_array(keys)
        except ArrowValueError as error:  # a key Python cannot hold: name the batch's row, not the distinct value's
            raise self.unhashable(keys, time, error) from error
        return hashes % np.uint64(peers)

    def unhashable(self, keys: Any, time: Any, error: ArrowValueError) -> ArrowValueError:
        """The error for Arrow ``keys`` of the batch at ``time`` that hashing refused (``error``): the row whose
        key Python cannot hold, found in ``keys`` themselves (``error`` names a row of their distinct values)."""
        return unhashable_error(keys, self.key_name, self.where, time, error)

    @property
    def key_name(self) -> str:
        """The key column's name, or what stands for a key function's keys in messages."""
        return self.key if isinstance(self.key, str) else "(the keys the key function returned)"

    def keys(self, batch: Any, time: Any) -> Any:
        """Each row's key (the key column, or what the key function returned), checked to be one per row.

        A key column must be of a type routing takes (:mod:`scopes.key_types`);
        a :class:`~scopes.errors.KeyTypeError` names the exchange and the column.
        """
        kind = self.check_kind(batch, time)
        key = self.key
        if isinstance(key, str):
            if kind == "ndarray":
                names = batch.dtype.names
                if names is None or key not in names:
                    self.missing(batch, time)
                check_key_type(batch.dtype[key], key, self.where, time)
                return batch[key]
            self.arrow_field(batch, time)
            column = batch.column(key)
            check_key_type(column.type, key, self.where, time)
            refuse_invalid_text(column, key, self.where, time)  # hashing would meet it on some batches only
            return column
        keys_at = getattr(key, "keys_at", None)  # a key that checks the batch's columns names the time itself
        rows = len(batch)
        try:
            keys = key(batch) if keys_at is None else keys_at(batch, time)
        except (TimelyError, KeyboardInterrupt):
            raise  # a key that checks the batch's columns explains itself; Ctrl-C stops the run
        except BaseException as error:  # sys.exit() too: see describe_user_error
            if self.receiver is None:
                raise
            what = f"the {kind} batch of {rows} rows"
            raise self.receiver.key_failed(error, time, key, batch, what) from error
        try:
            count = len(keys)
        except TypeError:
            raise UserFunctionError(
                f"{self.where}: the key function returned {describe_value(keys)} for a {kind} batch of {rows} "
                f"rows at time {time!r}; it must return one key per row (a NumPy array or a sequence)"
            ) from None
        if count != rows:
            raise UserFunctionError(
                f"{self.where}: the key function returned {count} keys for a {kind} batch of {rows} rows at "
                f"time {time!r}; it must return exactly one key per row"
            )
        if keys.__class__.__module__.startswith("pyarrow"):
            problem = key_type_problem(keys.type)
            if problem is not None:
                raise KeyHashError(
                    f"{self.where}: the key function returned Arrow keys of type {keys.type} at time {time!r}, "
                    f"which routing cannot hash: {problem}"
                )
            refuse_invalid_text(keys, self.key_name, self.where, time)
        return keys


class CheckBatchPusher:
    """The columnar exchange on a single worker: every row stays, but the batch kind and the keys are checked.

    Checking on one worker too means a misused key fails the same way whatever
    the number of workers.  A key column's type is checked as routing checks it
    (:mod:`scopes.key_types`).  A key function is called once per batch, as on
    several workers, and its keys are checked as routing would: one per row,
    of a type that hashes stably.  Keys of a plain dtype (numbers, strings) or
    an Arrow column are not hashed, since nothing is routed; other keys (an
    object array, a list) are, as routing would, to refuse what cannot be hashed.
    """

    __slots__ = ("_keys", "_queue")

    def __init__(self, keys: BatchKeys, queue: LocalQueue) -> None:
        """Check batches with ``keys`` before queueing them on ``queue``."""
        self._keys = keys
        self._queue = queue

    def push(self, time: Any, batch: Any) -> None:
        """Check the batch, then queue it."""
        keys = self._keys
        kind = keys.check_kind(batch, time)
        if isinstance(keys.key, str):
            if kind == "ndarray":
                names = batch.dtype.names
                if names is None or keys.key not in names:
                    keys.missing(batch, time)
                check_key_type(batch.dtype[keys.key], keys.key, keys.where, time)
                if batch.dtype[keys.key].kind == "O":
                    stable_hash_array(batch[keys.key])  # objects: raises KeyHashError as routing would
            elif kind != "list":  # an Arrow batch (check_kind refused a list with a column name)
                check_key_type(keys.arrow_field(batch, time).type, keys.key, keys.where, time)
                refuse_invalid_text(batch.column(keys.key), keys.key, keys.where, time)  # as routing refuses it
        else:
            found = keys.keys(batch, time)
            plain = found.__class__ is np.ndarray and found.ndim == 1 and found.dtype.kind in "biufUS"
            if not plain and not found.__class__.__module__.startswith("pyarrow"):
                stable_hash_array(found)  # raises KeyHashError as routing would
        self._queue.push(time, batch)


def record_keys_of_rows(key: Callable[[Any], Hashable], receiver: Receiver | None) -> BatchKeys:
    """The :class:`BatchKeys` of a record-wise exchange ``key`` met by a columnar batch: ``key`` of each row.

    A failing ``key`` is blamed on ``receiver`` (the operator the exchange delivers to).
    """
    where = "the Exchange channel (a record-wise key on a columnar batch)"
    if receiver is not None:
        scope = " > ".join(repr(name) for name in receiver.scope_path) or "(none)"
        into = f"the Exchange channel into operator '{receiver.name}' (address {receiver.address}, in scope {scope})"
        keys = row_keys(key, f"{into} on worker {receiver.worker}, making records of a columnar batch for its key")
    else:
        keys = row_keys(key, where)
    return BatchKeys(keys, where, receiver=receiver)


class KeyCheckPusher:
    """The record-wise exchange on a single worker: every record stays, but its key is computed and checked.

    The key's value is not needed to route anything, but calling it and
    checking that it hashes stably (:func:`~scopes.destinations.check_keys`)
    means a key that fails, or returns a value no worker count could route (a
    list, a dict), fails the same way whatever the number of workers.
    """

    __slots__ = ("_columnar", "_key", "_queue", "_receiver")

    def __init__(self, key: Callable[[Any], Hashable], queue: LocalQueue, receiver: Receiver | None = None) -> None:
        """Call ``key`` on each record before queueing its batch on ``queue``; ``receiver`` is blamed if it fails."""
        self._key = key
        self._queue = queue
        self._receiver = receiver
        self._columnar: CheckBatchPusher | None = None

    def push(self, time: Any, batch: Any) -> None:
        """Compute every record's key (each row's, of a columnar batch), then queue the batch."""
        if batch.__class__ is list:
            try:
                check_keys(list(map(self._key, batch)))  # every key, at C speed, and their types
            except KeyboardInterrupt:
                raise
            except BaseException as error:  # sys.exit() too: see describe_user_error
                if self._receiver is None:
                    raise
                raise self._receiver.key_failed(error, time, self._key, batch) from error
        elif is_columnar(batch):
            # several workers route a columnar batch by the key of each row (scopes.exchange): check it so here
            columnar = self._columnar
            if columnar is None:
                keys = record_keys_of_rows(self._key, self._receiver)
                columnar = self._columnar = CheckBatchPusher(keys, self._queue)
            columnar.push(time, batch)
            return
        self._queue.push(time, batch)
