"""``info.activate_after`` belongs to the thread stepping the operator's worker; any other thread is refused.

The worker's timers are a heap that only its stepping thread reads, and a
timer added by another thread while the worker is parked would not be seen
until something else woke it.  Such a call raises
:class:`~scopes.errors.ActivationError`, naming the operator, both threads and
``info.waker()``.  The owner is the thread stepping the worker now (or that
last stepped or built it): a worker built in one thread and stepped in
another, and the simulated communicator's workers, keep their timers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import runtime
from runtime import execute
from runtime.communication.fabric import ThreadFabric
from runtime.communication.simulation import simulate
from scopes import ActivationError, Capability, OperatorInfo


def polling_source(infos: list[OperatorInfo], runs: int = 3) -> Callable[[Any], Any]:
    """Build a source "Poller" that runs ``runs`` times, each run after an ``activate_after`` from its own logic,
    then drops its capability; its :class:`OperatorInfo` is appended to ``infos``."""

    def build(scope: Any) -> Any:
        def constructor(capability: Capability, info: OperatorInfo) -> Callable[[Any], None]:
            infos.append(info)
            count = [0]

            def logic(output: Any) -> None:
                count[0] += 1
                if count[0] < runs:
                    info.activate_after(0.001)  # from the worker's thread: taken
                elif count[0] == runs:
                    output.session(capability).give(info.worker_index)
                    capability.drop()

            return logic

        return scope.source("Poller", constructor).probe()

    return build


def call_from_a_thread(name: str, call: Callable[[], None]) -> BaseException | None:
    """Run ``call`` in a new thread called ``name``; return what it raised (``None``: nothing)."""
    raised: list[BaseException] = []

    def target() -> None:
        try:
            call()
        except BaseException as error:  # noqa: BLE001 - handed to the test
            raised.append(error)

    thread = threading.Thread(target=target, name=name)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    return raised[0] if raised else None


def refused_from_another_thread(worker: runtime.Worker) -> tuple[str, str, bool]:
    """Build the polling source, step once, call its ``activate_after`` from another thread, then run it out;
    return the refusal's message, this thread's name and whether the outside call left the timers as they were."""
    infos: list[OperatorInfo] = []
    probe = worker.dataflow(polling_source(infos))
    worker.step()
    before = list(worker._timers.pending)  # noqa: SLF001 - the logic's own timer
    error = call_from_a_thread(f"Outsider-{worker.index}", lambda: infos[0].activate_after(1e-9))  # due sooner
    assert isinstance(error, ActivationError), error
    unchanged = worker._timers.pending == before  # noqa: SLF001
    worker.step_while(lambda: not probe.done())
    return str(error), threading.current_thread().name, unchanged


def check_refusal(message: str, worker_thread: str, index: int, unchanged: bool) -> None:
    """The refusal names the operator, its address, both threads and ``info.waker()``; it added no timer."""
    assert "operator 'Poller'" in message and "(address (0, " in message
    assert f"thread 'Outsider-{index}'" in message and f"thread '{worker_thread}'" in message
    assert f"worker {index}" in message and "info.waker()" in message
    assert unchanged


@pytest.mark.parametrize("workers", [1, 2], ids=["1 worker", "2 threads"])
def test_activate_after_from_another_thread_is_refused_naming_both_threads(workers: int) -> None:
    results = execute(refused_from_another_thread, workers=workers, stall_timeout=30.0)
    for index, (message, worker_thread, unchanged) in enumerate(results):
        check_refusal(message, worker_thread, index, unchanged)


def test_activate_after_from_another_thread_is_refused_under_the_simulated_communicator() -> None:
    for index, (message, worker_thread, unchanged) in enumerate(simulate(refused_from_another_thread, workers=2)):
        check_refusal(message, worker_thread, index, unchanged)


def test_the_thread_stepping_a_worker_owns_its_timers_not_the_thread_that_built_it() -> None:
    worker = runtime.Worker(ThreadFabric(1).communicators()[0])
    infos: list[OperatorInfo] = []
    probe = worker.dataflow(polling_source(infos, runs=50))
    stepped, release = threading.Event(), threading.Event()

    def step_then_wait() -> None:
        worker.step()
        stepped.set()
        release.wait(30)

    # built here, stepped by another thread: the logic's activate_after there is taken
    stepper = threading.Thread(target=step_then_wait, name="Stepper")
    stepper.start()
    assert stepped.wait(30)
    assert worker._timers  # noqa: SLF001 - the logic's timer is pending
    # this thread built the worker but has not stepped it since another did: refused, naming the stepper
    with pytest.raises(ActivationError, match=r"thread 'MainThread'.*stepped by thread 'Stepper'.*info\.waker\(\)"):
        infos[0].activate_after(0.001)
    release.set()
    stepper.join(30)
    # once this thread steps it, its timers are this thread's
    worker.step_while(lambda: not probe.done())
    infos[0].activate_after(0.001)
    error = call_from_a_thread("Outsider", lambda: infos[0].activate_after(0.001))
    assert isinstance(error, ActivationError) and "thread 'Outsider'" in str(error)
