"""How fast the host lets this machine's CPUs run right now: one fixed loop, timed on every CPU at once.

Why the bench needs it.  On a virtual machine the host's other tenants share the
physical cores under the vCPUs, and neither the guest's load average nor its
steal time shows it.  Measured on the bench machine (2 vCPUs under KVM, load
under 0.5): the probe's loop (:data:`LOOP` dictionary stores) took about 5 ms
in some moments and 9 to 10 ms in others, on either vCPU, whether the other vCPU
was busy or idle; the state changed within a second or lasted for minutes.  A 2-processes-against-1
ratio measured while one vCPU runs at 0.55 of its speed tells nothing about
pytimely.

What the harness does with it.  :class:`CpuSpeed` keeps one idle process pinned
to each usable CPU.  A *probe* runs :data:`LOOP` iterations on all of them at
once and returns each one's seconds.  Before each repetition
(:meth:`CpuSpeed.settle`) the harness probes until every CPU is within
:data:`FULL_SPEED` of the fastest probe of the run, waiting at most
:data:`WAIT_PER_REPETITION` seconds each time and :data:`WAIT_PER_RUN` in all;
after it (:meth:`CpuSpeed.after`) it probes once more.  A repetition that did not
begin and end at full speed is run again (:meth:`CpuSpeed.run_again`), at most
:data:`RETRIES_PER_REPETITION` times and :data:`RETRIES_PER_RUN` in all, and only
its last run is kept.  Which runs are kept depends on the probes alone, never on
the times measured, and every variant is treated alike.  The report says how many
kept repetitions began and ended at full speed, and a run in which too few did is
marked noisy, like a run with a high load.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import statistics
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

LOOP = 100_000
"""Iterations of the probe's loop: about 5 ms on a bench vCPU at full speed."""

FULL_SPEED = 1.2
"""A CPU runs at full speed when its probe takes at most this many times the fastest probe of the run.  The bench
machine's two states are 1.7-1.9x apart, its probes at one state within 1.1x of each other."""

WAIT_PER_REPETITION = 5.0
"""Seconds :meth:`CpuSpeed.settle` waits at most for full speed before one repetition."""

WAIT_PER_RUN = 180.0
"""Seconds all the waits of one run may take together; then repetitions start without waiting."""

PAUSE = 0.1
"""Seconds between two probes while waiting."""

ANSWER_LIMIT = 10.0
"""Seconds a probe process may take to answer before probing stops (the run goes on, unprobed)."""

RETRIES_PER_REPETITION = 2
"""Times one repetition is run again at most when the probes show the CPUs slowed during it."""

RETRIES_PER_RUN = 100
"""Repetitions run again at most in one run; then every repetition is kept as it ran."""

CLEAN_SHARE = 0.8
"""A run in which fewer than this share of the repetitions began and ended at full speed is marked noisy."""

FIRST_PROBES = 10
"""Probes taken at the start, to find the fastest before the first repetition."""


def loop_seconds(iterations: int = LOOP) -> float:
    """Wall seconds of the probe's loop (dictionary stores: the interpreter's everyday work) on this thread."""
    began = time.perf_counter()
    table: dict[int, int] = {}
    for number in range(iterations):
        table[number & 4095] = number
    return time.perf_counter() - began


def _serve(cpu: int, link: Connection) -> None:
    """A probe process: pinned to ``cpu``, it times the loop whenever asked, until told ``None`` or orphaned."""
    with contextlib.suppress(OSError):  # the CPU went away: probe where the kernel puts us
        os.sched_setaffinity(0, {cpu})
    while True:
        try:
            if link.recv() is None:
                return
        except (EOFError, OSError):
            return
        link.send(loop_seconds())


@dataclass
class Repetition:
    """One repetition's probes: the slowest CPU's seconds before it began and after it ended."""

    before: float
    after: float = float("nan")
    kept: bool = True
    """Whether its time was kept (``False``: it was run again)."""


