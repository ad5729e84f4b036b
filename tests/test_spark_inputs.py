"""Damaged or hostile input to the Spark integration's readers: no Spark session, no JVM."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]
import pytest

from runtime.errors import CheckpointCorrupt
from runtime.spark import standalone
from runtime.spark.errors import SparkSetupError
from runtime.spark.resume import _HEAD, MAGIC, VERSION, OutputLog


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b'{"master": "spark://127.0.0.1:7077"',
        b"[1]",
        b'{"unexpected": 1}',
        b'{"master": "a", "web_ui": "b", "workers": "2", "cores": 1, "directory": "d"}',
        b"[" * 60_000,
    ],
    ids=["empty", "cut-short", "not-an-object", "unknown-field", "wrong-type", "deeply-nested"],
)
def test_a_damaged_standalone_state_file_is_named_and_stop_still_cleans_up(tmp_path: Path, content: bytes) -> None:
    state = tmp_path / standalone.STATE_FILE
    state.write_bytes(content)
    with pytest.raises(SparkSetupError, match="cluster.json is damaged"):  # was a raw JSONDecodeError or TypeError
        standalone.status(tmp_path)
    pids = tmp_path / "pids"
    pids.mkdir()
    (pids / f"spark-someone-{standalone.WORKER_CLASS}-2.pid").write_text("not a pid")
    assert standalone._worker_instances(tmp_path) == 2  # noqa: SLF001 - how stop finds a damaged cluster's workers
    standalone.stop(tmp_path, timeout=0)  # was the same raw error, leaving the file: start then refused for ever
    assert not state.exists()
    assert standalone.status(tmp_path) is None


@pytest.mark.parametrize("body", [b"\xff" * 64, b"", "cut"], ids=["garbage", "empty", "cut-short-stream"])
def test_a_saved_output_whose_arrow_stream_is_damaged_is_checkpoint_corrupt(tmp_path: Path, body: bytes | str) -> None:
    """The checksum is no key: a file whose Arrow stream is damaged but whose checksum matches it (a faulty writer,
    or a forger) raised pyarrow's ArrowInvalid or a bare OSError instead of CheckpointCorrupt."""
    schema = pa.schema([("a", pa.int64())])
    log = OutputLog(tmp_path, 0, 1, schema)
    log.write(0, [pa.record_batch([pa.array([1, 2, 3])], schema=schema)])
    if body == "cut":
        body = log.path(0).read_bytes()[len(MAGIC) + _HEAD.size : -32][:40]
    assert isinstance(body, bytes)
    data = MAGIC + _HEAD.pack(VERSION, len(body)) + body
    log.path(0).write_bytes(data + hashlib.blake2b(data, digest_size=32).digest())
    with pytest.raises(CheckpointCorrupt, match=rf"epoch-0+\.out: the Arrow stream at byte {len(MAGIC) + _HEAD.size}"):
        log.read(0)
    (log.directory / ("epoch-" + "\u0661" * 20 + ".out")).write_bytes(b"")  # Arabic-Indic digits: not an epoch
    assert log.epochs() == {0}
