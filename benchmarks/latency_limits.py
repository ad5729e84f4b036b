"""What limits the missed latency, loop and start-up goals of issue 18, measured in the same run as the goals.

``benchmarks/limits.py`` explains the missed COST (throughput) goals; this
module explains the others.  Each function measures once, in CPU time where
CPU is what is shared, and returns figures; each ``explain_*`` turns them into
Markdown lines that ``run.py`` prints beside the goal, and only when it missed.

* **Epoch latency on 2 threads** (:func:`threads_latency`).  The two workers
  share one interpreter and its GIL, so at most one of them runs Python at a
  time: the wall time per epoch is at least the *sum* of both workers' CPU per
  epoch.  Each worker's CPU per epoch is its steps per epoch times its CPU per
  step (``time.thread_time`` inside the worker's thread), so the goal needs
  ``steps × CPU per step × 2 <= goal``.  The lines give the steps, the CPU per
  step, that sum against the wall time (what is left is waiting: parked, or for
  the GIL) and the top functions of worker 0 under cProfile.
* **Epoch latency on 2 processes** (:func:`processes_latency`).  Each process
  has its own interpreter, so the wall time per epoch is at least the CPU of the
  critical path: one process's worker, then the frame to the other process, its
  reader thread, its worker.  The lines split each process's CPU per epoch into
  its worker thread (``time.thread_time``) and the rest (the fabric's reader and
  heartbeat threads: process CPU less the worker's), and count per epoch the
  frames sent (calls of the mesh's send methods) and the context switches of all
  the process's threads (``/proc/self/task/*/status``): every switch is a thread
  that slept and was woken, a few microseconds each.
* **The Collatz loop on 2 threads** (:func:`collatz_rounds`).  Every round of
  the loop is a round of progress; with 2 workers each worker sends a message
  to each worker per round (4 per round in all, instead of 1), and the
  engine's cost per message is mostly fixed, so the lines give rounds, messages
  per round, records per message, and the process's CPU per message on 1 worker
  and on 2 threads (the GIL serialises the 2 threads, so CPU is what their
  wall time is made of).
* **Start-up of a 2-process execute** (:func:`startup_timeline`).  The parent
  spawns both processes; each starts an interpreter, imports ``runtime`` and
  the worker's module, connects to the other and runs the worker.  The worker
  notes ``time.perf_counter()`` (CLOCK_MONOTONIC, the same clock in every
  process) as it begins and ends, which splits ``execute``'s wall time into
  *until both workers run* and *after the last worker ends* (shutdown and the
  results' return); a bare interpreter's start and a fresh ``import runtime``
  are measured apart, and what remains of the first part is spawning, reading
  the job and connecting.
"""

from __future__ import annotations

import contextlib
import cProfile
import dataclasses
import os
import pstats
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runtime import Worker, execute  # noqa: E402

WARMUP = 50
"""Epochs run before the timed ones (as ``latency_processes.py`` does)."""


def plus_one(x: int) -> int:
    """The map of the latency dataflow."""
    return x + 1


def _switches() -> tuple[int, int]:
    """(this thread's context switches, all this process's threads' context switches) so far; (0, 0) if unknown."""
    mine = every = 0
    try:
        own = threading.get_native_id()
        for task in os.listdir("/proc/self/task"):
            count = 0
            with open(f"/proc/self/task/{task}/status") as status:
                for line in status:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        count += int(line.split()[1])
            every += count
            if int(task) == own:
                mine = count
    except (OSError, ValueError):
        return 0, 0
    return mine, every


def _top(profiler: cProfile.Profile, epochs: int, top: int) -> list[list[Any]]:
    """The ``top`` functions by own time: [where, calls per epoch, own µs per epoch]."""
    raw = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    entries = sorted(raw.items(), key=lambda item: item[1][2], reverse=True)
    rows: list[list[Any]] = []
    for (file, line, function), (_, calls, own, _, _) in entries:
        if "disable" in function and "Profiler" in function:
            continue
        where = function if file == "~" else f"{file.rsplit('/', 1)[-1]}:{line}({function})"
        rows.append([where, calls / epochs, own / epochs * 1e6])
        if len(rows) == top:
            break
    return rows


