"""The final frontier: operators that watch their input see it become empty before the dataflow retires."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from runtime import execute
from scopes import Capability, OperatorInfo, OperatorInput, OperatorOutput, Pipeline, ScopeBuilder


def _recorder(log: list[tuple[Any, ...]]) -> Any:
    def constructor(capability: Capability, info: OperatorInfo) -> Any:
        capability.drop()  # holds no capability: only watches its input

        def logic(input: OperatorInput, output: OperatorOutput) -> None:
            for _ref, _batch in input:
                pass
            log.append(tuple(input.frontier.elements))

        return logic

    return constructor


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_unary_frontier_sees_the_empty_frontier(workers: int) -> None:
    logs: list[list[tuple[Any, ...]]] = [[] for _ in range(workers)]

    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()
            stream.exchange(lambda x: x).unary_frontier(Pipeline, "Watch", _recorder(logs[worker.index]))
            return handle

        handle = worker.dataflow(build)
        for epoch in range(3):
            handle.send(epoch)
            handle.advance_to(epoch + 1)
            worker.step()

    execute(main, workers=workers, stall_timeout=10)
    for log in logs:
        assert log, "the operator never ran"
        assert log[-1] == (), f"last frontier seen was {log[-1]!r}, not empty"


@pytest.mark.parametrize("workers", [1, 2])
def test_sink_and_nested_watchers_see_the_empty_frontier(workers: int) -> None:
    lock = threading.Lock()
    seen: dict[str, list[tuple[Any, ...]]] = {}

    def watcher(name: str) -> Any:
        def logic(input: OperatorInput) -> None:
            for _ref, _batch in input:
                pass
            with lock:
                seen.setdefault(f"{name}", []).append(tuple(input.frontier.elements))

        return logic

    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()
            stream.sink(Pipeline, "Outer", watcher(f"outer{worker.index}"))

            def body(inner: ScopeBuilder) -> None:
                stream.enter(inner).sink(Pipeline, "Inner", watcher(f"inner{worker.index}"))

            scope.region(body)
            return handle

        handle = worker.dataflow(build)
        handle.send(1)
        handle.advance_to(5)

    execute(main, workers=workers, stall_timeout=10)
    assert len(seen) == 2 * workers
    for name, log in seen.items():
        assert log[-1] == (), f"{name}: last frontier seen was {log[-1]!r}"
