"""Empirical coverage of central prediction intervals taken from the samples' quantiles.

A forecaster whose 80 % interval holds the outcome 47 % of the time is overconfident whatever its MAE; this
reports, per nominal level, how often the outcome fell inside, with a Wilson score interval for that rate
(Wilson 1927, "Probable inference, the law of succession, and statistical inference", JASA 22:209-212;
recommended over the Wald interval by Brown, Cai & DasGupta 2001, "Interval estimation for a binomial
proportion", Statistical Science 16:101-133). The interval comes from scipy's ``binomtest``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.stats import binomtest

from marketcast.calibrate._arrays import sample_pair
from marketcast.errors import ConfigError

LEVELS = (0.5, 0.8, 0.9, 0.95)


@dataclass(frozen=True)
class Coverage:
    """One nominal level: ``covered`` of ``n`` outcomes inside, ``rate`` = covered / n, Wilson CI [lo, hi]."""

    nominal: float
    covered: int
    n: int
    rate: float
    lo: float
    hi: float

    def __str__(self) -> str:
        return format_coverage(self)


def _check_level(level: float, where: str) -> float:
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ConfigError(f"{where}: interval level {level:g} is outside (0, 1); pass e.g. 0.8 for 80 %")
    return level


def wilson_interval(covered: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion ``covered / n`` (Wilson 1927)."""
    if n <= 0 or not 0 <= covered <= n:
        raise ConfigError(f"wilson_interval: need 0 <= covered <= n and n > 0, got covered={covered}, n={n}; "
                          "count at least one outcome")
    _check_level(confidence, "wilson_interval confidence")
    ci = binomtest(int(covered), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def interval_bounds(samples, level: float, axis: int = -2) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds of the central ``level`` interval: the samples' (1 -/+ level) / 2 quantiles
    (numpy's linear interpolation, as :func:`marketcast.forecast.aggregate.quantile`)."""
    level = _check_level(level, "interval_bounds")
    x = np.asarray(samples, dtype=np.float64)
    lo, hi = np.quantile(x, [(1 - level) / 2, (1 + level) / 2], axis=axis)
    return lo, hi


def coverage(samples, outcomes, levels: Sequence[float] = LEVELS, axis: int = -2,
             confidence: float = 0.95) -> tuple[Coverage, ...]:
    """Coverage per level of ``outcomes`` (samples' shape without ``axis``) by the samples' central intervals.

    Every window and horizon step counts as one outcome; an outcome on a bound counts as inside.
    """
    x, y = sample_pair(samples, outcomes, axis, "coverage")
    out = []
    for level in levels:
        lo, hi = interval_bounds(x, level, axis=-1)
        covered = int(((y >= lo) & (y <= hi)).sum())
        ci = wilson_interval(covered, y.size, confidence)
        out.append(Coverage(float(level), covered, int(y.size), covered / y.size, *ci))
    return tuple(out)


def format_coverage(c: Coverage) -> str:
    """``coverage 80%: 71% [66, 76]`` (nominal, observed rate, Wilson interval, all in percent)."""
    return f"coverage {100 * c.nominal:g}%: {100 * c.rate:.0f}% [{100 * c.lo:.0f}, {100 * c.hi:.0f}]"
