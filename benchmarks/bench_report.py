"""The benchmark report's model and its Markdown rendering.

A :class:`Section` holds :class:`Row` s; a row is one measured variant with its
median, spread, comparison with a baseline, goal and verdict (all already
formatted, computed with :mod:`bench_stats`).  :func:`render` writes the whole report:
the machine, one summary table of every row that has a goal, then each section.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
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
    return row


def judge_time_ratio(row: Row, sample: Sample, baseline: Sample, baseline_name: str, goal: float) -> Row:
    """Fill ``row`` with "time / ``baseline_name``'s time" (medians) and the verdict for ``<= goal``."""
    value = ratio(sample.median, baseline.median)
    row.comparison = f"{value:.2f}× the time of {baseline_name}"
    row.goal = f"≤ {goal:g}× the time of {baseline_name}"
    row.result = verdict(value, goal, at_least=False)
    return row


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


def machine_info() -> list[tuple[str, str]]:
    """What the report says about the machine and the revision measured."""
    try:
        usable = str(len(os.sched_getaffinity(0)))
    except AttributeError:
        usable = "n/a"
    commit = _git("rev-parse", "--short", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", "scopes", "runtime")
    revision = "unknown (not a git checkout)" if commit is None else commit + (
        " + uncommitted engine changes" if dirty else "")
    return [
        ("CPU", f"{_cpu_model()}, {os.cpu_count()} CPUs (usable by this process: {usable})"),
        ("Memory", _memory()),
        ("Platform", platform.platform()),
        ("Python", f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})"),
        ("pytimely revision", revision),
        ("Load average (1/5/15 min) before the run", load_average()),
        ("Date", datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")),
    ]


# ---------------------------------------------------------------------------- rendering

def _table(rows: Sequence[Row]) -> list[str]:
    lines = ["| variant | median | spread (min–max) | ratio | goal | result |", "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row.variant} | {row.median} | {row.spread} | {row.comparison} | {row.goal} | "
                     f"{_verdict(row.result)} |")
    return lines


def _verdict(result: str) -> str:
    return f"**{result}**" if result in (PASS, MISS) else result


def summary_lines(sections: Sequence[Section]) -> list[str]:
    """The summary table: every row with a goal, workload by workload."""
    lines = ["| workload | variant | median | ratio | goal | result |", "|---|---|---|---|---|---|"]
    for section in sections:
        for row in section.rows:
            if row.has_goal:
                lines.append(f"| {section.title} | {row.variant} | {row.median} | {row.comparison} | "
                             f"{row.goal} | {_verdict(row.result)} |")
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
) -> str:
    """The whole Markdown report."""
    lines = ["# pytimely benchmarks", ""]
    lines.append(f"Generated by `{command}`. Every figure is the **median of {repeat} repetitions**, with "
                 "the spread (fastest–slowest repetition); ratios compare medians, measured side by side "
                 "in the same run with the variants interleaved. See `benchmarks/README.md` for what is "
                 "measured. Nothing asserts on timings.")
    if quick:
        lines += ["", "> **Quick mode**: sizes are reduced for smoke testing and the heavy baselines "
                  "(bytewax throughput, PySpark, 100,000-port shapes) are skipped; the numbers are not "
                  "representative."]
    lines += ["", "## Machine", ""]
    lines += [f"- **{key}**: {value}" for key, value in machine]
    noisy = noisy_rows(sections)
    if noisy:
        lines += ["", f"> **Noisy run**: in {len(noisy)} measurements the repetitions span more than "
                  f"{NOISY_SPREAD:.0%} of the median: {'; '.join(noisy)}. Another program was probably "
                  "competing for the CPU, so a PASS/MISS near its threshold may change on a quiet machine."]
    counts = tally(sections)
    lines += ["", "## Summary", "",
              f"{counts[PASS]} goals met, {counts[MISS]} missed, {counts[NOT_MEASURED]} not measured.", ""]
    lines += summary_lines(sections)
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
        text += "\n" + trailer.rstrip() + "\n"
    return text


NOISY_SPREAD = 0.25
"""A measurement whose repetitions span more than this fraction of their median makes the run noisy."""


def noisy_rows(sections: Sequence[Section]) -> list[str]:
    """``variant (spread%)`` of every measured row whose repetitions span more than :data:`NOISY_SPREAD`."""
    return [f"{row.variant} ({row.sample.relative_spread:.0%})" for section in sections for row in section.rows
            if row.sample is not None and len(row.sample.values) > 1
            and row.sample.relative_spread > NOISY_SPREAD]


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
