"""Restored keyed state must sit on its key's owner (scopes.key_owners), or the resume is refused.

A checkpoint whose worker holds state for a key that the current routing sends
to another worker (written by a pytimely that routed keys differently, or a file
moved between worker directories) would resume with the key's state where its
records no longer arrive: two states for one key, a silent wrong answer.  Each
checkpoint here is a real one, written by a run whose routing was changed for one
key (or with the NaN hash of before all NaN keys were one key), or moved with
the store's own writer; the resumed run must fail with ``CheckpointMismatch``
and send nothing.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from helpers.ownership_mains import (
    COLUMNAR_FAMILIES,
    MULTI_KEY_FAMILIES,
    OPERATOR_NAMES,
    RECORD_FAMILIES,
    VICTIM,
    misroute_victim,
    old_nan_hashing,
    ownership_main,
)
from helpers.resumed_runs import assert_resume_repeats_the_plain_run

from runtime import execute
from runtime.checkpoints import _HEAD, MAGIC, CheckpointStore
from runtime.communication.wire import decode_value
from runtime.errors import CheckpointMismatch, WorkerFailed
from scopes.errors import KeyNotOwned, TimelyError
from scopes.state_registry import registry_of

pytest.importorskip("pyarrow")

FAMILIES = RECORD_FAMILIES + COLUMNAR_FAMILIES
STALL = 30.0
ADVICE = (
    "The checkpoint was written by a version of pytimely that routed keys differently (or the file was moved); "
    "start afresh in a new checkpoint directory"
)


def run(root: Path, family: str, tag: str, crash_after: int, processes: int = 1, misroute: str = "") -> int:
    """``family``'s run on 2 workers (2 threads, or 2 processes); the epoch it resumed from."""
    main = partial(ownership_main, root=str(root), family=family, tag=tag, crash_after=crash_after, misroute=misroute)
    workers = 2 if processes == 1 else 1
    return execute(main, workers=workers, processes=processes, stall_timeout=STALL)[0]


def outputs(root: Path, tag: str) -> list[str]:
    """Every output line the run ``tag`` wrote, on any worker."""
    return [line for path in root.glob(f"{tag}-worker-*.jsonl") for line in path.read_text().splitlines()]


def expected_key(family: str) -> Any:
    """The misrouted key as the error shows it: the key, or the key columns' values."""
    return {"user": VICTIM, "region": "eu"} if family in MULTI_KEY_FAMILIES else VICTIM


def refusal(caught: pytest.ExceptionInfo[WorkerFailed]) -> CheckpointMismatch:
    """The :class:`CheckpointMismatch` a resumed run on threads failed with, checked to be caused by KeyNotOwned."""
    cause = caught.value.__cause__
    assert isinstance(cause, CheckpointMismatch), repr(cause)
    assert isinstance(cause, TimelyError)
    assert isinstance(cause.__cause__, KeyNotOwned)
    return cause


def assert_names_everything(text: str, family: str, key: Any, worker: int, owner: int) -> None:
    """The refusal names the operator, the checkpoint (file and epoch), the key, both workers and what to do."""
    assert f"operator '{OPERATOR_NAMES[family]}' in scope 'dataflow 0'" in text, text
    assert re.search(rf"workers-2/worker-{worker}/epoch-\d{{20}}\.ckpt: ", text), text
    assert re.search(r"from the checkpoint at epoch [1-9]\d* ", text), text
    assert f"key {key!r} " in text, text
    assert f"on worker {worker}, but the key's records are routed to worker {owner}" in text, text
    assert ADVICE in text, text


@pytest.mark.parametrize("family", FAMILIES)
def test_a_key_checkpointed_on_a_worker_that_no_longer_owns_it_is_refused_on_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: str
) -> None:
    # VICTIM's owner is worker 1; while the checkpoint is written, its records (and rows) go to worker 0
    with monkeypatch.context() as patch:
        misroute_victim(patch.setattr)
        with pytest.raises(WorkerFailed, match="crash after epoch 2"):
            run(tmp_path, family, "first", 2)
    with pytest.raises(WorkerFailed) as caught:
        run(tmp_path, family, "second", -1)
    cause = refusal(caught)
    assert_names_everything(str(cause), family, expected_key(family), 0, 1)
    owned = cause.__cause__
    assert isinstance(owned, KeyNotOwned)
    assert (owned.key, owned.worker, owned.owner) == (expected_key(family), 0, 1)
    assert not outputs(tmp_path, "second")