def _count_sends() -> list[int]:
    """Count the frame batches this process sends from now on, over TCP (the mesh) or shared memory (the rings)."""
    from runtime.communication.shm_transport import ShmTransport
    from runtime.communication.tcp import Mesh

    counter = [0]
    for owner, name in ((Mesh, "send"), (Mesh, "send_pieces"), (ShmTransport, "send")):
        original = getattr(owner, name)

        def counted(self: Any, *args: Any, _original: Any = original) -> Any:
            counter[0] += 1
            return _original(self, *args)

        setattr(owner, name, counted)
    return counter


def latency_worker(worker: Worker, epochs: int, top: int, count_sends: bool) -> dict[str, Any]:
    """Input -> map -> probe one epoch at a time; this worker's figures over the ``epochs`` timed epochs.

    With ``top`` the timed epochs run under cProfile (worker 0 only), and the
    figures are the profiled run's; ``count_sends`` wraps the mesh's send
    methods (processes only) to count them.
    """
    sends = _count_sends() if count_sends else [0]

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Ticks")
        return handle, stream.map(plus_one).probe()

    handle, probe = worker.dataflow(build, name="epoch latency")
    profiler = cProfile.Profile() if top and worker.index == 0 else None
    steps = sent = 0
    wall = cpu = thread = 0.0
    switches = (0, 0)
    for epoch in range(WARMUP + epochs):
        if epoch == WARMUP:
            steps, sent, switches = 0, sends[0], _switches()
            wall, cpu, thread = time.perf_counter(), time.process_time(), time.thread_time()
            if profiler is not None:
                profiler.enable()
        handle.send(epoch)
        handle.advance_to(epoch + 1)
        while probe.less_than(epoch + 1):
            worker.step_or_park(0.01)
            steps += 1
    if profiler is not None:
        profiler.disable()
    end, cpu, thread = time.perf_counter(), time.process_time() - cpu, time.thread_time() - thread
    mine, every = _switches()
    return {
        "start": wall,
        "end": end,
        "steps": steps / epochs,
        "thread_cpu": thread / epochs,
        "process_cpu": cpu / epochs,
        "sends": (sends[0] - sent) / epochs,
        "switches_thread": (mine - switches[0]) / epochs,
        "switches_process": (every - switches[1]) / epochs,
        "profile": _top(profiler, epochs, top) if profiler is not None else [],
    }


@dataclass(frozen=True)
class Latency:
    """One run of the latency dataflow on 2 workers (threads or processes): per-epoch figures, seconds."""

    wall: float
    """Wall time per epoch, from the first worker's start to the last one's end."""
    workers: list[dict[str, Any]]
    """Each worker's :func:`latency_worker` figures."""
    profile: list[list[Any]] = field(default_factory=list)
    """Worker 0's top functions under cProfile (a separate, untimed run)."""
    single: dict[str, Any] | None = None
    """The same dataflow on 1 worker, run just before (:func:`latency_worker`'s figures), for comparison."""
    pinned: Latency | None = None
    """The same 2 threads with every thread of the run on one CPU (``None`` where that cannot be arranged)."""


def _latency(epochs: int, workers: int, processes: int, top: int) -> Latency:
    run = partial(latency_worker, epochs=epochs, top=0, count_sends=processes > 1)
    results = execute(run, workers=workers, processes=processes)
    wall = (max(r["end"] for r in results) - min(r["start"] for r in results)) / epochs
    profile: list[list[Any]] = []
    if top:
        profiled = partial(latency_worker, epochs=epochs, top=top, count_sends=False)
        profile = execute(profiled, workers=workers, processes=processes)[0]["profile"]
    return Latency(wall, results, profile)


@contextlib.contextmanager
def one_cpu() -> Iterator[bool]:
    """Run the threads started inside on one CPU (they inherit the calling thread's affinity); False if not possible.

    ``os.sched_setaffinity(0, ...)`` sets the calling thread's affinity on
    Linux, and the threads it starts inherit it; it is restored on the way out.
    """
    getter = getattr(os, "sched_getaffinity", None)
    setter = getattr(os, "sched_setaffinity", None)
    if getter is None or setter is None or len(getter(0)) < 2:
        yield False
        return
    before = getter(0)
    setter(0, {min(before)})
    try:
        yield True
    finally:
        setter(0, before)


