"""Programs whose user functions fail, for tests that run them on threads and on processes.

Top-level functions, so that ``execute(main, processes=2)`` can import them in
every process.
"""

from __future__ import annotations

from typing import Any

from scopes import Pipeline


def ten_over(record: int) -> int:
    """A key function that fails on the record 0."""
    return 10 // record


def key_after_input(worker: Any) -> None:
    """Worker 0 sends 1, 2, 0 into an exchange whose key fails on 0."""

    def build(scope: Any) -> Any:
        handle, numbers = scope.new_input("Numbers")
        return handle, numbers.exchange(ten_over, name="ByKey").probe()

    handle, probe = worker.dataflow(build)
    if worker.index == 0:
        handle.send_batch([1, 2, 0])
    handle.advance_to(1)
    worker.step_while(lambda: probe.less_than(1))


def key_after_map(worker: Any) -> None:
    """As :func:`key_after_input`, with a map between the input and the exchange."""

    def build(scope: Any) -> Any:
        handle, numbers = scope.new_input("Numbers")
        copied = numbers.map(lambda n: n, name="Copy")
        return handle, copied.exchange(ten_over, name="ByKey").probe()

    handle, probe = worker.dataflow(build)
    handle.advance_to(3)
    if worker.index == 0:
        handle.send_batch([1, 2, 0])
    handle.advance_to(4)
    worker.step_while(lambda: probe.less_than(4))


def notification_fails(worker: Any) -> None:
    """An operator whose notification logic fails at time 5."""

    def logic(input: Any, output: Any, notificator: Any) -> None:
        for ref, _batch in input:
            notificator.notify_at(ref.retain())
        for capability in notificator:
            output.session(capability).give(1 // (capability.time - 5))

    def build(scope: Any) -> Any:
        handle, numbers = scope.new_input("Numbers")
        return handle, numbers.unary_notify(Pipeline, "Windows", logic).probe()

    handle, probe = worker.dataflow(build)
    handle.advance_to(5)
    handle.send(1)
    handle.advance_to(6)
    worker.step_while(lambda: probe.less_than(6))


def to_worker_one(record: Any) -> int:
    """Every record goes to worker 1."""
    return 1


def big_record(worker: Any) -> None:
    """Worker 0 sends one 300 kB record to worker 1, in another process."""

    def build(scope: Any) -> Any:
        handle, texts = scope.new_input("Texts")
        return handle, texts.exchange(to_worker_one, name="ToOne").probe()

    handle, probe = worker.dataflow(build)
    if worker.index == 0:
        handle.send("x" * 300_000)
    handle.advance_to(1)
    worker.step_while(lambda: probe.less_than(1))
