"""The statistics of the benchmark report: median, spread, ratio and verdict.

Every measurement is a list of repetitions (seconds, or any positive figure).
The report gives its median and its spread (minimum-maximum and the
interquartile range); ratios compare medians; a verdict compares a ratio
(or a value) with its goal.  Pure functions, unit-tested in ``tests/test_bench.py``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

PASS = "PASS"
MISS = "MISS"
NOT_MEASURED = "n/a"


def median(samples: Sequence[float]) -> float:
    """The median of ``samples`` (the mean of the middle two for an even count)."""
    if not samples:
        raise ValueError("median of no samples: a measurement needs at least one repetition")
    return float(statistics.median(samples))


def quartiles(samples: Sequence[float]) -> tuple[float, float]:
    """The first and third quartiles of ``samples`` (inclusive method; one sample gives it twice)."""
    if not samples:
        raise ValueError("quartiles of no samples: a measurement needs at least one repetition")
    if len(samples) == 1:
        return float(samples[0]), float(samples[0])
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return float(q1), float(q3)


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``; ``nan`` when the denominator is zero or either is missing."""
    if denominator == 0 or math.isnan(numerator) or math.isnan(denominator):
        return math.nan
    return numerator / denominator


def verdict(value: float, goal: float, at_least: bool) -> str:
    """``PASS`` if ``value >= goal`` (``at_least``) or ``value <= goal`` (otherwise), else ``MISS``.

    A missing value (``nan``) has no verdict: ``n/a``.
    """
    if math.isnan(value):
        return NOT_MEASURED
    passed = value >= goal if at_least else value <= goal
    return PASS if passed else MISS


@dataclass(frozen=True)
class Sample:
    """The repetitions of one measured variant, in seconds (or another unit, lower is better)."""

    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Sequence[float]) -> Sample:
        """A sample of ``values``; at least one is required."""
        if not values:
            raise ValueError("a sample needs at least one repetition")
        return cls(tuple(float(v) for v in values))

    @property
    def median(self) -> float:
        """The median repetition."""
        return median(self.values)

    @property
    def low(self) -> float:
        """The fastest repetition."""
        return min(self.values)

    @property
    def high(self) -> float:
        """The slowest repetition."""
        return max(self.values)

    @property
    def iqr(self) -> tuple[float, float]:
        """The interquartile range (first, third quartile)."""
        return quartiles(self.values)

    @property
    def relative_spread(self) -> float:
        """``(max - min) / median``: 0.1 means the repetitions span 10% of the median."""
        return ratio(self.high - self.low, self.median)

    def speedup_over(self, baseline: Sample) -> float:
        """How many times faster this is than ``baseline`` (medians; > 1 is faster)."""
        return ratio(baseline.median, self.median)


def format_seconds(seconds: float) -> str:
    """``seconds`` with a unit that keeps three significant figures readable (s, ms or µs)."""
    if math.isnan(seconds):
        return "n/a"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.1f} µs"


def format_spread(sample: Sample, scale: float = 1.0, unit: str | None = None) -> str:
    """``min–max`` of ``sample`` (times ``scale``), in ``unit`` or in automatic time units."""
    if unit is None:
        return f"{format_seconds(sample.low * scale)}–{format_seconds(sample.high * scale)}"
    return f"{sample.low * scale:.3g}–{sample.high * scale:.3g} {unit}"
