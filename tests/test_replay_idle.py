"""Operators waiting for outside data park their worker instead of spinning a CPU core.

Each test holds its source back for about a second and measures the CPU time the
run spends (:class:`helpers.idle_cpu.RunCpu`: this process's, less what threads
of earlier tests use meanwhile, with no garbage collection of their heap): a
worker re-activating its operator on every step burns the whole second (about
100% of the wall time, or what a loaded machine leaves it: 30% was seen on a
busy 2-CPU machine), a parked one 1 to 2%.  The bound, a tenth of the wall
time, leaves room for a slow machine's steps (a busy machine gives the process
less CPU, never more).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest
from helpers.idle_cpu import RunCpu

import runtime
from runtime import execute
from runtime.errors import EventLogTruncated, WorkerFailed
from runtime.eventlog import EventReader, encode_event, event_log_bytes
from scopes import INTEGER
from scopes.capture import CapturedBatch, CaptureRecorder, Progress

HOLD = 1.0
"""Seconds a source holds its data back: the idle wait that is measured."""

MOST_CPU = 0.1
"""The most CPU time an idle wait may cost, as a share of its wall time (spinning costs about 1.0)."""

STALL_TIMEOUT = 30.0
"""A wake-up that is lost leaves the replay waiting for ever: the run fails after this many seconds instead."""


def cpu_share(run: Any) -> tuple[Any, float, float]:
    """Run ``run()``; return its result, its wall time and the CPU time it spent (see :class:`RunCpu`)."""
    with RunCpu() as measured:
        result = run()
    return result, measured.wall, measured.cpu


def events_of(stream: int) -> list[Any]:
    """The events of a small captured stream: two epochs of records, then its end."""
    return [
        CapturedBatch(0, [f"{stream}-a", f"{stream}-b"]),
        Progress([(1, 1), (0, -1)]),
        CapturedBatch(1, [f"{stream}-c"]),
        Progress([(1, -1)]),
    ]


def replayed_into(scope: Any, recordings: Any, got: list[tuple[int, str]]) -> Any:
    """Replay ``recordings`` in ``scope``, adding each record with its time to ``got``; return a probe."""
    return scope.replay(recordings).inspect_batch(lambda time_, batch: got.extend((time_, x) for x in batch)).probe()


def send_in_pieces(sender: socket.socket, data: bytes, cut: int) -> None:
    """Hold ``data`` back for :data:`HOLD` s, send it up to ``cut``, then the rest, then close."""
    time.sleep(HOLD)  # the idle wait measured: the replay has nothing to read meanwhile
    try:
        sender.sendall(data[:cut])
        time.sleep(HOLD / 4)  # the replay waits again, in the middle of a frame
        sender.sendall(data[cut:])
    finally:
        sender.close()


def test_a_replay_waiting_on_sockets_parks_its_workers_and_replays_everything() -> None:
    logs = [event_log_bytes([encode_event(event) for event in events_of(stream)]) for stream in range(2)]
    pairs = [socket.socketpair() for _ in logs]
    senders = [
        threading.Thread(target=send_in_pieces, args=(sender, log, len(log) - 7), daemon=True)
        for (sender, _), log in zip(pairs, logs, strict=True)
    ]
    readers = [EventReader(receiver, INTEGER) for _, receiver in pairs]

    def main(worker: runtime.Worker) -> list[tuple[int, str]]:
        got: list[tuple[int, str]] = []
        probe = worker.dataflow(lambda scope: replayed_into(scope, readers, got))
        worker.step_while(lambda: not probe.done())
        return got

    def run() -> Any:
        for thread in senders:  # in the measured block: the hold begins after cpu_share's collection
            thread.start()
        return execute(main, workers=2, stall_timeout=STALL_TIMEOUT)

    try:
        results, wall, cpu = cpu_share(run)
    finally:
        for thread in senders:
            if thread.ident is not None:
                thread.join()
        for _, receiver in pairs:  # the readers were lent them, not given them
            receiver.close()
    replayed = sorted(pair for result in results for pair in result)
    assert replayed == sorted((time_, f"{s}-{x}") for s in range(2) for time_, x in [(0, "a"), (0, "b"), (1, "c")])
    assert wall >= HOLD
    assert cpu < MOST_CPU * wall, f"waiting on the sockets cost {cpu:.2f} s of CPU in {wall:.2f} s"


def test_a_replay_waiting_on_a_socket_still_reports_a_peer_that_closes_mid_frame() -> None:
    log = event_log_bytes([encode_event(event) for event in events_of(0)])
    sender, receiver = socket.socketpair()
    cut = len(log) - 7

    def send_part() -> None:
        time.sleep(HOLD / 4)  # the replay waits first
        sender.sendall(log[:cut])
        sender.close()

    thread = threading.Thread(target=send_part, daemon=True)
    thread.start()
    reader = EventReader(receiver, INTEGER)

    def main(worker: runtime.Worker) -> None:
        worker.dataflow(lambda scope: scope.replay([reader]).probe())

    try:
        with pytest.raises(WorkerFailed) as caught:
            execute(main, stall_timeout=STALL_TIMEOUT)
    finally:
        thread.join()
        receiver.close()
    truncated = caught.value.__cause__
    while truncated is not None and not isinstance(truncated, EventLogTruncated):  # through the failed operator
        truncated = truncated.__cause__
    assert isinstance(truncated, EventLogTruncated), caught.value
    assert "socket" in str(truncated) and "truncated" in str(truncated)


def test_a_replay_of_an_in_memory_recording_parks_until_the_recording_grows() -> None:
    def main(worker: runtime.Worker) -> list[tuple[int, str]]:
        recordings: list[CaptureRecorder] = []

        def capture(scope: Any) -> Any:
            handle, stream = scope.new_input()
            recordings.append(stream.capture())
            return handle

        handle = worker.dataflow(capture)
        got: list[tuple[int, str]] = []
        probe = worker.dataflow(lambda scope: replayed_into(scope, recordings, got))
        deadline = time.monotonic() + HOLD
        worker.step_while(lambda: time.monotonic() < deadline)  # the replay waits for the recording meanwhile
        handle.send("late")
        handle.close()
        worker.step_while(lambda: not probe.done())
        return got

    results, wall, cpu = cpu_share(lambda: execute(main, stall_timeout=STALL_TIMEOUT))
    assert results == [[(0, "late")]]
    assert cpu < MOST_CPU * wall, f"waiting on the recording cost {cpu:.2f} s of CPU in {wall:.2f} s"


class Trickle:
    """An event stream that cannot wake the replay: it yields ``None`` until ``HOLD`` seconds have passed."""

    def __init__(self) -> None:
        self.events = events_of(0)
        self.ready_at = time.monotonic() + HOLD
        self.polls = 0

    def __iter__(self) -> Trickle:
        return self

    def __next__(self) -> Any:
        self.polls += 1
        if time.monotonic() < self.ready_at:
            return None
        if not self.events:
            raise StopIteration
        return self.events.pop(0)


def test_a_source_that_cannot_wake_the_replay_is_polled_at_a_growing_interval() -> None:
    trickle = Trickle()

    def main(worker: runtime.Worker) -> list[tuple[int, str]]:
        got: list[tuple[int, str]] = []
        probe = worker.dataflow(lambda scope: replayed_into(scope, [trickle], got))
        worker.step_while(lambda: not probe.done())
        return got

    results, wall, cpu = cpu_share(lambda: execute(main, stall_timeout=STALL_TIMEOUT))
    assert results == [[(0, "0-a"), (0, "0-b"), (1, "0-c")]]
    assert cpu < MOST_CPU * wall, f"polling the source cost {cpu:.2f} s of CPU in {wall:.2f} s"
    # at most every 50 ms once backed off (a few more while the interval grows from 1 ms): not on every step
    assert 5 <= trickle.polls <= wall / 0.05 + 30, trickle.polls


def test_a_sequencer_waiting_for_a_busy_peer_does_not_spin() -> None:
    def main(worker: runtime.Worker) -> list[int]:
        sequencer: runtime.Sequencer[int] = runtime.Sequencer(worker)
        sequencer.push(worker.index)
        if worker.index == 1:
            time.sleep(HOLD)  # busy in its own code: worker 0 waits for its capability to pass worker 0's item
        return sequencer.take(2, timeout=STALL_TIMEOUT)

    orders, wall, cpu = cpu_share(lambda: execute(main, workers=2))
    assert orders[0] == orders[1] and sorted(orders[0]) == [0, 1]
    assert cpu < MOST_CPU * wall, f"waiting for the peer cost {cpu:.2f} s of CPU in {wall:.2f} s"