def threads_latency(epochs: int, top: int = 8) -> Latency:
    """The latency dataflow on 2 threads of this process, a profile of worker 0, 1 worker for comparison,
    and the 2 threads again on one CPU.

    The 1-worker run comes just before, so that both meet the same load on a
    shared machine.  The run on one CPU shows what handing the GIL from one CPU
    to another costs: the waiting thread is woken on the other CPU, and the
    engine's state moves between the CPUs' caches at every hand-over.
    """
    single = _latency(epochs, 1, 1, 0).workers[0]
    measured = _latency(epochs, 2, 1, top)
    pinned = None
    with one_cpu() as pinned_down:
        if pinned_down:
            pinned = _latency(epochs, 2, 1, 0)
    return dataclasses.replace(measured, single=single, pinned=pinned)


def processes_latency(epochs: int, top: int = 8) -> Latency:
    """The latency dataflow on 2 processes × 1 worker, and a profile of worker 0."""
    return _latency(epochs, 1, 2, top)


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs"


def _profile_table(title: str, rows: list[list[Any]]) -> list[str]:
    if not rows:
        return []
    lines = [
        "",
        f"{title} (cProfile, one untimed run; top {len(rows)} by own time, per epoch; "
        "own time is wall-clock, so it includes waiting for the GIL):",
        "",
        "| function | calls per epoch | own µs per epoch |",
        "|---|---:|---:|",
    ]
    lines += [f"| `{where}` | {calls:.2f} | {own:.2f} |" for where, calls, own in rows]
    return lines


def explain_threads(measured: Latency, goal: float) -> list[str]:
    """Markdown: why 2 threads take ``measured.wall`` per epoch against ``goal`` seconds."""
    steps = [w["steps"] for w in measured.workers]
    cpu = [w["thread_cpu"] for w in measured.workers]
    per_step = [c / s if s else 0.0 for c, s in zip(cpu, steps, strict=True)]
    serial = sum(cpu)
    lines = [
        f"- **What limits 2 threads** (`benchmarks/latency_limits.py`, measured in this run over the same "
        f"dataflow): each worker takes {' and '.join(f'{s:.2f}' for s in steps)} steps per epoch at "
        f"{' and '.join(_us(p) for p in per_step)} of CPU per step (its own thread's time), "
        f"{' + '.join(_us(c) for c in cpu)} = {_us(serial)} of CPU per epoch. Under the GIL one worker runs at "
        f"a time, so an epoch takes at least that sum: {serial / goal:.2f}× the goal of {_us(goal)} before any "
        f"waiting. The wall time was {_us(measured.wall)} per epoch, "
        + (
            f"{_us(measured.wall - serial)} of it neither worker running (parked, handing over the GIL, or the "
            "machine running another program)."
            if measured.wall > serial
            else "no more than the CPU."
        ),
    ]
    need = goal / 2 / max(min(steps), 1.0)
    lines.append(
        f"  To meet the goal, each worker's CPU per epoch must fit in {_us(goal / 2)}: at "
        f"{min(steps):.2f} steps per epoch that is {_us(need)} per step, against {_us(min(per_step))} measured."
    )
    single = measured.single
    if single is not None and single["steps"] > 0:
        alone = single["thread_cpu"] / single["steps"]
        lines.append(
            f"  1 worker, run just before: {single['steps']:.2f} steps per epoch at {_us(alone)} of CPU per step, "
            f"{_us(single['thread_cpu'])} per epoch. On 2 threads a step costs {min(per_step) / alone:.2f}× as much "
            f"and an epoch takes {sum(steps) / single['steps']:.2f}× as many steps in all."
        )
    pinned = measured.pinned
    if pinned is not None:
        pinned_steps = sum(w["steps"] for w in pinned.workers)
        pinned_cpu = sum(w["thread_cpu"] for w in pinned.workers)
        pinned_step = pinned_cpu / max(pinned_steps, 1e-12)
        dearer = min(per_step) / max(pinned_step, 1e-12)
        lines.append(
            f"  The same 2 threads with the process on one CPU: {_us(pinned.wall)} per epoch "
            f"({pinned.wall / max(measured.wall, 1e-12):.2f}× the time on 2 CPUs), {_us(pinned_cpu)} of CPU in "
            f"{pinned_steps:.2f} steps, {_us(pinned_step)} per step. "
            + (
                f"A step on 2 CPUs costs {dearer:.2f}× as much: the difference is the GIL changing CPU (the waiting "
                "thread is woken on the other CPU, and the engine's state moves between the CPUs' caches)."
                if dearer > 1.2
                else f"A step on 2 CPUs costs {dearer:.2f}× as much: in this run the GIL's changing CPU added little."
            )
        )
    return lines + _profile_table("Profile of worker 0 of 2 threads", measured.profile)


