"""Dataflows for the columnar tests that run in other processes; imports neither pyarrow nor pytest."""

from __future__ import annotations

from typing import Any

import numpy as np


def exchange_arrays(worker: Any) -> list[Any]:
    """Records ``(key, array)`` exchanged by key between the workers (used without pyarrow)."""
    received: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        probe = (
            stream.exchange(lambda record: record[0])
            .inspect(lambda record: received.append((record[0], record[1].tolist(), str(record[1].dtype))))
            .probe()
        )
        return handle, probe

    handle, probe = worker.dataflow(build)
    if worker.index == 0:
        handle.send_batch([(key, np.arange(key, dtype=np.int16)) for key in range(6)])
    handle.close()
    worker.step_while(lambda: not probe.done())
    return sorted(received)


# ---------------------------------------------------------------------- columnar capture and exchange

ROWS = 50
"""Rows per batch sent by each worker at each epoch."""
EPOCHS = 3


def make_batch(kind: str, worker: int, epoch: int, rows: int = ROWS) -> Any:
    """A batch of ``rows`` rows (``k``, ``w``, ``word``, ``value``): a structured numpy array or an Arrow batch."""
    keys = (np.arange(rows, dtype=np.int64) * 7 + worker * 1000 + epoch) % 97
    words = np.array([f"w{int(key) % 13}" for key in keys], dtype="U8")
    values = keys * 0.5 + epoch
    if kind == "numpy":
        array = np.empty(rows, dtype=[("k", "<i8"), ("w", "<i2"), ("word", "U8"), ("value", "<f8")])
        array["k"], array["w"], array["word"], array["value"] = keys, worker, words, values
        return array
    import pyarrow as pa

    return pa.record_batch(
        {"k": keys, "w": np.full(rows, worker, np.int16), "word": words.astype(str).tolist(), "value": values}
    )


def capture_columnar(worker: Any, kind: str, directory: str | None = None, port: int | None = None) -> list[Any]:
    """Send ``EPOCHS`` batches of ``kind``, exchange them by column ``k``, capture them into a file or a TCP socket.

    Returns the ``(time, batch)`` pairs this worker captured (they travel back in the wire encoding).
    """
    import socket
    from pathlib import Path

    from runtime.eventlog import EventWriter
    from scopes.capture import CaptureRecorder, capture_into

    if directory is not None:
        writer = EventWriter(Path(directory) / f"s{worker.index}.log")
    else:
        assert port is not None
        writer = EventWriter(socket.create_connection(("127.0.0.1", port), timeout=30))
    recorder = CaptureRecorder()

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        exchanged = stream.exchange_batch("k")
        capture_into(exchanged, writer)
        capture_into(exchanged, recorder, name="Record")
        return handle

    handle = worker.dataflow(build)
    for epoch in range(EPOCHS):
        handle.send_batch(make_batch(kind, worker.index, epoch))
        handle.advance_to(epoch + 1)
    handle.close()
    worker.step_while(lambda: not recorder.finished)
    return recorder.batches()


def replay_batches(worker: Any, sources: list[Any]) -> list[Any]:
    """Replay ``sources`` (event iterables; this worker takes its share); return the ``(time, batch)`` pairs."""
    from scopes.capture import replay_into

    got: list[Any] = []

    def build(scope: Any) -> Any:
        return replay_into(sources, scope).inspect_batch(lambda time, batch: got.append((time, batch))).probe()

    probe = worker.dataflow(build)
    worker.step_while(lambda: not probe.done())
    return got


def exchange_and_sum(worker: Any, kind: str, batches: int, rows: int) -> list[Any]:
    """Each worker sends ``batches`` batches of ``rows`` rows in one epoch, exchanged by ``k``; per key: (k, rows, sum).

    Every received batch is checked to be columnar; the sums are vectorised.
    """
    totals: dict[int, list[float]] = {}

    def fold(batch: Any) -> None:
        if kind == "numpy":
            assert isinstance(batch, np.ndarray), type(batch)
            keys, values = batch["k"], batch["value"]
        else:
            assert type(batch).__name__ == "RecordBatch", type(batch)
            keys, values = batch.column("k").to_numpy(), batch.column("value").to_numpy()
        unique, inverse = np.unique(keys, return_inverse=True)
        sums = np.bincount(inverse, weights=values)
        counts = np.bincount(inverse)
        for key, count, total in zip(unique.tolist(), counts.tolist(), sums.tolist(), strict=True):
            entry = totals.setdefault(key, [0, 0.0])
            entry[0] += count
            entry[1] += total

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        probe = stream.exchange_batch("k").inspect_batch(lambda _time, batch: fold(batch)).probe()
        return handle, probe

    handle, probe = worker.dataflow(build)
    for number in range(batches):
        handle.send_batch(make_batch(kind, worker.index, number, rows))
    handle.close()
    worker.step_while(lambda: not probe.done())
    return sorted((key, count, round(total, 6)) for key, (count, total) in totals.items())


def exchange_records(worker: Any, batches: int, rows: int) -> list[Any]:
    """The record-wise twin of :func:`exchange_and_sum`: the same rows as tuples, ``exchange`` by key."""
    totals: dict[int, list[float]] = {}

    def add(record: tuple[Any, ...]) -> None:
        entry = totals.setdefault(record[0], [0, 0.0])
        entry[0] += 1
        entry[1] += record[3]

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        probe = stream.exchange(lambda record: record[0]).inspect(add).probe()
        return handle, probe

    handle, probe = worker.dataflow(build)
    for number in range(batches):
        handle.send_batch([tuple(row) for row in make_batch("numpy", worker.index, number, rows).tolist()])
    handle.close()
    worker.step_while(lambda: not probe.done())
    return sorted((key, count, round(total, 6)) for key, (count, total) in totals.items())


def broadcast_and_mutate(worker: Any) -> list[int]:
    """Worker 0 broadcasts two arrays; every worker sums what it receives, then changes its array in place.

    Returns the sums seen: all equal unless two workers were handed the same array.
    """
    sums: list[int] = []

    def receive(batch: Any) -> None:
        sums.append(int(batch.sum()))
        batch += 1_000_000

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        probe = stream.broadcast().inspect_batch(lambda _time, batch: receive(batch)).probe()
        return handle, probe

    handle, probe = worker.dataflow(build)
    if worker.index == 0:
        for _ in range(2):
            handle.send_batch(np.arange(1_000))
    handle.close()
    worker.step_while(lambda: not probe.done())
    return sums
