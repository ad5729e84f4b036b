"""Failures a user must understand: a user function raising, different graphs on different
workers, dataflows that cannot progress (anywhere: step_while, step loops, the final drain),
and Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

from runtime import DataflowMismatch, DataflowStuck, Stop, WorkerFailed, execute, run_workers
from runtime.communication.fabric import ThreadFabric, WorkerSignal
from scopes import Pipeline
from scopes.errors import OperatorFailed

ROOT = Path(__file__).resolve().parent.parent


def failure_of(main: Any, workers: int, stall_timeout: float | None = 5.0) -> WorkerFailed:
    with pytest.raises(WorkerFailed) as caught:
        execute(main, workers=workers, stall_timeout=stall_timeout)
    return caught.value


# ---------------------------------------------------------------------- a user function raises


def parse_amount(record: str) -> int:
    """The user's function, whose frame must show in the traceback."""
    return int(record)


def failing_operator_main(worker: Any) -> None:
    """An operator that reports a user error the way operators do: as OperatorFailed."""

    def build(scope: Any) -> Any:
        def body(inner: Any) -> Any:
            def constructor(capability: Any, info: Any) -> Any:
                capability.drop()

                def logic(input: Any, output: Any) -> None:
                    for ref, batch in input:
                        try:
                            output.session(ref).give_batch([parse_amount(r) for r in batch])
                        except ValueError as error:
                            raise OperatorFailed(
                                f"operator 'Parse' failed: {error}",
                                "Parse",
                                info.address,
                                ("payments", "Region"),
                                ref.time,
                                worker.index,
                            ) from error

                return logic

            return scope_stream.enter(inner).unary(Pipeline, "Parse", constructor).leave()

        handle, scope_stream = scope.new_input("Amounts")
        return handle, scope.region(body).probe()

    handle, probe = worker.dataflow(build, name="payments")
    handle.send_batch(["1", "2"] if worker.index else ["3", "lots"])
    handle.advance_to(4)
    worker.step_while(lambda: probe.less_than(4))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_user_error_names_worker_operator_scope_and_time(workers: int) -> None:
    failed = failure_of(failing_operator_main, workers)
    message = str(failed)
    assert f"worker 0 of {workers} failed in operator 'Parse'" in message
    assert "scope 'payments / Region'" in message
    assert "at time 0" in message
    assert "ValueError: invalid literal for int() with base 10: 'lots'" in message
    assert failed.worker == 0
    assert isinstance(failed.__cause__, OperatorFailed)
    assert isinstance(failed.__cause__.__cause__, ValueError)
    shown = "".join(traceback.format_exception(failed))
    assert "in parse_amount" in shown and "return int(record)" in shown


def test_other_errors_name_the_worker_and_stop_every_worker() -> None:
    stopped: list[int] = []

    def main(worker: Any) -> None:
        handle, probe = worker.dataflow(lambda scope: _input_probe(scope))
        try:
            if worker.index == 2:
                raise KeyError("no such account")
            worker.step_while(lambda: True)
        finally:
            stopped.append(worker.index)

    failed = failure_of(main, 3)
    assert str(failed) == "worker 2 of 3 failed: KeyError: 'no such account'"
    assert isinstance(failed.__cause__, KeyError)
    assert sorted(stopped) == [0, 1, 2]


def _input_probe(scope: Any, name: str = "Input") -> Any:
    handle, stream = scope.new_input(name)
    return handle, stream.exchange(lambda x: x).probe()


@pytest.mark.parametrize(
    ("stop", "expected"),
    [
        (Stop("failed", 1, "ValueError: boom"), "stopped because worker 1 failed: ValueError: boom"),
        (Stop("lost", 1, "process 1 at 10.0.0.2:7000"), "a peer was lost: process 1 at 10.0.0.2:7000"),
    ],
)
def test_workers_stopped_from_elsewhere_report_why(stop: Stop, expected: str) -> None:
    """As in a process cluster: the local worker is stopped by a worker it does not run."""
    fabric = ThreadFabric(2)
    local = fabric.communicator(0)

    def main(worker: Any) -> None:
        handle, probe = worker.dataflow(lambda scope: _input_probe(scope))
        threading.Timer(0.2, fabric.stop, args=(stop,)).start()
        worker.step_while(lambda: True)

    with pytest.raises(WorkerFailed) as caught:
        run_workers(main, [local], stall_timeout=None)
    assert expected in str(caught.value)
    assert caught.value.worker == 1


# ---------------------------------------------------------------------- different dataflows


def test_workers_that_build_different_graphs_get_a_mismatch_naming_the_difference() -> None:
    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input("Numbers")
            if worker.index == 1:
                stream = stream.map(lambda x: x + 1, name="PlusOne")
            return handle, stream.exchange(lambda x: x).count().probe()

        handle, probe = worker.dataflow(build, name="sums")
        handle.send_batch(range(10))
        handle.close()
        worker.step_while(lambda: not probe.done())

    failed = failure_of(main, 2)
    cause = failed.__cause__
    assert isinstance(cause, DataflowMismatch)
    message = str(cause)
    assert "dataflow 'sums'" in message
    assert "between worker" in message
    assert "'PlusOne'" in message
    assert "Every worker must build the same dataflows" in message


