"""Checkpoints (runtime.checkpoints): resume from the last complete epoch with the answer of an uninterrupted run."""

from __future__ import annotations

import hashlib
import re
import struct
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers.epoch_feed import Crash, feed_epochs
from helpers.forged_checkpoints import rewrite_latest
from helpers.keyed_timers import count_records, emit_count

from runtime import execute
from runtime.checkpoints import CheckpointStore
from runtime.errors import CheckpointCorrupt, CheckpointError, CheckpointMismatch, ConfigurationError, WorkerFailed
from scopes import Exchange, Tumbling

EPOCHS = [["a", "b", "a"], ["b", "c"], [], ["a"], ["c", "c", "b"], ["a", "b"], [], ["c"], ["a", "a"], ["b"]]


def streaks(scope: Any, words: Any) -> Any:
    keyed = words.key_by(lambda w: w)
    totals = keyed.fold(int, lambda n, w: n + 1).map(lambda kv: ("total", kv))
    windows = keyed.window(Tumbling(3)).count().down.map(lambda r: ("window", r))
    sessions = keyed.window(Tumbling(2)).collect().down.map(lambda r: ("collect", (r[0], r[1], len(r[2]))))

    timers = keyed.process(count_records, emit_count).map(lambda kv: ("timer", kv))
    return totals.concat(windows, sessions, timers)


def run(
    store: CheckpointStore | None,
    seen: list[Any],
    workers: int = 2,
    crash_after: int | None = None,
    report_before: int | None = None,
) -> None:
    """Run the streaks dataflow, epoch by epoch, from the store's resume epoch; crash after ``crash_after``.

    With ``report_before``, each worker says ``written_before(report_before)`` once that epoch is passed.
    """
    lock = threading.Lock()

    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            inp, words = scope.new_input("Words")
            out = streaks(scope, words)
            out.inspect_batch(lambda time, batch: _keep(lock, seen, time, batch))
            return inp, out.probe()

        inp, probe = worker.dataflow(build, checkpoint=store)
        start = store.resume_epoch if store is not None else 0
        for epoch in range(start, len(EPOCHS)):
            if worker.index == 0:
                inp.send_batch(EPOCHS[epoch])
            inp.advance_to(epoch + 1)
            worker.step_while(lambda epoch=epoch: probe.less_than(epoch + 1))
            if store is not None and report_before is not None and epoch + 1 == report_before:
                store.written_before(worker.index, report_before)
            if epoch == crash_after and worker.index == 0:
                raise Crash(f"crash after epoch {epoch}")
        inp.close()
        worker.step_while(lambda: not probe.done())

    execute(main, workers=workers)


def _keep(lock: threading.Lock, seen: list[Any], time: int, batch: list[Any]) -> None:
    with lock:
        seen.extend((time, record) for record in batch)


def uninterrupted() -> Counter[Any]:
    seen: list[Any] = []
    run(None, seen)
    return Counter(seen)


@pytest.mark.parametrize("crash_after", [0, 3, 6])
def test_a_resumed_run_gives_the_uninterrupted_answer(tmp_path: Path, crash_after: int) -> None:
    first: list[Any] = []
    with pytest.raises(WorkerFailed, match="crash after epoch"):
        run(CheckpointStore(tmp_path), first, crash_after=crash_after)
    store = CheckpointStore(tmp_path)
    second: list[Any] = []
    run(store, second)
    resumed = store.resume_epoch
    assert 0 < resumed <= crash_after + 1
    kept = [(time, record) for time, record in first if time < resumed]
    assert Counter(kept + second) == uninterrupted()


def test_a_finished_run_resumes_at_its_end_and_sends_only_what_lies_after_it(tmp_path: Path) -> None:
    first: list[Any] = []
    run(CheckpointStore(tmp_path), first)
    store = CheckpointStore(tmp_path)
    again: list[Any] = []
    run(store, again)
    assert store.resume_epoch == len(EPOCHS)
    # windows still open at the end close after the last epoch: times from the resume epoch on are sent again
    assert again and Counter(again) == Counter(r for r in first if r[0] >= len(EPOCHS))


@pytest.mark.parametrize("report_before", [None, 3])
def test_a_store_with_own_outputs_claims_no_epoch_before_the_program_reports_its_outputs(
    tmp_path: Path, report_before: int | None
) -> None:
    # The kill test's lost record: a checkpoint taken in a run's first steps, before the program's first
    # written_before, claimed an epoch whose outputs were still in memory. Now no checkpoint passes what is reported.
    with pytest.raises(WorkerFailed, match="crash after epoch 6"):
        run(CheckpointStore(tmp_path, own_outputs=True), [], crash_after=6, report_before=report_before)
    store = CheckpointStore(tmp_path, own_outputs=True)
    run(store, [])
    assert store.resume_epoch == (report_before or 0)


