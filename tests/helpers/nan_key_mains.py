"""Worker mains and data for tests/test_nan_keys.py (importable by name in each process).

Every NaN here is made where it is used, so that records carry NaN objects of
their own (as records decoded from another process do), next to records that
share one NaN object, NaN of the other sign and NaN with other payload bits.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helpers.epoch_feed import feed_epochs
from helpers.keyed_timers import count_records, emit_count
from runtime.checkpoints import CheckpointStore
from scopes import Session, Tumbling

SHARED_NAN = float("nan")
"""One NaN object that several records share (dict lookups find it by identity)."""
SENTINEL = "NaN"
"""What a NaN stands for in the expected answers: a key like any other."""


def fresh_nan() -> float:
    """A NaN object no other record holds."""
    return float("nan")


def negative_nan() -> float:
    """A NaN with its sign bit set, a new object."""
    return -float("nan")


def payload_nan() -> float:
    """A quiet NaN with payload bits ``2``, a new object (its bytes' CRC-32 is even, ``float('nan')``'s odd)."""
    value: float = struct.unpack("<d", bytes.fromhex("020000000000f87f"))[0]
    return value


def nan_makers(sentinel: bool) -> tuple[Callable[[], Any], Callable[[], Any], Callable[[], Any], Any]:
    """``(fresh, negative, payload, shared)``: NaN makers and the shared NaN; all :data:`SENTINEL` if ``sentinel``."""
    if sentinel:
        return (lambda: SENTINEL), (lambda: SENTINEL), (lambda: SENTINEL), SENTINEL
    return fresh_nan, negative_nan, payload_nan, SHARED_NAN


def plain(value: Any) -> Any:
    """``value`` with every float NaN (in tuples, lists and dicts too) replaced by :data:`SENTINEL`, lists as tuples."""
    if isinstance(value, float) and math.isnan(value):
        return SENTINEL
    if isinstance(value, (tuple, list)):
        return tuple(plain(item) for item in value)
    if isinstance(value, dict):
        return tuple(sorted((key, plain(item)) for key, item in value.items()))
    return value


# ---------------------------------------------------------------------------------------------- checkpoints

CHECKPOINT_EPOCHS = 8
"""How many epochs the checkpointed run sends."""


def checkpoint_records(epoch: int) -> list[Any]:
    """The ``(key, value)`` records of ``epoch``: NaN keys of every kind, a tuple key holding NaN, a plain key."""
    return [
        (fresh_nan(), epoch),
        (negative_nan(), 1),
        (payload_nan(), 2),
        ((fresh_nan(), "a"), 1),
        ("s", 1),
    ]


def checkpoint_table(epoch: int) -> list[Any]:
    """The table updates of ``epoch``: a new value for the NaN key every third epoch."""
    return [(fresh_nan(), f"v{epoch}")] if epoch % 3 == 0 else []


def checkpointed_dataflow(records: Any, table: Any) -> Any:
    """A fold, per-key timers, windows, sessions and a table join over keyed ``records``, tagged and concatenated."""
    totals = records.fold(int, lambda total, value: total + value).map(lambda kv: ("total", kv))
    timers = records.process(count_records, emit_count).map(lambda kv: ("timer", kv))
    windows = records.window(Tumbling(3)).count().down.map(lambda result: ("window", result))
    sessions = records.window(Session(2)).count().down.map(lambda result: ("session", result))
    joined = records.join_latest(table, how="left").map(lambda result: ("joined", result))
    return totals.concat(timers, windows, sessions, joined)


def checkpointed_main(worker: Any, root: str, tag: str, crash_after: int) -> int:
    """Run :func:`checkpointed_dataflow` from the store's resume epoch (no store for ``tag`` ``"plain"``).

    Each worker appends every result, with NaN as :data:`SENTINEL`, to
    ``root/tag-worker-I.jsonl`` as ``[time, record]`` lines; worker 0 raises
    :class:`~helpers.epoch_feed.Crash` once epoch ``crash_after`` is complete (``-1``: never).
    Returns the epoch the run resumed from.
    """
    store = CheckpointStore(Path(root) / "checkpoints") if tag != "plain" else None
    lines = open(Path(root) / f"{tag}-worker-{worker.index}.jsonl", "a")  # noqa: SIM115 (closed below)

    def keep(time: int, batch: Any) -> None:
        for record in batch:
            lines.write(json.dumps([time, plain(record)]) + "\n")
        lines.flush()

    def build(scope: Any) -> Any:
        records_in, records = scope.new_input("Records")
        table_in, table = scope.new_input("Table")
        out = checkpointed_dataflow(records.keyed(), table.keyed())
        out.inspect_batch(keep)
        return records_in, table_in, out.probe()

    try:
        records_in, table_in, probe = worker.dataflow(build, checkpoint=store)
        start = store.resume_epoch if store is not None else 0

        def batches(epoch: int) -> tuple[list[Any], list[Any]]:
            shares = slice(worker.index, None, worker.peers)
            return checkpoint_records(epoch)[shares], checkpoint_table(epoch)[shares]

        feed_epochs(worker, (records_in, table_in), batches, probe, range(start, CHECKPOINT_EPOCHS), crash_after)
        return start
    finally:
        lines.close()


# ---------------------------------------------------------------------------------------------- columnar


def _batches_of(worker: Any, batches: list[Any]) -> list[Any]:
    """Batch ``j`` goes from worker ``j % peers``."""
    return [batch for number, batch in enumerate(batches) if number % worker.peers == worker.index]


def _rows(batch: Any) -> list[Any]:
    """The rows of an Arrow table as tuples in column order, NaN as :data:`SENTINEL`, ``-0.0`` as ``0.0``."""
    return [tuple(0.0 if value == 0.0 else plain(value) for value in row.values()) for row in batch.to_pylist()]


def window_main(worker: Any, epochs: list[list[Any]], keys: list[str], session: bool) -> list[Any]:
    """``window_batch`` counts per key (tumbling windows of 2, or sessions of gap 2); ``(time, rows)`` per output."""
    seen: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        spec = Session(2) if session else Tumbling(2)
        out = stream.window_batch(spec, keys=keys).count().down
        return handle, out.inspect_batch(lambda time, batch: seen.append((time, _rows(batch)))).probe()

    handle, probe = worker.dataflow(build)
    for epoch, batches in enumerate(epochs):
        for batch in _batches_of(worker, batches):
            handle.send_batch(batch)
        handle.advance_to(epoch + 1)
    handle.close()
    worker.step_while(lambda: not probe.done())
    return seen


def join_latest_main(worker: Any, rows: list[list[Any]], table: list[list[Any]], keys: list[str]) -> list[Any]:
    """``KeyedBatches.join_latest`` (inner) of ``rows`` against ``table``; ``(time, rows)`` per output."""
    seen: list[Any] = []

    def build(scope: Any) -> Any:
        rows_in, row_stream = scope.new_input("Rows")
        table_in, table_stream = scope.new_input("Table")
        out = row_stream.key_by_columns(keys).join_latest(table_stream.key_by_columns(keys))
        probe = out.inspect_batch(lambda time, batch: seen.append((time, _rows(batch)))).probe()
        return rows_in, table_in, probe

    rows_in, table_in, probe = worker.dataflow(build)
    for epoch, (row_batches, table_batches) in enumerate(zip(rows, table, strict=True)):
        for handle, batches in ((rows_in, row_batches), (table_in, table_batches)):
            for batch in _batches_of(worker, batches):
                handle.send_batch(batch)
            handle.advance_to(epoch + 1)
    rows_in.close()
    table_in.close()
    worker.step_while(lambda: not probe.done())
    return seen
