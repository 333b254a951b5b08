"""Probability integral transform (PIT) of outcomes under sample forecasts, and tests of its uniformity.

A calibrated forecast's PIT is uniform on (0, 1) (Dawid 1984; Gneiting, Balabdaoui & Raftery 2007,
"Probabilistic forecasts, calibration and sharpness", JRSS B 69:243-268). A U-shaped histogram says the
forecast is too narrow, a hump too wide, a slope biased.

For a finite ensemble the fraction of samples below the outcome sits on S + 1 atoms, so the PIT is randomised
as for discrete forecasts (Czado, Gneiting & Held 2009, "Predictive model assessment for count data",
Biometrics 65:1254-1261): between the "<" and "<=" counts, on the rank of the outcome among the S + 1 values
(the rank histogram of Anderson 1996 / Hamill 2001),

    u = (#{x < y} + V * (#{x == y} + 1)) / (S + 1),   V ~ U(0, 1),

which is exactly U(0, 1) when the outcome and the samples are exchangeable, ties (discrete samples) included,
and tends to the fraction below as S grows.

The uniformity tests' p-values are computed here without scipy, since every backtest reports them and a
baseline backtest imports no scipy (tests/spine/test_startup.py): the KS p-value from Kolmogorov's limiting
distribution at Stephens' finite-n statistic (Kolmogorov 1933; Stephens 1970, "Use of the Kolmogorov-Smirnov,
Cramer-von Mises and related statistics without extensive tables", JRSS B 32:115-122), the chi-square p-value
from the closed-form survival function for whole degrees of freedom (Abramowitz & Stegun 1964, 26.4.4-26.4.5).
tests/calibrate/test_pit.py checks both against scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from marketcast.calibrate._arrays import sample_pair
from marketcast.errors import ConfigError

RELIABILITY_LEVELS = tuple(np.round(np.arange(0.05, 0.951, 0.05), 2))


def pit_values(samples, outcomes, axis: int = -2, seed: int = 0) -> np.ndarray:
    """Randomised PIT in (0, 1), shaped as ``outcomes`` (samples' shape without ``axis``); ``seed`` fixes V."""
    x, y = sample_pair(samples, outcomes, axis, "pit_values")
    below = (x < y[..., None]).sum(axis=-1)
    ties = (x == y[..., None]).sum(axis=-1)
    v = np.random.default_rng(seed).random(y.shape)
    return (below + v * (ties + 1)) / (x.shape[-1] + 1)


def _check_pit(pit, where: str) -> np.ndarray:
    u = np.asarray(pit, dtype=np.float64).ravel()
    if u.size == 0 or not np.isfinite(u).all() or (u < 0).any() or (u > 1).any():
        raise ConfigError(f"{where}: PIT values must be a non-empty array in [0, 1]; "
                          "pass the output of pit_values")
    return u


def pit_histogram(pit, bins: int = 10) -> np.ndarray:
    """Counts of PIT values in ``bins`` equal bins of [0, 1] (the last bin closed), over every element."""
    if int(bins) < 2:
        raise ConfigError(f"pit_histogram: bins={bins} is fewer than 2; pass e.g. 10")
    counts, _ = np.histogram(_check_pit(pit, "pit_histogram"), bins=int(bins), range=(0.0, 1.0))
    return counts


@dataclass(frozen=True)
class PitTest:
    """Uniformity of the PIT: Kolmogorov-Smirnov against U(0, 1) and Pearson's chi-square on the bins."""

    n: int
    counts: tuple[int, ...]
    ks_stat: float
    ks_p: float
    chi2_stat: float
    chi2_p: float


def ks_uniform(u) -> tuple[float, float]:
    """One-sample KS statistic D of ``u`` against U(0, 1) and its p-value, Kolmogorov's limiting law at
    Stephens' (1970) modified statistic (sqrt(n) + 0.12 + 0.11 / sqrt(n)) D: for n >= 20 within 0.025 of the
    exact p-value (scipy's), within 0.005 where that is below 0.1 (tests/calibrate/test_pit.py)."""
    x = np.sort(np.asarray(u, dtype=np.float64).ravel())
    n = x.size
    i = np.arange(1, n + 1)
    d = float(max((i / n - x).max(), (x - (i - 1) / n).max()))
    root = math.sqrt(n)
    return d, kolmogorov_sf((root + 0.12 + 0.11 / root) * d)


def kolmogorov_sf(lam: float) -> float:
    """P(K > lam) for Kolmogorov's K: 2 sum (-1)^(k-1) exp(-2 k^2 lam^2), or for small lam the equivalent
    theta-function form 1 - sqrt(2 pi) / lam sum exp(-(2k-1)^2 pi^2 / (8 lam^2)), which converges there."""
    if lam <= 0:
        return 1.0
    if lam < 1.0:
        total = sum(math.exp(-((2 * k - 1) ** 2) * math.pi ** 2 / (8 * lam * lam)) for k in range(1, 20))
        return min(1.0, max(0.0, 1.0 - math.sqrt(2 * math.pi) / lam * total))
    total = sum((-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam) for k in range(1, 101))
    return min(1.0, max(0.0, 2.0 * total))


def chi2_sf(x: float, df: int) -> float:
    """P(chi2_df > x) for a whole ``df`` >= 1 (Abramowitz & Stegun 26.4.4 even, 26.4.5 odd), in log space."""
    if x <= 0:
        return 1.0
    if df % 2 == 0:  # exp(-x/2) sum_{r < df/2} (x/2)^r / r!
        logs = [-x / 2 + r * math.log(x / 2) - math.lgamma(r + 1) for r in range(df // 2)]
        return min(1.0, sum(math.exp(t) for t in logs))
    chi = math.sqrt(x)
    tail = math.erfc(chi / math.sqrt(2))  # 2 Q(chi)
    logs = [math.log(2) - x / 2 - 0.5 * math.log(2 * math.pi) + (2 * r - 1) / 2 * math.log(x)
            - (math.lgamma(2 * r + 1) - r * math.log(2) - math.lgamma(r + 1)) for r in range(1, (df - 1) // 2 + 1)]
    return min(1.0, tail + sum(math.exp(t) for t in logs))  # (2r - 1)!! = (2r)! / (2^r r!)


def pit_uniformity(pit, bins: int = 10) -> PitTest:
    """KS test against U(0, 1) (:func:`ks_uniform`) and Pearson's chi-square on ``bins`` equal bins (equal
    expected counts, ``bins - 1`` degrees of freedom, :func:`chi2_sf`) of the PIT values. The PITs of
    overlapping multi-step windows are dependent, so read the p-values of such a set as a guide, not an exact
    size."""
    u = _check_pit(pit, "pit_uniformity")
    counts = pit_histogram(u, bins)
    ks_stat, ks_p = ks_uniform(u)
    expected = u.size / counts.size
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    return PitTest(int(u.size), tuple(int(c) for c in counts), ks_stat, ks_p, chi2, chi2_sf(chi2, counts.size - 1))


def reliability_points(pit, levels=RELIABILITY_LEVELS) -> tuple[np.ndarray, np.ndarray]:
    """Reliability-diagram points: nominal quantile level tau and the observed frequency of outcomes below
    the forecast's tau-quantile, i.e. the fraction of PIT values <= tau. On the diagonal when calibrated."""
    u = _check_pit(pit, "reliability_points")
    tau = np.asarray(levels, dtype=np.float64)
    if tau.ndim != 1 or tau.size == 0 or (tau <= 0).any() or (tau >= 1).any():
        raise ConfigError("reliability_points: levels must be a non-empty list in (0, 1); pass e.g. 0.05..0.95")
    observed = np.searchsorted(np.sort(u), tau, side="right") / u.size
    return tau, observed
