"""Issue 26, items 1-4: a stall is an error exactly when it is certain.

Certain: the wait's condition reads a probe, and everything holding that probe
back is open inputs (or what they could still cause) whose ``main`` waits too.
Then ``DataflowStuck`` is raised within ``worker.certain_stall`` seconds and names
the line that created the input.  Anything else keeps running.  The programs are
in :mod:`helpers.stall_mains`, each run on 1 worker, 2 threads and 2 processes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import stall_mains

from runtime import DataflowStuck, WorkerFailed, execute
from runtime.stalls import Wait
from scopes.probes import ProbeHandle

SHAPES = {
    "1 worker": {"workers": 1},
    "2 threads": {"workers": 2},
    "2 processes": {"workers": 1, "processes": 2},
    "2 processes x 2 threads": {"workers": 2, "processes": 2},
}
"""How each program is run."""


def edges_line() -> int:
    """The line of ``stall_mains.py`` that creates the 'Edges' input."""
    lines = Path(stall_mains.__file__).read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if 'new_input("Edges")' in line)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("shape", SHAPES)
def test_step_while_on_a_deadline_steps_until_it_passes(shape: str) -> None:
    """Item 1: the condition reads no probe, so the wait is not a stall that can be certain."""
    results = execute(stall_mains.deadline_main, **SHAPES[shape])
    assert sum(sum(counts) for counts in results) == 20 * len(results)  # each worker sends 10 at time 0, 10 at 1


@pytest.mark.timeout(120)
@pytest.mark.parametrize("shape", SHAPES)
def test_waiting_for_a_probe_an_unadvanced_input_holds_raises(shape: str) -> None:
    """Items 2 and 4: count()'s capability at the input's time is the input's doing; the error names the line."""
    with pytest.raises(WorkerFailed) as failure:
        execute(stall_mains.forgotten_main, **SHAPES[shape])
    cause = failure.value.__cause__
    assert isinstance(cause, DataflowStuck)
    message = str(cause)
    assert f"input 'Edges' is still open at time 0 (created at stall_mains.py:{edges_line()})" in message
    assert "This cannot change" in message or "no worker can make progress" in message


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shape", ["1 worker", "2 threads", "2 processes"])
def test_a_source_polling_in_another_dataflow_does_not_hide_a_certain_stall(shape: str) -> None:
    """A timer's run that finds nothing moves nothing: the stall goes on and is judged as without the poller."""
    with pytest.raises(WorkerFailed) as failure:
        execute(stall_mains.polled_forgotten_main, **SHAPES[shape])
    cause = failure.value.__cause__
    assert isinstance(cause, DataflowStuck)
    assert f"input 'Edges' is still open at time 0 (created at stall_mains.py:{edges_line()})" in str(cause)


def test_the_certain_error_says_why_and_where() -> None:
    with pytest.raises(WorkerFailed) as failure:
        execute(stall_mains.forgotten_main)
    message = str(failure.value.__cause__)
    assert "This cannot change: worker 0 waits in step_while, and only its own open inputs" in message
    assert f"(input 'Edges' (created at stall_mains.py:{edges_line()}) at time 0)" in message
    assert "operator 'Count'" in message


@pytest.mark.timeout(120)
@pytest.mark.parametrize("shape", ["2 threads", "2 processes"])
def test_a_probe_held_by_another_workers_open_input_is_not_certain(shape: str) -> None:
    """Worker 1 waits; worker 0's main polls outside with step() and feeds its input later."""
    results = execute(stall_mains.other_input_main, **SHAPES[shape])
    assert sum(sum(counts) for counts in results) == 3


@pytest.mark.timeout(60)
@pytest.mark.timeout(120)
@pytest.mark.parametrize("shape", ["1 worker", "2 threads", "2 processes"])
def test_a_probe_only_an_operator_reads_does_not_make_a_deadline_wait_certain(shape: str) -> None:
    """The operator read the probe during the wait, the condition never did: the deadline ends the wait."""
    results = execute(stall_mains.operator_reads_probe_main, **SHAPES[shape])
    assert results == [[True]] * len(results)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("shape", ["1 worker", "2 threads", "2 processes"])
def test_a_probe_another_thread_reads_does_not_make_an_outside_wait_certain(shape: str) -> None:
    """A thread of the user's read the probe during the wait, the condition never did: the outside event ends it."""
    results = execute(stall_mains.monitored_main, **SHAPES[shape])
    assert sum(sum(counts) for counts in results) == len(results)