@pytest.mark.parametrize("family", FAMILIES)
def test_a_checkpoint_of_the_same_routing_still_resumes_with_the_uninterrupted_answer(
    tmp_path: Path, family: str
) -> None:
    assert_resume_repeats_the_plain_run(tmp_path, partial(run, tmp_path, family), 2)


def test_a_nan_key_routed_by_the_old_nan_hash_is_refused_on_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before all NaN keys were one key, a NaN of payload 2 went to worker 0 of 2 (by its bytes' CRC-32); every NaN
    # now goes to worker 1. The fold kept it, canonical, on worker 0: resumed there, it would never be updated.
    with monkeypatch.context() as patch:
        old_nan_hashing(patch.setattr)
        with pytest.raises(WorkerFailed, match="crash after epoch 2"):
            run(tmp_path, "nan", "first", 2)
    with pytest.raises(WorkerFailed) as caught:
        run(tmp_path, "nan", "second", -1)
    cause = refusal(caught)
    assert_names_everything(str(cause), "fold", float("nan"), 0, 1)
    assert not outputs(tmp_path, "second")


@pytest.mark.parametrize("family", ["fold", "columnar_window"])
def test_a_misplaced_key_is_refused_on_two_processes(tmp_path: Path, family: str) -> None:
    with pytest.raises(WorkerFailed, match="crash after epoch 2"):
        run(tmp_path, family, "first", 2, processes=2, misroute="victim")
    with pytest.raises(WorkerFailed) as caught:
        run(tmp_path, family, "second", -1, processes=2)
    text = "\n".join([str(caught.value), *getattr(caught.value, "__notes__", [])])
    assert "CheckpointMismatch" in text, text
    assert_names_everything(text, family, VICTIM, 0, 1)
    assert not outputs(tmp_path, "second")


def _shape(path: Path) -> str:
    """The dataflow shape in a checkpoint file's header."""
    data = path.read_bytes()
    _, length = _HEAD.unpack_from(data, len(MAGIC))
    start = len(MAGIC) + _HEAD.size
    shape: str = decode_value(data[start : start + length])["shape"]
    return shape


@pytest.mark.parametrize("processes", [1, 2], ids=["2-threads", "2-processes"])
def test_checkpoint_files_moved_between_workers_are_refused(tmp_path: Path, processes: int) -> None:
    # An honest checkpoint; then each worker's file rewritten, header and checksum, as the other worker's
    with pytest.raises(WorkerFailed, match="crash after epoch 2"):
        run(tmp_path, "fold", "first", 2, processes=processes)
    store = CheckpointStore(tmp_path / "checkpoints")
    boundary = max(set.intersection(*(store.boundaries(worker, 2) for worker in range(2))))
    paths = [store.directory(worker, 2) / f"epoch-{boundary:020d}.ckpt" for worker in range(2)]
    shape = _shape(paths[0])
    states = [store.read(path, 2, worker, shape) for worker, path in enumerate(paths)]
    for worker in range(2):
        store.write(worker, 2, shape, boundary, states[1 - worker])
    with pytest.raises(WorkerFailed) as caught:
        run(tmp_path, "fold", "second", -1, processes=processes)
    text = "\n".join([str(caught.value), *getattr(caught.value, "__notes__", [])])
    found = re.search(r"on worker (\d), but the key's records are routed to worker (\d)", text)
    assert found is not None and found.group(1) != found.group(2), text
    assert f"from the checkpoint at epoch {boundary} " in text and ADVICE in text, text
    assert not outputs(tmp_path, "second")


@pytest.mark.parametrize("workers", [1, 2])
def test_one_worker_makes_no_check_and_several_make_one_per_keyed_operator(tmp_path: Path, workers: int) -> None:
    from scopes import Tumbling

    def main(worker: Any) -> list[bool]:
        checks: list[bool] = []

        def build(scope: Any) -> Any:
            _, records = scope.new_input("Records")
            _, rows = scope.new_input("Rows")
            keyed = records.keyed()
            keyed.fold(int, lambda total, value: total + value)
            keyed.window(Tumbling(3)).count()
            rows.window_batch(Tumbling(3), keys="user").count()
            registry = registry_of(scope)
            assert registry is not None
            checks.extend(state.misplaced is not None for state in registry.operators.values())
            return None

        worker.dataflow(build, checkpoint=CheckpointStore(tmp_path / f"worker-{worker.index}"))
        return checks

    assert execute(main, workers=workers) == [[workers > 1] * 3] * workers
