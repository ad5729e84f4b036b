"""A streaming job with checkpoints, killed and resumed by tests/test_checkpoint_kills.py.

``python checkpoint_program.py DIR [cluster flags]`` counts words per key, per
window and per timer over ``EPOCHS`` epochs, checkpointing into ``DIR/checkpoints``
and writing each worker's output of each time to ``DIR/out/worker-I/time-T.json``
(hidden, then renamed) once the dataflow has passed that time.  Run again after a
crash, it resumes from the last checkpoint every worker completed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from runtime import execute_from_args
from runtime.checkpoints import CheckpointStore
from scopes import Tumbling

EPOCHS = 120
PACE = float(os.environ.get("CHECKPOINT_PACE", "0.004"))
"""Seconds each epoch waits for its (pretend) outside data, so that a run lasts long enough to be killed."""


def words_of(epoch: int) -> list[str]:
    """The records of ``epoch``: a deterministic mix of keys."""
    return [f"w{(epoch * 7 + i * 3) % 11}" for i in range(epoch % 5 + 1)]


def dataflow(scope: Any, words: Any) -> Any:
    keyed = words.key_by(lambda w: w)
    totals = keyed.fold(int, lambda n, w: n + 1).map(lambda kv: ["total", kv[0], kv[1]])
    windows = keyed.window(Tumbling(4)).count().down.map(lambda r: ["window", r[0], r[1][0], r[2]])

    def on_record(context: Any, word: Any) -> None:
        if context.state is None:
            context.state = 0
            context.set_timer(context.time + 3)
        context.state += 1

    def on_timer(context: Any) -> None:
        context.emit(context.state)
        context.state = None

    timers = keyed.process(on_record, on_timer).map(lambda kv: ["timer", kv[0], kv[1]])
    return totals.concat(windows, timers)


def main(worker: Any) -> None:
    root = Path(sys.argv[1])
    out = root / "out" / f"worker-{worker.index}"
    out.mkdir(parents=True, exist_ok=True)
    store = CheckpointStore(root / "checkpoints", keep=3, own_outputs=True)
    pending: dict[int, list[Any]] = {}

    def build(scope: Any) -> Any:
        inp, words = scope.new_input("Words")
        results = dataflow(scope, words)
        results.inspect_batch(lambda t, batch: pending.setdefault(t, []).extend(batch))
        return inp, results.probe()

    inp, probe = worker.dataflow(build, checkpoint=store)

    def flush(before: int | None) -> None:
        for t in sorted(t for t in pending if before is None or t < before):
            hidden = out / f".time-{t}.tmp"
            hidden.write_text(json.dumps(sorted(pending.pop(t))))
            os.replace(hidden, out / f"time-{t}.json")
        if before is not None:
            store.written_before(worker.index, before)

    for epoch in range(store.resume_epoch, EPOCHS):
        if worker.index == 0:
            inp.send_batch(words_of(epoch))
        inp.advance_to(epoch + 1)
        deadline = time.monotonic() + PACE
        worker.step_while(lambda deadline=deadline: time.monotonic() < deadline)  # waiting for outside data
        flush(min(probe.frontier(), default=None))
    inp.close()
    worker.step_while(lambda: not probe.done())
    flush(None)


if __name__ == "__main__":
    execute_from_args(main, sys.argv[2:])
