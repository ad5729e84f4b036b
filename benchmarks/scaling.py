"""Scaling benchmarks: timely's ``shape_scaling`` shapes, and a loop with an exchange inside.

Run by ``benchmarks/run.py`` (workloads ``loop`` and ``shape``); runnable alone too:
``python benchmarks/scaling.py shape operator 10000`` prints one JSON line.

* **Shapes**: an input partitioned into N streams, then (a) one operator with N inputs
  and N outputs, input ``i`` reaching only output ``i``, or (b) one region that every
  stream enters and leaves; then ``concat`` and a probe.  Two epochs of a few records
  go through.  Each size runs in a fresh interpreter, so the peak resident memory
  (``VmHWM``, see :func:`peak_memory_mb`) is that of the one dataflow; it includes the
  interpreter (about 35 MB with NumPy).  Goal: 10,000 ports in under 10 s and 500 MB, for both shapes.
* **Collatz loop with exchange**: numbers 1..limit iterate the Collatz map in an
  ``iterative`` scope, exchanged by value every round, until they reach 1.  Reported
  on 1 worker and 2 threads, with the CPU time, the average records per exchanged message
  and the steps of the busiest worker; the 2 threads run as by default (``PYTIMELY_THREAD_CORES=auto``),
  and again kept on one core (``one``) and on every CPU (``all``).  Extra runs with both
  kept on one core, instrumented (:func:`split_calls`), split the time into the operators'
  own work, progress propagation, and the rest (stepping, scheduling, hand-overs).
"""

from __future__ import annotations

import contextlib
import json
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness import (  # noqa: E402
    Log,
    Metric,
    Size,
    WrongAnswer,
    clocked_calls,
    environment,
    in_seconds,
    interleaved,
    measured,
    median,
    repetition,
)

from runtime.execute import execute  # noqa: E402
from runtime.thread_cores import CORES_VARIABLE  # noqa: E402
from scopes import INTEGER, Pipeline, ScopeBuilder, Stream, generic  # noqa: E402


def _operator_shape(scope: ScopeBuilder, parts: list[Stream]) -> list[Stream]:
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
    return generic(scope, "OpScaling", [(p, Pipeline) for p in parts], count, constructor, summary=summary)


def _region_shape(scope: ScopeBuilder, parts: list[Stream]) -> list[Stream]:
    return scope.region(lambda inner: [part.enter(inner).leave() for part in parts])


SHAPES = {"operator": _operator_shape, "region": _region_shape}


def shape_once(shape: str, count: int) -> dict[str, float]:
    """Build and run one shape with ``count`` ports in this process; seconds and peak MB."""
    build_shape = SHAPES[shape]

    def main(worker: Any) -> int:
        seen: list[Any] = []

        def build(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()
            outs = build_shape(scope, stream.partition(count, lambda x: x % count))
            probe = outs[0].concat(*outs[1:]).inspect_batch(lambda t, b: seen.extend(b)).probe()
            return handle, probe

        handle, probe = worker.dataflow(build)
        for epoch in range(2):
            handle.send_batch([epoch, count - 1])
            handle.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(handle.time))
        return len(seen)

    start = time.perf_counter()
    records = execute(main, workers=1)[0]
    seconds = time.perf_counter() - start
    if records != 4:
        raise RuntimeError(f"{shape} shape with {count} ports delivered {records} records, not 4")
    return {"seconds": seconds, "peak_mb": peak_memory_mb()}


