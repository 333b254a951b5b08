"""How far to trust a Sharpe ratio: the probabilistic Sharpe ratio and a bootstrap confidence interval.

* :func:`probabilistic_sharpe` (PSR; Bailey and Lopez de Prado, "The Sharpe Ratio Efficient Frontier",
  Journal of Risk 15(2), 2012): the probability that the true Sharpe ratio exceeds ``benchmark``, given how
  many returns there are and how far they are from normal,

      PSR = Phi((SR - SR*) * sqrt(N - 1) / sqrt(1 - g3 * SR + (g4 - 1) / 4 * SR**2))

  with SR = mean / std(ddof=1) per period (not annualised), g3 the skewness and g4 the kurtosis (3 for a
  normal) as population moments, SR* the benchmark per period (0: "is the Sharpe positive at all"), and
  Phi(z) = erfc(-z / sqrt(2)) / 2. None when N < 3, the returns never vary, or the denominator is not positive.
* :func:`sharpe_interval`: a percentile bootstrap. The N returns are resampled with replacement (iid) ``reps``
  times from ``numpy.random.default_rng(seed)``; the interval is the ``(1 - level) / 2`` and
  ``(1 + level) / 2`` quantiles of the resampled Sharpe ratios (annualised like ``sharpe``; a resample that
  never varies has Sharpe 0). One seed for every strategy of a symbol resamples the same windows for all
  (common random numbers), so their intervals compare like with like; it also makes them cheap: the draws
  are counted once into a ``reps x N`` matrix of how often each return was drawn (kept for the next series
  of the same length), and each series' resampled means and variances are two matrix products,
  mean = C r / N and var = (C r**2 - N mean**2) / (N - 1). A resample whose variance is within rounding of
  zero (below 1e-12 of its mean square) never varies.

Neither corrects for having compared several strategies; the reports say how many were compared.

When they are shown (:func:`trust_reason`): a series gets a PSR and an interval only with at least ``min_trades``
trades (``--min-trades``, default 10; buy and hold counts each window it holds) and at least
:data:`MIN_NONZERO` (10) non-zero returns; otherwise both are None and ``psr_ci_reason`` says why ("too few
trades (3)"). A strategy's flat windows are zeros, so a series of 70 windows with one trade is one number and
69 zeros. Its PSR rests on skewness and kurtosis estimated from that one number (the normal approximation of
the Sharpe ratio's error is asymptotic: Lo, "The Statistics of Sharpe Ratios", Financial Analysts Journal
58(4), 2002; Mertens 2002), and its bootstrap is lumpy: with k non-zero returns among N, a resample draws none of
them with probability (1 - k/N)**N ~ exp(-k) (each of the N iid draws misses all k), about 5 % of the resamples
at k = 3, enough to move the end of a 95 % interval, and 0.005 % at k = 10.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

_CHUNK = 2_000_000  # resampled returns drawn at once
MIN_NONZERO = 10  # non-zero returns a series needs for a PSR and a bootstrap interval (module docstring)


def trust_reason(returns, filled, min_trades: int, unit: str = "trades") -> str | None:
    """Why the PSR and the bootstrap interval of ``returns`` are not shown, or None when they are: fewer than
    ``min_trades`` ``filled`` windows ("too few trades (3)"; ``unit`` names them, e.g. windows held) or fewer
    than :data:`MIN_NONZERO` non-zero returns."""
    trades = int(np.count_nonzero(filled))
    if trades < min_trades:
        return f"too few {unit} ({trades})"
    nonzero = int(np.count_nonzero(np.asarray(returns, dtype=np.float64)))
    if nonzero < MIN_NONZERO:
        return f"too few non-zero returns ({nonzero})"
    return None
_ROUNDING = 1e-12  # a resample's variance below this share of its mean square is zero


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
    z = (sr - benchmark) * math.sqrt(n - 1) / math.sqrt(denominator)
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


@lru_cache(maxsize=1)
def resample_counts(n: int, reps: int, seed: int) -> np.ndarray:
    """``[reps, n]``: how often resample b drew each of ``n`` returns (row b counts the b-th draw of
    ``rng.integers(0, n, n)`` from ``numpy.random.default_rng(seed)``). Read-only; the last one is kept, as
    every series of a backtest has the same length."""
    rng = np.random.default_rng(seed)
    counts = np.empty((reps, n))
    rows = max(1, _CHUNK // max(n, 1))
    for start in range(0, reps, rows):
        m = min(rows, reps - start)
        draws = rng.integers(0, n, size=(m, n)) + n * np.arange(m)[:, None]
        counts[start:start + m] = np.bincount(draws.ravel(), minlength=m * n).reshape(m, n)
    counts.flags.writeable = False
    return counts


def bootstrap_sharpes(returns, reps: int = 1000, seed: int = 0) -> np.ndarray:
    """Per-period Sharpe ratios of ``reps`` iid resamples (see the module docstring): ``[reps]`` for returns
    ``[N]``; ``[S, reps]`` for ``S`` series ``[S, N]``, all resampled with the same draws in one matrix product."""
    r = np.asarray(returns, dtype=np.float64)
    many = np.atleast_2d(r)
    s, n = many.shape
    if n < 2:
        return np.zeros(r.shape[:-1] + (reps,))
    sums = resample_counts(n, reps, seed) @ np.concatenate([many, many * many]).T  # [reps, 2S]
    mean, mean_square = sums[:, :s] / n, sums[:, s:] / n
    var = (sums[:, s:] - n * mean * mean) / (n - 1)
    varies = var > _ROUNDING * mean_square
    out = np.where(varies, mean / np.sqrt(np.where(varies, var, 1.0)), 0.0).T
    return out if r.ndim == 2 else out[0]


def sharpe_intervals(returns, periods_per_year: float, reps: int = 1000, level: float = 0.95,
                     seed: int = 0) -> list[tuple[float, float] | None]:
    """Bootstrap ``level`` interval of the annualised Sharpe ratio of each series ``[S, N]``; None for fewer
    than 2 returns or returns that never vary (a strategy that never traded)."""
    r = np.atleast_2d(np.asarray(returns, dtype=np.float64))
    lo, hi = np.quantile(bootstrap_sharpes(r, reps, seed), [(1 - level) / 2, (1 + level) / 2], axis=1)
    scale = math.sqrt(periods_per_year)
    return [None if r.shape[1] < 2 or row.std() == 0 else (float(a * scale), float(b * scale))
            for row, a, b in zip(r, lo, hi)]


def sharpe_interval(returns, periods_per_year: float, reps: int = 1000, level: float = 0.95,
                    seed: int = 0) -> tuple[float, float] | None:
    """:func:`sharpe_intervals` of one series."""
    return sharpe_intervals(np.asarray(returns, dtype=np.float64)[None], periods_per_year, reps, level, seed)[0]
