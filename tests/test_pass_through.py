"""A nested scope whose input is wired straight to its output (``enter(inner).leave()``).

Regression: the scope summarized that path as missing, so its parent let a
probe downstream declare times complete while their records were still on the
way through the scope.
"""

import pytest

from runtime import execute


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("nesting", ["region", "iterative"])
def test_records_never_arrive_after_the_probe_passed_their_time(workers, nesting):
    def main(worker):
        late = []
        arrived = []

        def build(scope):
            handle, stream = scope.new_input()

            def body(inner):
                return stream.enter(inner).leave()

            passed = scope.region(body) if nesting == "region" else scope.iterative(body)
            probe_box = []

            def check(time, batch):
                if probe_box and not probe_box[0].less_equal(time):
                    late.append((time, list(batch)))
                arrived.extend(batch)

            probe = passed.exchange(lambda x: x).inspect_batch(check).probe()
            probe_box.append(probe)
            return handle, probe

        handle, probe = worker.dataflow(build)
        for epoch in range(5):
            handle.send_batch(range(epoch * 10, epoch * 10 + 10))
            handle.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(handle.time))
        handle.close()
        worker.step_while(lambda: not probe.done())
        return late, sorted(arrived)

    results = execute(main, workers=workers)
    assert all(late == [] for late, _ in results)
    everything = sorted(x for _, arrived in results for x in arrived)
    assert everything == sorted(list(range(50)) * workers)
