"""Python calls per epoch on the lean epoch path: input handle -> map -> probe, one worker.

The input handle checks integer times inline, the only probe of a handle shares
its input frontier with the handle, and pipeline messages go from an output to
its queue without a tee call (issue 12).  :func:`measure` counts, with
``cProfile``, the calls per epoch of the functions those savings removed or
kept, so that a change that brings a call back shows in the numbers.  These
were tests once (``tests/test_lean_input_probe.py``); counts of private
functions are a measurement, not a behaviour, so they live here.

``python benchmarks/call_counts.py [EPOCHS]`` prints each count next to the
count it had when the savings were made, and exits 1 if one grew.  Functions
the profiler cannot see (compiled by ``make compiled``) are reported as ``None``;
a function whose file was renamed since counts 0 (update :data:`EXPECTED`).
"""

from __future__ import annotations

import cProfile
import gc
import os
import pstats
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime.execute import execute  # noqa: E402
from runtime.worker import Worker  # noqa: E402
from scopes.native import compiled_modules  # noqa: E402

EXPECTED: dict[tuple[str, str], float] = {
    ("input_handle.py", "_check_open"): 0,  # the input handle validates integer times inline
    ("timestamp.py", "validate"): 0,
    ("input_handle.py", "release"): 1,  # only as the input operator's logic, not from advance_to
    ("order.py", "less_equal"): 1,  # at most: the capability's own check remains
    ("probes.py", "update"): 0,  # the probe shares its antichain with the handle: no second frontier update
    ("antichain.py", "update_iter"): 6,  # at most: five frontiers move per epoch (the first epoch one more)
    ("subgraph.py", "activate_child"): 4,  # at most: the probe wakes per pushed message and input event
    ("local_channels.py", "push"): 2,  # two pipeline edges, one message each: LocalQueue.push alone
    ("local_channels.py", "_push_all"): 0,  # no tee in between
}
"""Calls per epoch of each (file name, function) when the savings were made (files as they were then)."""

COMPILED = {"antichain.py": "scopes.progress.antichain", "subgraph.py": "scopes.progress.subgraph"}
"""Files whose module the compiled build replaces: the profiler does not see their functions then."""


def calls_by_function(epochs: int = 200) -> dict[tuple[str, str], float]:
    """Run input -> map -> probe for ``epochs`` epochs; calls per epoch keyed by (file name, function)."""

    def main(worker: Worker) -> dict[tuple[str, str], float]:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input("Ticks")
            return handle, stream.map(lambda x: x + 1).probe()

        handle, probe = worker.dataflow(build)
        profiler = cProfile.Profile()
        gc.collect()
        gc.disable()
        try:
            profiler.enable()
            for epoch in range(epochs):
                handle.send(epoch)
                handle.advance_to(epoch + 1)
                while probe.less_than(epoch + 1):
                    worker.step()
            profiler.disable()
        finally:
            gc.enable()
        handle.close()
        stats = pstats.Stats(profiler)
        result: dict[tuple[str, str], float] = {}
        for (file, _line, function), (_cc, calls, *_rest) in stats.stats.items():  # type: ignore[attr-defined]
            key = (file.rsplit("/", 1)[-1], function)
            result[key] = result.get(key, 0) + calls / epochs
        return result

    os.environ["PYTIMELY_AUDIT"] = "0"  # the calls of the path without the audit's hooks
    calls: dict[tuple[str, str], float] = execute(main, workers=1)[0]
    return calls


def measure(epochs: int = 200) -> dict[tuple[str, str], float | None]:
    """Calls per epoch of each function of :data:`EXPECTED` (``None`` where compiled, hence unseen)."""
    calls = calls_by_function(epochs)
    compiled = compiled_modules()
    return {key: None if COMPILED.get(key[0]) in compiled else calls.get(key, 0.0) for key in EXPECTED}


def main(argv: list[str]) -> int:
    """Print each function's calls per epoch beside its count when the savings were made; 1 if any grew."""
    epochs = int(argv[0]) if argv else 200
    grew = False
    print(f"{'function':<30} {'calls/epoch':>12} {'was':>6}")
    for (file, function), count in measure(epochs).items():
        shown = "compiled" if count is None else f"{count:.2f}"
        grew = grew or (count is not None and count > EXPECTED[file, function] + 0.01)
        print(f"{file + ':' + function:<30} {shown:>12} {EXPECTED[file, function]:>6g}")
    return 1 if grew else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
