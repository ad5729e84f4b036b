"""A retried gang resumes from its last complete checkpoint: ``run_dataflow(checkpoint=DIR)``.

Without it a failed attempt starts the dataflow again from its first input
batch.  With it, each task's dataflow runs with a
:class:`~runtime.checkpoints.CheckpointStore` under ``DIR/state``, and

* each Arrow batch of the task's partition is its own epoch (0, 1, 2, ...);
  at most :data:`EPOCHS_AHEAD` epochs are in flight, so checkpoints follow
  the input closely;
* the output of each epoch, once the dataflow has passed it, is validated,
  saved as one file per task and epoch under ``DIR/outputs``
  (:class:`OutputLog`) and only then handed to Spark, and the store is told
  (``written_before``): a checkpoint never claims an epoch whose output could
  be lost, and no saved output is one its reader refuses;
* a retried task finds the latest epoch ``E`` every task's checkpoint holds,
  restores its operators' state as of ``E``, hands Spark the saved output of
  the epochs before ``E``, skips its partition's first ``E`` batches and
  feeds the rest.  It reports ``resumed`` (with ``epoch=E``) to ``on_progress``.

The result equals an uninterrupted run's when the partitions come out the same
on every attempt (a deterministic source; ``repartition`` of one sorts rows
first) and state lives in operators that register it (windows, keyed state,
joins, :mod:`scopes.state_registry`).  ``DIR`` belongs to one job: every task
must reach it (a shared file system across hosts), and a later job with the
same directory resumes where that one ended.

Output files are framed like checkpoints: magic, version, length, the batches
in Arrow's IPC stream format, and a BLAKE2b-256 of everything before; a
damaged one is refused with its path and byte offset.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]

from runtime.checkpoints import CheckpointStore
from runtime.communication.arraycodec import refuse_compressed
from runtime.errors import CheckpointCorrupt
from runtime.spark.arrow import OutputBatcher, input_rows, refuse_invalid_output
from scopes.state_registry import ENDED

EPOCHS_AHEAD = 2
"""Input epochs a task feeds beyond the last one the whole dataflow has passed."""
MAGIC = b"\x89PTOUT\r\n"
"""The first 8 bytes of a saved output file."""
VERSION = 1
_HEAD = struct.Struct(">HQ")
_DIGEST = 32


class OutputLog:
    """One task's saved output, one file per epoch, under ``root/workers-W/worker-I``."""

    def __init__(
        self, root: str | os.PathLike[str], worker: int, peers: int, schema: pa.Schema, dataflow: str = "pytimely"
    ) -> None:
        """The log of task ``worker`` of ``peers``, whose batches have ``schema``, of the dataflow named
        ``dataflow`` (for errors)."""
        self.directory = Path(root) / f"workers-{peers}" / f"worker-{worker}"
        self.schema = schema
        self.worker = worker
        self.dataflow = dataflow

    def path(self, epoch: int) -> Path:
        """The file holding epoch ``epoch``'s output."""
        return self.directory / f"epoch-{epoch:020d}.out"

    def write(self, epoch: int, batches: list[pa.RecordBatch]) -> None:
        """Save epoch ``epoch``'s output: hidden, flushed, then renamed into place.

        A batch that is not valid Arrow is refused first
        (:class:`~runtime.spark.errors.InvalidOutputBatch`), and nothing of the
        epoch is saved: :meth:`read` would take such a file for a damaged one.
        """
        where = f"the output of operator 'SparkOutput' of dataflow {self.dataflow!r}"
        fate = f"nothing of epoch {epoch} was saved under {str(self.directory)!r} nor handed to Spark"
        for batch in batches:
            refuse_invalid_output(batch, self.worker, epoch, where, fate, "epoch")
        self.directory.mkdir(parents=True, exist_ok=True)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, self.schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
        body = sink.getvalue().to_pybytes()
        data = MAGIC + _HEAD.pack(VERSION, len(body)) + body
        data += hashlib.blake2b(data, digest_size=_DIGEST).digest()
        final = self.path(epoch)
        hidden = self.directory / f".{final.name}.{os.getpid()}.tmp"
        with open(hidden, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(hidden, final)

    def read(self, epoch: int) -> list[pa.RecordBatch]:
        """Epoch ``epoch``'s saved batches; :class:`CheckpointCorrupt` naming the byte offset if damaged."""
        path = self.path(epoch)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise CheckpointCorrupt(
                f"{path}: the output of epoch {epoch} is missing although a checkpoint after it is complete"
            ) from None
        if not data.startswith(MAGIC):
            raise CheckpointCorrupt(f"{path}: not a pytimely output file (no magic number at byte 0)")
        at = len(MAGIC) + _HEAD.size
        if len(data) < at + _DIGEST:
            raise CheckpointCorrupt(f"{path}: cut short at byte {len(data)}")
        version, length = _HEAD.unpack_from(data, len(MAGIC))
        if version != VERSION:
            raise CheckpointCorrupt(f"{path}: output format version {version} at byte {len(MAGIC)}; expected {VERSION}")
        if at + length + _DIGEST != len(data):
            raise CheckpointCorrupt(f"{path}: body length {length} at byte {len(MAGIC) + 2} does not match the file")
        if hashlib.blake2b(data[: at + length], digest_size=_DIGEST).digest() != data[at + length :]:
            raise CheckpointCorrupt(f"{path}: the checksum at byte {at + length} does not match the bytes before it")
        # The checksum is no key: bytes a writer got wrong (or forged) still reach Arrow's reader, which checks
        # only that buffers lie inside the stream.  An offset pointing outside its data crashed the process when
        # the batch was read (to hand it to Spark), and a compressed buffer declares the size it inflates to.
        try:
            body = pa.py_buffer(data[at : at + length])
            refuse_compressed(pa, body, "a saved output")
            reader = pa.ipc.open_stream(body)
            schema = reader.schema
            batches = list(reader)
            for batch in batches:
                batch.validate(full=True)
        except Exception as error:  # ArrowInvalid, ArrowIOError, ColumnarDecodeError, ...: all mean damaged bytes
            raise CheckpointCorrupt(
                f"{path}: the Arrow stream at byte {at} cannot be read ({type(error).__name__}: {error!s:.300}); "
                "delete the checkpoint directory to run the job from its start"
            ) from None
        if not schema.equals(self.schema):
            raise CheckpointCorrupt(
                f"{path}: the Arrow stream at byte {at} has the schema {str(schema)!r:.300}, not the job's "
                f"{str(self.schema)!r:.300}"
            )
        return batches

    def replay(self, before: int) -> Iterator[pa.RecordBatch]:
        """The saved output of every epoch before ``before``, in epoch order."""
        for epoch in sorted(epoch for epoch in self.epochs() if epoch < before):
            yield from self.read(epoch)

    def epochs(self) -> set[int]:
        """The epochs with a saved output file."""
        if not self.directory.is_dir():
            return set()
        return {
            int(name[6:26])
            for name in os.listdir(self.directory)
            if name.startswith("epoch-") and name.endswith(".out") and name[6:26].isascii() and name[6:26].isdigit()
        }


class EpochOutput:
    """The output of the epochs the dataflow has not passed yet, saved and handed over once it has."""

    def __init__(self, log: OutputLog, store: CheckpointStore, worker: int, put: Callable[[Any], None]) -> None:
        """Hand ``put`` each finished epoch's batches after saving them in ``log``; tell ``store``."""
        self.log = log
        self.store = store
        self.worker = worker
        self.put = put
        self.pending: dict[int, tuple[OutputBatcher, list[pa.RecordBatch]]] = {}
        self.rows = 0

    def add(self, time: int, message: Any) -> None:
        """One output message of epoch ``time``."""
        entry = self.pending.get(time)
        if entry is None:
            entry = self.pending[time] = (OutputBatcher(self.log.schema), [])
        entry[1].extend(entry[0].add(message))

    def flush(self, before: int) -> None:
        """Save and hand over the output of every epoch before ``before``, which the dataflow has passed."""
        for time in sorted(time for time in self.pending if time < before):
            batcher, batches = self.pending.pop(time)
            batches.extend(batcher.finish())
            self.log.write(time, batches)
            for batch in batches:
                self.rows += batch.num_rows
                self.put(batch)
        self.store.written_before(self.worker, before)


def drive_resumable(
    worker: Any,
    root: str,
    name: str,
    schema: pa.Schema,
    columnar: bool,
    build: Callable[[Any, Callable[[Any, Any], None]], Any],
    batches: Iterator[pa.RecordBatch],
    put: Callable[[Any], None],
    report: Callable[..., None],
) -> int:
    """Run the task's dataflow with checkpoints under ``root`` (see the module docstring); its output rows.

    ``build(scope, hand_over)`` builds the dataflow on ``scope`` and returns
    ``(input handle, probe)``, calling ``hand_over(time, message)`` for each
    output message.
    """
    index, peers = worker.index, worker.peers
    store = CheckpointStore(Path(root) / "state", own_outputs=True)
    output = EpochOutput(OutputLog(Path(root) / "outputs", index, peers, schema, name), store, index, put)
    handle, probe = worker.dataflow(lambda scope: build(scope, output.add), name=name, checkpoint=store)
    resumed = store.resume_epoch
    if resumed:
        replayed = 0
        for batch in output.log.replay(resumed):
            replayed += batch.num_rows
            put(batch)
        output.rows += replayed
        report("resumed", epoch=resumed, rows=replayed)
    epochs = 0
    read = 0  # the partition's rows up to this batch, for an input error to name a row
    for epoch, batch in enumerate(batches):
        epochs = epoch + 1
        read += batch.num_rows
        if epoch < resumed:
            continue
        handle.send_batch(batch if columnar else input_rows(batch, read - batch.num_rows))
        handle.advance_to(epoch + 1)
        worker.step_while(lambda epoch=epoch: probe.less_than(epoch + 1 - EPOCHS_AHEAD))
        output.flush(_passed(probe))
    report("input", batches=max(epochs - resumed, 0), skipped=min(resumed, epochs))
    handle.close()

    def running() -> bool:
        output.flush(_passed(probe))  # each epoch's output reaches Spark once the dataflow has passed it
        return not probe.done()

    worker.step_while(running)
    output.flush(ENDED)
    return output.rows


def _passed(probe: Any) -> int:
    """The earliest epoch the probed output may still show (``ENDED`` once it can show none)."""
    return min(probe.frontier(), default=ENDED)