def test_a_capability_a_timer_drops_later_is_not_certain() -> None:
    """The operator's capability at 0 cannot come from the input, advanced to 1: the timer ends the wait."""
    assert execute(stall_mains.timer_main) == [["tick"]]


def test_a_wait_records_which_probes_its_condition_reads() -> None:
    read, unread = ProbeHandle(), ProbeHandle()
    wait = Wait([read, unread])
    assert wait.consulted() == []
    read.done()
    assert wait.consulted() == [read]
    unread.less_than(3)
    unread.less_equal(3)
    unread.frontier()
    assert wait.consulted() == [read, unread]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("shape", ["2 threads", "2 processes"])
def test_a_worker_whose_main_returned_cannot_end_the_wait_either(shape: str) -> None:
    """Worker 1 only drains; worker 0's own input holds the probe, so the wait is certain."""
    with pytest.raises(WorkerFailed) as failure:
        execute(stall_mains.one_forgets_main, **SHAPES[shape])
    cause = failure.value.__cause__
    assert isinstance(cause, DataflowStuck)
    assert "input 'Edges' is still open at time 0 (created at stall_mains.py:" in str(cause)


def crossed_line() -> int:
    """The line of ``stall_mains.py`` that creates the inputs of :func:`~helpers.stall_mains.crossed_main`."""
    lines = Path(stall_mains.__file__).read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if "new_input(name)  # the line the error names" in line)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("shape", ["2 threads", "2 processes"])
def test_the_error_names_the_other_workers_input_and_its_time_when_that_copy_holds(shape: str) -> None:
    """Found auditing stalls: worker 0 named its own copy of the holding input, at its own time 1, when the copy
    that held its wait was worker 1's at time 0; and said that it held 1 capability at each of the times 0 and 1."""
    with pytest.raises(WorkerFailed) as failure:
        execute(stall_mains.crossed_main, **SHAPES[shape])
    message = str(failure.value.__cause__)
    site = f"(created at stall_mains.py:{crossed_line()})"
    assert f"(input 'Left' {site} of another worker, at time 0 (this worker's is at time 1))" in message, message
    assert f"(input 'Right' {site} of another worker, at time 0 (this worker's is at time 1))" in message, message
    assert "holds 1 capability(ies) for time 0 at output 0 (worker" not in message, message
    assert "(worker 0 holds 1 of those 2 capabilities at output 0 of operator 'Left'; the others are" in message


@pytest.mark.timeout(120)
def test_the_stall_of_several_processes_is_explained_under_one_header() -> None:
    """Found auditing stalls: each process's combined explanation kept its own header under the cluster's."""
    with pytest.raises(WorkerFailed) as failure:
        execute(stall_mains.crossed_main, **SHAPES["2 processes"])
    message = str(failure.value.__cause__)
    assert message.count("no worker can make progress") == 1, message
    assert "worker 0: " in message and "worker 1: " in message, message


@pytest.mark.timeout(120)
@pytest.mark.parametrize("shape", ["2 threads", "2 processes"])
@pytest.mark.parametrize("program", ["barrier_on_worker_0_only", "extra_dataflow_on_worker_0"])
def test_a_dataflow_that_only_some_workers_build_is_a_certain_stall(shape: str, program: str) -> None:
    """Found by the misuse audit: a Barrier made on worker 0 alone, or a dataflow more on worker 0, hung for ever
    on 2 threads (the stall rule skipped dataflows not built everywhere) and, on 2 processes, ended after 7 s in a
    false 'process 0 stopped answering'."""
    with pytest.raises(WorkerFailed) as failure:
        execute(getattr(stall_mains, program), **SHAPES[shape])
    message = str(failure.value.__cause__)
    assert "not built by worker(s) 1" in message, message
    assert "Every worker must build the same dataflows in the same order" in message, message
    waits = "waits in step_while on" if program.startswith("barrier") else "returned from main with"
    assert f"This cannot change: worker 0 {waits} dataflow(s) '" in message, message


@pytest.mark.timeout(120)
def test_a_process_whose_main_runs_on_after_the_others_finished_is_not_reported_silent() -> None:
    """Found auditing partial builds: a process stopped beating to peers that had said goodbye, which still watched
    it for silence, so a main that went on for more than the silence limit after the dataflows completed was
    killed as 'stopped answering'."""
    assert execute(stall_mains.long_main_after_completion, **SHAPES["2 processes"]) == [0, 1]
