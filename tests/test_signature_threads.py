"""Worker threads that check operator functions at once never trip CPython 3.11's AST counter.

Reading a builtin's signature (``seen.append``) parses text with :mod:`ast`;
in CPython 3.11 two threads doing so at once can raise ``SystemError: AST
constructor recursion depth mismatch``.  CI met it building PageRank on three
worker threads.  The runtime hands :mod:`scopes.signatures` a lock on import.
"""

from __future__ import annotations

import ast
import gc
import sys
import threading

import pytest

import runtime.worker  # noqa: F401  (installs the lock)
from runtime import execute
from scopes import signatures
from scopes.signatures import check_function


class _Churn:
    """Garbage whose finalizer runs Python code, so the collector switches threads mid-parse."""

    def __del__(self) -> None:
        sum(range(50))


def _check_builtins_in_threads(threads: int = 4, rounds: int = 1500) -> list[BaseException]:
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(rounds):
                garbage: list[object] = [_Churn(), _Churn(), _Churn()]
                garbage.append(garbage)  # a cycle: only the collector frees it
                check_function([].append, ("record",), "the inspect function", "operator 'Collect'")
                check_function({}.get, ("key",), "the key function", "operator 'Lookup'")
        except SystemError as error:
            errors.append(error)

    interval, threshold = sys.getswitchinterval(), gc.get_threshold()
    sys.setswitchinterval(1e-6)
    gc.set_threshold(50)
    try:
        workers = [threading.Thread(target=work) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*threshold)
    return errors


def test_the_runtime_guards_signature_reads_with_a_reentrant_lock():
    assert isinstance(signatures._signature_reads, type(threading.RLock()))


@pytest.mark.timeout(30)
def test_a_signature_that_checks_another_function_does_not_deadlock():
    """``inspect.signature`` reads a callable's ``__signature__``; one that checks a function itself re-enters."""

    inner_checked = []

    class Checked:
        def __call__(self, record):
            return record

        @property
        def __signature__(self):
            check_function(len, ("record",), "the inner function", "operator 'Inner'")
            inner_checked.append(True)
            import inspect

            return inspect.signature(lambda record: record)

    check_function(Checked(), ("record",), "the inspect function", "operator 'Outer'")
    assert inner_checked  # the outer read did go through the inner check, under the same lock


def test_threads_checking_builtins_at_once_raise_nothing():
    assert _check_builtins_in_threads() == []


def test_the_parse_of_a_builtins_signature_runs_with_the_lock_held(monkeypatch):
    """The part that races (``ast.parse`` of a builtin's text signature) happens while no other thread can read one.

    Deterministic where a stress without the lock is not: CI's machine once ran five unguarded rounds without
    meeting the SystemError.
    """
    parses: list[bool] = []
    real_parse = ast.parse

    def parse_and_probe(*args, **kwargs):
        free = []
        prober = threading.Thread(target=lambda: free.append(_try_lock(signatures._signature_reads)))
        prober.start()
        prober.join()
        parses.append(free == [False])
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", parse_and_probe)
    check_function([].append, ("record",), "the inspect function", "operator 'Collect'")
    assert parses == [True]


def _try_lock(lock) -> bool:
    """Whether this thread could take ``lock`` at once (released again if so)."""
    if lock.acquire(blocking=False):
        lock.release()
        return True
    return False


def test_three_workers_build_with_a_builtin_inspect_function():
    def main(worker):
        seen: list[int] = []

        def build(scope):
            handle, numbers = scope.new_input("numbers")
            return handle, numbers.inspect(seen.append, name="Collect").probe()

        handle, _ = worker.dataflow(build)
        handle.send_batch([worker.index])
        handle.close()
        return seen  # filled as the runtime runs the dataflow to completion

    assert sorted(x for seen in execute(main, workers=3) for x in seen) == [0, 1, 2]