def explain_processes(measured: Latency, goal: float, one_worker_cpu: float | None = None) -> list[str]:
    """Markdown: why 2 processes take ``measured.wall`` per epoch against ``goal`` seconds."""
    parts = []
    for index, w in enumerate(measured.workers):
        other = max(w["process_cpu"] - w["thread_cpu"], 0.0)
        parts.append(
            f"process {index}: {_us(w['process_cpu'])} ({_us(w['thread_cpu'])} in the worker's thread, "
            f"{_us(other)} in its other threads), {w['steps']:.2f} steps, {w['sends']:.2f} sends to the mesh, "
            f"{w['switches_process']:.1f} context switches ({w['switches_thread']:.1f} of the worker's thread)"
        )
    busiest = max(w["process_cpu"] for w in measured.workers)
    worker_cpu = max(w["thread_cpu"] for w in measured.workers)
    lines = [
        "- **What limits 2 processes** (`benchmarks/latency_limits.py`, measured in this run): per epoch, "
        + "; ".join(parts)
        + f". The wall time was {_us(measured.wall)} per epoch. "
        + (f"1 worker's process spends {_us(one_worker_cpu)} of CPU per epoch. " if one_worker_cpu is not None else "")
        + f"The busiest worker thread alone needs {_us(worker_cpu)} per epoch, {worker_cpu / goal:.2f}× the goal of "
        f"{_us(goal)}, and its whole process {_us(busiest)} ({busiest / goal:.2f}×). What the wall time holds "
        f"beyond the busiest worker's CPU ({_us(max(measured.wall - worker_cpu, 0.0))}) is that worker waiting: "
        "for the other process's worker, and for the frames between them (each a send, a reader thread woken, "
        "a worker woken).",
    ]
    return lines + _profile_table("Profile of worker 0 of 2 processes", measured.profile)


# ---------------------------------------------------------------------------- the Collatz loop


@dataclass(frozen=True)
class Loop:
    """One run of the Collatz loop: its time and how its exchange was used."""

    workers: int
    wall: float
    cpu: float
    """The process's CPU seconds (every worker thread's) over the run."""
    rounds: int
    messages: int
    records: int
    steps: float
    """Steps per worker over the run (their mean)."""


def collatz_rounds(limit: int, workers: int) -> Loop:
    """``scaling.collatz_once``'s dataflow, counting the exchanged messages, their records, rounds and steps."""
    import scaling

    lock = threading.Lock()
    messages = [0, 0]
    rounds: set[Any] = set()
    steps = [0] * workers

    def count(t: Any, batch: list[int]) -> None:
        with lock:
            messages[0] += 1
            messages[1] += len(batch)
            rounds.add(t)

    def on_step(index: int) -> None:
        steps[index] += 1

    wall, cpu = time.perf_counter(), time.process_time()
    execute(partial(scaling.collatz_worker, limit=limit, count=count, on_step=on_step), workers=workers)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return Loop(workers, wall, cpu, len(rounds), messages[0], messages[1], sum(steps) / workers)


