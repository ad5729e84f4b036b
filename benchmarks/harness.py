"""What every workload module and ``run.py`` share: metrics, the goals file, the machine's state, the report.

A workload is a function ``bench(size: Size, log: Log) -> dict[str, Metric]`` that
measures and checks its answers (raising :class:`WrongAnswer` on a wrong one) and
returns named medians.  ``goals.toml`` says which ratios of those metrics are
judged; :func:`render` turns one run into ``BENCHMARKS.md``.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from cpu_speed import CpuSpeed

HERE = Path(__file__).resolve().parent
GOALS = HERE / "goals.toml"
NOISY_LOAD = 1.0
"""A 1-minute load average at or above this, at the start or the end, marks the run noisy."""

Log = Callable[[str], None]


class WrongAnswer(Exception):
    """A variant computed something other than the right answer: a bug, not a slow run."""


class Skip(Exception):
    """A workload that cannot run here (a baseline not installed, or left out of ``--quick``): the reason."""


class GoalsError(ValueError):
    """``goals.toml`` is malformed: names the entry and the field."""


@dataclass(frozen=True)
class Size:
    """How big a run is: ``quick`` for the smoke test, and the repetitions of every measurement."""

    quick: bool
    repeat: int


@dataclass(frozen=True)
class Metric:
    """One measured quantity: its median, unit (``s``, ``ns``, ``MB``, ``x`` or empty) and what it is."""

    value: float
    unit: str
    what: str

    def text(self) -> str:
        """The value with its unit, seconds scaled to s, ms or µs."""
        if math.isnan(self.value):
            return "not measured"
        if self.unit == "s":
            value = abs(self.value)
            scale, suffix = (1, "s") if value >= 1 else (1e3, "ms") if value >= 1e-3 else (1e6, "µs")
            return f"{self.value * scale:.3g} {suffix}" if value < 100 else f"{self.value:.0f} s"
        if self.unit == "x":
            return f"{self.value:.2f}×"
        number = f"{self.value:,.0f}" if abs(self.value) >= 1000 else f"{self.value:.3g}"
        return f"{number} {self.unit}".rstrip()


def median(values: list[float]) -> float:
    """The median of ``values``."""
    return float(statistics.median(values))


def in_seconds(values: list[float], what: str) -> Metric:
    """The median of ``values`` seconds."""
    return Metric(median(values), "s", what)


_cpu_speed: CpuSpeed | None = None


def watch_cpu_speed(speed: CpuSpeed | None) -> None:
    """Let :func:`repetition` wait for (and record) full CPU speed with ``speed``'s probes (``None``: stop)."""
    global _cpu_speed
    _cpu_speed = speed


@contextmanager
def repetition() -> Iterator[None]:
    """Around one timed repetition that cannot be run again (see :func:`measured`): first wait, within the run's
    budget, until every CPU runs at full speed, and probe again after it (see :mod:`cpu_speed`); nothing when no
    probe watches (a workload run on its own)."""
    speed = _cpu_speed
    if speed is not None:
        speed.settle()
    try:
        yield
    finally:
        if speed is not None:
            speed.after()


T = TypeVar("T")


