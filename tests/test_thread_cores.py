"""PYTIMELY_THREAD_CORES: with ``one`` the worker threads of one process share one core (they share the GIL), with
``all`` they keep every CPU; ``auto``, the default, is tested in test_core_governor.py."""

from __future__ import annotations

import os
import threading

import pytest

from runtime import execute
from runtime.errors import ConfigurationError
from runtime.thread_cores import CORES_VARIABLE, choose_core, cores_setting, current_cpu, shared_core
from runtime.worker import Worker

needs_cores = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs a system that gives threads CPUs")


def cores_and_sum(worker: Worker) -> tuple[frozenset[int], int, str]:
    """The CPUs this worker's thread may use, a small computation's answer, and the thread's name."""

    def build(scope):  # type: ignore[no-untyped-def]
        handle, stream = scope.new_input("numbers")
        return handle, stream.exchange(lambda n: n).probe()

    handle, probe = worker.dataflow(build)
    handle.send_batch(list(range(worker.index, 100, worker.peers)))
    handle.close()
    worker.step_while(lambda: not probe.done())
    return frozenset(os.sched_getaffinity(0)), worker.index, threading.current_thread().name


@needs_cores
def test_one_makes_worker_threads_share_one_core_and_the_calling_thread_keeps_its_cpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CORES_VARIABLE, "one")
    before = os.sched_getaffinity(0)
    results = execute(cores_and_sum, workers=3)
    cores = {result[0] for result in results}
    assert len(cores) == 1  # every worker thread on the same set...
    (shared,) = cores
    assert len(shared) == 1 and shared <= before  # ...of one CPU the process may use (its only one, or one of them)
    assert [result[1] for result in results] == [0, 1, 2]
    assert os.sched_getaffinity(0) == before


@needs_cores
def test_with_all_worker_threads_keep_every_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CORES_VARIABLE, "all")
    before = frozenset(os.sched_getaffinity(0))
    results = execute(cores_and_sum, workers=2)
    assert {result[0] for result in results} == {before}


@needs_cores
def test_one_worker_runs_in_the_calling_thread_on_its_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CORES_VARIABLE, "one")
    before = frozenset(os.sched_getaffinity(0))
    ((cores, _, name),) = execute(cores_and_sum, workers=1)
    assert cores == before and name == threading.current_thread().name


def test_a_bad_setting_is_refused_with_what_to_write(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CORES_VARIABLE, "two")
    with pytest.raises(ConfigurationError, match="PYTIMELY_THREAD_CORES must be 'auto'.*'one'.*'all'.*'two'"):
        shared_core()
    with pytest.raises(ConfigurationError, match="'auto'.*'one'.*'all'"):
        execute(cores_and_sum, workers=2)


@pytest.mark.parametrize(("value", "setting"), [(None, "auto"), ("auto", "auto"), (" One ", "one"), ("ALL", "all")])
def test_the_setting_is_auto_unless_the_variable_says_otherwise(
    monkeypatch: pytest.MonkeyPatch, value: str | None, setting: str
) -> None:
    if value is None:
        monkeypatch.delenv(CORES_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(CORES_VARIABLE, value)
    assert cores_setting() == setting


def test_the_shared_core_is_the_current_cpu_when_allowed_else_the_lowest() -> None:
    assert choose_core({0, 1, 2}, 2) == 2
    assert choose_core({1, 3}, 0) == 1
    assert choose_core({5, 7}, None) == 5


@needs_cores
def test_the_current_cpu_is_one_the_thread_may_use() -> None:
    cpu = current_cpu()
    assert cpu is not None and cpu in os.sched_getaffinity(0)
