"""Columnar batches inside the engine: instrumentation counts rows, loops and the simulator carry arrays,
and scopes works without pyarrow installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import Recorder, execute
from runtime.communication.simulation import simulate
from runtime.instrument import Messages
from scopes import ScopeBuilder
from scopes.hashing import route

ROOT = Path(__file__).resolve().parent.parent


def test_instrumentation_counts_the_rows_of_columnar_batches() -> None:
    def main(worker: Any) -> None:
        def dataflow(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()
            return handle, stream.map_batch(lambda batch: batch[batch % 2 == 0], name="Evens").probe()

        handle, probe = worker.dataflow(dataflow)
        handle.send_batch(np.arange(10))
        handle.advance_to(1)
        handle.send_batch(np.arange(7))
        handle.close()
        worker.step_while(lambda: not probe.done())

    with Recorder() as recording:
        execute(main, stall_timeout=10)
    messages = [event for event in recording.events if isinstance(event, Messages)]
    consumed = sorted(entry for event in messages for port in event.consumed for entry in port)
    produced = sorted(entry for event in messages for port in event.produced for entry in port)
    assert (0, 10) in consumed and (1, 7) in consumed  # the map_batch input: rows, not messages
    assert (0, 5) in produced and (1, 4) in produced  # its output


def iterate_main(worker: Any) -> list[tuple[int, list[int]]]:
    """Halve every value until it is below 4, inside a loop that exchanges arrays by value."""
    seen: list[tuple[int, list[int]]] = []

    def dataflow(scope: ScopeBuilder) -> Any:
        handle, stream = scope.new_input()

        def body(inner: ScopeBuilder) -> Any:
            loop, cycle = inner.loop_variable(1)
            entered = stream.enter(inner).concat(cycle).exchange_batch(lambda batch: batch, name="ByValue")
            entered.inspect_batch(lambda time, batch: seen.append((worker.index, batch.tolist())))
            entered.map_batch(lambda batch: batch[batch >= 4] // 2).connect_loop(loop)
            return entered.map_batch(lambda batch: batch[batch < 4]).leave()

        return handle, scope.iterative(body).probe()

    handle, probe = worker.dataflow(dataflow)
    handle.send_batch(np.arange(40, dtype=np.int64) + 40 * worker.index)
    handle.close()
    worker.step_while(lambda: not probe.done())
    return seen


def test_exchange_batch_inside_a_loop_keeps_arrays_and_routes_by_value() -> None:
    outputs = execute(iterate_main, workers=3, stall_timeout=10)
    rows = 0
    for worker, seen in enumerate(outputs):
        for _, values in seen:
            assert all(route(value, 3) == worker for value in values)
            rows += len(values)
    assert rows > 120


@given(st.integers(0, 2**16))
@settings(max_examples=10, deadline=None)
def test_simulated_schedules_route_arrays_like_threads(seed: int) -> None:
    expected = sorted(value for seen in execute(iterate_main, workers=2) for _, values in seen for value in values)
    simulated = simulate(iterate_main, workers=2, seed=seed)
    assert sorted(value for seen in simulated for _, values in seen for value in values) == expected


_WITHOUT_PYARROW = """
import sys
sys.modules["pyarrow"] = None  # importing pyarrow now fails, as if it were not installed
sys.path.insert(0, sys.argv[1])
import numpy as np
from runtime import execute
from scopes.hashing import route

def main(worker):
    seen = []
    def dataflow(scope):
        handle, stream = scope.new_input()
        keyed = np.zeros(20, dtype=[("k", "i8"), ("v", "f8")])
        keyed["k"] = np.arange(20)
        out = stream.map_batch(lambda b: b).exchange_batch("k").inspect_batch(lambda t, b: seen.extend(b["k"].tolist()))
        handle.send_batch(keyed)
        return handle, out.count().probe()
    handle, probe = worker.dataflow(dataflow)
    handle.close()
    worker.step_while(lambda: not probe.done())
    return seen

outputs = execute(main, workers=2, stall_timeout=10)
assert all(route(k, 2) == w for w, seen in enumerate(outputs) for k in seen)
assert sorted(k for seen in outputs for k in seen) == sorted(list(range(20)) * 2)
print("ok")
"""


def test_numpy_batches_work_without_pyarrow() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_PYARROW, str(ROOT)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
