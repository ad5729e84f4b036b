"""The parts of the Spark support that need no Spark session: the bounded barrier wait, saved outputs, interpreters."""

from __future__ import annotations

import threading
import venv
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")

from runtime.errors import CheckpointCorrupt  # noqa: E402
from runtime.spark.errors import RETRY_MARKER, TaskFailed  # noqa: E402
from runtime.spark.gang import all_gather  # noqa: E402
from runtime.spark.resume import OutputLog  # noqa: E402
from runtime.spark.sessions import same_python  # noqa: E402


class StuckContext:
    """A ``BarrierTaskContext`` whose peers never arrive: ``allGather`` blocks until released."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def allGather(self, address: str) -> list[str]:  # noqa: N802 - Spark's name
        self.release.wait()
        return [address]


class FailingContext:
    def allGather(self, address: str) -> list[str]:  # noqa: N802 - Spark's name
        raise RuntimeError("barrier epoch mismatch")


def test_the_barrier_wait_ends_after_the_jobs_own_timeout_and_is_retryable() -> None:
    context = StuckContext()  # its allGather would wait forever: only the job's timeout can end the call
    with pytest.raises(TaskFailed) as caught:
        all_gather(context, "h:1", 1, 0.3)
    context.release.set()
    assert str(caught.value).startswith(RETRY_MARKER) and "connect_timeout" in str(caught.value)
    assert "within 0.3 s" in str(caught.value) and "task 1" in str(caught.value)


def test_the_barrier_wait_returns_the_addresses_or_a_retryable_sync_failure() -> None:
    context = StuckContext()
    context.release.set()
    assert all_gather(context, "h:1", 0, 5.0) == ["h:1"]
    with pytest.raises(TaskFailed, match="barrier sync failed: barrier epoch mismatch") as caught:
        all_gather(FailingContext(), "h:1", 0, 5.0)
    assert str(caught.value).startswith(RETRY_MARKER)


def test_saved_output_reads_back_in_epoch_order_and_damage_is_refused_at_its_byte(tmp_path: Path) -> None:
    schema = pa.schema([("k", pa.string()), ("n", pa.int64())])
    log = OutputLog(tmp_path, 1, 2, schema)
    for epoch in (3, 0, 1):
        log.write(epoch, [pa.record_batch({"k": [f"e{epoch}"], "n": [epoch]}, schema=schema)])
    assert [batch.column("n").to_pylist() for batch in log.replay(3)] == [[0], [1]]
    path = log.path(1)
    data = bytearray(path.read_bytes())
    data[40] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointCorrupt, match=r"epoch-0+1\.out: the checksum at byte \d+"):
        list(log.replay(3))
    path.write_bytes(bytes(data[:20]))
    with pytest.raises(CheckpointCorrupt, match="cut short at byte 20"):
        log.read(1)


def test_two_virtual_environments_of_one_interpreter_are_different_pythons(tmp_path: Path) -> None:
    for name in ("one", "two"):
        venv.EnvBuilder(with_pip=False, symlinks=True).create(tmp_path / name)
    one, two = (str(tmp_path / name / "bin" / "python") for name in ("one", "two"))
    assert Path(one).resolve() == Path(two).resolve()
    assert same_python(one, one) and not same_python(one, two)