def peak_memory_mb() -> float:
    """This process's peak resident memory in MB.

    ``VmHWM`` from ``/proc/self/status`` where there is one: it belongs to this
    program's own address space.  ``ru_maxrss`` is the fallback, but on Linux it
    survives ``execve`` and so includes the parent's resident memory at the
    ``fork`` (a benchmark parent of 350 MB made every child report at least 350 MB).
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def shape_in_child(shape: str, count: int, timeout: float = 300) -> dict[str, float] | None:
    """:func:`shape_once` in a fresh interpreter; ``None`` if it failed or ran out of time."""
    try:
        out = subprocess.run(
            [sys.executable, __file__, "shape", shape, str(count)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return None
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def collatz_worker(
    worker: Any,
    limit: int,
    count: Callable[[Any, list[int]], None],
    on_step: Callable[[int], None] | None = None,
    exchange: bool = True,
) -> None:
    """One worker of the Collatz loop over ``1..limit``: ``count(time, batch)`` sees every exchanged message.

    Every number iterates the Collatz map in an ``iterative`` scope, exchanged
    by value each round, until it reaches 1.  ``on_step(worker index)`` is called
    before each step (to count them).  Without ``exchange``, each worker keeps
    its own numbers (the loop's cost without routing or messages between workers).
    """

    def build(scope: ScopeBuilder) -> Any:
        handle, stream = scope.new_input()

        def body(inner: ScopeBuilder) -> Stream:
            loop, feedback = inner.loop_variable(1)
            running, finished = stream.enter(inner).concat(feedback).branch(lambda n: n == 1)
            stepped = running.map(lambda n: n // 2 if n % 2 == 0 else 3 * n + 1)
            if exchange:
                stepped = stepped.exchange(lambda n: n)
            stepped.inspect_batch(count).connect_loop(loop)
            return finished.leave()

        return handle, scope.iterative(body).probe()

    handle, probe = worker.dataflow(build)
    peers, index = worker.peers, worker.index
    handle.send_batch(range(index or peers, limit + 1, peers))  # the n in 1..limit with n % peers == index
    handle.close()

    def running() -> bool:
        if on_step is not None:
            on_step(worker.index)
        return not probe.done()

    worker.step_while(running)


def step_counter(workers: int) -> tuple[list[int], Callable[[int], None]]:
    """Each worker's steps, and the ``on_step`` of :func:`collatz_worker` that counts them."""
    steps = [0] * workers

    def on_step(index: int) -> None:
        steps[index] += 1

    return steps, on_step


def collatz_once(limit: int, workers: int, exchange: bool = True) -> dict[str, float]:
    """Run the Collatz loop once (without ``exchange``: each worker keeps its numbers): seconds, CPU seconds of the
    process, records per exchanged message, and steps of the busiest worker (every call of its ``step_while``
    condition)."""
    lock = threading.Lock()
    stats = [0, 0]
    steps, on_step = step_counter(workers)

    def count(t: Any, batch: list[int]) -> None:
        with lock:
            stats[0] += 1
            stats[1] += len(batch)

    cpu = time.process_time()
    start = time.perf_counter()
    execute(partial(collatz_worker, limit=limit, count=count, on_step=on_step, exchange=exchange), workers=workers)
    return {
        "seconds": time.perf_counter() - start,
        "cpu": time.process_time() - cpu,
        "per_message": stats[1] / max(stats[0], 1),
        "steps": max(steps),
    }


def split_calls() -> list[tuple[Any, str, str]]:
    """What :func:`collatz_split` times, for :func:`~harness.clocked_calls`.

    ``Operator.pull_internal_progress`` is an operator's own work: its logic and
    what it sends, routing included.  ``Subgraph._propagate`` is a scope's
    progress tracker folding counts and telling its children of frontier
    changes.  Neither call nests inside the other, so the two sums do not overlap.
    ``routing`` is the part of the operators' time spent routing records by key:
    the exchange's pusher (on 1 worker, its key check, which calls the key and
    checks its type as routing would).  ``waits`` counts a worker's waits for a wake-up: a park, or a hand-over of
    the GIL to the other thread (their time lies in the rest).
    """
    from runtime.communication.fabric import WakeGate
    from scopes.batch_keys import KeyCheckPusher
    from scopes.exchange import ExchangePusher
    from scopes.operator import Operator
    from scopes.progress.subgraph import Subgraph

    return [
        (Operator, "pull_internal_progress", "operators"),
        (Subgraph, "_propagate", "propagation"),
        (ExchangePusher, "push", "routing"),
        (KeyCheckPusher, "push", "routing"),
        (WakeGate, "wait", "waits"),
    ]


def collatz_split(limit: int, workers: int) -> dict[str, float] | None:
    """One Collatz run with :func:`split_calls` timed (threads kept on one core): seconds of wall time, operators,
    propagation, and the rest; the waits of all workers for a wake-up, and the steps of the busiest; ``None`` where
    they cannot be wrapped (a compiled build)."""
    steps, on_step = step_counter(workers)
    with thread_cores("one"), clocked_calls(split_calls()) as clock:
        start = time.perf_counter()
        main = partial(collatz_worker, limit=limit, count=lambda _time, _batch: None, on_step=on_step)
        execute(main, workers=workers)
        seconds = time.perf_counter() - start
    if clock is None:
        return None
    operators, propagation = clock.seconds("operators"), clock.seconds("propagation")
    return {
        "seconds": seconds,
        "operators": operators,
        "routing": clock.seconds("routing"),
        "propagation": propagation,
        "rest": seconds - operators - propagation,
        "waits": clock.calls("waits"),
        "steps": max(steps),
    }


def thread_cores(setting: str) -> contextlib.AbstractContextManager[None]:
    """Run the body with ``PYTIMELY_THREAD_CORES=setting`` (``auto``, ``one`` or ``all``), then restore it."""
    return environment(CORES_VARIABLE, setting)


def bench_loop(size: Size, log: Log) -> dict[str, Metric]:
    """The workload for ``run.py``: the Collatz loop on 1 worker and on 2 threads; CPU, records per message, steps.

    ``two`` is 2 threads as they run by default (``PYTIMELY_THREAD_CORES=auto``); ``two_one_core`` and
    ``two_all_cores`` are the same with the worker threads kept on one core (``one``) or on every CPU (``all``).
    ``one_local`` and ``two_local`` leave the exchange out (each worker keeps its numbers): what 2 threads cost
    beside 1 worker with no routing and no messages between them, for the goal's cause line.
    """
    limit = 300 if size.quick else 3_000
    found: dict[str, dict[str, list[float]]] = {
        name: {} for name in ("one", "two", "two_one_core", "two_all_cores", "one_local", "two_local")
    }

    def run(name: str, workers: int, setting: str, exchange: bool = True) -> float:
        with thread_cores(setting):
            result = collatz_once(limit, workers, exchange)
        for key, value in result.items():
            found[name].setdefault(key, []).append(value)
        return result["seconds"]

    forms = {"two": "auto", "two_one_core": "one", "two_all_cores": "all"}
    variants = (
        {"one": partial(run, "one", 1, "auto")}
        | {name: partial(run, name, 2, s) for name, s in forms.items()}
        | {
            "one_local": partial(run, "one_local", 1, "auto", False),
            "two_local": partial(run, "two_local", 2, "auto", False),
        }
    )
    values = interleaved(variants, size, log, "loop")
    what = {
        "one": "1 worker",
        "two": "2 threads (PYTIMELY_THREAD_CORES=auto, the default)",
        "two_one_core": "2 threads sharing one core (PYTIMELY_THREAD_CORES=one)",
        "two_all_cores": "2 threads on every CPU (PYTIMELY_THREAD_CORES=all)",
        "one_local": "1 worker, no exchange (each worker keeps its numbers)",
        "two_local": "2 threads, no exchange (each worker keeps its numbers)",
    }
    metrics = {name: in_seconds(values[name], f"{what[name]}, numbers 1 to {limit:,}") for name in variants}
    metrics["two_local_over_one_local"] = Metric(
        median(values["two_local"]) / median(values["one_local"]),
        "x",
        "2 threads ÷ 1 worker with no exchange in the loop (each worker pays the loop's cost of a round)",
    )
    for name in variants:
        metrics[f"cpu_{name}"] = in_seconds(found[name]["cpu"], f"CPU of the process, {what[name]}")
    for name in ("one", "two"):
        metrics[f"per_message_{name}"] = Metric(
            median(found[name]["per_message"]), "", f"records per exchanged message on {what[name]}"
        )
        steps = median(found[name]["steps"])
        metrics[f"steps_{name}"] = Metric(steps, "", f"steps of the busiest worker, {what[name]}")
    metrics.update(split_metrics(limit, size, log))
    return metrics


def split_metrics(limit: int, size: Size, log: Log) -> dict[str, Metric]:
    """Where the time of 1 worker and of 2 threads on one core goes (:func:`collatz_split`), medians of
    instrumented runs beside the timed ones."""
    splits: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    for _ in range(max(1, min(size.repeat, 5))):
        for workers in (1, 2):
            found = measured(partial(collatz_split, limit, workers))
            if found is None:
                return {}
            splits[workers].append(found)
    metrics = {}
    parts = {
        "operators": "in operators (their work, routing included)",
        "routing": "of that, routing by key (1 worker: the key check)",
        "propagation": "in progress propagation",
        "rest": "in the rest (steps, scheduling, hand-overs)",
    }
    for workers, label in ((1, "1 worker"), (2, "2 threads on one core")):
        log(
            f"  loop split, {label}: "
            + ", ".join(
                f"{part} {median([s[part] for s in splits[workers]]) * 1e3:.1f} ms" for part in ("seconds", *parts)
            )
        )
        for part, where in parts.items():
            key = f"{part}_{'one' if workers == 1 else 'two'}"
            values = [s[part] for s in splits[workers]]
            metrics[key] = in_seconds(values, f"{label}, {where}, instrumented")
    metrics["waits_per_step_two"] = Metric(
        median([s["waits"] / s["steps"] for s in splits[2]]),
        "",
        "2 threads on one core: waits for a wake-up (a park, or a hand-over of the GIL), both threads together, per "
        "step of the busier (2: the fewest for two workers that take turns each round), instrumented",
    )
    return metrics


def bench_shape(size: Size, log: Log) -> dict[str, Metric]:
    """The workload for ``run.py``: both shapes with N ports (100,000; 1,000 in ``--quick``), each in a fresh
    interpreter: seconds and peak resident MB."""
    count = 1_000 if size.quick else 100_000
    found: dict[str, Metric] = {}
    for shape in SHAPES:
        runs = []
        for _ in range(min(size.repeat, 3)):  # 30 s each at 100,000: probed, but not run again
            with repetition():
                runs.append(shape_in_child(shape, count))
        if any(result is None for result in runs):
            raise WrongAnswer(f"the {shape} shape with {count:,} ports failed or ran out of time")
        log(f"  shape {shape}: {[round(result['seconds'], 2) for result in runs if result]} s")
        found[shape] = in_seconds([r["seconds"] for r in runs if r], f"{shape} shape, N = {count:,}")
        peak = median([r["peak_mb"] for r in runs if r])
        found[f"{shape}_mb"] = Metric(peak, "MB", f"peak resident memory, {shape} shape, N = {count:,}")
    return found


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "shape":
        print(json.dumps(shape_once(sys.argv[2], int(sys.argv[3]))))
    elif len(sys.argv) == 4 and sys.argv[1] == "collatz":
        print(json.dumps(collatz_once(int(sys.argv[2]), int(sys.argv[3]))))
    else:
        print(__doc__)
        sys.exit(2)
