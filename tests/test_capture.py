"""Capture and replay (seed 002): the events recorded, replay on other numbers of workers,
frontiers equal to the captured stream's, and the replay contract's failure cases."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import WorkerFailed, execute
from runtime.testing import run_dataflow
from scopes import INTEGER, Product, ProductType
from scopes.capture import (
    Batch,
    CaptureRecorder,
    Progress,
    ReplayError,
    capture,
    capture_into,
    replay_into,
)
from scopes.errors import OperatorFailed


def run_capture(workers: int, epochs: int, per_epoch: int = 3, timestamp=INTEGER, time_of=lambda e: e, lockstep=False):
    """Capture an input fed over ``epochs`` epochs on ``workers`` workers; return the recorders.

    With ``lockstep``, each epoch completes before the next begins.
    """
    recorders = [CaptureRecorder() for _ in range(workers)]

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()
            exchanged = stream.exchange(lambda x: x)
            capture_into(exchanged, recorders[worker.index])
            return handle, exchanged.probe()

        handle, probe = worker.dataflow(build, timestamp=timestamp)
        for epoch in range(epochs):
            handle.send_batch([(worker.index, epoch, i) for i in range(per_epoch)])
            handle.advance_to(time_of(epoch + 1))
            if lockstep:
                worker.step_while(lambda: probe.less_than(handle.time))

    execute(main, workers=workers, stall_timeout=5)
    return recorders


def replay(recordings, workers: int, timestamp=INTEGER):
    """Replay ``recordings`` on ``workers`` workers (stream s on worker s % workers); return (time, record)s."""
    run = run_dataflow(
        lambda scope, _no_input: replay_into(recordings, scope),
        [],
        workers=workers,
        timestamp=timestamp,
        stall_timeout=5,
    )
    assert run.frontiers == {"output": []}, "the replayed stream must end"
    return [(time, record) for time, records in run.output().items() for record in records]


def test_events_are_messages_and_frontier_changes_without_the_initial_capability():
    [recorder] = run_capture(1, 3, per_epoch=2, lockstep=True)
    assert recorder.events() == [
        Batch(0, [(0, 0, 0), (0, 0, 1)]),
        Progress([(0, -1), (1, 1)]),
        Batch(1, [(0, 1, 0), (0, 1, 1)]),
        Progress([(1, -1), (2, 1)]),
        Batch(2, [(0, 2, 0), (0, 2, 1)]),
        Progress([(2, -1), (3, 1)]),
        Progress([(3, -1)]),
    ]
    assert recorder.finished


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_each_recording_starts_from_one_capability_at_zero_and_ends_with_none(workers):
    for recorder in run_capture(workers, 4):
        held = Counter({0: 1})
        for event in recorder:
            if isinstance(event, Progress):
                for time, diff in event.updates:
                    held[time] += diff
                    assert held[time] >= 0
            else:
                assert any(t <= event.time for t, n in held.items() if n > 0), event
        assert +held == Counter()
        assert not any(isinstance(e, Progress) and (0, 1) in e.updates for e in recorder[:1])


@pytest.mark.parametrize(("captured", "replaying"), [(5, 3), (3, 5), (2, 1), (1, 2)])
def test_replay_into_a_different_number_of_workers_delivers_every_record_at_its_time(captured, replaying):
    recorders = run_capture(captured, 4)
    expected = sorted(pair for rec in recorders for pair in rec.messages())
    assert len(expected) == captured * 4 * 3
    assert sorted(replay(recorders, replaying)) == expected


def test_replaying_the_same_recording_twice_gives_two_copies():
    [recorder] = run_capture(1, 2)
    assert sorted(replay([recorder, recorder], 1)) == sorted(recorder.messages() * 2)


def test_product_timestamps_replay_faithfully():
    product = ProductType(INTEGER, INTEGER)
    recorders = run_capture(2, 3, timestamp=product, time_of=lambda e: Product(e, e))
    replayed = replay(recorders, 3, timestamp=product)
    assert all(isinstance(t, Product) for t, _ in replayed)
    assert sorted(replayed) == sorted(pair for rec in recorders for pair in rec.messages())


@pytest.mark.parametrize("workers", [1, 3])
def test_replayed_frontiers_pass_through_the_same_frontiers_as_the_captured_stream(workers):
    """Capture and replay run side by side, live; each probe's frontier history is recorded at every step."""
    recorders = [CaptureRecorder() for _ in range(workers)]
    histories: dict[int, tuple[list, list]] = {}

    def main(worker):
        def build_capture(scope):
            handle, stream = scope.new_input()
            capture_into(stream.exchange(lambda x: x), recorders[worker.index])
            return handle, stream.probe()

        def build_replay(scope):
            return replay_into(recorders, scope).probe()

        handle, captured = worker.dataflow(build_capture)
        replayed = worker.dataflow(build_replay)
        seen: tuple[list, list] = ([], [])

        def observe():
            for history, probe in zip(seen, (captured, replayed), strict=True):
                frontier = list(probe.frontier())
                if not history or history[-1] != frontier:
                    history.append(frontier)

        def step_until(condition):
            while not condition():
                worker.step_or_park(0.01)
                observe()

        observe()
        for epoch in range(5):
            handle.send_batch(range(epoch * 10, epoch * 10 + 10))
            handle.advance_to(epoch + 1)
            step_until(lambda: not captured.less_than(handle.time))
            step_until(lambda: not replayed.less_than(handle.time))
        handle.close()
        step_until(captured.done)
        step_until(replayed.done)
        histories[worker.index] = seen

    execute(main, workers=workers, stall_timeout=5)
    for captured_history, replayed_history in histories.values():
        assert captured_history == [[0], [1], [2], [3], [4], [5], []]
        assert replayed_history == captured_history


