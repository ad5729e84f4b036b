"""Smaller items of issue 17, each as a user would run into it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import runtime
from runtime import WorkerFailed, execute


def test_a_temporary_barrier_does_not_hold_the_program_open():
    """``Barrier(worker).wait()`` on a temporary, then stepping to the end, completes."""

    def main(worker):
        runtime.Barrier(worker).wait()
        while worker.step():
            pass
        return "done"

    assert execute(main, workers=2, stall_timeout=5) == ["done", "done"]


def test_a_barrier_as_a_context_manager_closes_when_the_block_ends():
    def main(worker):
        with runtime.Barrier(worker) as barrier:
            barrier.wait()
            barrier.wait()
            rounds = barrier.rounds
        while worker.step():
            pass
        return rounds

    assert execute(main, workers=2, stall_timeout=5) == [2, 2]


def test_probe_frontier_is_called_like_less_than_and_done():
    def main(worker):
        def build(scope):
            handle, numbers = scope.new_input()
            return handle, numbers.probe()

        handle, probe = worker.dataflow(build)
        handle.advance_to(4)
        worker.step_while(lambda: probe.less_than(4))
        called = probe.frontier()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            old_style = list(probe.frontier)
        return list(called), old_style, [str(w.message) for w in caught]

    ((called, old_style, caught),) = execute(main)
    assert called == old_style == [4]
    assert len(caught) == 1 and "call probe.frontier()" in caught[0]


ARGV_PROGRAM = """
import sys
from runtime import execute_from_args

def main(worker):
    return sys.argv[1:3]

if __name__ == "__main__":
    print(execute_from_args(main))
"""


def test_processes_see_the_program_arguments_as_the_parent_does(tmp_path):
    """A main reading its own arguments works the same on threads and on processes."""
    program = tmp_path / "reads_its_arguments.py"
    program.write_text(ARGV_PROGRAM)
    for flags in (["-w", "2"], ["-n", "2", "-w", "1"]):
        finished = subprocess.run(
            [sys.executable, str(program), "--city", "Oslo", *flags],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        )
        assert finished.returncode == 0, finished.stderr
        assert finished.stdout.strip() == "[['--city', 'Oslo'], ['--city', 'Oslo']]", (flags, finished.stdout)


def test_readme_commands_run_the_projects_python():
    """A bare ``python`` (a system Python without the project's packages) appears in no README command."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    bare = re.findall(r"(?<![\w./-])python3? (?:examples|docs|benchmarks|-m )", readme)
    assert bare == [], bare
    assert ".venv/bin/python examples/hello.py" in readme or ".venv/bin/python examples/NAME.py" in readme


def test_the_demo_replay_hint_names_the_projects_python(monkeypatch):
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root / "examples"))
    try:
        import pipeline
    finally:
        sys.path.remove(str(root / "examples"))
    monkeypatch.setattr(sys, "executable", str(root / ".venv" / "bin" / "python"))
    assert pipeline.python_command() == ".venv/bin/python"


def test_a_record_over_the_frame_limit_is_an_error_naming_the_limit_and_the_operator(monkeypatch):
    """With the limit lowered to 100 kB (as 1 GiB would be, without the memory), a 300 kB record
    is refused by its sender, not reported as a lost connection."""
    from helpers import user_error_mains

    monkeypatch.setenv("PYTIMELY_MAX_FRAME_BYTES", "100000")
    with pytest.raises(WorkerFailed) as failure:
        execute(user_error_mains.big_record, workers=1, processes=2, stall_timeout=30)
    message = str(failure.value)
    assert "exceeds the frame limit of 100000 bytes" in message, message
    assert "PYTIMELY_MAX_FRAME_BYTES" in message and "FrameTooLarge" in message, message
    assert "operator 'Texts'" in message and "at time 0" in message, message  # the sender, and when
    assert "the operator at address (0, 2)" in message, message  # the receiver, the exchange 'ToOne'
    assert "connection closed" not in message and "lost" not in message, message


def test_a_message_past_the_frame_prefixs_32_bits_is_refused_as_too_large_not_a_struct_error():
    """A 5 GiB message (its length only: nothing that large is made) cannot be packed into a frame's 32-bit
    prefix; the sender's check must say FrameTooLarge, as for any message over the limit."""
    from runtime.communication.process_fabric import DATA, ProcessCommunicator
    from runtime.communication.wire import BATCH_NDARRAY, FrameTooLarge, frame_size

    class Huge:  # an array's encoding: the frame limit alone applies
        def __len__(self) -> int:
            return 5 << 30

    assert frame_size([DATA, 1, (0, 2), [1], 0, BATCH_NDARRAY], 5 << 30) > 5 << 30
    with pytest.raises(FrameTooLarge, match=r"a message of \d+ bytes at time 0 .* exceeds the frame limit"):
        ProcessCommunicator._check_frame(object(), 1, 1, 3, (0, 2), 0, BATCH_NDARRAY, Huge())


def test_a_batch_of_records_over_what_a_receiver_decodes_is_refused_by_its_sender(monkeypatch):
    """With the frame limit raised to 3 GiB, a 1.5 GiB array may travel, but a 1.5 GiB batch of records (msgpack,
    which the receiver decodes up to 1 GiB) is refused where it is sent, not reported by its receiver as damage."""
    from runtime.communication import process_communicator
    from runtime.communication.process_communicator import ProcessCommunicator
    from runtime.communication.wire import BATCH_COLUMNS, BATCH_FAST, BATCH_GENERAL, BATCH_NDARRAY, FrameTooLarge

    class Large:
        def __len__(self) -> int:
            return 3 << 29

    monkeypatch.setattr(process_communicator, "MAX_FRAME", 3 << 30)
    ProcessCommunicator._check_frame(object(), 1, 1, 3, (0, 2), 0, BATCH_NDARRAY, Large())  # an array: it fits
    for path in (BATCH_FAST, BATCH_COLUMNS, BATCH_GENERAL):
        with pytest.raises(FrameTooLarge, match=r"a batch of records of 1610612736 bytes at time 0 .* exceeds the"):
            ProcessCommunicator._check_frame(object(), 1, 1, 3, (0, 2), 0, path, Large())