def explain_loop(ones: list[Loop], twos: list[Loop], goal: float, pinned: list[Loop] | None = None) -> list[str]:
    """Markdown: why the loop on 2 threads takes more than ``goal`` times 1 worker's time.

    ``ones`` and ``twos`` are runs of :func:`collatz_rounds` on 1 worker and 2
    threads; the figures are those of each setting's run of median CPU, with
    the range of records per message over the runs (it varies with how the
    threads interleave).  ``pinned`` are runs on 2 threads with the process on
    one CPU (see :func:`one_cpu`).
    """

    def median_run(loops: list[Loop]) -> Loop:
        return sorted(loops, key=lambda loop: loop.cpu)[len(loops) // 2]

    def figures(loop: Loop, loops: list[Loop]) -> str:
        spread = [run.records / max(run.messages, 1) for run in loops]
        return (
            f"{loop.rounds} rounds, {loop.messages / max(loop.rounds, 1):.1f} messages per round, "
            f"{loop.records / max(loop.messages, 1):.1f} records per message ({min(spread):.1f}–{max(spread):.1f} "
            f"over {len(loops)} runs), {loop.steps:.0f} steps per worker, {loop.cpu * 1e3:.1f} ms of CPU "
            f"({loop.cpu / max(loop.messages, 1) * 1e6:.1f} µs per message)"
        )

    one, two = median_run(ones), median_run(twos)
    lines = [
        "- **What limits the loop on 2 threads** (`benchmarks/latency_limits.py`, more runs of each in this "
        f"run, CPU of the whole process): 1 worker: {figures(one, ones)}; 2 threads: {figures(two, twos)}. The 2 "
        f"threads used {two.cpu / max(one.cpu, 1e-9):.2f}× 1 worker's CPU (their wall time "
        f"{two.wall / max(one.wall, 1e-9):.2f}× 1 worker's), and under the GIL that CPU is spent one thread at a "
        "time, so the time ratio cannot fall much below the CPU ratio. The goal of "
        f"{goal:g}× needs the 2 threads' CPU under {goal * one.cpu * 1e3:.1f} ms.",
    ]
    one_steps, two_steps = one.steps * one.workers, two.steps * two.workers
    if one_steps and two_steps:
        lines.append(
            f"  In all, 1 worker took {one_steps:.0f} steps at {one.cpu / one_steps * 1e6:.0f} µs of CPU each; the 2 "
            f"threads {two_steps:.0f} steps ({two_steps / one_steps:.2f}×) at {two.cpu / two_steps * 1e6:.0f} µs "
            f"each, and sent {two.messages} messages against {one.messages} "
            f"({two.messages / max(one.messages, 1):.2f}×) with the same records."
        )
    if pinned:
        on_one = median_run(pinned)
        lines.append(
            f"  The same 2 threads with the process on one CPU: {on_one.wall / max(one.wall, 1e-9):.2f}× 1 worker's "
            f"time, {on_one.cpu * 1e3:.1f} ms of CPU ({on_one.cpu / max(one.cpu, 1e-9):.2f}× 1 worker's), "
            f"{on_one.messages} messages, {on_one.records / max(on_one.messages, 1):.1f} records per message: "
            "the difference from the runs on 2 CPUs is what running the 2 threads on different CPUs cost here."
        )
    return lines


# ---------------------------------------------------------------------------- start-up


def timeline_worker(worker: Worker) -> list[float]:
    """A worker that does nothing but note when it began: [perf_counter at its start, process CPU until then]."""
    return [time.perf_counter(), time.process_time()]


@dataclass(frozen=True)
class Startup:
    """Where a 2-process ``execute`` of an idle worker spends its wall time, seconds."""

    whole: float
    first_worker: float
    """From calling ``execute`` to the earlier of the 2 workers' start."""
    until_workers: float
    """From calling ``execute`` to the later of the 2 workers' start."""
    after_workers: float
    """From the later worker's start to ``execute``'s return (shutdown, results)."""
    child_cpu: float
    """The busier child's CPU until its worker began (interpreter, imports, connecting)."""
    bare: float
    """A bare interpreter's start and exit (``python -c pass``)."""
    imported: float
    """``import runtime`` in a fresh interpreter, beyond the bare start."""
    modules: int = 0
    """How many modules ``import runtime`` imports (``-X importtime``)."""
    imports: list[tuple[str, float]] = field(default_factory=list)
    """The slowest of them by own time: (name, seconds)."""


def _python(code: str) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120, capture_output=True)
    return time.perf_counter() - began


def runtime_imports(top: int = 5) -> tuple[int, list[tuple[str, float]]]:
    """What ``import runtime`` imports: how many modules, and the ``top`` by own time (name, seconds).

    From ``python -X importtime -c "import runtime"`` in a fresh interpreter;
    a module's own time leaves out the modules it imported.
    """
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import runtime"],
        cwd=ROOT,
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    pending: list[tuple[str, float]] = []
    modules: list[tuple[str, float]] = []
    for line in done.stderr.splitlines():
        fields = line.split("|")
        own = fields[0].rsplit(":", 1)[-1].strip()
        if len(fields) != 3 or not own.isdigit():
            continue
        name = fields[2].rstrip()
        pending.append((name.strip(), int(own) / 1e6))
        if len(name) - len(name.lstrip()) == 1:  # a module imported at the top level: runtime, or site's
            if name.strip() == "runtime":
                modules = pending
            pending = []
    return len(modules), sorted(modules, key=lambda item: -item[1])[:top]


