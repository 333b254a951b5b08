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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import chisquare, kstest

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


def pit_uniformity(pit, bins: int = 10) -> PitTest:
    """KS test (scipy.stats.kstest against ``uniform``) and chi-square (scipy.stats.chisquare, equal expected
    counts, ``bins - 1`` degrees of freedom) of the PIT values. The PITs of overlapping multi-step windows are
    dependent, so read the p-values of such a set as a guide, not an exact size."""
    u = _check_pit(pit, "pit_uniformity")
    counts = pit_histogram(u, bins)
    ks = kstest(u, "uniform")
    chi = chisquare(counts)
    return PitTest(int(u.size), tuple(int(c) for c in counts), float(ks.statistic), float(ks.pvalue),
                   float(chi.statistic), float(chi.pvalue))


def reliability_points(pit, levels=RELIABILITY_LEVELS) -> tuple[np.ndarray, np.ndarray]:
    """Reliability-diagram points: nominal quantile level tau and the observed frequency of outcomes below
    the forecast's tau-quantile, i.e. the fraction of PIT values <= tau. On the diagonal when calibrated."""
    u = _check_pit(pit, "reliability_points")
    tau = np.asarray(levels, dtype=np.float64)
    if tau.ndim != 1 or tau.size == 0 or (tau <= 0).any() or (tau >= 1).any():
        raise ConfigError("reliability_points: levels must be a non-empty list in (0, 1); pass e.g. 0.05..0.95")
    observed = np.searchsorted(np.sort(u), tau, side="right") / u.size
    return tau, observed
