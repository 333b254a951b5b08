"""Empirical coverage of central prediction intervals taken from the samples' quantiles, or from the model's
own quantiles (knots) when it has them and both bounds of an interval are knots (Toto 2.0's 80 % interval is
its 0.1 and 0.9 knots; its 50 % interval, 0.25 .. 0.75, is not, and is read from the samples).

A forecaster whose 80 % interval holds the outcome 47 % of the time is overconfident whatever its MAE; this
reports, per nominal level, how often the outcome fell inside, with a Wilson score interval for that rate
(Wilson 1927, "Probable inference, the law of succession, and statistical inference", JASA 22:209-212;
recommended over the Wald interval by Brown, Cai & DasGupta 2001, "Interval estimation for a binomial
proportion", Statistical Science 16:101-133), in closed form (the z quantile from the standard library) so
that a backtest, which reports coverage every run, does not import scipy (tests/spine/test_startup.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

import numpy as np

from marketcast.calibrate._arrays import sample_pair
from marketcast.errors import ConfigError

LEVELS = (0.5, 0.8, 0.9, 0.95)


@dataclass(frozen=True)
class Coverage:
    """One nominal level: ``covered`` of ``n`` outcomes inside, ``rate`` = covered / n, Wilson CI [lo, hi];
    ``source`` says where the interval's bounds came from ("samples" or "quantiles": the model's knots)."""

    nominal: float
    covered: int
    n: int
    rate: float
    lo: float
    hi: float
    source: str = "samples"

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
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p, z2 = covered / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return min(max(0.0, centre - half), p), max(min(1.0, centre + half), p)  # exact at k = 0 and k = n


def interval_bounds(samples, level: float, axis: int = -2) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds of the central ``level`` interval: the samples' (1 -/+ level) / 2 quantiles
    (numpy's linear interpolation, as :func:`marketcast.forecast.aggregate.quantile`)."""
    level = _check_level(level, "interval_bounds")
    x = np.asarray(samples, dtype=np.float64)
    lo, hi = np.quantile(x, [(1 - level) / 2, (1 + level) / 2], axis=axis)
    return lo, hi


def _sorted_quantile(ordered: np.ndarray, q: float) -> np.ndarray:
    """numpy's linear-interpolation quantile (its ``_lerp``, value for value) of rows already sorted."""
    last = ordered.shape[-1] - 1
    h = last * q
    i = int(np.floor(h))
    t = h - i
    a, b = ordered[..., i], ordered[..., min(i + 1, last)]
    return a + (b - a) * t if t < 0.5 else b - (b - a) * (1 - t)


def _knot(knot_levels: Sequence[float], q: float) -> int | None:
    """Index of the knot at probability ``q`` (to 1e-9: (1 - 0.8) / 2 is 0.1 up to rounding), else None."""
    hit = [i for i, v in enumerate(knot_levels) if abs(float(v) - q) <= 1e-9]
    return hit[0] if hit else None


def coverage(samples, outcomes, levels: Sequence[float] = LEVELS, axis: int = -2,
             confidence: float = 0.95, knots=None, knot_levels: Sequence[float] = ()) -> tuple[Coverage, ...]:
    """Coverage per level of ``outcomes`` (samples' shape without ``axis``) by the samples' central intervals.

    Every window and horizon step counts as one outcome; an outcome on a bound counts as inside. With
    ``knots`` (the model's quantiles at ``knot_levels``, on ``axis`` like the samples), a level whose two bounds
    are both knots reads them instead of the samples (``source="quantiles"``).
    """
    x, y = sample_pair(samples, outcomes, axis, "coverage")
    levels = [_check_level(level, "coverage") for level in levels]
    if knots is not None:
        knots, _ = sample_pair(knots, outcomes, axis, "coverage knots")
        if knots.shape[-1] != len(knot_levels):
            raise ConfigError(f"coverage: {knots.shape[-1]} knots on axis {axis} but {len(knot_levels)} knot "
                              "levels; pass one level per knot")
    ordered = np.sort(x, axis=-1)  # one sort for every level: half the time of np.quantile's partitions
    out = []
    for level in levels:
        probs = ((1 - level) / 2, (1 + level) / 2)
        at = [None, None] if knots is None else [_knot(knot_levels, q) for q in probs]
        if None in at:
            lo, hi = (_sorted_quantile(ordered, q) for q in probs)
        else:
            lo, hi = knots[..., at[0]], knots[..., at[1]]
        covered = int(((y >= lo) & (y <= hi)).sum())
        ci = wilson_interval(covered, y.size, confidence)
        out.append(Coverage(float(level), covered, int(y.size), covered / y.size, *ci,
                            "samples" if None in at else "quantiles"))
    return tuple(out)


def format_coverage(c: Coverage) -> str:
    """``coverage 80%: 71% [66, 76]`` (nominal, observed rate, Wilson interval, all in percent)."""
    return f"coverage {100 * c.nominal:g}%: {100 * c.rate:.0f}% [{100 * c.lo:.0f}, {100 * c.hi:.0f}]"