@dataclass
class CpuSpeed:
    """One pinned probe process per usable CPU, the probes of one run, and the waits for full speed."""

    cpus: list[int] = field(default_factory=lambda: sorted(os.sched_getaffinity(0)))
    probes: list[tuple[float, ...]] = field(default_factory=list)
    repetitions: list[Repetition] = field(default_factory=list)
    wait_per_run: float = WAIT_PER_RUN
    """Seconds all waits may take together (0: probe and report, never wait; what ``--quick`` does)."""
    retries_per_run: int = field(default_factory=lambda: RETRIES_PER_RUN)
    """Repetitions that may be run again in all (0: none; what ``--quick`` does)."""
    waited: float = 0.0
    retried: int = 0
    """Repetitions run again because the CPUs slowed during them."""
    broken: str = ""
    """Why probing stopped (a probe process died or stopped answering), or empty."""
    _links: list[Connection] = field(default_factory=list)
    _processes: list[Any] = field(default_factory=list)

    def start(self) -> CpuSpeed:
        """Start the probe processes and take :data:`FIRST_PROBES` probes; return ``self``."""
        context = multiprocessing.get_context("spawn")
        for cpu in self.cpus:
            ours, theirs = context.Pipe()
            process = context.Process(target=_serve, args=(cpu, theirs), name=f"cpu-speed-{cpu}", daemon=True)
            process.start()
            theirs.close()
            self._links.append(ours)
            self._processes.append(process)
        for _ in range(FIRST_PROBES):
            self.probe()
            time.sleep(PAUSE)
        return self

    def close(self) -> None:
        """Stop the probe processes (killed if they do not end within a second)."""
        for link in self._links:
            with contextlib.suppress(OSError):  # a probe process that died takes nothing
                link.send(None)
        for process in self._processes:
            process.join(1.0)
            if process.is_alive():
                process.kill()
                process.join()
        for link in self._links:
            link.close()
        self._links, self._processes = [], []

    def __enter__(self) -> CpuSpeed:
        """Started."""
        return self.start()

    def __exit__(self, *exc: object) -> None:
        """Closed."""
        self.close()

    # ------------------------------------------------------------------------ probing

    def probe(self) -> tuple[float, ...] | None:
        """Seconds of the loop on every CPU at once (``None`` once probing has stopped); kept in :attr:`probes`."""
        if self.broken or not self._links:
            return None
        try:
            for link in self._links:
                link.send(True)
            found = []
            for cpu, link in zip(self.cpus, self._links, strict=True):
                if not link.poll(ANSWER_LIMIT):
                    raise TimeoutError(f"the probe process of CPU {cpu} did not answer within {ANSWER_LIMIT:g} s")
                found.append(float(link.recv()))
        except (OSError, EOFError, TimeoutError) as error:
            self.broken = f"probing stopped: {error or type(error).__name__}"
            return None
        sample = tuple(found)
        self.probes.append(sample)
        return sample

    @property
    def best(self) -> float:
        """The fastest probe of the run on any CPU (seconds), ``nan`` before the first."""
        return min((min(sample) for sample in self.probes), default=float("nan"))

    def slowdown(self, sample: tuple[float, ...]) -> float:
        """The slowest CPU of ``sample`` against the run's fastest probe (1: full speed)."""
        return max(sample) / self.best

    def settle(self) -> None:
        """Before a repetition: probe until every CPU runs at full speed, within the waits' budgets."""
        sample = self.probe()
        if sample is None:
            return
        began = time.monotonic()
        limit = min(WAIT_PER_REPETITION, max(self.wait_per_run - self.waited, 0.0))
        while self.slowdown(sample) > FULL_SPEED and time.monotonic() - began < limit:
            time.sleep(PAUSE)
            found = self.probe()
            if found is None:
                break
            sample = found
        self.waited += time.monotonic() - began
        self.repetitions.append(Repetition(max(sample)))

    def after(self) -> None:
        """After a repetition: one probe, the repetition's end."""
        sample = self.probe()
        if sample is not None and self.repetitions:
            self.repetitions[-1].after = max(sample)

    def at_full_speed(self, repetition: Repetition) -> bool:
        """Whether every CPU was within :data:`FULL_SPEED` of the best when ``repetition`` began and ended."""
        limit = FULL_SPEED * self.best
        return repetition.before <= limit and repetition.after <= limit

    def run_again(self, attempt: int) -> bool:
        """After attempt ``attempt`` (0: the first) of a repetition: whether to drop its time and run it again.

        Yes when the probes show the CPUs slowed during it and the budgets
        (:data:`RETRIES_PER_REPETITION`, :data:`RETRIES_PER_RUN`) allow; the
        dropped attempt is kept in :attr:`repetitions`, marked not kept.
        """
        if not self.repetitions or self.broken:
            return False
        last = self.repetitions[-1]
        if self.at_full_speed(last) or attempt >= RETRIES_PER_REPETITION or self.retried >= self.retries_per_run:
            return False
        last.kept = False
        self.retried += 1
        return True

    # ------------------------------------------------------------------------ the report

    def kept(self) -> list[Repetition]:
        """The repetitions whose times were kept (the last attempt of each)."""
        return [repetition for repetition in self.repetitions if repetition.kept]

    def clean(self) -> int:
        """Kept repetitions whose probes before and after were both at full speed (judged against the run's best)."""
        return sum(map(self.at_full_speed, self.kept()))

    @property
    def noisy(self) -> bool:
        """Whether fewer than :data:`CLEAN_SHARE` of the kept repetitions began and ended at full speed."""
        kept = len(self.kept())
        return bool(kept) and self.clean() < CLEAN_SHARE * kept

    def summary(self) -> str:
        """One line for the report: the fastest probe, the typical one, and the repetitions at full speed."""
        if not self.probes:
            return f"CPU speed: not probed{f' ({self.broken})' if self.broken else ''}"
        typical = statistics.median(max(sample) for sample in self.probes) / self.best
        line = (
            f"CPU speed (`benchmarks/cpu_speed.py`, {len(self.cpus)} CPUs probed at once): the probe's loop took "
            f"{self.best * 1e3:.1f} ms at best, the slowest CPU's median {typical:.2f}× that over {len(self.probes)} "
            f"probes; {self.clean()} of {len(self.kept())} repetitions began and ended with every CPU within "
            f"{FULL_SPEED:g}× the best (waited {self.waited:.0f} s for it in all; {self.retried} run again "
            "because the CPUs slowed during them)"
        )
        return line + (f"; {self.broken}" if self.broken else "")
