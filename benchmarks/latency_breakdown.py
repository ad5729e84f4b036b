"""Where an epoch of the latency dataflow goes on 2 processes or 2 threads: CPU per thread, and the critical path.

The dataflow is ``benchmarks/latency_processes.py``'s (input -> map -> probe,
one record per worker and epoch).  Prints, per epoch and for each process:

* the CPU of each thread (the worker, the connection's reader, the heartbeat),
  from ``/proc/self/task/<tid>/schedstat``, with its voluntary and involuntary
  context switches (Linux only);
* the worker's steps, parks, frames sent and frames received;
* with ``--timeline`` (2 processes), the medians of the critical path: from the
  start of the epoch to the send of its progress frame, the ``send`` call,
  from its return to the other process's reader handling the frame, from this
  process's reader handling the other's frame to the worker waking, and from
  then to the probe passing.  The timeline patches the fabric's methods to take
  timestamps (``time.perf_counter``, one clock for every process of a host).

    python benchmarks/latency_breakdown.py --epochs 5000
    python benchmarks/latency_breakdown.py --threads
    python benchmarks/latency_breakdown.py --timeline
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

try:  # the installed pytimely (so that another checkout's interpreter measures that checkout)
    import runtime  # noqa: F401
except ImportError:  # pragma: no cover - run from a clone without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime import Worker, execute  # noqa: E402
from runtime.communication import fabric as thread_fabric  # noqa: E402
from runtime.communication import process_fabric, tcp  # noqa: E402

WARMUP = 200
EVENTS: list[tuple[float, str]] = []
"""Timestamps taken by the patched methods (``--timeline``), in this process."""
COUNTS: Counter[str] = Counter()
"""Parks, frames sent and frames received, in this process."""


def plus_one(x: int) -> int:
    """The map of the latency dataflow."""
    return x + 1


def thread_clocks() -> dict[str, tuple[int, int, int]]:
    """For each live thread: (CPU nanoseconds, voluntary, involuntary context switches)."""
    clocks = {}
    for thread in threading.enumerate():
        tid = thread.native_id
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as file:
                nanoseconds = int(file.read().split()[0])
            with open(f"/proc/self/task/{tid}/status") as file:
                status = file.read()
        except OSError:
            continue
        voluntary = int(status.split("\nvoluntary_ctxt_switches:")[1].split()[0])
        involuntary = int(status.split("nonvoluntary_ctxt_switches:")[1].split()[0])
        clocks[f"{thread.name} ({tid})"] = (nanoseconds, voluntary, involuntary)
    return clocks


def _patch(owner: Any, name: str, before: str | None, after: str | None, count: str | None = None) -> None:
    """Wrap ``owner.name`` to count its calls and take timestamps before and after it."""
    original: Callable[..., Any] = getattr(owner, name)

    def patched(*args: Any, **kwargs: Any) -> Any:
        if count is not None:
            COUNTS[count] += 1
        if before is not None:
            EVENTS.append((time.perf_counter(), before))
        result = original(*args, **kwargs)
        if after is not None:
            EVENTS.append((time.perf_counter(), after))
        return result

    setattr(owner, name, patched)


def instrument(timeline: bool) -> None:
    """Count parks and frames; with ``timeline``, take the critical path's timestamps too (once per process)."""
    if COUNTS["instrumented"]:
        return
    COUNTS["instrumented"] = 1
    _patch(thread_fabric.WorkerSignal, "park", "park" if timeline else None, "woken" if timeline else None, "parks")
    _patch(tcp.Mesh, "send_pieces", "send" if timeline else None, "sent" if timeline else None, "sends")
    original = process_fabric.ProcessFabric.on_frame

    def on_frame(fabric: Any, process: int, header: list[Any], payload: Any) -> None:
        COUNTS["frames received"] += 1
        if timeline and header[0] == process_fabric.DATA:
            EVENTS.append((time.perf_counter(), "received"))
        original(fabric, process, header, payload)
        if timeline and header[0] == process_fabric.DATA:
            EVENTS.append((time.perf_counter(), "handed over"))

    process_fabric.ProcessFabric.on_frame = on_frame  # type: ignore[method-assign]