def startup_timeline(processes: int = 2, rounds: int = 3) -> Startup:
    """The median of ``rounds`` timelines of ``execute(timeline_worker, processes=processes)``."""
    import statistics

    execute(timeline_worker, workers=1, processes=processes)  # untimed: the page cache holds the modules
    runs = []
    for _ in range(rounds):
        began = time.perf_counter()
        results = execute(timeline_worker, workers=1, processes=processes)
        ended = time.perf_counter()
        first = min(start for start, _ in results)
        last = max(start for start, _ in results)
        bare = _python("pass")
        imported = _python("import runtime") - bare
        cpu = max(cpu for _, cpu in results)
        runs.append((ended - began, first - began, last - began, ended - last, cpu, bare, imported))
    whole, first, until, after, cpu, bare, imported = (statistics.median(run[i] for run in runs) for i in range(7))
    modules, slowest = runtime_imports()
    return Startup(whole, first, until, after, cpu, bare, imported, modules, slowest)


def explain_startup(measured: Startup, goal: float) -> list[str]:
    """Markdown: where a 2-process ``execute`` spends its time against ``goal`` seconds."""
    rest = measured.first_worker - measured.bare - measured.imported

    def ms(seconds: float) -> str:
        return f"{seconds * 1e3:.1f} ms"

    slowest = ", ".join(f"`{name}` {ms(seconds)}" for name, seconds in measured.imports)
    return [
        f"- **Where the start-up goes** (`benchmarks/latency_limits.py`, medians of a few more runs in this run): "
        f"`execute` took {ms(measured.whole)}, {measured.whole / goal:.2f}× the goal of {goal:g} s: "
        f"{ms(measured.first_worker)} until the first worker ran, {ms(measured.until_workers)} until both did, and "
        f"{ms(measured.after_workers)} after that (shutting down and returning the results). A bare interpreter "
        f"starts and exits in {ms(measured.bare)} and `import runtime` adds {ms(measured.imported)} in a fresh one; "
        f"the {ms(rest)} left before the first worker is spawning, reading the job, importing the worker's module, "
        "connecting, and what the two children's imports lose to running side by side (the fresh import is measured "
        f"alone). A child spent {ms(measured.child_cpu)} of CPU before its "
        f"worker began ({measured.child_cpu / max(measured.first_worker, 1e-9):.0%} of the time until the first "
        "worker ran)."
        + (
            f" `import runtime` imports {measured.modules} modules; the slowest by own time (`-X importtime`): "
            f"{slowest}."
            if slowest
            else ""
        )
    ]


# ---------------------------------------------------------------------------- the record pipeline


def explain_pipeline(records: int, loop: float, builtins: float, record: float, goal: float) -> list[str]:
    """Markdown: the record-wise pipeline's time per record against the loop's, and what the goal leaves the engine.

    ``loop``, ``builtins`` and ``record`` are the median seconds of the loop, the
    same functions through builtin ``map``/``filter``, and the record-wise
    pipeline; ``goal`` is the speed-up over the loop the pipeline must reach.
    """
    per = 1e9 / records
    allowed = loop / goal
    engine = record - builtins
    left = allowed - builtins
    share = (
        f"which leaves the engine {left * per:.0f} ns per record: it must shed {(record - allowed) * per:.0f} ns "
        f"({(record - allowed) / max(engine, 1e-12):.0%} of its own cost)"
        if left > 0
        else f"which the function calls alone exceed by {abs(left) * per:.0f} ns: no engine cost would meet it here"
    )
    return [
        f"- **What limits the record-wise pipeline** (medians of this run): the loop takes {loop * per:.0f} ns per "
        f"record; the same functions through builtin `map`/`filter` {builtins * per:.0f} ns; the record-wise "
        f"pipeline {record * per:.0f} ns, so the engine adds {engine * per:.0f} ns per record over the function "
        f"calls. The goal of {goal:g}× the loop allows {allowed * per:.0f} ns per record, {share}. The profile below "
        "shows where the time goes."
    ]


if __name__ == "__main__":
    print("\n".join(explain_threads(threads_latency(2000), 30e-6)))
    print("\n".join(explain_processes(processes_latency(2000), 60e-6)))
    print("\n".join(explain_loop([collatz_rounds(3000, 1)] * 3, [collatz_rounds(3000, 2) for _ in range(3)], 1.5)))
    print("\n".join(explain_startup(startup_timeline(), 0.2)))