@contextmanager
def environment(name: str, value: str) -> Iterator[None]:
    """Run the body with the environment variable ``name`` set to ``value`` (processes started in it inherit it),
    then restore it."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


def measured(run: Callable[[], T]) -> T:
    """One timed repetition, ``run()``: run at full CPU speed when the run's budget allows, and run again when the
    probes show the CPUs slowed during it (see :mod:`cpu_speed`); the last run's result.  Just ``run()`` when no
    probe watches."""
    speed = _cpu_speed
    attempt = 0
    while True:
        with repetition():
            result = run()
        if speed is None or not speed.run_again(attempt):
            return result
        attempt += 1


class CallClock:
    """Seconds spent inside the calls :func:`clocked_calls` wraps, by label, over every thread that made them."""

    def __init__(self) -> None:
        """No time yet."""
        self._spans: list[tuple[str, float]] = []  # list.append is atomic under the GIL; `+=` on a shared sum is not

    def add(self, label: str, seconds: float) -> None:
        """Count ``seconds`` spent in one call labelled ``label``."""
        self._spans.append((label, seconds))

    def reset(self) -> None:
        """Forget what was counted so far (a warm-up, say)."""
        self._spans.clear()

    def seconds(self, label: str | None = None) -> float:
        """Seconds counted under ``label``, or under every label."""
        return sum(seconds for found, seconds in list(self._spans) if label is None or found == label)

    def calls(self, label: str) -> int:
        """Calls counted under ``label``."""
        return sum(1 for found, _ in list(self._spans) if found == label)


@contextmanager
def clocked_calls(
    calls: Sequence[tuple[Any, str, str]], clock: Callable[[], float] = time.perf_counter
) -> Iterator[CallClock | None]:
    """While the body runs, time every call of each ``(owner, attribute, label)`` (a class's method or a module's
    function) with ``clock``; restore them all after, also on an error.

    Yields ``None``, with nothing wrapped, where one of them cannot be replaced (a
    compiled class): no figure rather than a partial one.  A wrapped call costs
    about a microsecond, so wrap calls made once per batch or per operator run,
    and time the instrumented runs apart from the timed ones.
    """
    counted = CallClock()

    def timed(original: Callable[..., Any], label: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            began = clock()
            try:
                return original(*args, **kwargs)
            finally:
                counted.add(label, clock() - began)

        return call

    patched: list[tuple[Any, str, Any]] = []
    try:
        try:
            for owner, name, label in calls:
                original = getattr(owner, name)
                setattr(owner, name, timed(original, label))
                patched.append((owner, name, original))
        except (AttributeError, TypeError):  # a compiled class
            for owner, name, original in reversed(patched):
                setattr(owner, name, original)
            patched.clear()
            yield None
        else:
            yield counted
    finally:
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)


def interleaved(variants: Mapping[str, Callable[[], float]], size: Size, log: Log, name: str) -> dict[str, list[float]]:
    """Seconds of every variant, ``size.repeat`` times, the variants interleaved so drift affects all alike."""
    values: dict[str, list[float]] = {key: [] for key in variants}
    for rep in range(size.repeat):
        for key, run in variants.items():
            values[key].append(measured(run))
            log(f"  {name} {rep + 1}/{size.repeat} {key}: {Metric(values[key][-1], 's', '').text()}")
    return values


# ---------------------------------------------------------------------------- the goals file


@dataclass(frozen=True)
class Goal:
    """One goal: ``metric`` against ``baseline`` (a metric, ``workload.metric``, or a constant)."""

    name: str
    workload: str
    metric: str
    baseline: str | float
    direction: str
    goal: float
    cause: tuple[str, ...] = ()

    def ratio(self, value: float, base: float) -> float:
        """``at_least``: the speed-up baseline ÷ metric; ``at_most``: metric ÷ baseline."""
        return base / value if self.direction == "at_least" else value / base

    def met(self, ratio: float) -> bool:
        """Whether ``ratio`` meets the goal."""
        return ratio >= self.goal if self.direction == "at_least" else ratio <= self.goal

    def text(self) -> str:
        """``≥ 1.8×`` or ``≤ 1.5×``."""
        return f"{'≥' if self.direction == 'at_least' else '≤'} {self.goal:g}×"


@dataclass(frozen=True)
class CostLine:
    """A parallel workload's COST: ``metric`` (with ``{p}``) on each process count against ``baseline``."""

    name: str
    workload: str
    metric: str
    baseline: str
    processes: tuple[int, ...] = (1, 2, 4)


def _field(entry: Mapping[str, object], key: str, kind: type, where: str) -> object:
    value = entry.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise GoalsError(f"{where}: field {key!r} must be a {kind.__name__}, got {value!r}")
    return value


def load_goals(path: Path = GOALS) -> tuple[list[Goal], list[CostLine]]:
    """The goals and COST lines of ``path``; :class:`GoalsError` names a bad entry."""
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise GoalsError(f"{path}: {error}") from None
    goals: list[Goal] = []
    for index, entry in enumerate(data.get("goal", [])):
        where = f"{path.name}: goal {index + 1} ({entry.get('name', '?')!r})"
        direction = _field(entry, "direction", str, where)
        if direction not in ("at_least", "at_most"):
            raise GoalsError(f"{where}: direction must be 'at_least' or 'at_most', got {direction!r}")
        baseline = entry.get("baseline")
        if not isinstance(baseline, str | int | float) or isinstance(baseline, bool):
            raise GoalsError(f"{where}: field 'baseline' must be a metric name or a number, got {baseline!r}")
        cause = entry.get("cause", [])
        if not isinstance(cause, list) or not all(isinstance(item, str) for item in cause):
            raise GoalsError(f"{where}: field 'cause' must be a list of metric names, got {cause!r}")
        goal = float(_field(entry, "goal", int | float, where))  # type: ignore[arg-type]
        if goal <= 0:
            raise GoalsError(f"{where}: field 'goal' must be positive, got {goal}")
        goals.append(
            Goal(
                str(_field(entry, "name", str, where)),
                str(_field(entry, "workload", str, where)),
                str(_field(entry, "metric", str, where)),
                baseline if isinstance(baseline, str) else float(baseline),
                str(direction),
                goal,
                tuple(cause),
            )
        )
    names = [goal.name for goal in goals]
    if len(set(names)) != len(names):
        raise GoalsError(f"{path.name}: goal names repeat: {sorted({n for n in names if names.count(n) > 1})}")
    costs = []
    for index, entry in enumerate(data.get("cost", [])):
        where = f"{path.name}: cost {index + 1} ({entry.get('name', '?')!r})"
        metric = str(_field(entry, "metric", str, where))
        if "{p}" not in metric:
            raise GoalsError(f"{where}: field 'metric' must contain {{p}} for the process count, got {metric!r}")
        processes = entry.get("processes", [1, 2, 4])
        if not isinstance(processes, list) or not all(isinstance(p, int) and p > 0 for p in processes):
            raise GoalsError(f"{where}: field 'processes' must be a list of positive integers, got {processes!r}")
        costs.append(
            CostLine(
                str(_field(entry, "name", str, where)),
                str(_field(entry, "workload", str, where)),
                metric,
                str(_field(entry, "baseline", str, where)),
                tuple(processes),
            )
        )
    return goals, costs


