"""``scope.replay(all_recordings)`` replays each recording exactly once, on any number of workers.

Every worker is given the whole list and takes its own share (worker ``i`` of ``P``
replays recordings ``i, i + P, ...``).  Before, each worker replayed everything it
was given: 300 captured records replayed as 600 on 2 workers and 1,500 on 5.
Workers given different lists are refused when the dataflow is built.
"""

from __future__ import annotations

from collections import Counter

import pytest

from runtime import DataflowMismatch, EventWriter, LogFile, WorkerFailed, execute
from runtime.testing import run_dataflow
from scopes import INTEGER

RECORDS = 300


def capture_on_three_workers(directory) -> list:
    """The user's capture: 3 workers record one stream each, 300 records in all."""

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()
            stream.capture_into(EventWriter(directory / f"stream-{worker.index}.log", INTEGER))
            return handle

        handle = worker.dataflow(build)
        for epoch in range(10):
            handle.send_batch(range(worker.index * 100 + epoch * 10, worker.index * 100 + epoch * 10 + 10))
            handle.advance_to(epoch + 1)
        handle.close()
        while worker.step():
            pass

    execute(main, workers=3)
    return sorted(directory.glob("stream-*.log"))


def replay_everything(paths, workers: int) -> Counter:
    """The user's replay: every worker passes all recordings to scope.replay."""
    run = run_dataflow(
        lambda scope, _no_input: scope.replay([LogFile(path, INTEGER) for path in paths]), [], workers=workers
    )
    return Counter(run.records())


@pytest.mark.parametrize("workers", [2, 5, 1])
def test_capture_on_three_replay_on_any_number_replays_each_record_once(tmp_path, workers):
    paths = capture_on_three_workers(tmp_path)
    replayed = replay_everything(paths, workers)
    assert sum(replayed.values()) == RECORDS
    assert replayed == Counter(range(RECORDS))


def test_in_memory_recordings_replay_once_on_every_worker_count():
    def capture(worker, recorders):
        def build(scope):
            handle, stream = scope.new_input()
            recorders[worker.index] = stream.capture()
            return handle

        handle = worker.dataflow(build)
        handle.send_batch(range(worker.index * 100, worker.index * 100 + 100))
        handle.close()
        while worker.step():
            pass

    recorders: dict[int, object] = {}
    execute(lambda worker: capture(worker, recorders), workers=3)
    everything = [recorders[index] for index in range(3)]

    for workers in (2, 5):
        run = run_dataflow(lambda scope, _no_input: scope.replay(everything), [], workers=workers)
        assert run.records() == list(range(RECORDS))


def test_workers_given_different_recordings_are_refused(tmp_path):
    """The old way (each worker passing its own share) is refused, not silently halved."""
    paths = capture_on_three_workers(tmp_path)

    def main(worker):
        mine = [LogFile(path, INTEGER) for index, path in enumerate(paths) if index % worker.peers == worker.index]
        probe = worker.dataflow(lambda scope: scope.replay(mine).probe())
        worker.step_while(lambda: not probe.done())

    with pytest.raises(WorkerFailed) as failure:
        execute(main, workers=2)
    mismatch = failure.value.__cause__
    assert isinstance(mismatch, DataflowMismatch)
    assert "Replay of 2 recording(s)" in str(mismatch) and "Replay of 1 recording(s)" in str(mismatch)


def test_workers_given_other_files_of_the_same_count_are_refused(tmp_path):
    paths = capture_on_three_workers(tmp_path)[:2]

    def main(worker):
        ordered = paths if worker.index == 0 else list(reversed(paths))
        probe = worker.dataflow(lambda scope: scope.replay([LogFile(path, INTEGER) for path in ordered]).probe())
        worker.step_while(lambda: not probe.done())

    with pytest.raises(WorkerFailed) as failure:
        execute(main, workers=2)
    assert isinstance(failure.value.__cause__, DataflowMismatch)
    assert "stream-0.log" in str(failure.value.__cause__)
