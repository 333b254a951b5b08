"""How far to trust a Sharpe ratio: the probabilistic Sharpe ratio and a bootstrap confidence interval.

* :func:`probabilistic_sharpe` (PSR; Bailey and Lopez de Prado, "The Sharpe Ratio Efficient Frontier",
  Journal of Risk 15(2), 2012): the probability that the true Sharpe ratio exceeds ``benchmark``, given how
  many returns there are and how far they are from normal,

      PSR = Phi((SR - SR*) * sqrt(N - 1) / sqrt(1 - g3 * SR + (g4 - 1) / 4 * SR**2))

  with SR = mean / std(ddof=1) per period (not annualised), g3 the skewness and g4 the kurtosis (3 for a
  normal) as population moments, SR* the benchmark per period (0: "is the Sharpe positive at all").
  None when N < 3, the returns never vary, or the denominator is not positive.
* :func:`sharpe_interval`: a percentile bootstrap. The N returns are resampled with replacement (iid) ``reps``
  times from ``numpy.random.default_rng(seed)``; the interval is the ``(1 - level) / 2`` and
  ``(1 + level) / 2`` quantiles of the resampled Sharpe ratios (annualised like ``sharpe``; a resample that
  never varies has Sharpe 0). One seed for every strategy of a symbol resamples the same windows for all
  (common random numbers), so their intervals compare like with like.

Neither corrects for having compared several strategies; the reports say how many were compared.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

_CHUNK = 2_000_000  # resampled returns held at once


def probabilistic_sharpe(returns, benchmark: float = 0.0) -> float | None:
    """PSR of per-period ``returns`` against the per-period Sharpe ratio ``benchmark``."""
    r = np.asarray(returns, dtype=np.float64)
    n = len(r)
    if n < 3:
        return None
    sd = r.std(ddof=1)
    if sd == 0:
        return None
    sr = r.mean() / sd
    z = (r - r.mean()) / r.std(ddof=0)
    skew, kurt = float(np.mean(z**3)), float(np.mean(z**4))
    denominator = 1.0 - skew * sr + (kurt - 1.0) / 4.0 * sr**2
    if denominator <= 0:
        return None
    return float(norm.cdf((sr - benchmark) * math.sqrt(n - 1) / math.sqrt(denominator)))


def bootstrap_sharpes(returns, reps: int = 1000, seed: int = 0) -> np.ndarray:
    """Per-period Sharpe ratios of ``reps`` iid resamples of ``returns`` (row b uses the b-th draw of
    ``rng.integers(0, N, N)``)."""
    r = np.asarray(returns, dtype=np.float64)
    n = len(r)
    rng = np.random.default_rng(seed)
    out = np.empty(reps)
    rows = max(1, _CHUNK // max(n, 1))
    for start in range(0, reps, rows):
        x = r[rng.integers(0, n, size=(min(rows, reps - start), n))]
        sd = x.std(axis=1, ddof=1)
        out[start:start + len(x)] = np.where(sd > 0, x.mean(axis=1) / np.where(sd > 0, sd, 1.0), 0.0)
    return out


def sharpe_interval(returns, periods_per_year: float, reps: int = 1000, level: float = 0.95,
                    seed: int = 0) -> tuple[float, float] | None:
    """Bootstrap ``level`` interval of the annualised Sharpe ratio; None for fewer than 2 returns or returns
    that never vary (a strategy that never traded)."""
    r = np.asarray(returns, dtype=np.float64)
    if len(r) < 2 or r.std() == 0:
        return None
    lo, hi = np.quantile(bootstrap_sharpes(r, reps, seed), [(1 - level) / 2, (1 + level) / 2])
    scale = math.sqrt(periods_per_year)
    return float(lo * scale), float(hi * scale)