def test_a_nested_difference_is_located_in_its_scope() -> None:
    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input("Numbers")

            def body(inner: Any) -> Any:
                entered = stream.enter(inner)
                if worker.index == 0:
                    entered = entered.filter(lambda x: x > 0, name="Positive")
                else:
                    entered = entered.map(lambda x: x, name="Same")
                return entered.leave()

            return handle, scope.region(body, name="Inner").probe()

        handle, probe = worker.dataflow(build, name="nested")
        handle.close()
        worker.step_while(lambda: not probe.done())

    cause = failure_of(main, 2).__cause__
    assert isinstance(cause, DataflowMismatch)
    assert "scope 'nested / Inner'" in str(cause)
    assert "'Positive'" in str(cause) and "'Same'" in str(cause)


def test_a_dataflow_built_on_one_worker_only_is_reported_not_hung() -> None:
    def main(worker: Any) -> None:
        if worker.index == 0:
            handle, probe = worker.dataflow(lambda scope: _input_probe(scope), name="lonely")
            handle.close()
            worker.step_while(lambda: not probe.done())

    cause = failure_of(main, 2, stall_timeout=0.5).__cause__
    assert isinstance(cause, DataflowStuck)
    assert "dataflow 'lonely'" in str(cause)
    assert "worker(s) 1 have not built it" in str(cause)


# ---------------------------------------------------------------------- stall detection


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_a_stall_in_step_while_is_detected(workers: int) -> None:
    def main(worker: Any) -> None:
        handle, probe = worker.dataflow(lambda scope: _input_probe(scope, "Prices"), name="quotes")
        handle.send(5)
        handle.advance_to(2)
        worker.step_while(lambda: probe.less_than(3))  # the input is never advanced to 3

    started = time.monotonic()
    cause = failure_of(main, workers, stall_timeout=0.4).__cause__
    assert time.monotonic() - started < 10
    assert isinstance(cause, DataflowStuck)
    message = str(cause)
    assert "input 'Prices' is still open at time 2" in message
    assert "operator 'Prices' (scope 'quotes', address (0, 1), built at test_runtime_errors.py:" in message
    assert "for time 2 at output 0" in message
    assert "(worker 0 holds 1 at that output)" in message
    for index in range(workers):
        assert f"worker {index}:" in message


def test_a_stall_in_a_step_loop_is_detected() -> None:
    def main(worker: Any) -> None:
        handle, probe = worker.dataflow(lambda scope: _input_probe(scope, "Ticks"))
        while probe.less_than(1):
            worker.step()

    cause = failure_of(main, 2, stall_timeout=0.4).__cause__
    assert isinstance(cause, DataflowStuck)
    assert "input 'Ticks' is still open at time 0" in str(cause)


def test_a_stall_in_the_final_drain_is_detected() -> None:
    def main(worker: Any) -> None:
        def build(scope: Any) -> Any:
            def constructor(capability: Any, info: Any) -> Any:
                held = [capability]
                return lambda output: held

            return scope.source("Hoarder", constructor).probe()

        worker.dataflow(build, name="drain")

    cause = failure_of(main, 2, stall_timeout=0.4).__cause__
    assert isinstance(cause, DataflowStuck)
    assert "operator 'Hoarder' (scope 'drain'" in str(cause)


def test_a_worker_busy_in_user_code_is_not_stalled() -> None:
    def main(worker: Any) -> int:
        handle, probe = worker.dataflow(lambda scope: _input_probe(scope))
        if worker.index == 0:
            worker.step()
            time.sleep(1.2)  # producing input slowly, longer than the stall timeout
            handle.send_batch(range(5))
        handle.close()
        worker.step_while(lambda: not probe.done())
        return worker.index

    assert execute(main, workers=2, stall_timeout=0.4) == [0, 1]


def test_a_parked_worker_is_woken_and_a_busy_one_is_not() -> None:
    signal_ = WorkerSignal()
    signal_.activate((0, 1))
    assert not signal_.event.is_set()
    signal_.parked = True
    signal_.activate((0, 2))
    assert signal_.event.is_set()
    assert list(signal_.pending) == [(0, 1), (0, 2)]


# ---------------------------------------------------------------------- Ctrl-C


@pytest.mark.parametrize("workers", [1, 3])
def test_ctrl_c_stops_every_worker_with_one_line_and_status_130(workers: int) -> None:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "helpers" / "interrupt_workers.py"), str(workers)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        ready = 0
        deadline = time.monotonic() + 30
        while ready < workers and time.monotonic() < deadline:
            line = process.stdout.readline()
            ready += line.startswith("ready")
        assert ready == workers
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, stderr
    assert sorted(line for line in stdout.splitlines() if line.startswith("finally")) == [
        f"finally {index}" for index in range(workers)
    ]
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines() == [f"pytimely: interrupted (Ctrl-C); stopped {workers} worker(s)"]