# ---------------------------------------------------------------------------- judging

Results = Mapping[str, Mapping[str, Metric]]
"""Metrics by workload and name."""


@dataclass
class Verdict:
    """A goal judged from one run: the metrics, the ratio and the result (met, missed or not measured)."""

    goal: Goal
    measured: Metric | None = None
    baseline: Metric | None = None
    ratio: float = math.nan
    result: str = "not measured"
    why: str = ""
    cause: list[Metric] = field(default_factory=list)


def lookup(results: Results, workload: str, name: str) -> Metric | None:
    """Metric ``name`` of ``workload``, or of another workload when written ``workload.name``."""
    if "." in name:
        workload, name = name.split(".", 1)
    metric = results.get(workload, {}).get(name)
    return None if metric is None or math.isnan(metric.value) else metric


def judge(goal: Goal, results: Results, skipped: Mapping[str, str]) -> Verdict:
    """``goal`` against this run's metrics."""
    verdict = Verdict(goal)
    named = [goal.metric, goal.baseline] if isinstance(goal.baseline, str) else [goal.metric]
    for workload in [goal.workload] + [name.split(".")[0] for name in named if "." in name]:
        if workload in skipped:
            verdict.why = f"{workload}: {skipped[workload]}"
            return verdict
    verdict.measured = lookup(results, goal.workload, goal.metric)
    if isinstance(goal.baseline, float):
        unit = verdict.measured.unit if verdict.measured else ""
        verdict.baseline = Metric(goal.baseline, unit, "the goal's constant")
    else:
        verdict.baseline = lookup(results, goal.workload, goal.baseline)
    for name, metric in ((goal.metric, verdict.measured), (str(goal.baseline), verdict.baseline)):
        if metric is None:
            workload, key = name.split(".", 1) if "." in name else (goal.workload, name)
            reason = results.get(workload, {}).get(key)
            verdict.why = reason.what if reason is not None else f"{workload} reported no {key}"
    if verdict.measured is None or verdict.baseline is None:
        return verdict
    verdict.ratio = goal.ratio(verdict.measured.value, verdict.baseline.value)
    verdict.result = "met" if goal.met(verdict.ratio) else "missed"
    verdict.cause = [m for m in (lookup(results, goal.workload, name) for name in goal.cause) if m is not None]
    return verdict


def cost_cells(line: CostLine, results: Results) -> tuple[Metric | None, dict[int, Metric], str]:
    """The baseline, the metric per process count, and the COST: fewest processes beating the baseline."""
    baseline = lookup(results, line.workload, line.baseline)
    found = {p: lookup(results, line.workload, line.metric.format(p=p)) for p in line.processes}
    times = {p: m for p, m in found.items() if m is not None}
    if baseline is None or not times:
        return baseline, times, "not measured"
    for p in sorted(times):
        if times[p].value < baseline.value:
            return baseline, times, f"{p} ({baseline.value / times[p].value:.2f}× the single thread)"
    best = min(times, key=lambda p: times[p].value)
    return baseline, times, f"never up to {max(times)} (best {baseline.value / times[best].value:.2f}× at {best})"


# ---------------------------------------------------------------------------- the machine and the report


def load() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


def revision() -> str:
    """The checkout's short git revision, ``+`` if it has uncommitted changes."""
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=HERE, capture_output=True, text=True)
    except OSError:
        return "unknown"
    return rev.stdout.strip() + ("+" if dirty.stdout.strip() else "") if rev.returncode == 0 else "unknown"