def test_capture_returns_a_thread_safe_recorder_that_can_be_read_while_recording():
    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()
            return handle, capture(stream)

        handle, recorder = worker.dataflow(build)
        cursor = recorder.cursor()
        handle.send(1)
        handle.advance_to(1)
        worker.step_while(lambda: len(recorder) < 2)
        assert next(cursor) == Batch(0, [1])
        assert next(cursor) == Progress([(0, -1), (1, 1)])
        assert next(cursor) is None  # live: nothing more yet, but not finished
        assert not recorder.finished
        return recorder

    [recorder] = execute(main, workers=1)
    assert recorder.finished
    assert list(recorder.cursor()) == recorder.events() == list(recorder)
    assert recorder[-1] == Progress([(1, -1)])
    assert "finished" in repr(recorder)
    with pytest.raises(ReplayError, match="already finished"):
        recorder.push(Batch(3, [1]))


def test_a_recorder_can_be_replayed_while_another_thread_records_into_it():
    recorder = CaptureRecorder(threading.Lock())
    started = threading.Event()

    def feed():
        started.wait(5)
        for time in range(50):
            recorder.push(Batch(time, [time]))
            recorder.push(Progress([(time, -1), (time + 1, 1)]))
        recorder.push(Progress([(50, -1)]))
        recorder.finish()

    thread = threading.Thread(target=feed)
    thread.start()

    def main(worker):
        got = []

        def build(scope):
            stream = replay_into([recorder], scope)
            stream.inspect(got.append)
            return stream.probe()

        probe = worker.dataflow(build)
        started.set()
        worker.step_while(lambda: not probe.done())
        return got

    [got] = execute(main, workers=1, stall_timeout=5)
    thread.join(5)
    assert got == list(range(50))


# ---------------------------------------------------------------------- the contract, broken


def replay_failure(events_per_stream, timestamp=INTEGER) -> ReplayError:
    with pytest.raises(WorkerFailed) as failure:
        replay([list(events) for events in events_per_stream], 1, timestamp=timestamp)
    wrapped = failure.value.__cause__
    assert isinstance(wrapped, OperatorFailed) and wrapped.operator == "Replay", wrapped
    error = wrapped.__cause__
    assert isinstance(error, ReplayError), error
    assert "replay operator 'Replay'" in str(error) and "worker 0" in str(error)
    return error


def test_a_stream_that_ends_while_holding_capabilities_is_reported_as_incomplete():
    error = replay_failure([[Progress([(0, -1), (1, 1)])], [Progress([(0, -1)])]])
    assert error.stream == 0
    assert "ended while still holding capabilities for times [1]" in str(error)


def test_a_message_without_a_capability_is_reported():
    error = replay_failure([[Progress([(0, -1), (5, 1)]), Batch(3, ["late"]), Progress([(5, -1)])]])
    assert "message at time 3 while holding capabilities only for [5]" in str(error)


def test_releasing_a_capability_never_held_is_reported():
    error = replay_failure([[Progress([(7, -1)])]])
    assert "released a capability for time 7 that it did not hold" in str(error)


def test_times_of_another_timestamp_type_are_refused():
    error = replay_failure([[Batch(Product(0, 0), [1]), Progress([(0, -1)])]])
    assert "Product(0, 0)" in str(error) and "integer" in str(error)


def test_something_other_than_an_event_is_refused():
    error = replay_failure([["not an event"]])
    assert "neither Progress nor CapturedBatch" in str(error)


def test_capture_into_needs_a_pusher():
    def main(worker):
        def build(scope):
            _, stream = scope.new_input()
            capture_into(stream, object())

        worker.dataflow(build)

    with pytest.raises(WorkerFailed) as failure:
        execute(main, workers=1)
    assert "has no push(event) method" in str(failure.value.__cause__)


def test_a_worker_with_no_streams_to_replay_drops_its_capability():
    [recorder] = run_capture(1, 2)
    assert sorted(replay([recorder], 4)) == sorted(recorder.messages())
    assert replay([], 2) == []


# ---------------------------------------------------------------------- law


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.integers(-5, 5), max_size=4), min_size=1, max_size=6), st.integers(1, 3))
def test_replay_reproduces_every_record_at_its_time(epochs, workers):
    recorders = [CaptureRecorder() for _ in range(workers)]

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()
            capture_into(stream, recorders[worker.index])
            return handle

        handle = worker.dataflow(build)
        for epoch, records in enumerate(epochs):
            if worker.index == epoch % worker.peers:
                handle.send_batch(records)
            handle.advance_to(epoch + 1)

    execute(main, workers=workers, stall_timeout=5)
    expected = sorted((epoch, r) for epoch, records in enumerate(epochs) for r in records)
    assert sorted(pair for rec in recorders for pair in rec.messages()) == expected
    assert sorted(replay(recorders, 2)) == expected
