"""A dataflow whose every operator and scope counts its own records, to check the metrics against."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from runtime import Worker
from runtime.metrics import current_state

RECORD_SERIES = ("operator_records_in", "operator_records_out")


def counted_loop(worker: Worker) -> tuple[dict[tuple[str, str], int], list[tuple[dict[str, str], float]]]:
    """Run the dataflow; return this worker's own counts ``(operator, "in"/"out") -> records`` and its samples.

    Worker 0 sends more than the others, and the exchange sends to every worker,
    so each worker's counts differ from the others' and from the total.
    """
    counts: Counter[tuple[str, str]] = Counter()

    def pre(x: int) -> int:
        counts["Pre", "in"] += 1
        counts["Pre", "out"] += 1
        return x

    def keep(x: int) -> bool:
        counts["Keep", "in"] += 1
        counts["Keep", "out"] += x % 3 == 0
        return x % 3 == 0

    def post(x: int) -> int:
        counts["Post", "in"] += 1
        counts["Post", "out"] += 1
        return x

    def build(scope: Any) -> Any:
        handle, numbers = scope.new_input("numbers")
        before = numbers.exchange(lambda x: x // 7).map(pre, name="Pre")

        def body(inner: Any) -> Any:
            entered = before.enter(inner)

            def deeper(innermost: Any) -> Any:
                return entered.enter(innermost).filter(keep, name="Keep").leave()

            return inner.iterative(deeper, name="Inner").leave()

        after = scope.iterative(body, name="Loop").map(post, name="Post")
        return handle, after.probe()

    handle, probe = worker.dataflow(build, name="flow")
    for epoch in range(3):
        batch = list(range(40 if worker.index == 0 else 5 + epoch))
        counts["numbers", "out"] += len(batch)
        handle.send_batch(batch)
        handle.advance_to(epoch + 1)
        worker.step_while(lambda: probe.less_than(handle.time))
    handle.close()
    worker.step_while(lambda: not probe.done())
    counts["Loop", "in"] = counts["Pre", "out"]  # what Pre sent on this worker entered the loop here
    counts["Loop", "out"] = counts["Inner", "out"] = counts["Keep", "out"]
    counts["Inner", "in"] = counts["Pre", "out"]
    counts["Probe", "in"] = counts["Post", "out"]
    counts["Exchange", "in"] = counts["Exchange", "out"] = counts["Pre", "in"]  # it receives after the exchange
    return dict(counts), _own_samples(worker.index)


def _own_samples(index: int) -> list[tuple[dict[str, str], float]]:
    """This worker's record series, once its probe's frontier (logged after its last records) has arrived."""
    state = current_state()
    assert state is not None, "run with metrics on"
    deadline = time.monotonic() + 30
    while True:
        samples = state.samples()
        done = [
            value
            for labels, value in samples.get("frontier", [])
            if labels["worker"] == str(index) and labels["operator"] == "Probe"
        ]
        if done == [float("inf")]:
            break
        assert time.monotonic() < deadline, f"worker {index}: the probe's final frontier never reached the metrics"
        time.sleep(0.02)
    return [
        ({**labels, "series": metric}, value)
        for metric in RECORD_SERIES
        for labels, value in samples.get(metric, [])
        if labels["worker"] == str(index)
    ]