def latency_worker(worker: Worker, epochs: int, timeline: bool) -> dict[str, Any]:
    """Run the epochs; return this worker's figures (and its process's events)."""
    instrument(timeline)

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Ticks")
        return handle, stream.map(plus_one).probe()

    handle, probe = worker.dataflow(build, name="epoch latency")
    steps = 0
    clocks: dict[str, tuple[int, int, int]] = {}
    wall = 0.0
    for epoch in range(WARMUP + epochs):
        if epoch == WARMUP:
            EVENTS.clear()
            COUNTS.clear()
            COUNTS["instrumented"] = 1
            clocks, steps, wall = thread_clocks(), 0, time.perf_counter()
        EVENTS.append((time.perf_counter(), "epoch"))
        handle.send(epoch)
        handle.advance_to(epoch + 1)
        while probe.less_than(epoch + 1):
            worker.step_or_park(0.01)
            steps += 1
    EVENTS.append((time.perf_counter(), "epoch"))
    wall = time.perf_counter() - wall
    after = thread_clocks()
    threads = {
        name: tuple((after[name][i] - clocks[name][i]) / epochs for i in range(3)) for name in after if name in clocks
    }
    counts = {name: count / epochs for name, count in COUNTS.items() if name != "instrumented"}
    return {
        "worker": worker.index,
        "wall": wall / epochs,
        "steps": steps / epochs,
        "threads": threads,
        "counts": counts,
        "events": list(EVENTS),
    }


def critical_path(mine: list[tuple[float, str]], theirs: list[tuple[float, str]]) -> dict[str, list[float]]:
    """Per epoch of ``mine`` with one send and one frame received: the critical path's pieces, in seconds."""
    epochs = [t for t, name in mine if name == "epoch"]
    their_frames = [t for t, name in theirs if name == "received"]
    pieces: dict[str, list[float]] = {
        "epoch start -> send": [],
        "send call": [],
        "sent -> other's reader has the frame": [],
        "reader has the frame -> worker woken": [],
        "worker woken -> probe passes": [],
        "epoch": [],
    }
    for start, end in zip(epochs, epochs[1:], strict=False):
        inside: dict[str, list[float]] = {}
        for t, name in mine:
            if start <= t < end:
                inside.setdefault(name, []).append(t)
        if len(inside.get("send", ())) != 1 or len(inside.get("handed over", ())) != 1:
            continue
        sent = inside["sent"][0]
        arrived = next((t for t in their_frames if t >= sent), None)
        woken = [t for t in inside.get("woken", ()) if t >= inside["handed over"][0]]
        if arrived is None or not woken:
            continue  # the other's frame arrived before this worker parked: no wake-up on the path
        pieces["epoch start -> send"].append(inside["send"][0] - start)
        pieces["send call"].append(sent - inside["send"][0])
        pieces["sent -> other's reader has the frame"].append(arrived - sent)
        pieces["reader has the frame -> worker woken"].append(woken[0] - inside["handed over"][0])
        pieces["worker woken -> probe passes"].append(end - woken[0])
        pieces["epoch"].append(end - start)
    return pieces


def report(results: list[dict[str, Any]], timeline: bool) -> None:
    """Print each worker's figures, and the critical path of each process if ``timeline``."""
    seen: set[str] = set()  # threads of one process: every worker sees them all
    for result in results:
        counts = ", ".join(f"{name} {value:.2f}" for name, value in sorted(result["counts"].items()))
        print(
            f"worker {result['worker']}: wall {result['wall'] * 1e6:.1f} us/epoch, steps {result['steps']:.2f}; "
            f"per epoch in its process: {counts}"
        )
        for name, (nanoseconds, voluntary, involuntary) in sorted(result["threads"].items()):
            if nanoseconds > 100 and name not in seen:
                seen.add(name)
                print(
                    f"    {name:32s} CPU {nanoseconds / 1e3:7.1f} us, context switches: "
                    f"voluntary {voluntary:.2f}, involuntary {involuntary:.2f}"
                )
    if not timeline or len(results) != 2:
        return
    for mine, theirs in ((results[0], results[1]), (results[1], results[0])):
        pieces = critical_path(mine["events"], theirs["events"])
        count = len(pieces["epoch"])
        print(f"worker {mine['worker']}: critical path, medians over the {count} epochs with a wake-up on it:")
        for name, values in pieces.items():
            if values:
                print(f"    {name:40s} {statistics.median(values) * 1e6:7.1f} us")


def main() -> None:
    """Measure 2 processes (or 2 threads with ``--threads``) and print the breakdown."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=5000)
    parser.add_argument("--threads", action="store_true", help="2 worker threads in 1 process")
    parser.add_argument("--timeline", action="store_true", help="the critical path (2 processes)")
    args = parser.parse_args()
    if not sys.platform.startswith("linux"):
        sys.exit("latency_breakdown.py reads /proc: Linux only")
    workers, processes = (2, 1) if args.threads else (1, 2)
    timeline = args.timeline and not args.threads
    results = execute(
        partial(latency_worker, epochs=args.epochs, timeline=timeline), workers=workers, processes=processes
    )
    print(f"pytimely from {Path(str(sys.modules['runtime'].__file__)).parent.parent}")
    report(results, timeline)


if __name__ == "__main__":
    main()
