"""Worker mains for tests/test_checkpoint_ownership.py (importable by name in each process).

One dataflow per operator family, each keeping keyed state in checkpoints, fed
the same keys every epoch.  A run can be made with the routing changed for one
key (:func:`misroute_victim`: :data:`VICTIM` goes to the worker after its owner,
record-wise and columnar, as a changed hash would send it) or with the NaN hash
pytimely had before all NaN keys were made one key (:func:`old_nan_hashing`), so
that its checkpoints hold a key on a worker the real routing does not send it to.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helpers.epoch_feed import feed_epochs
from helpers.keyed_timers import emit_count
from runtime.checkpoints import CheckpointStore
from scopes import Session, Tumbling

VICTIM = "victim"
"""The key routed to the wrong worker while the checkpoint is written (its owner is worker 1 of 2)."""

KEYS = (VICTIM, "other", "beta")
"""The keys of every epoch: ``other`` is owned by worker 0 of 2, ``beta`` by worker 1."""

EPOCHS = 5
"""How many epochs a run sends."""

RECORD_FAMILIES = ("fold", "stateful_map", "process", "window", "session", "join_latest")
"""The record-wise keyed operators, each a dataflow of its own."""

COLUMNAR_FAMILIES = ("columnar_window", "columnar_session", "columnar_join_latest")
"""The columnar keyed operators (Arrow tables), each a dataflow of its own."""

OPERATOR_NAMES = {
    "fold": "Fold",
    "stateful_map": "StatefulMap",
    "process": "Process",
    "window": "WindowCount",
    "session": "WindowCount",
    "join_latest": "JoinLatest",
    "columnar_window": "WindowCount",
    "columnar_session": "WindowCount",
    "columnar_join_latest": "JoinLatestBatch",
}
"""The name each family's stateful operator has (its default), which the error names."""

MULTI_KEY_FAMILIES = ("columnar_session",)
"""Families keyed by two columns (``user`` and ``region``): their exchange combines the columns' hashes."""

PAYLOAD_NAN_BITS = bytes.fromhex("020000000000f87f")
"""A quiet NaN with payload 2: before all NaN were one key its bytes' CRC-32 (even) sent it to worker 0 of 2,
while every NaN now goes where ``float('nan')`` (CRC-32 odd) always went, worker 1."""


def misroute_victim(set_attribute: Callable[[Any, str, Any], None]) -> None:
    """Make the exchanges send :data:`VICTIM`'s records and rows to the worker after its owner.

    ``set_attribute`` is ``monkeypatch.setattr`` in the test's process, ``setattr`` in a
    worker process of its own.  The hashes are shifted by one where the exchanges look
    them up (record-wise: ``stable_hash``; columnar: ``stable_hash_arrow``, of one key
    column or of each of several), which flips the worker among 2.
    """
    import numpy as np
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    import scopes.batch_keys
    import scopes.columnar_ops
    import scopes.destinations
    import scopes.exchange
    import scopes.hashing

    real = scopes.hashing.stable_hash
    real_arrow = scopes.hashing.stable_hash_arrow

    def shifted(key: Any) -> int:
        return real(key) + 1 if key.__class__ is str and key == VICTIM else real(key)

    def shifted_arrow(values: Any) -> Any:
        hashes = real_arrow(values).copy()
        if pa.types.is_string(values.type):
            hashes[np.asarray(pc.fill_null(pc.equal(values, VICTIM), False))] += 1
        return hashes

    set_attribute(scopes.exchange, "stable_hash", shifted)
    set_attribute(scopes.destinations, "stable_hash", shifted)
    set_attribute(scopes.batch_keys, "stable_hash_arrow", shifted_arrow)
    set_attribute(scopes.columnar_ops, "stable_hash_arrow", shifted_arrow)


def old_nan_hashing(set_attribute: Callable[[Any, str, Any], None]) -> None:
    """Route NaN keys as pytimely did before all NaN keys were one key: by the CRC-32 of their bytes."""
    import scopes.destinations
    import scopes.exchange
    import scopes.hashing

    real = scopes.hashing.stable_hash

    def by_bits(key: Any) -> int:
        if key.__class__ is float and key != key:
            return zlib.crc32(struct.pack("<d", key))
        return real(key)

    set_attribute(scopes.exchange, "stable_hash", by_bits)
    set_attribute(scopes.destinations, "stable_hash", by_bits)


def sum_until_later(context: Any, value: Any) -> None:
    """``process``'s per-record function: sum the key's values, with a timer 100 epochs after its first record."""
    if context.state is None:
        context.state = 0
        context.set_timer(context.time + 100)
    context.state += value


