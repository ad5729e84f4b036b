"""Ports scale linearly: timely's ``shape_scaling`` shapes with thousands of ports.

(a) one operator with N inputs and N outputs, input ``i`` connected to output ``i`` only;
(b) one region with N streams entering and leaving.  Summaries are sparse, so both cost
O(N) to build and to run; tabulated per input x output pair they cost O(N * N).
"""

from __future__ import annotations

import cProfile
import pstats
from typing import Any

import pytest

from runtime import execute
from scopes import INTEGER, Pipeline, ScopeBuilder, Stream, generic

N = 2_000


def operator_shape(scope: ScopeBuilder, parts: list[Stream]) -> list[Stream]:
    """One operator with ``len(parts)`` inputs and outputs, each input reaching only its own output."""
    count = len(parts)

    def constructor(capabilities: list[Any], info: Any) -> Any:
        for capability in capabilities:
            capability.drop()

        def logic(inputs: list[Any], outputs: list[Any]) -> None:
            for input, output in zip(inputs, outputs, strict=True):
                for ref, batch in input:
                    output.session(ref).give_batch(batch)

        return logic

    summary = {(i, i): [INTEGER.identity()] for i in range(count)}
    return generic(scope, "OpScaling", [(part, Pipeline) for part in parts], count, constructor, summary=summary)


def region_shape(scope: ScopeBuilder, parts: list[Stream]) -> list[Stream]:
    """One region with every part entering and leaving it."""
    return scope.region(lambda inner: [part.enter(inner).leave() for part in parts])


def run_shape(shape: Any, count: int, workers: int = 1) -> tuple[list[Any], int]:
    """Build the shape with ``count`` ports, push records through two epochs; return what arrived and the calls made."""

    def main(worker: Any) -> list[Any]:
        seen: list[Any] = []

        def build(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()
            parts = stream.partition(count, lambda x: x % count)
            outs = shape(scope, parts)
            probe = outs[0].concat(*outs[1:]).inspect_batch(lambda t, b: seen.extend((t, x) for x in b)).probe()
            return handle, probe

        handle, probe = worker.dataflow(build)
        for epoch in range(2):
            handle.send_batch([epoch * 10 + k for k in range(3)] + [count - 1])
            handle.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(handle.time))
            assert probe.frontier().elements == (epoch + 1,)
        handle.close()
        worker.step_while(lambda: not probe.done())
        assert probe.done()
        return seen

    # Work is counted as the function calls (Python and built-in) of this thread, where one worker runs: a count
    # that load cannot inflate, where the CPU time it replaced once measured 8.3x for four times the ports under the
    # suite's load (5.5x to 6.7x quiet) and failed CI.
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        results = execute(main, workers=workers, stall_timeout=20)
    finally:
        profiler.disable()
    return [r for per in results for r in per], pstats.Stats(profiler).total_calls  # type: ignore[attr-defined]


@pytest.mark.parametrize("shape", [operator_shape, region_shape])
def test_shapes_with_thousands_of_ports(shape: Any) -> None:
    small, small_calls = run_shape(shape, N // 4)
    seen, calls = run_shape(shape, N)
    expected = sorted([(0, 0), (0, 1), (0, 2), (0, N - 1), (1, 10), (1, 11), (1, 12), (1, N - 1)])
    assert sorted(seen) == expected
    assert len(small) == len(seen)
    # four times the ports: linear work makes about four times the calls (3.97x measured for both shapes), work
    # per input x output pair sixteen times (it took seconds at N = 1,000)
    assert calls < 5 * small_calls, f"{N // 4} ports: {small_calls} calls, {N}: {calls} calls"


def test_operator_shape_on_two_workers() -> None:
    seen, _ = run_shape(operator_shape, 50, workers=2)
    assert sorted(seen) == sorted([(0, 0), (0, 1), (0, 2), (0, 49), (1, 10), (1, 11), (1, 12), (1, 49)] * 2)
