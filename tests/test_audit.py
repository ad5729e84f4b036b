"""The progress audit: a correct computation passes it; a ledger that lies is caught at the first lie."""

from __future__ import annotations

import random
import re
from functools import partial

import pytest
from helpers import audit_mains
from helpers.example_loader import load_example

from runtime import execute
from runtime.audit import Auditor, ProcessLedger
from runtime.errors import AuditViolation, WorkerFailed
from runtime.testing import run_dataflow
from runtime.worker import Worker
from scopes.operator import OutputPort

scc = load_example("scc")


def audit_error(error: BaseException) -> AuditViolation:
    while not isinstance(error, AuditViolation):
        assert error.__cause__ is not None, f"no AuditViolation under {error!r}"
        error = error.__cause__
    return error


def counting(scope, numbers):
    """Numbers through a loop scope, an exchange by ``v % 7`` and a count per time (top level: processes import it)."""
    looped = scope.iterative(lambda inner: numbers.enter(inner).map(lambda v: v + 1, name="Inc").leave())
    return looped.exchange(lambda v: v % 7, name="ByKey").count()


EPOCHS = [list(range(50))] * 4
"""50 numbers in each of 4 epochs, every epoch completed before the next is sent."""


@pytest.mark.parametrize(("workers", "processes"), [(1, 1), (2, 1), (3, 1), (1, 2)])
def test_a_correct_computation_passes_the_audit(workers, processes):
    run = run_dataflow(counting, EPOCHS, workers=workers, processes=processes, per_epoch=True, audit=True)
    # each worker counts the numbers routed to it: the counts of an epoch add up to its 50 numbers
    assert {time: sum(counts) for time, counts in run.output().items()} == {epoch: 50 for epoch in range(4)}
    assert all(len(counts) <= workers * processes for counts in run.output().values())


@pytest.mark.parametrize("workers", [1, 2])
def test_loops_nested_in_loops_pass_the_audit(workers):
    rng = random.Random(5)
    edges = [(rng.randrange(40), rng.randrange(40)) for _ in range(120)]
    outcomes = execute(partial(scc.scc_worker, edges_for=lambda i, n: edges[i::n]), workers=workers, audit=True)
    components, _ = scc.summarize(outcomes)
    assert set(components) == set(scc.networkx_components(edges))


def test_the_environment_variable_turns_the_audit_on(monkeypatch):
    monkeypatch.setenv("PYTIMELY_AUDIT", "1")
    assert execute(lambda worker: worker.auditor is not None) == [True]
    monkeypatch.setenv("PYTIMELY_AUDIT", "0")
    assert execute(lambda worker: worker.auditor is not None) == [False]


@pytest.fixture
def operator_that_forgets_what_it_sends(monkeypatch):
    """A deliberately broken operator: 'Broken' sends records without counting them in the ledger."""
    real = OutputPort.send

    def send(self, time, batch):
        real(self, time, batch)
        if self.operator == "Broken":
            self.produced[time] -= len(batch)

    monkeypatch.setattr(OutputPort, "send", send)


def broken(worker: Worker) -> list[int]:
    totals: list[int] = []

    def build(scope):
        handle, numbers = scope.new_input("numbers")
        counts = numbers.map(lambda v: v, name="Broken").exchange(lambda v: v, name="ByValue").count()
        counts.inspect(totals.append)
        return handle, counts.probe()

    handle, probe = worker.dataflow(build, name="broken")
    for epoch in range(3):
        handle.send_batch(list(range(100)))
        handle.advance_to(epoch + 1)
        worker.step_while(lambda: probe.less_than(handle.time))
    return totals


def test_without_the_audit_the_broken_operator_goes_unnoticed(operator_that_forgets_what_it_sends):
    totals = execute(broken, workers=2, audit=False, stall_timeout=10)
    # completes with a plausible answer (each worker counts its 100 records an epoch): the lie is silent
    assert totals == [[100, 100, 100], [100, 100, 100]]


def test_the_audit_catches_the_broken_operator_on_one_worker(operator_that_forgets_what_it_sends):
    with pytest.raises(WorkerFailed) as failure:
        execute(broken, workers=1, audit=True, stall_timeout=10)
    message = str(audit_error(failure.value))
    assert "negative count, on worker 0" in message
    assert "messages in flight at time 0" in message
    assert "input 0 of operator 'ByValue' (scope 'broken', address (0, 3))" in message


def test_the_audit_catches_the_broken_operator_on_two_workers(operator_that_forgets_what_it_sends):
    with pytest.raises(WorkerFailed) as failure:
        execute(broken, workers=2, audit=True, stall_timeout=10)
    message = str(audit_error(failure.value))
    assert "operator 'ByValue' (scope 'broken', address (0, 3))" in message
    assert re.search(r"at time \d", message) and re.search(r"on worker \d", message)
    assert "safety" in message or "channel balance" in message


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("workers", "processes"), [(1, 1), (2, 1), (1, 2)])
def test_the_audit_names_an_operator_that_over_counts_instead_of_hanging(workers, processes):
    # Without check 5 the run hangs (here: until stall_timeout, DataflowStuck); the audit names the lie within a second.
    with pytest.raises(WorkerFailed) as failure:
        execute(audit_mains.over_counting, workers=workers, processes=processes, audit=True, stall_timeout=30)
    message = str(audit_error(failure.value)) if processes == 1 else str(failure.value)
    assert "AuditViolation" in message or processes == 1
    assert re.search(r"over-count, on worker \d", message)
    assert "counted in flight to input 0 of operator 'ByValue' (scope 'broken', address (0, 3))" in message
    broken_output = "operator 'Broken' (scope 'broken', address (0, 2)) output 0 counted 101 record(s) at time 0"
    assert re.search(re.escape(broken_output) + r" on worker \d", message)
    if processes == 1:
        assert f"produced {101 * workers} record(s) at that time and it consumed {100 * workers}" in message


