"""The benchmark report's model and its Markdown rendering.

A :class:`Section` holds :class:`Row` s; a row is one measured variant with its
median, spread, comparison with a baseline, goal and verdict (all already
formatted, computed with :mod:`bench_stats`).  :func:`render` writes the whole report:
the machine, one summary table of every row that has a goal, then each section.
"""

from __future__ import annotations

import datetime
import math
import os
import platform
import re
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench_stats import MISS, NOT_MEASURED, PASS, Sample, format_seconds, format_spread, ratio, verdict

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Row:
    """One measured variant of a workload, ready to print."""

    variant: str
    median: str
    spread: str = ""
    comparison: str = ""
    goal: str = ""
    result: str = ""
    sample: Sample | None = None
    margin: str = ""
    """For a missed goal: by how much (printed after **MISS**)."""
    issue: int = 0
    """The issue whose goal this row judges, when it is listed in that issue's own table (18: COST)."""

    @property
    def has_goal(self) -> bool:
        """Whether this row is judged against a goal (it then appears in the summary)."""
        return bool(self.goal)


@dataclass
class Section:
    """One workload: a title, what it measures, its rows, and notes after the table."""

    title: str
    intro: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    """Further Markdown (tables) printed after the notes."""
    headline: list[str] = field(default_factory=list)
    """Markdown lines repeated under the goals of :data:`HEADLINE_ISSUE` at the top (the COST lines)."""


HEADLINE_ISSUE = 18
"""The issue whose goals the report lists first, in a table of their own."""


def timed_row(variant: str, sample: Sample, scale: float = 1.0, unit: str | None = None) -> Row:
    """A row showing ``sample``'s median and min–max (times ``scale``, in ``unit`` or time units)."""
    shown = format_seconds(sample.median * scale) if unit is None else f"{sample.median * scale:.3g} {unit}"
    return Row(variant, shown, format_spread(sample, scale, unit), sample=sample)


def judge_speedup(row: Row, sample: Sample, baseline: Sample, baseline_name: str, goal: float) -> Row:
    """Fill ``row`` with "N× faster than ``baseline_name``" (medians) and the verdict for ``>= goal``."""
    value = sample.speedup_over(baseline)
    row.comparison = f"{value:.2f}× {baseline_name}"
    row.goal = f"≥ {goal:g}× {baseline_name}"
    row.result = verdict(value, goal, at_least=True)
    row.margin = miss_margin(value, goal, at_least=True)
    return row


def judge_time_ratio(row: Row, sample: Sample, baseline: Sample, baseline_name: str, goal: float) -> Row:
    """Fill ``row`` with "time / ``baseline_name``'s time" (medians) and the verdict for ``<= goal``."""
    value = ratio(sample.median, baseline.median)
    row.comparison = f"{value:.2f}× the time of {baseline_name}"
    row.goal = f"≤ {goal:g}× the time of {baseline_name}"
    row.result = verdict(value, goal, at_least=False)
    row.margin = miss_margin(value, goal, at_least=False)
    return row


def judge_at_most(row: Row, value: float, goal: float, unit_goal: str) -> Row:
    """Fill ``row``'s goal and verdict for an absolute ``value <= goal`` (e.g. seconds), shown as ``unit_goal``."""
    row.goal = f"≤ {unit_goal}"
    row.result = verdict(value, goal, at_least=False)
    row.margin = miss_margin(value, goal, at_least=False)
    if not row.comparison:
        row.comparison = f"{ratio(value, goal):.2f}× the goal"
    return row


def miss_margin(value: float, goal: float, at_least: bool) -> str:
    """For a missed goal, how much faster it must get: ``"needs 1.45× the speed"``; empty if met or unknown.

    ``value`` is a speed-up (``at_least``) or a time or time ratio (otherwise);
    either way the factor is how many times faster the variant must run to meet ``goal``.
    """
    if verdict(value, goal, at_least) != MISS:
        return ""
    factor = goal / value if at_least else value / goal
    return f"needs {factor:.2f}× the speed"


def missing_row(variant: str, reason: str, goal: str = "") -> Row:
    """A row for a variant that could not be measured, saying why (never a number)."""
    return Row(variant, "not measured", "", reason, goal, NOT_MEASURED if goal else "")


# ---------------------------------------------------------------------------- the machine


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GB"
    except (OSError, ValueError):
        pass
    return "unknown"


def load_average() -> str:
    """The 1/5/15-minute load averages, or ``n/a``."""
    try:
        return " / ".join(f"{load:.2f}" for load in os.getloadavg())
    except (AttributeError, OSError):
        return "n/a"


