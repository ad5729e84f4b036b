"""Damaged or hostile input to the Spark integration's readers: no Spark session, no JVM."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.spark import standalone
from runtime.spark.errors import SparkSetupError


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