def idle_with_an_open_input(worker: Worker) -> str:
    """A correct program that idles (input open, nothing in flight) well past the audit's quiet period."""
    import time

    from runtime.audit import AUDIT_QUIET

    def build(scope):
        handle, numbers = scope.new_input("numbers")
        return handle, counting(scope, numbers).probe()

    handle, probe = worker.dataflow(build, name="idle")
    handle.send_batch(list(range(50)))
    handle.advance_to(1)
    worker.step_while(lambda: probe.less_than(1))
    quiet_until = time.monotonic() + 3 * AUDIT_QUIET
    while time.monotonic() < quiet_until:  # every worker idle, the input open: a stall, and no lie
        worker.step()
    return "done"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [1, 2])
def test_a_correct_program_idling_with_an_open_input_passes_the_over_count_check(workers):
    assert execute(idle_with_an_open_input, workers=workers, audit=True) == ["done"] * workers


# ---------------------------------------------------------------------- each check alone


def auditor(peers: int = 1, ledger: ProcessLedger | None = None) -> Auditor:
    audit = Auditor(0, peers, ledger)
    audit.operator_created((0,), "flow", 0, 0, [], "int")
    audit.operator_created((0, 1), "Source", 0, 1, [], None)
    audit.operator_created((0, 2), "Sink", 1, 0, [[]], None)
    # location 0: output 0 of node 1 (a capability); location 1: input 0 of node 2 (messages)
    audit.locations((0,), [(1, 0, True), (2, 0, False)])
    return audit


def test_a_frontier_that_goes_backwards_is_caught():
    audit = auditor()
    audit.frontiers((0,), [(1, 3, 1)])
    audit.frontiers((0,), [(1, 3, -1), (1, 5, 1)])  # 3 -> 5: forwards
    with pytest.raises(AuditViolation, match="time 4 joined the frontier at input 0 of operator 'Sink'.*was \\[5\\]"):
        audit.frontiers((0,), [(1, 5, -1), (1, 4, 1)])


def test_a_frontier_that_was_complete_never_reopens():
    audit = auditor()
    audit.frontiers((0,), [(1, 0, 1)])
    audit.frontiers((0,), [(1, 0, -1)])
    with pytest.raises(AuditViolation, match="was empty \\(complete\\) and became \\[7\\]"):
        audit.frontiers((0,), [(1, 7, 1)])


def test_a_negative_capability_count_is_caught_with_any_number_of_workers():
    audit = auditor(peers=4)
    audit.pointstamps((0,), [(1, 2, -1)])  # messages may go below zero for a moment with several workers
    with pytest.raises(AuditViolation, match="count of capabilities at time 2 at output 0 of operator 'Source'"):
        audit.pointstamps((0,), [(0, 2, -1)])


def test_a_message_consumed_behind_the_frontier_is_caught():
    audit = auditor(peers=2)
    audit.frontiers((0,), [(1, 6, 1)])
    audit.messages((0, 2), [[(6, 3)]], [])
    with pytest.raises(AuditViolation, match="safety.*'Sink'.*consumed 2 record\\(s\\) at time 5 on input 0.*\\[6\\]"):
        audit.messages((0, 2), [[(5, 2)]], [])


def test_a_count_left_over_at_completion_is_caught():
    audit = auditor(peers=2)
    audit.pointstamps((0,), [(1, 3, 2), (1, 3, -1)])
    with pytest.raises(AuditViolation, match="dataflow 'flow' completed with a count of 1 at time 3 at input 0"):
        audit.dataflow_completed(0, "flow")


def test_the_channel_balance_is_checked_when_every_worker_has_completed():
    ledger = ProcessLedger(local_workers=2, peers=2)
    first, second = auditor(2, ledger), auditor(2, ledger)
    first.channel_created((0,), (1, 0), (2, 0), "Exchange")
    second.channel_created((0,), (1, 0), (2, 0), "Exchange")
    first.frontiers((0,), [(1, 0, 1)])
    second.frontiers((0,), [(1, 0, 1)])
    first.messages((0, 1), [], [[(0, 10)]])
    second.messages((0, 1), [], [[(0, 10)]])
    first.messages((0, 2), [[(0, 12)]], [])
    second.messages((0, 2), [[(0, 7)]], [])
    first.dataflow_completed(0, "flow")
    with pytest.raises(AuditViolation, match="'Sink'.*input 0 consumed 19 record\\(s\\) at time 0.*produced 20"):
        second.dataflow_completed(0, "flow")
