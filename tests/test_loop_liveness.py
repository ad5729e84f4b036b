"""A loop that never converges says so: after ``main`` returns, the worker periodically logs
which loop is still circulating and at what iteration (before, it ran on in silence)."""

from __future__ import annotations

import logging
import threading
import time

import runtime.worker as worker_module
from runtime import execute


def test_a_loop_still_circulating_after_main_returns_is_reported_periodically(monkeypatch):
    monkeypatch.setattr(worker_module, "CIRCULATING_FIRST", 0.3)
    monkeypatch.setattr(worker_module, "CIRCULATING_EVERY", 0.3)
    stop = threading.Event()
    reports: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            reports.append(record.getMessage())
            if len(reports) >= 3:
                stop.set()  # the user reads the reports and fixes the loop: here, it stops feeding back

    def main(worker):
        def build(scope):
            handle, seeds = scope.new_input("Seeds")

            def body(inner):
                loop, fed_back = inner.loop_variable(1, name="Again")
                state = seeds.enter(inner).concat(fed_back)
                # the user's loop never converges: every record goes round again
                state.map(lambda n: n + 1, name="Grow").filter(lambda n: not stop.is_set()).connect_loop(loop)
                return state.leave()

            scope.iterative(body, name="Forever")
            return handle

        handle = worker.dataflow(build)
        handle.send(1)
        return "main returned"  # the loop goes on after this

    handler = Collect(level=logging.WARNING)
    logger = logging.getLogger("runtime.worker")
    logger.addHandler(handler)
    started = time.monotonic()
    safety = threading.Timer(20, stop.set)  # the test ends even if nothing is reported
    safety.start()
    try:
        assert execute(main) == ["main returned"]
    finally:
        safety.cancel()
        logger.removeHandler(handler)
    assert time.monotonic() - started < 30
    assert len(reports) >= 3
    for report in reports:
        assert "scope 'dataflow 0' > 'Forever' at iteration" in report, report
        assert "main returned" in report and "never converges" in report
    first = int(reports[0].split("at iteration ")[1].split(" ")[0])
    last = int(reports[-1].split("at iteration ")[1].split(" ")[0])
    assert last > first > 0