@dataclass
class Run:
    """One run's circumstances: command, size, cores, load at both ends, durations per workload."""

    command: str
    size: Size
    load_start: float = field(default_factory=load)
    load_end: float = math.nan
    load_after: float = math.nan
    """The load once the run's own processes (Spark's JVM, say) had stopped and the machine stood idle."""
    idle_after: float = 0.0
    took: dict[str, float] = field(default_factory=dict)
    began: float = field(default_factory=time.time)
    speed: CpuSpeed | None = None
    """The CPU speed probes of the run (:mod:`cpu_speed`), if it was probed."""

    @property
    def loaded(self) -> bool:
        """Whether the load reached :data:`NOISY_LOAD` before the run, or after it once idle (else at its end)."""
        after = self.load_end if math.isnan(self.load_after) else self.load_after
        return self.load_start >= NOISY_LOAD or after >= NOISY_LOAD

    @property
    def noisy(self) -> bool:
        """Whether the run was :attr:`loaded`, or the host slowed its CPUs in too many repetitions."""
        return self.loaded or (self.speed is not None and self.speed.noisy)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _metric_cell(metric: Metric | None) -> str:
    return "" if metric is None else f"{metric.text()} ({metric.what})"


def render(run: Run, verdicts: list[Verdict], costs: list[CostLine], results: Results) -> str:
    """``BENCHMARKS.md``: the header, a row per goal, a line per missed goal, the scaling and COST table."""
    tally = {result: sum(v.result == result for v in verdicts) for result in ("met", "missed", "not measured")}
    cores = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    durations = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in run.took.items())
    lines = [
        "# pytimely benchmarks",
        "",
        f"Written by `{run.command}` at revision {revision()}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(run.began))}"
        + (" (**--quick**: small sizes, not figures to quote)" if run.size.quick else "")
        + f". Medians of {run.size.repeat} repetitions, variants interleaved; goals from `benchmarks/goals.toml`.",
        "",
        f"- Cores: {cores} (`os.cpu_count()`), {usable} usable by this run",
        f"- 1-minute load: {run.load_start:.2f} at the start, {run.load_end:.2f} at the end of the last workload"
        + ("" if math.isnan(run.load_after) else f", {run.load_after:.2f} after {run.idle_after:.0f} s idle"),
        f"- Duration: {sum(run.took.values()) / 60:.1f} min ({durations})",
    ]
    if run.speed is not None:
        lines.append(f"- {run.speed.summary()}")
    if run.loaded:
        lines.append(f"- **Noisy run**: the load reached {NOISY_LOAD:.1f}; rerun on a quiet machine before quoting.")
    if run.speed is not None and run.speed.noisy:
        lines.append(
            "- **Noisy run**: the host slowed this machine's CPUs in more than a fifth of the repetitions "
            "(see the CPU speed above); rerun when it gives them at full speed before quoting."
        )
    lines += [
        "",
        f"**{tally['met']} goals met, {tally['missed']} missed, {tally['not measured']} not measured.** "
        "The ratio is a speed-up (baseline ÷ measured) for a ≥ goal, a time ratio (measured ÷ baseline) for a ≤ goal.",
        "",
        _row(["goal", "measured", "baseline", "ratio", "goal", "result"]),
        "|---|---|---|---:|---|---|",
    ]
    for v in verdicts:
        ratio = "" if math.isnan(v.ratio) else f"{v.ratio:.2f}×"
        result = {"met": "met", "missed": "**missed**"}.get(v.result, f"not measured: {v.why}")
        lines.append(
            _row([v.goal.name, _metric_cell(v.measured), _metric_cell(v.baseline), ratio, v.goal.text(), result])
        )
    missed = [v for v in verdicts if v.result == "missed"]
    if missed:
        lines += ["", "## Missed goals and their measured causes", ""]
        for v in missed:
            cause = "; ".join(f"{m.what}: {m.text()}" for m in v.cause) or "no cause measured"
            lines.append(f"- **{v.goal.name}**: {v.ratio:.2f}× (goal {v.goal.text()}); {cause}.")
    if costs:
        counts = sorted({p for line in costs for p in line.processes})
        lines += [
            "",
            f"## Scaling and COST on {cores} cores",
            "",
            "Medians; the speed-up over 1 process in brackets. COST: the fewest processes × 1 worker that beat "
            "the best single-threaded program.",
            "",
            _row(["workload", "single thread"] + [f"{p} process{'es' if p > 1 else ''}" for p in counts] + ["COST"]),
            "|---|---|" + "---|" * len(counts) + "---|",
        ]
        for line in costs:
            baseline, times, answer = cost_cells(line, results)
            one = times.get(1)
            cells = [
                "" if p not in times else times[p].text() + (f" ({one.value / times[p].value:.2f}×)" if one else "")
                for p in counts
            ]
            lines.append(_row([line.name, baseline.text() if baseline else "not measured", *cells, answer]))
    return "\n".join(lines) + "\n"
