"""Progress batches: compacted before they are broadcast, and never mailed to their own worker."""

from __future__ import annotations

from typing import Any

from runtime import execute
from scopes import ScopeBuilder
from scopes.progcaster import Progcaster, compact


def test_compact_cancels_and_sums_within_one_batch() -> None:
    batch = [(1, 0, 1), (2, 0, 3), (1, 0, -1), (2, 0, -1), (3, 5, 0), (2, 1, 1)]
    assert compact(batch) == [(2, 0, 2), (2, 1, 1)]
    assert compact([(1, 0, 1), (1, 0, -1)]) == []
    assert compact([(4, 2, 0)]) == []
    assert compact([(4, 2, 7)]) == [(4, 2, 7)]


def test_batches_are_compacted_and_own_batches_not_mailed() -> None:
    sent: list[list[Any]] = []

    class Recording:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def push(self, time: Any, batch: list[Any]) -> None:
            sent.append(list(batch))
            self.inner.push(time, batch)

    def main(worker: Any) -> int:
        def build(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()
            return handle, stream.map(lambda x: x).exchange(lambda x: x).probe()

        handle, probe = worker.dataflow(build)
        # wrapped once connected, not by patching Progcaster.connect: the compiled build calls it natively
        progcaster: Progcaster = worker.dataflows[0].root._progcaster
        assert len(progcaster._pushers) == worker.peers - 1
        progcaster._pushers = [Recording(p) for p in progcaster._pushers]
        for epoch in range(5):
            handle.send(epoch)
            handle.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(handle.time))
        return 0

    execute(main, workers=2, stall_timeout=10)
    assert sent, "no progress batch was sent to the other worker"
    for batch in sent:
        assert batch, "an empty batch was sent"
        keys = [(loc, time) for loc, time, _ in batch]
        assert len(keys) == len(set(keys)), f"batch not compacted: {batch}"
        assert all(diff for _, _, diff in batch)


def test_single_worker_has_no_progress_channel() -> None:
    def main(worker: Any) -> None:
        def build(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()
            return handle, stream.probe()

        handle, probe = worker.dataflow(build)
        root = worker.dataflows[0].root
        assert root._progcaster._pushers == [] and root._progcaster._puller is None
        handle.send(1)
        handle.advance_to(2)
        worker.step_while(lambda: probe.less_than(2))

    execute(main, workers=1, stall_timeout=10)