def test_written_before_on_a_store_without_own_outputs_is_refused(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    with pytest.raises(ConfigurationError, match=r"own_outputs=True"):
        store.written_before(0, 3)


def test_old_checkpoints_are_pruned_to_keep(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path, keep=2)
    run(store, [])

    def files() -> list[set[int]]:
        return [
            {int(path.name[6:26]) for path in (tmp_path / "workers-2" / f"worker-{worker}").glob("epoch-*.ckpt")}
            for worker in range(2)
        ]

    # during the run a worker prunes below the last 2 boundaries every worker has when it writes (it may be
    # ahead of the other, so it can keep more); once both have written, pruning leaves just those two
    assert all(len(mine) < len(EPOCHS) for mine in files())
    for worker in range(2):
        store.prune(worker, 2)
    common = sorted(files()[0] & files()[1])
    assert files() == [set(common[-2:])] * 2 and len(common) == 2


def test_every_takes_a_checkpoint_at_multiples_only(tmp_path: Path) -> None:
    first: list[Any] = []
    with pytest.raises(WorkerFailed):
        run(CheckpointStore(tmp_path, every=4, keep=10), first, crash_after=6)
    names = sorted(p.name for p in (tmp_path / "workers-2" / "worker-0").glob("epoch-*.ckpt"))
    assert names == ["epoch-00000000000000000004.ckpt"]
    store = CheckpointStore(tmp_path, every=4)
    second: list[Any] = []
    run(store, second)
    assert store.resume_epoch == 4
    assert Counter([r for r in first if r[0] < 4] + second) == uninterrupted()


# ---------------------------------------------------------------------- refusals and damage


def crashed_store(tmp_path: Path) -> None:
    with pytest.raises(WorkerFailed):
        run(CheckpointStore(tmp_path, keep=10), [], crash_after=5)


def test_a_damaged_checkpoint_is_refused_at_its_offset_and_the_previous_one_is_used(tmp_path: Path) -> None:
    crashed_store(tmp_path)
    files = sorted((tmp_path / "workers-2" / "worker-1").glob("epoch-*.ckpt"))
    latest = files[-1]
    data = bytearray(latest.read_bytes())
    data[len(data) // 2] ^= 0x40
    latest.write_bytes(bytes(data))
    store = CheckpointStore(tmp_path)
    with pytest.warns(UserWarning, match=rf"{latest.name}: the checksum at byte \d+ does not match"):
        run(store, [])
    assert store.resume_epoch == int(files[-2].name[6:26])


def test_a_file_a_kill_left_half_written_is_removed_when_the_job_runs_again(tmp_path: Path) -> None:
    """Found by SIGKILLing a job at random moments: its hidden ``.epoch-...tmp`` files stayed for ever."""
    crashed_store(tmp_path)
    directory = tmp_path / "workers-2" / "worker-1"
    latest = sorted(directory.glob("epoch-*.ckpt"))[-1]
    unfinished = directory / f".epoch-{int(latest.name[6:26]) + 1:020d}.ckpt.4242.tmp"
    unfinished.write_bytes(latest.read_bytes()[:40])  # what a kill during write() leaves
    run(CheckpointStore(tmp_path), [])
    assert not unfinished.exists()
    assert not [path for path in tmp_path.rglob(".*") if path.is_file()]


def test_a_cut_or_foreign_file_is_reported_with_its_path(tmp_path: Path) -> None:
    crashed_store(tmp_path)
    store = CheckpointStore(tmp_path)
    path = sorted((tmp_path / "workers-2" / "worker-0").glob("epoch-*.ckpt"))[-1]
    path.write_bytes(path.read_bytes()[:30])
    with pytest.raises(CheckpointCorrupt, match="cut short at byte 30"):
        store.read(path, 2, 0, "any")
    whole = path.read_bytes()
    for cut in range(8):  # a file cut within its magic number is cut short, not foreign (the stall audit found it)
        path.write_bytes(whole[:cut])
        with pytest.raises(CheckpointCorrupt, match=f"cut short at byte {cut}, within the magic number"):
            store.read(path, 2, 0, "any")
    path.write_bytes(b"PAR1" + bytes(100))
    with pytest.raises(CheckpointCorrupt, match="not a pytimely checkpoint .no magic number at byte 0"):
        store.read(path, 2, 0, "any")
    path.write_bytes(b"PAR1")
    with pytest.raises(CheckpointCorrupt, match="no magic number at byte 0"):
        store.read(path, 2, 0, "any")


def test_another_worker_count_is_refused(tmp_path: Path) -> None:
    crashed_store(tmp_path)
    with pytest.raises(WorkerFailed) as caught:
        run(CheckpointStore(tmp_path), [], workers=3)
    assert isinstance(caught.value.__cause__, CheckpointMismatch)
    assert "written by 2 workers, and this run has 3" in str(caught.value.__cause__)


def test_another_dataflow_is_refused(tmp_path: Path) -> None:
    crashed_store(tmp_path)

    def main(worker: Any) -> None:
        worker.dataflow(
            lambda scope: scope.new_input("Other")[1].key_by(str).fold(int, max).probe(),
            checkpoint=CheckpointStore(tmp_path),
        )

    with pytest.raises(WorkerFailed) as caught:
        execute(main, workers=2)
    assert isinstance(caught.value.__cause__, CheckpointMismatch)
    assert "written by another dataflow" in str(caught.value.__cause__)


def test_a_hand_written_operator_is_refused_when_built(tmp_path: Path) -> None:
    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            _, words = scope.new_input("Words")
            return words.unary(Exchange(str), "MyCounter", lambda cap, info: lambda i, o: None).probe()

        worker.dataflow(build, checkpoint=CheckpointStore(tmp_path))

    with pytest.raises(WorkerFailed, match="'MyCounter' .* is written by hand, and a checkpoint cannot see"):
        execute(main, workers=1)


def test_state_a_checkpoint_cannot_carry_is_refused_when_built(tmp_path: Path) -> None:
    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            _, words = scope.new_input("Words")
            return words.key_by(str).stateful_map(threading.Lock, lambda s, w: (s, w), name="Locks").probe()

        worker.dataflow(build, checkpoint=CheckpointStore(tmp_path))

    with pytest.raises(WorkerFailed, match="operator 'Locks' .* keeps state that a checkpoint cannot carry: .*lock"):
        execute(main, workers=1)


def test_state_that_turns_unencodable_later_names_the_operator_and_the_type(tmp_path: Path) -> None:
    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            inp, words = scope.new_input("Words")
            return inp, words.key_by(str).stateful_map(int, lambda s, w: (threading.Lock(), w), name="Locks").probe()

        inp, probe = worker.dataflow(build, checkpoint=CheckpointStore(tmp_path))
        for epoch in range(3):
            inp.send_batch(["a"])
            inp.advance_to(epoch + 1)
            worker.step_while(lambda epoch=epoch: probe.less_than(epoch + 1))

    with pytest.raises(
        WorkerFailed, match="operator 'Locks' .* keeps state that a checkpoint cannot carry: .*_thread.lock"
    ):
        execute(main, workers=1)


def test_a_join_against_a_table_resumes_with_the_table_as_of_the_checkpoint(tmp_path: Path) -> None:
    clicks = [[("u1", 1)], [("u1", 2), ("u2", 3)], [], [("u1", 4), ("u2", 5)], [("u2", 6)], [("u1", 7)]]
    names = [[("u1", "ann")], [("u2", "bob")], [("u1", "anne"), ("u2", None)], [], [("u2", "bo")], []]

    def main(worker: Any, crash_after: int | None, seen: list[Any], lock: threading.Lock) -> int:
        store = CheckpointStore(tmp_path / ("plain" if crash_after == -1 else "checkpoints"))

        def build(scope: Any) -> Any:
            clicks_in, click_stream = scope.new_input("Clicks")
            names_in, name_stream = scope.new_input("Names")
            joined = click_stream.keyed().join_latest(name_stream.keyed(), how="left")
            joined.inspect_batch(lambda time, batch: _keep(lock, seen, time, batch))
            return clicks_in, names_in, joined.probe()

        clicks_in, names_in, probe = worker.dataflow(build, checkpoint=store)
        mine = worker.index == 0  # worker 0 sends every record
        batches = lambda epoch: (clicks[epoch], names[epoch]) if mine else (None, None)  # noqa: E731
        feed_epochs(worker, (clicks_in, names_in), batches, probe, range(store.resume_epoch, len(clicks)), crash_after)
        return store.resume_epoch

    def run_join(crash_after: int | None, seen: list[Any]) -> int:
        lock = threading.Lock()
        return execute(lambda worker: main(worker, crash_after, seen, lock), workers=2)[0]

    expected: list[Any] = []
    run_join(-1, expected)
    first: list[Any] = []
    with pytest.raises(WorkerFailed, match="crash after epoch 3"):
        run_join(3, first)
    second: list[Any] = []
    resumed = run_join(None, second)
    assert 0 < resumed <= 4
    assert Counter([r for r in first if r[0] < resumed] + second) == Counter(expected)


def run_to_files(checkpoints: Path, output: Path, crash_after: int | None = None, every: int = 1) -> int:
    """The running totals, written by write_files, checkpointed every ``every`` epochs; crash after ``crash_after``."""
    from runtime.files import write_files

    def main(worker: Any) -> int:
        store = CheckpointStore(checkpoints, every=every)

        def build(scope: Any) -> Any:
            inp, words = scope.new_input("Words")
            totals = words.key_by(lambda w: w).fold(int, lambda n, w: n + 1)
            rows = totals.map(lambda kv: {"word": kv[0], "total": kv[1]})
            return inp, write_files(rows, output, format="jsonl").probe()

        inp, probe = worker.dataflow(build, checkpoint=store)
        batches = lambda epoch: (EPOCHS[epoch] if worker.index == 0 else None,)  # noqa: E731  # worker 0 sends all
        feed_epochs(worker, (inp,), batches, probe, range(store.resume_epoch, len(EPOCHS)), crash_after)
        return store.resume_epoch

    return execute(main, workers=2)[0]


def committed(output: Path) -> dict[str, list[str]]:
    return {
        epoch.name: sorted(line for part in epoch.iterdir() for line in part.read_text().splitlines())
        for epoch in sorted(output.iterdir())
        if epoch.name.startswith("epoch=")
    }


def test_write_files_resumes_without_writing_a_committed_epoch_twice(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    run_to_files(tmp_path / "plain-checkpoints", tmp_path / "plain")
    expected = committed(tmp_path / "plain")
    with pytest.raises(WorkerFailed, match="crash after epoch"):
        run_to_files(tmp_path / "checkpoints", tmp_path / "out", crash_after=4)
    before = {name: (tmp_path / "out" / name).stat().st_mtime_ns for name in committed(tmp_path / "out")}
    resumed = run_to_files(tmp_path / "checkpoints", tmp_path / "out")
    assert 0 < resumed <= 5
    assert committed(tmp_path / "out") == expected
    kept = [name for name in before if int(name[6:]) < resumed]
    assert kept, "the crashed run committed epochs before its checkpoint"
    for name in kept:  # epochs before the resume point were not written again
        assert (tmp_path / "out" / name).stat().st_mtime_ns == before[name]


def test_a_crash_before_the_first_checkpoint_reruns_over_the_epochs_it_committed(tmp_path: Path) -> None:
    """Found by SIGKILLing a 2-process job early: epochs committed, no checkpoint yet, and the rerun was refused."""
    pytest.importorskip("pyarrow")
    run_to_files(tmp_path / "plain-checkpoints", tmp_path / "plain")
    expected = committed(tmp_path / "plain")
    with pytest.raises(WorkerFailed, match="crash after epoch 1"):
        run_to_files(tmp_path / "checkpoints", tmp_path / "out", crash_after=1, every=4)
    assert committed(tmp_path / "out"), "the crashed run committed epochs before its first checkpoint"
    assert not list((tmp_path / "checkpoints").rglob("epoch-*.ckpt"))
    assert run_to_files(tmp_path / "checkpoints", tmp_path / "out", every=4) == 0
    assert committed(tmp_path / "out") == expected


def test_another_jobs_output_is_still_refused_under_checkpoints(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    run_to_files(tmp_path / "first-checkpoints", tmp_path / "out")
    with pytest.raises(WorkerFailed, match="already holds another run's output"):
        run_to_files(tmp_path / "other-checkpoints", tmp_path / "out")


def read_and_total(source: Path, checkpoints: Path, seen: list[Any], crash_at: int | None = None) -> int:
    """Running totals over a directory read by read_files (one file an epoch); crash on reaching ``crash_at``."""
    from runtime.files import read_files

    lock = threading.Lock()

    def main(worker: Any) -> int:
        store = CheckpointStore(checkpoints)

        def build(scope: Any) -> Any:
            words = read_files(scope, source).map(lambda row: row["word"])
            totals = words.key_by(lambda w: w).fold(int, lambda n, w: n + 1)

            def keep(time: int, batch: list[Any]) -> None:
                if time == crash_at:
                    raise Crash(f"crash at epoch {time}")
                _keep(lock, seen, time, batch)

            totals.inspect_batch(keep)
            return totals.probe()

        probe = worker.dataflow(build, checkpoint=store)
        worker.step_while(lambda: not probe.done())
        return store.resume_epoch

    return execute(main, workers=2)[0]


def test_read_files_resumes_from_the_checkpoints_epoch(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    source = tmp_path / "in"
    source.mkdir()
    for epoch, words in enumerate(EPOCHS):
        pq.write_table(pa.table({"word": pa.array(words, pa.string())}), source / f"part-{epoch:03d}.parquet")
    expected: list[Any] = []
    read_and_total(source, tmp_path / "plain", expected)
    first: list[Any] = []
    with pytest.raises(WorkerFailed, match="crash at epoch 5"):
        read_and_total(source, tmp_path / "checkpoints", first, crash_at=5)
    second: list[Any] = []
    resumed = read_and_total(source, tmp_path / "checkpoints", second)
    assert 0 < resumed <= 5
    assert Counter([r for r in first if r[0] < resumed] + second) == Counter(expected)


def test_to_stream_sends_nothing_again_once_resumed_past_it(tmp_path: Path) -> None:
    def main(worker: Any) -> tuple[int, list[Any]]:
        store = CheckpointStore(tmp_path)
        seen: list[Any] = []

        def build(scope: Any) -> Any:
            inp, more = scope.new_input("More")
            words = scope.to_stream(["a", "b", "a"] if worker.index == 0 else []).concat(more)
            totals = words.key_by(lambda w: w).fold(int, lambda n, w: n + 1)
            totals.inspect_batch(lambda time, batch: seen.extend(batch))
            return inp, totals.probe()

        inp, probe = worker.dataflow(build, checkpoint=store)
        for epoch in range(store.resume_epoch, 3):
            inp.send_batch(["a"] if worker.index == 0 else [])
            inp.advance_to(epoch + 1)
            worker.step_while(lambda epoch=epoch: probe.less_than(epoch + 1))
        inp.close()
        worker.step_while(lambda: not probe.done())
        return store.resume_epoch, seen

    first = execute(main, workers=2)
    assert sorted(r for _, seen in first for r in seen) == [("a", 3), ("a", 4), ("a", 5), ("b", 1)]
    again = execute(main, workers=2)
    assert again[0][0] == 3 and not any(seen for _, seen in again)


@pytest.mark.parametrize("kind", ["source", "replay"])
def test_sources_that_cannot_resume_are_refused(tmp_path: Path, kind: str) -> None:
    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            if kind == "source":
                stream = scope.source("Mine", lambda capability, info: lambda output: None)
            else:
                stream = scope.replay([[]])
            return stream.probe()

        worker.dataflow(build, checkpoint=CheckpointStore(tmp_path))

    message = "is written by hand" if kind == "source" else "replays recordings from their start"
    with pytest.raises(WorkerFailed, match=message):
        execute(main, workers=1)


@pytest.mark.parametrize("kind", ["delay", "top-level feedback"])
def test_moving_records_to_later_epochs_is_refused_under_checkpoints(tmp_path: Path, kind: str) -> None:
    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            _, numbers = scope.new_input("Numbers")
            if kind == "delay":
                return numbers.delay(lambda record, time: time + 1).probe()
            handle, fed = scope.loop_variable(1)
            numbers.concat(fed).filter(lambda n: n < 3).map(lambda n: n + 1).connect_loop(handle)
            return numbers.probe()

        worker.dataflow(build, checkpoint=CheckpointStore(tmp_path))

    message = "delays records to later times" if kind == "delay" else "feeds records back to later epochs"
    with pytest.raises(WorkerFailed, match=f"{message}, and records on their way to a later epoch are in no"):
        execute(main, workers=1)


def test_a_loop_inside_the_dataflow_resumes_under_checkpoints(tmp_path: Path) -> None:
    def main(worker: Any) -> tuple[int, list[Any]]:
        store = CheckpointStore(tmp_path)
        seen: list[Any] = []

        def build(scope: Any) -> Any:
            numbers_in, numbers = scope.new_input("Numbers")

            def halve(inner: Any) -> Any:
                handle, fed = inner.loop_variable(1)
                again = numbers.enter(inner).concat(fed).map(lambda n: n // 2)
                again.filter(lambda n: n > 0).connect_loop(handle)
                return again.filter(lambda n: n == 0).leave()

            zeros = scope.iterative(halve)
            totals = zeros.key_by(lambda n: n).fold(int, lambda count, n: count + 1)
            totals.inspect_batch(lambda time, batch: seen.extend((time, r) for r in batch))
            return numbers_in, totals.probe()

        numbers_in, probe = worker.dataflow(build, checkpoint=store)
        for epoch in range(store.resume_epoch, 4):
            if worker.index == 0:
                numbers_in.send_batch([epoch + 5, epoch + 9])
            numbers_in.advance_to(epoch + 1)
            worker.step_while(lambda epoch=epoch: probe.less_than(epoch + 1))
        numbers_in.close()
        worker.step_while(lambda: not probe.done())
        return store.resume_epoch, seen

    first = execute(main, workers=2)
    assert sorted(r for _, seen in first for r in seen) == [(0, (0, 2)), (1, (0, 4)), (2, (0, 6)), (3, (0, 8))]
    assert execute(main, workers=2)[0][0] == 4


def _forge(path: Path, header: bytes, body: bytes) -> None:
    """Write a checkpoint at ``path`` holding ``header`` and ``body`` as they are, its checksum right."""
    from runtime.checkpoints import MAGIC, VERSION

    data = MAGIC + struct.pack(">HI", VERSION, len(header)) + header + struct.pack(">Q", len(body)) + body
    path.write_bytes(data + hashlib.blake2b(data, digest_size=32).digest())


def test_a_checksum_valid_file_that_does_not_decode_is_refused_at_its_offset(tmp_path: Path) -> None:
    """A BLAKE2b anyone can recompute proves nothing: bytes under a right checksum used to raise a bare WireError
    ("malformed value on the wire", no file, no offset), which stopped the run instead of using an earlier file."""
    from runtime.communication.wire import encode_value

    store = CheckpointStore(tmp_path)
    path = store.write(0, 1, "shape", 5, {"key": encode_value([1])})
    header = encode_value({"shape": "shape", "workers": 1, "worker": 0, "epoch": 5})
    _forge(path, b"\xc1", encode_value({}))  # 0xc1: never used by msgpack
    with pytest.raises(CheckpointCorrupt, match=rf"{path.name}: the header at byte 14 cannot be decoded"):
        store.read(path, 1, 0, "shape")
    _forge(path, header, b"\x91\xc1")
    with pytest.raises(CheckpointCorrupt, match=rf"{path.name}: the body at byte {14 + len(header) + 8} cannot"):
        store.read(path, 1, 0, "shape")
    with pytest.warns(UserWarning, match="cannot be decoded.*resuming from an earlier checkpoint"):
        assert store.latest(0, 1, "shape") == (0, None)


def test_a_directory_in_place_of_a_checkpoint_is_skipped_with_a_warning(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    path = store.write(0, 1, "shape", 5, {})
    path.unlink()
    path.mkdir()  # was a bare IsADirectoryError out of the resume
    with pytest.raises(CheckpointCorrupt, match=rf"{path.name}: cannot be read"):
        store.read(path, 1, 0, "shape")
    with pytest.warns(UserWarning, match="cannot be read.*resuming from an earlier checkpoint"):
        assert store.latest(0, 1, "shape") == (0, None)


def test_operator_state_of_another_shape_under_a_right_checksum_names_the_file(tmp_path: Path) -> None:
    """States that decode but are not what the operators keep (here, 5 for a keyed table) raised a bare
    TypeError out of an operator's restore; now a CheckpointCorrupt names the file and what to do."""
    from runtime.checkpoints import MAGIC
    from runtime.communication.wire import decode_value, encode_value

    crashed_store(tmp_path)
    latest = max(int(path.name[6:26]) for path in (tmp_path / "workers-2" / "worker-0").glob("epoch-*.ckpt"))
    for worker in range(2):
        path = tmp_path / "workers-2" / f"worker-{worker}" / f"epoch-{latest:020d}.ckpt"
        data = path.read_bytes()
        (length,) = struct.unpack_from(">I", data, len(MAGIC) + 2)
        header = data[len(MAGIC) + 6 : len(MAGIC) + 6 + length]
        states = decode_value(data[len(MAGIC) + 6 + length + 8 : -32])
        _forge(path, header, encode_value({key: encode_value(5) for key in states}))
    with pytest.raises(WorkerFailed) as caught:
        run(CheckpointStore(tmp_path), [])
    cause = caught.value.__cause__
    assert isinstance(cause, CheckpointCorrupt), repr(cause)
    assert f"epoch-{latest:020d}.ckpt" in str(cause) and "do not restore this dataflow's operators" in str(cause)
    assert re.search(r"\(the state at byte \d+ for '[^']+'\)", str(cause)), cause  # which operator, where in the file


def test_a_file_copied_from_another_epoch_is_refused(tmp_path: Path) -> None:
    """Each worker's file of epoch E copied over its file of the latest epoch: sound, of this dataflow and this
    worker, so it was restored, and the run resumed at the latest epoch with the state of an earlier one (the
    records between were lost, silently). The header's epoch is now checked against the file's name."""
    crashed_store(tmp_path)
    latest = max(int(path.name[6:26]) for path in (tmp_path / "workers-2" / "worker-0").glob("epoch-*.ckpt"))
    for worker in range(2):
        directory = tmp_path / "workers-2" / f"worker-{worker}"
        (directory / f"epoch-{latest:020d}.ckpt").write_bytes(
            (directory / f"epoch-{latest - 1:020d}.ckpt").read_bytes()
        )
    with pytest.raises(WorkerFailed) as caught:
        run(CheckpointStore(tmp_path), [])
    cause = caught.value.__cause__
    assert isinstance(cause, CheckpointMismatch), repr(cause)
    assert f"epoch-{latest:020d}.ckpt: written at epoch boundary {latest - 1} (its header at byte 14)" in str(cause)


@pytest.mark.parametrize("kind", ["fold", "reduce", "stateful_map", "process"])
def test_keyed_state_inside_a_loop_is_refused_when_built_under_checkpoints(tmp_path: Path, kind: str) -> None:
    """A fold in an iterative scope was built, then failed its first time with "TypeError: '<' not supported
    between instances of 'Product' and 'int'": no moment holds a loop's keyed state as of an epoch boundary."""

    def state(keyed: Any) -> Any:
        if kind == "fold":
            return keyed.fold(int, lambda n, x: n + 1)
        if kind == "reduce":
            return keyed.reduce(lambda n, x: n + x)
        if kind == "stateful_map":
            return keyed.stateful_map(int, lambda n, x: (n + 1, n))
        return keyed.process(count_records, emit_count)

    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            _, numbers = scope.new_input("Numbers")

            def body(inner: Any) -> Any:
                handle, fed = inner.loop_variable(1)
                now = numbers.enter(inner).concat(fed)
                now.map(lambda n: n // 2).filter(lambda n: n > 0).connect_loop(handle)
                return state(now.key_by(lambda n: n % 2)).leave()

            return scope.iterative(body).probe()

        worker.dataflow(build, checkpoint=CheckpointStore(tmp_path))

    with pytest.raises(
        WorkerFailed, match=r"keeps keyed state in a scope whose times are ProductType.*outside the loop"
    ):
        execute(main, workers=1)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda key, s: [[[*w[:4], "x"] for w in s[0]], s[1]] if "WindowCount" in key else s, id="close"),
        pytest.param(lambda key, s: [[[*w[:4], 1] for w in s[0]], s[1]] if "WindowCount" in key else s, id="sent"),
        pytest.param(
            lambda key, s: [[[w[0], w[1] + 1, *w[2:]] for w in s[0]], s[1]] if "Window" in key else s, id="start"
        ),
        pytest.param(lambda key, s: [s[0], [("x", k) for _, k in s[1]]] if "Process" in key else s, id="timer"),
        pytest.param(lambda key, s: [s[0], [(1, k) for _, k in s[1]]] if "Process" in key else s, id="fired"),
    ],
)
def test_windows_and_timers_changed_under_a_right_checksum_are_refused_naming_the_file(
    tmp_path: Path, change: Any
) -> None:
    """A window's close time or a timer's time that is no epoch raised a bare CapabilityError ("cannot delay to time
    'x'") that named no file; one before the checkpoint's epoch (a window or timer that had already fired) was resumed
    and sent at that earlier time, and a window's start off the spec's grid was sent as it was."""
    crashed_store(tmp_path)
    for path in tmp_path.glob("workers-2/worker-*/epoch-00000000000000000006.ckpt"):
        path.unlink()  # at epoch 6 no window is open; at 5, [3, 6) and [4, 6) are
    latest = rewrite_latest(tmp_path, 2, change)
    assert latest == 5
    with pytest.raises(WorkerFailed) as caught:
        run(CheckpointStore(tmp_path), [])
    cause = caught.value.__cause__
    assert isinstance(cause, CheckpointCorrupt), repr(cause)
    assert f"epoch-{latest:020d}.ckpt" in str(cause) and "do not restore this dataflow's operators" in str(cause)
    assert re.search(r"\(the state at byte \d+ for '[^']+'\)", str(cause)), cause


@pytest.mark.parametrize("same_store", [True, False])
def test_two_dataflows_checkpointing_into_one_directory_are_refused_when_built(
    tmp_path: Path, same_store: bool
) -> None:
    """Two dataflows of a worker checkpointing into one directory wrote files of the same names, each overwriting the
    other's; the next run then found only the other dataflow's files at its latest epoch and refused to resume
    ("written by another dataflow"), its checkpoints lost."""

    def counts(scope: Any, name: str) -> Any:
        return scope.new_input(name)[1].key_by(str).fold(int, lambda n, w: n + 1).probe()

    def main(worker: Any) -> None:
        first = CheckpointStore(tmp_path)
        worker.dataflow(lambda scope: counts(scope, "A"), checkpoint=first)
        worker.dataflow(lambda scope: counts(scope, "B"), checkpoint=first if same_store else CheckpointStore(tmp_path))

    with pytest.raises(WorkerFailed) as caught:
        execute(main, workers=2)
    assert isinstance(caught.value.__cause__, ConfigurationError), repr(caught.value.__cause__)
    assert f"dataflow 'dataflow 1' checkpoints into {str(tmp_path)!r}, where 'dataflow 0'" in str(caught.value)

    def apart(worker: Any) -> None:  # a directory each: both build
        worker.dataflow(lambda scope: counts(scope, "A"), checkpoint=CheckpointStore(tmp_path / "a"))
        worker.dataflow(lambda scope: counts(scope, "B"), checkpoint=CheckpointStore(tmp_path / "b"))

    execute(apart, workers=2)


def test_a_damaged_format_version_is_damage_and_another_format_is_refused(tmp_path: Path) -> None:
    """A bit flipped in the 2-byte version field was reported as a checkpoint of another format version: the run was
    refused (CheckpointMismatch) instead of resuming from the previous boundary, as damage anywhere else does."""
    from runtime.checkpoints import MAGIC

    crashed_store(tmp_path)
    files = sorted((tmp_path / "workers-2" / "worker-1").glob("epoch-*.ckpt"))
    whole = files[-1].read_bytes()
    data = bytearray(whole)
    data[len(MAGIC) + 1] ^= 0x02  # version 1 reads 3
    files[-1].write_bytes(bytes(data))
    store = CheckpointStore(tmp_path)
    with pytest.warns(UserWarning, match=rf"{files[-1].name}: the format version at byte 8 reads 3, .* damaged"):
        run(store, [])
    assert store.resume_epoch == int(files[-2].name[6:26])

    header_length = struct.unpack_from(">I", whole, len(MAGIC) + 2)[0]
    header = whole[len(MAGIC) + 6 : len(MAGIC) + 6 + header_length]
    body = whole[len(MAGIC) + 6 + header_length + 8 : -32]
    data = bytearray(MAGIC + struct.pack(">HI", 2, len(header)) + header + struct.pack(">Q", len(body)) + body)
    files[-1].write_bytes(bytes(data) + hashlib.blake2b(bytes(data), digest_size=32).digest())  # a whole version 2
    with pytest.raises(
        CheckpointMismatch, match="checkpoint format version 2 at byte 8; this pytimely reads version 1"
    ):
        store.read(files[-1], 2, 1, "any")


def test_a_store_where_no_checkpoint_can_be_written_is_refused_when_built(tmp_path: Path) -> None:
    """A store at a path under a file was found out at the first checkpoint, as a bare NotADirectoryError."""
    (tmp_path / "a-file").write_text("not a directory")
    built: list[int] = []

    def main(worker: Any) -> None:
        worker.dataflow(
            lambda scope: scope.new_input("Words")[1].probe(), checkpoint=CheckpointStore(tmp_path / "a-file")
        )
        built.append(worker.index)

    with pytest.raises(WorkerFailed) as caught:
        execute(main, workers=2)
    assert isinstance(caught.value.__cause__, CheckpointError), repr(caught.value.__cause__)
    assert f"the checkpoint store {str(tmp_path / 'a-file')!r} cannot hold worker" in str(caught.value)
    assert not built


def one_epoch_of_words(worker: Any, store: CheckpointStore, before: Any = None) -> None:
    """Build a dataflow of one input checkpointed into ``store``, call ``before()``, send one epoch, run to the end."""
    inp, probe = worker.dataflow(
        lambda scope: (lambda i, s: (i, s.probe()))(*scope.new_input("Words")), checkpoint=store
    )
    if before is not None:
        before()
    inp.send_batch(["a"])
    inp.advance_to(1)
    worker.step_while(lambda: probe.less_than(1))
    inp.close()
    worker.step_while(lambda: not probe.done())


def test_a_checkpoint_that_cannot_be_written_names_the_worker_the_epoch_and_the_file(tmp_path: Path) -> None:
    """A checkpoint write that failed (here the worker's directory turned into a file) raised a bare OSError."""
    import shutil

    def main(worker: Any) -> None:
        store = CheckpointStore(tmp_path)

        def in_the_way() -> None:
            directory = store.directory(0, 1)
            shutil.rmtree(directory)
            directory.write_text("in the way")

        one_epoch_of_words(worker, store, before=in_the_way)

    with pytest.raises(WorkerFailed) as caught:
        execute(main, workers=1)
    assert isinstance(caught.value.__cause__, CheckpointError), repr(caught.value.__cause__)
    assert "worker 0 cannot write its checkpoint of epoch 1 as " in str(caught.value)
    assert "epoch-00000000000000000001.ckpt" in str(caught.value)


@pytest.mark.parametrize("change", ["not-a-table", "no-key-column", "no-plan-column"])
def test_a_columnar_table_changed_under_a_right_checksum_is_refused_naming_the_file(
    tmp_path: Path, change: str
) -> None:
    """The table of a columnar join_latest was restored as it was: a table without the key column (or a column of
    the schema) joined on as if nothing were wrong, and one that was no table failed the operator later, naming no
    file. It is now checked when restored."""
    pa = pytest.importorskip("pyarrow")
    plans = pa.schema([("user", pa.string()), ("plan", pa.string()), ("gone", pa.bool_())])

    def main(worker: Any, crash_after: int | None) -> int:
        store = CheckpointStore(tmp_path)

        def build(scope: Any) -> Any:
            rows_in, rows = scope.new_input("Rows")
            plans_in, updates = scope.new_input("Plans")
            clicks = rows.map_batch(lambda batch: pa.Table.from_pylist(batch)).key_by_columns("user")
            table = updates.map_batch(lambda batch: pa.Table.from_pylist(batch, schema=plans)).key_by_columns("user")
            joined = clicks.join_latest(table, how="left", deletes="gone", schema=plans)
            return (rows_in, plans_in), joined.probe()

        inputs, probe = worker.dataflow(build, checkpoint=store)

        def batches(epoch: int) -> list[Any]:
            return [[{"user": f"u{epoch % 3}", "page": epoch}], [{"user": f"u{epoch % 3}", "plan": "p", "gone": False}]]

        feed_epochs(worker, inputs, batches, probe, range(store.resume_epoch, 6), crash_after)
        return store.resume_epoch

    with pytest.raises(WorkerFailed, match="crash after epoch"):
        execute(lambda worker: main(worker, 3), workers=1)

    def changed(key: str, state: Any) -> Any:
        (table,) = state
        if change == "not-a-table":
            return [5]
        return [table.drop_columns(["user" if change == "no-key-column" else "plan"])]

    latest = rewrite_latest(tmp_path, 1, changed)
    with pytest.raises(WorkerFailed) as caught:
        execute(lambda worker: main(worker, None), workers=1)
    cause = caught.value.__cause__
    assert isinstance(cause, CheckpointCorrupt), repr(cause)
    assert f"epoch-{latest:020d}.ckpt" in str(cause) and "do not restore this dataflow's operators" in str(cause)
    assert re.search(r"\(the state at byte \d+ for '[^']+'\)", str(cause)), cause


def test_inputs_sent_again_from_epoch_0_after_a_resume_are_refused_saying_why(tmp_path: Path) -> None:
    """A program that forgot resume_epoch was told "cannot advance to time 1, which is earlier than the current time
    6", a time it never advanced to; the error now says that the checkpoint advanced it, and what to do."""
    crashed_store(tmp_path)

    def main(worker: Any) -> None:
        inp, probe = worker.dataflow(
            lambda scope: (lambda i, s: (i, s.probe()))(*scope.new_input("Words")),
            checkpoint=CheckpointStore(tmp_path / "again"),
        )
        inp.advance_to(1)  # a fresh start: no checkpoint advanced it, and the message says nothing of one
        inp.advance_to(0)

    with pytest.raises(WorkerFailed) as fresh:
        execute(main, workers=1)
    assert "input times may only move forward" in str(fresh.value) and "resumed" not in str(fresh.value)

    def forgetful(worker: Any) -> None:
        def build(scope: Any) -> Any:
            inp, words = scope.new_input("Words")
            out = streaks(scope, words)
            out.inspect_batch(lambda time, batch: None)  # as run() builds it
            return inp, out.probe()

        inp, probe = worker.dataflow(build, checkpoint=CheckpointStore(tmp_path))
        for epoch in range(len(EPOCHS)):  # from 0, not from store.resume_epoch
            inp.send_batch(EPOCHS[epoch])
            inp.advance_to(epoch + 1)
            worker.step_while(lambda epoch=epoch: probe.less_than(epoch + 1))

    with pytest.raises(
        WorkerFailed,
        match=r"cannot advance to time 1, which is earlier than the current time (\d+); "
        r"input times may only move forward \(the dataflow resumed from its checkpoint at epoch \1, "
        r"which has every record before it: send the inputs from the store's resume_epoch\)",
    ):
        execute(forgetful, workers=2)


def test_a_named_dataflow_resumes_when_the_program_builds_another_before_it(tmp_path: Path) -> None:
    """Its operators' states are filed under addresses that start with the dataflow's index among its worker's
    dataflows: one more dataflow built first (a monitor, say) made the same dataflow's checkpoint "not fit", naming
    states that differed only in that index."""

    def main(worker: Any, monitor: bool, crash_after: int | None) -> tuple[int, list[Any]]:
        if monitor:
            worker.dataflow(lambda scope: scope.new_input("Other")[1].probe(), name="monitor")
        store = CheckpointStore(tmp_path)
        seen: list[Any] = []

        def build(scope: Any) -> Any:
            inp, words = scope.new_input("Words")
            out = streaks(scope, words)
            out.inspect_batch(lambda time, batch: seen.extend((time, record) for record in batch))
            return inp, out.probe()

        inp, probe = worker.dataflow(build, name="streaks", checkpoint=store)
        feed_epochs(
            worker,
            [inp],
            lambda epoch: [EPOCHS[epoch] if worker.index == 0 else []],
            probe,
            range(store.resume_epoch, len(EPOCHS)),
            crash_after,
        )
        return store.resume_epoch, seen

    with pytest.raises(WorkerFailed, match="crash after epoch"):
        execute(lambda worker: main(worker, False, 5), workers=2)
    results = execute(lambda worker: main(worker, True, None), workers=2)
    resumed = results[0][0]
    assert 0 < resumed <= 6
    assert Counter(r for _, seen in results for r in seen) == Counter(
        r for r in uninterrupted().elements() if r[0] >= resumed
    )


def test_a_recording_into_a_file_is_refused_under_checkpoints_and_one_in_memory_is_not(tmp_path: Path) -> None:
    """capture_into(EventWriter(path)) under checkpoints: the resumed run opened the same file again and recorded only
    the epochs from its resume epoch on, so the recording silently lost the earlier ones."""
    from runtime import EventWriter

    def main(worker: Any, into_file: bool) -> Any:
        def build(scope: Any) -> Any:
            counts = scope.new_input("Words")[1].key_by(str).fold(int, lambda n, w: n + 1)
            if into_file:
                counts.capture_into(EventWriter(tmp_path / f"counts-{worker.index}.log"))
                return None
            return counts.capture()

        return worker.dataflow(build, checkpoint=CheckpointStore(tmp_path / "checkpoints"))

    with pytest.raises(WorkerFailed, match=r"operator 'Capture' .* records the stream from its start into EventWriter"):
        execute(lambda worker: main(worker, True), workers=1)
    assert execute(lambda worker: main(worker, False), workers=1)[0] is not None  # in memory: each run its own


def test_a_store_that_is_not_shared_by_every_worker_fails_the_run_once_its_grace_has_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint directory each process (or host) had its own of was never detected: no boundary was ever
    common to all workers, so every run resumed at epoch 0, and no file was ever pruned."""
    from runtime import checkpoints

    monkeypatch.setattr(checkpoints, "UNSHARED_GRACE", 0.0)  # as if the directories had stayed unseen for long

    def main(worker: Any) -> None:
        one_epoch_of_words(worker, CheckpointStore(tmp_path / f"host-{worker.index}"))  # each host its own disk

    with pytest.raises(WorkerFailed) as caught:
        execute(main, workers=2)
    assert isinstance(caught.value.__cause__, CheckpointError), repr(caught.value.__cause__)
    assert "the store is not one directory every worker reaches" in str(caught.value)


def test_a_directory_of_another_worker_not_seen_yet_is_first_a_warning(tmp_path: Path) -> None:
    """A network file system's cache may hide a directory another host just made: the first time, a warning."""

    def main(worker: Any) -> None:
        one_epoch_of_words(worker, CheckpointStore(tmp_path / f"host-{worker.index}"))

    with pytest.warns(UserWarning, match=r"the directories of worker\(s\) [01] are missing; a network file system"):
        execute(main, workers=2)
