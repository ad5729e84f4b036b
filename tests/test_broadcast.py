"""Broadcast delivers one copy per worker, and progress tracking counts every copy.

Regression: the produced count used to add each broadcast record to the target
once, while each of the ``peers`` receivers consumed a copy, so a notification
could fire before all copies for its time had arrived.
"""

import pytest

from runtime import execute
from runtime.testing import assert_outputs, run_dataflow
from scopes import Pipeline, Product


def _rounds(workers: int) -> list[list[tuple]]:
    def main(worker):
        log = []

        def build(scope):
            handle, stream = scope.new_input()

            def body(inner):
                loop, feedback = inner.loop_variable(1)
                received: dict = {}
                notified: set = set()

                def logic(data, rounds, output, notificator):
                    for ref, batch in rounds:
                        if ref.time in notified:
                            log.append(("late", ref.time, batch))
                        received[ref.time] = received.get(ref.time, 0) + len(batch)
                    for cap in notificator:
                        notified.add(cap.time)
                        log.append(("round", cap.time.inner, received.pop(cap.time, 0)))
                        if cap.time.inner < 3:
                            output.session(cap).give(worker.index)
                            notificator.notify_at(cap.delayed(Product(0, cap.time.inner + 1)))

                out = stream.enter(inner).binary_notify(
                    feedback, Pipeline, Pipeline, "Rounds", logic, notify_at=[Product(0, 0)]
                )
                out.broadcast().connect_loop(loop)
                return out.leave()

            return handle, scope.iterative(body).probe()

        handle, probe = worker.dataflow(build)
        handle.close()
        worker.step_while(lambda: not probe.done())
        return log

    return execute(main, workers=workers)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_every_round_sees_one_record_from_each_worker_and_nothing_late(workers):
    for log in _rounds(workers):
        assert log == [("round", 0, 0)] + [("round", r, workers) for r in (1, 2, 3)]


def received_where(scope, numbers):
    """Each broadcast record, tagged with the worker that received it."""
    return numbers.broadcast().map(lambda record: (scope.index, record))


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_broadcast_delivers_every_record_to_every_worker(workers):
    result = run_dataflow(received_where, [list(range(10))], workers=workers)
    assert_outputs(result, {0: [(worker, record) for worker in range(workers) for record in range(10)]})
