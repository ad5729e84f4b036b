"""Passenger columns of the Arrow types Arrow has no take or filter for (tests/test_columnar_arrow_types.py).

:func:`table` builds an epoch's rows: an integer key ``k``, a value ``v`` and
passenger columns ``s`` (``string_view``), ``b`` (``binary_view``), ``r``
(run-end encoded) and ``n`` (a struct holding a ``string_view``), nulls
included.  :func:`exchanged`, :func:`joined` and :func:`semi_joined` are the
build functions run on threads and processes.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

PASSENGERS = ("s", "b", "r", "n")
"""The passenger columns of :func:`table`."""


def table(rows: list[tuple[int, int, str | None]]) -> Any:
    """An Arrow table of ``(k, v, text)`` rows, ``text`` in every passenger column's type."""
    texts = [text for _, _, text in rows]
    return pa.table(
        {
            "k": pa.array([k for k, _, _ in rows], pa.int64()),
            "v": pa.array([v for _, v, _ in rows], pa.int64()),
            "s": pa.array(texts, pa.string_view()),
            "b": pa.array([None if t is None else t.encode() for t in texts], pa.binary_view()),
            "r": pc.run_end_encode(pa.array(texts, pa.string())),
            "n": pa.array([None if t is None else {"t": t} for t in texts], pa.struct([("t", pa.string_view())])),
        }
    )


def exchanged(scope: Any, stream: Any) -> Any:
    """The rows routed by their key column, as they came."""
    return stream.exchange_batch("k")


def joined(scope: Any, stream: Any) -> Any:
    """The inner join of the rows with their keys and values (``w``), passengers on the left."""
    return stream.join_batch(stream.map_batch(lambda t: t.select(["k", "v"]).rename_columns(["k", "w"])), "k")


def semi_joined(scope: Any, stream: Any) -> Any:
    """The rows whose key has a row with an even value (a ``left semi`` join)."""
    evens = stream.map_batch(lambda t: t.select(["k", "v"]).filter(pc.equal(pc.bit_wise_and(t.column("v"), 1), 0)))
    return stream.join_batch(evens.map_batch(lambda t: t.rename_columns(["k", "w"])), "k", join_type="left semi")


class Celsius(pa.ExtensionType):
    """A user's extension type (``int64`` storage) as the pyarrow docs write one: it defines no ``__hash__``."""

    def __init__(self) -> None:
        super().__init__(pa.int64(), "pytimely.tests.celsius")

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: Any, serialized: bytes) -> Celsius:
        return cls()


with contextlib.suppress(pa.ArrowKeyError):  # imported twice (as helpers.arrow_type_mains and by a process's loader)
    pa.register_extension_type(Celsius())


def column_types(scope: Any, stream: Any) -> Any:
    """One row per batch: the type of its column ``t`` as the worker sees it."""
    return stream.map_batch(lambda t: pa.table({"type": [str(t.schema.field("t").type)]}))


def no_columns_routed(scope: Any, stream: Any) -> Any:
    """The rows without their columns (Arrow allows it), routed by a key function, then counted."""
    import numpy as np

    rows = stream.map_batch(lambda t: t.select([]))
    return rows.exchange_batch(lambda t: np.arange(len(t))).count()


def uuid_dictionaries_routed(scope: Any, stream: Any) -> Any:
    """Rows given a dictionary of pyarrow's ``uuid`` extension type, routed by their key to other workers."""

    def encoded(t: Any) -> Any:
        uuids = pa.ExtensionArray.from_storage(pa.uuid(), pa.array([bytes(16), b"\x01" * 16], pa.binary(16)))
        indices = pa.array([i % 2 for i in range(t.num_rows)], pa.int32())
        return t.append_column("u", pa.DictionaryArray.from_arrays(indices, uuids))

    return stream.map_batch(encoded).exchange_batch("k", name="Route")