def payload_nan() -> float:
    """A new NaN object with the bits :data:`PAYLOAD_NAN_BITS`."""
    value: float = struct.unpack("<d", PAYLOAD_NAN_BITS)[0]
    return value


def epoch_records(family: str, epoch: int) -> list[Any]:
    """The ``(key, value)`` records of ``epoch``: each key of :data:`KEYS` (``nan``: a payload-2 NaN and ``other``)."""
    if family == "nan":
        return [(payload_nan(), epoch), ("other", epoch)]
    return [(key, epoch) for key in KEYS]


def _table(pairs: list[Any]) -> Any:
    import pyarrow as pa

    users = [key for key, _ in pairs]
    return pa.table(
        {
            "user": pa.array(users, pa.string()),
            "region": pa.array(["eu" if user == VICTIM else "us" for user in users], pa.string()),
            "amount": pa.array([value for _, value in pairs], pa.int64()),
        }
    )


def record_dataflow(family: str, records: Any, table: Any) -> Any:
    """The record-wise ``family``'s operator over keyed ``records`` (``table``: the join's keyed updates)."""
    if family in ("fold", "nan"):
        return records.fold(int, lambda total, value: total + value)
    if family == "stateful_map":
        return records.stateful_map(int, lambda state, value: (state + value, state))
    if family == "process":
        return records.process(sum_until_later, emit_count)
    if family == "window":
        return records.window(Tumbling(100)).count().down
    if family == "session":
        return records.window(Session(50)).count().down
    if family == "join_latest":
        return records.join_latest(table, how="left")
    raise ValueError(family)


def columnar_dataflow(family: str, rows: Any, table: Any) -> Any:
    """The columnar ``family``'s operator over Arrow ``rows`` (``table``: the join's updates)."""
    if family == "columnar_window":
        return rows.window_batch(Tumbling(100), keys="user").count().down
    if family == "columnar_session":
        return rows.window_batch(Session(50), keys=["user", "region"]).count().down
    if family == "columnar_join_latest":
        return rows.key_by_columns("user").join_latest(table.key_by_columns("user"))
    raise ValueError(family)


def ownership_main(worker: Any, root: str, family: str, tag: str, crash_after: int, misroute: str) -> int:
    """Run ``family``'s dataflow with checkpoints in ``root/checkpoints`` from the store's resume epoch.

    The run tagged ``plain``, uninterrupted, keeps its checkpoints apart (in ``root/plain-checkpoints``).

    ``misroute`` is ``"victim"`` (:func:`misroute_victim`), ``"nan"`` (:func:`old_nan_hashing`) or ``""``: for a run
    in processes of its own, whose routing is changed for the whole process.  Each worker appends every output as
    a line to ``root/tag-worker-I.jsonl``; worker 0 raises :class:`~helpers.epoch_feed.Crash` once epoch
    ``crash_after`` is complete (``-1``: never).  Returns the epoch the run resumed from.
    """
    if misroute == "victim":
        misroute_victim(setattr)
    elif misroute == "nan":
        old_nan_hashing(setattr)
    store = CheckpointStore(Path(root) / ("plain-checkpoints" if tag == "plain" else "checkpoints"))
    lines = open(Path(root) / f"{tag}-worker-{worker.index}.jsonl", "a")  # noqa: SIM115 (closed below)
    columnar = family.startswith("columnar")

    def keep(time: int, batch: Any) -> None:
        for record in batch.to_pylist() if columnar else batch:
            lines.write(json.dumps([time, repr(record)]) + "\n")
        lines.flush()

    def build(scope: Any) -> Any:
        records_in, records = scope.new_input("Records")
        table_in, table = scope.new_input("Table")
        if columnar:
            out = columnar_dataflow(family, records, table)
        else:
            out = record_dataflow(family, records.keyed(), table.keyed())
        out.inspect_batch(keep)
        return records_in, table_in, out.probe()

    try:
        records_in, table_in, probe = worker.dataflow(build, checkpoint=store)
        start = store.resume_epoch

        def batches(epoch: int) -> tuple[Any, Any]:
            pairs = epoch_records(family, epoch)[worker.index :: worker.peers]
            updates = [(key, f"v{epoch}") for key, _ in pairs] if epoch % 2 == 0 else []
            if not columnar:
                return pairs, updates
            return _table(pairs), _table([(key, epoch) for key, _ in updates]) if updates else None

        feed_epochs(worker, (records_in, table_in), batches, probe, range(start, EPOCHS), crash_after)
        return start
    finally:
        lines.close()