def cores() -> tuple[int, int]:
    """(``os.cpu_count()``, the CPUs this process may run on: its affinity)."""
    count = os.cpu_count() or 1
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = count
    return count, usable


def machine_info() -> list[tuple[str, str]]:
    """What the report says about the machine and the revision measured."""
    count, usable = cores()
    commit = _git("rev-parse", "--short", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", "scopes", "runtime")
    revision = (
        "unknown (not a git checkout)"
        if commit is None
        else commit + (" + uncommitted engine changes" if dirty else "")
    )
    return [
        ("CPU", f"{_cpu_model()}, {count} CPUs (`os.cpu_count()`; usable by this process, its affinity: {usable})"),
        ("Memory", _memory()),
        ("Platform", platform.platform()),
        ("Python", f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})"),
        ("pytimely revision", revision),
        ("Load average (1/5/15 min) before the run", load_average()),
        ("Date", datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")),
    ]


def one_minute_load() -> float:
    """The 1-minute load average (``nan`` where there is none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return math.nan


def busy_cpu_seconds() -> float:
    """CPU seconds every program on the machine has used since boot (``/proc/stat``; ``nan`` elsewhere).

    User, nice, system, interrupts and steal (time the hypervisor gave another machine).
    """
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[1:9])
    except (OSError, ValueError, IndexError):
        return math.nan
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """CPU seconds of this process and of the children it has waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@dataclass
class Quiet:
    """How quiet the machine was during a run: load at both ends and the CPU other programs used."""

    load_start: float
    load_end: float = math.nan
    others_cores: float = math.nan
    """CPU seconds of other programs per second of the run: 1.0 is one core busy all along."""
    _busy: float = math.nan
    _own: float = math.nan
    _began: float = 0.0

    @classmethod
    def start(cls) -> Quiet:
        """Note the load and the CPU counters at the start of a run."""
        return cls(one_minute_load(), _busy=busy_cpu_seconds(), _own=own_cpu_seconds(), _began=time.perf_counter())

    def finish(self) -> None:
        """Note the load at the end and what other programs used meanwhile."""
        self.load_end = one_minute_load()
        elapsed = time.perf_counter() - self._began
        others = busy_cpu_seconds() - self._busy - (own_cpu_seconds() - self._own)
        if elapsed > 0 and not math.isnan(others):
            self.others_cores = max(0.0, others) / elapsed

    @property
    def noisy(self) -> bool:
        """Whether the 1-minute load was above :data:`NOISY_LOAD` at the start or the end."""
        return any(load > NOISY_LOAD for load in (self.load_start, self.load_end) if not math.isnan(load))

    def lines(self) -> list[tuple[str, str]]:
        """The machine lines that describe it."""
        others = "n/a" if math.isnan(self.others_cores) else f"{self.others_cores:.2f} cores on average"
        return [
            ("1-minute load average at the start / end of the run", f"{self.load_start:.2f} / {self.load_end:.2f}"),
            (
                "CPU used by other programs during the run (`/proc/stat` less this run's own and its waited-for "
                "children's; PySpark's JVM counts as another program)",
                others,
            ),
        ]


NOISY_LOAD = 1.3
"""A run whose 1-minute load average exceeds this at its start or end is marked noisy."""


# ---------------------------------------------------------------------------- rendering


def _table(rows: Sequence[Row]) -> list[str]:
    lines = ["| variant | median | spread (min–max) | ratio | goal | result |", "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(
            f"| {row.variant} | {row.median} | {row.spread} | {row.comparison} | {row.goal} | {_verdict(row)} |"
        )
    return lines


def _verdict(row: Row) -> str:
    shown = f"**{row.result}**" if row.result in (PASS, MISS) else row.result
    return f"{shown}: {row.margin}" if row.result == MISS and row.margin else shown


def summary_lines(sections: Sequence[Section], issue: int | None = None) -> list[str]:
    """The summary table: every row with a goal, workload by workload; only ``issue``'s, or only the others'."""
    lines = ["| workload | variant | median | ratio | goal | result |", "|---|---|---|---|---|---|"]
    for section in sections:
        for row in section.rows:
            if row.has_goal and (row.issue == issue if issue is not None else row.issue != HEADLINE_ISSUE):
                lines.append(
                    f"| {section.title} | {row.variant} | {row.median} | {row.comparison} | "
                    f"{row.goal} | {_verdict(row)} |"
                )
    return lines


def tally(sections: Sequence[Section]) -> dict[str, int]:
    """How many goals passed, were missed, or could not be measured."""
    counts = {PASS: 0, MISS: 0, NOT_MEASURED: 0}
    for section in sections:
        for row in section.rows:
            if row.has_goal:
                counts[row.result if row.result in counts else NOT_MEASURED] += 1
    return counts


def render(
    sections: Sequence[Section],
    machine: Sequence[tuple[str, str]],
    command: str,
    repeat: int,
    quick: bool,
    trailer: str = "",
    quiet: Quiet | None = None,
) -> str:
    """The whole Markdown report (``quiet``: the load during the run, marking it noisy when it was high)."""
    lines = ["# pytimely benchmarks", ""]
    lines.append(
        f"Generated by `{command}`. Every figure is the **median of {repeat} repetitions**, with "
        "the spread (fastest–slowest repetition); ratios compare medians, measured side by side "
        "in the same run with the variants interleaved. See `benchmarks/README.md` for what is "
        "measured. Nothing asserts on timings."
    )
    if quick:
        lines += [
            "",
            "> **Quick mode**: sizes are reduced for smoke testing and the heavy baselines "
            "(bytewax throughput, PySpark, 100,000-port shapes) are skipped; the numbers are not "
            "representative.",
        ]
    lines += ["", "## Machine", ""]
    lines += [f"- **{key}**: {value}" for key, value in machine]
    if quiet is not None:
        lines += [f"- **{key}**: {value}" for key, value in quiet.lines()]
        if quiet.noisy:
            lines += [
                "",
                f"> **Noisy run**: the 1-minute load average was above {NOISY_LOAD:g} (at the start "
                f"{quiet.load_start:.2f}, at the end {quiet.load_end:.2f}) on a machine with "
                f"{cores()[0]} CPUs: other programs shared the CPUs, so every figure is slower than on a "
                "quiet machine and the multi-worker ones most. Do not quote it; rerun on a quiet machine.",
            ]
    noisy = noisy_rows(sections)
    if noisy:
        lines += [
            "",
            f"> **Noisy run**: in {len(noisy)} measurements the repetitions span more than "
            f"{NOISY_SPREAD:.0%} of the median: {'; '.join(noisy)}. Another program was probably "
            "competing for the CPU, so a PASS/MISS near its threshold may change on a quiet machine.",
        ]
    counts = tally(sections)
    lines += [
        "",
        "## Summary",
        "",
        f"{counts[PASS]} goals met, {counts[MISS]} missed, {counts[NOT_MEASURED]} not measured. A missed goal "
        "says how many times faster the variant must run to meet it.",
    ]
    headline = [line for section in sections for line in section.headline]
    if headline or any(row.issue == HEADLINE_ISSUE and row.has_goal for section in sections for row in section.rows):
        lines += ["", f"### Issue {HEADLINE_ISSUE}: more workers must mean more speed (COST)", ""]
        lines += summary_lines(sections, HEADLINE_ISSUE)
        if headline:
            lines += [""] + headline
        lines += ["", "### Other goals"]
    lines += [""] + summary_lines(sections)
    for number, section in enumerate(sections, 1):
        lines += ["", f"## {number}. {section.title}", ""]
        if section.intro:
            lines += [" ".join(section.intro), ""]
        lines += _table(section.rows)
        for note in section.notes:
            lines += ["", note]
        if section.extra:
            lines += [""] + section.extra
    text = "\n".join(lines).rstrip() + "\n"
    if trailer:
        text += "\n" + renumber(trailer, len(sections) + 1).rstrip() + "\n"
    return text


def renumber(sections_text: str, first: int) -> str:
    """``sections_text`` with its ``## N. Title`` headings numbered from ``first`` on, in order."""
    number = first - 1

    def next_heading(match: re.Match[str]) -> str:
        nonlocal number
        number += 1
        return f"## {number}. "

    return re.sub(r"^## \d+\. ", next_heading, sections_text, flags=re.MULTILINE)


NOISY_SPREAD = 0.25
"""A measurement whose repetitions span more than this fraction of their median makes the run noisy."""


def noisy_rows(sections: Sequence[Section]) -> list[str]:
    """``variant (spread%)`` of every measured row whose repetitions span more than :data:`NOISY_SPREAD`."""
    return [
        f"{row.variant} ({row.sample.relative_spread:.0%})"
        for section in sections
        for row in section.rows
        if row.sample is not None and len(row.sample.values) > 1 and row.sample.relative_spread > NOISY_SPREAD
    ]


SEPARATE = "(measured separately"


def kept_sections(previous: str) -> str:
    """The sections of a previous report whose heading says they were measured separately (kept verbatim)."""
    kept: list[str] = []
    keeping = False
    for line in previous.splitlines():
        if line.startswith("## "):
            keeping = SEPARATE in line
        if keeping:
            kept.append(line)
    return "\n".join(kept)
