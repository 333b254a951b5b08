"""Is the best strategy better than luck? Multiple-testing statistics of a backtest's choice among its trials.

A backtest compares N strategies (trials) on the same windows and reports the best; the best of N noisy Sharpe
ratios is high even when no strategy has an edge. Three corrections, each from its paper:

* **Deflated Sharpe ratio** (DSR; Bailey and López de Prado, "The Deflated Sharpe Ratio: Correcting for
  Selection Bias, Backtest Overfitting and Non-Normality", Journal of Portfolio Management 40(5), 2014). The
  Sharpe ratio the best of N zero-edge trials is expected to reach,

      SR0 = sqrt(V[SR]) * ((1 - g) * Z^-1(1 - 1/N) + g * Z^-1(1 - 1/(N e)))        (g: Euler-Mascheroni)

  with V[SR] the variance of the trials' Sharpe ratios (0 for a single trial), is the benchmark of the
  probabilistic Sharpe ratio: DSR = Z((SR - SR0) sqrt(T - 1) / sqrt(1 - g3 SR + (g4 - 1) / 4 SR^2)), where
  SR, g3 (skewness) and g4 (kurtosis, 3 for a normal) are the chosen series' per-period Sharpe ratio and
  population moments over its T returns. Z is the standard normal CDF (``statistics.NormalDist``).
* **Probability of backtest overfitting** (PBO; Bailey, Borwein, López de Prado and Zhu, "The Probability of
  Backtest Overfitting", Journal of Computational Finance 20(4), 2017), by combinatorially symmetric
  cross-validation (CSCV): the T x N return matrix is cut into S contiguous blocks of rows (sizes differ by
  at most one when S does not divide T); for each of the C(S, S/2) ways to take half the blocks as in-sample,
  the strategy with the best in-sample Sharpe ratio gets its out-of-sample relative rank w = rank / (N + 1)
  (rank 1 = worst; ties share their mean rank) and the logit l = log(w / (1 - w)). PBO is the share of
  splits with l <= 0: how often the in-sample best is at or below the out-of-sample median.
* **Reality check / SPA** (White, "A Reality Check for Data Snooping", Econometrica 68(5), 2000; Hansen, "A
  Test for Superior Predictive Ability", JBES 23(4), 2005), by ``arch.bootstrap.SPA`` on losses = -returns:
  the p-value of "no strategy beats buy and hold", with the stationary bootstrap. ``consistent`` is Hansen's
  SPA p-value, ``upper`` White's reality check.

The figures here are per symbol; the trials are its strategies (one setting each). A sweep's trials are its
cells: :func:`marketcast.runs.overview.selection` deflates the best cell of a run with these functions
(:func:`expected_max_sharpe` over the cells' Sharpe variance, :func:`deflated_sharpe` of the best cell's
walk-forward record, :func:`cscv` on the cells' walk-forward returns) and says so with :func:`luck_sentence`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Mapping

import numpy as np

from marketcast.errors import ConfigError

EULER_GAMMA = 0.5772156649015329
DEFAULT_SPLITS = 16
DSR_LEVEL = 0.95  # a DSR below this is not distinguishable from the best of the trials by luck
PBO_LEVEL = 0.5  # a PBO above this: the in-sample best is more often than not below median out of sample
_ROUNDING = 1e-12  # a variance below this share of the mean square is zero (as marketcast.backtest.stats)
_NORMAL = NormalDist()


def trial_count(strategies: int, settings: int = 1) -> int:
    """Trials behind one decision: every strategy under every setting tried (a backtest: one setting)."""
    return strategies * settings


def expected_max_sharpe(trials: int, sharpe_variance: float) -> float:
    """SR0: the Sharpe ratio the best of ``trials`` zero-edge trials reaches on average (same units as the
    Sharpe ratios whose variance is ``sharpe_variance``); 0 for one trial."""
    if trials < 2:
        return 0.0
    z = (1 - EULER_GAMMA) * _NORMAL.inv_cdf(1 - 1 / trials) + EULER_GAMMA * _NORMAL.inv_cdf(1 - 1 / (trials * math.e))
    return math.sqrt(sharpe_variance) * z


def deflated_sharpe(sharpe: float, observations: int, skew: float, kurtosis: float, sr0: float) -> float | None:
    """DSR from the chosen series' per-period ``sharpe``, its ``observations`` and moments, and SR0 (per
    period); None when the standard error is undefined (T < 3 or a non-positive variance term)."""
    var = 1 - skew * sharpe + (kurtosis - 1) / 4 * sharpe**2
    if observations < 3 or var <= 0:
        return None
    return _NORMAL.cdf((sharpe - sr0) * math.sqrt(observations - 1) / math.sqrt(var))


def moments(returns) -> tuple[float, float, float] | None:
    """Per-period Sharpe ratio (std ddof=1), skewness and kurtosis (population); None if it never varies."""
    r = np.asarray(returns, dtype=np.float64)
    if len(r) < 2 or r.var() <= _ROUNDING * np.mean(r * r):
        return None
    z = (r - r.mean()) / r.std()
    return float(r.mean() / r.std(ddof=1)), float(np.mean(z**3)), float(np.mean(z**4))


def series_dsr(returns, sr0: float) -> float | None:
    """:func:`deflated_sharpe` of a return series."""
    m = moments(returns)
    return None if m is None else deflated_sharpe(m[0], len(returns), m[1], m[2], sr0)


def check_splits(splits: int, windows: int) -> None:
    """CSCV needs an even number of blocks, at least 2 and at most one per window."""
    if splits < 2 or splits % 2 or splits > windows:
        raise ConfigError(f"--cscv-splits must be an even number from 2 to the {windows} windows, got {splits}")


def default_splits(windows: int) -> int | None:
    """16 blocks, or the largest even number of blocks the windows allow; None below 2 windows."""
    s = min(DEFAULT_SPLITS, windows - windows % 2)
    return s if s >= 2 else None


@dataclass(frozen=True)
class Cscv:
    """The PBO of one return matrix and its split logits (``logits[c]`` for the c-th combination)."""

    pbo: float
    splits: int
    logits: np.ndarray


def _sharpes(sums: np.ndarray, n_series: int) -> np.ndarray:
    """[C, N] Sharpe ratios from rows of (count, sum of r per series, sum of r**2 per series); 0 where a series
    never varies."""
    n = sums[:, :1]
    mean, mean_square = sums[:, 1:n_series + 1] / n, sums[:, n_series + 1:] / n
    with np.errstate(divide="ignore", invalid="ignore"):  # a half of one window has no variance (NaN: not > 0)
        var = (mean_square - mean * mean) * n / (n - 1)
    varies = var > _ROUNDING * mean_square
    return np.where(varies, mean / np.sqrt(np.where(varies, var, 1.0)), 0.0)


@lru_cache(maxsize=4)
def _halves(splits: int) -> np.ndarray:
    """[C(S, S/2), S]: row c is 1 on the blocks of the c-th in-sample half (itertools' order), else 0."""
    combos = np.array(list(itertools.combinations(range(splits), splits // 2)))
    inside = np.zeros((len(combos), splits))
    inside[np.arange(len(combos))[:, None], combos] = 1.0
    inside.flags.writeable = False
    return inside


def cscv(returns, splits: int) -> Cscv | None:
    """PBO of the ``[T windows, N strategies]`` matrix by CSCV over ``splits`` blocks (module docstring); None
    with fewer than 2 strategies that vary."""
    m = np.asarray(returns, dtype=np.float64)
    check_splits(splits, len(m))
    if sum(moments(col) is not None for col in m.T) < 2:
        return None
    blocks = np.array_split(np.arange(len(m)), splits)
    per_block = np.array([[len(b), *m[b].sum(axis=0), *(m[b] ** 2).sum(axis=0)] for b in blocks])  # [S, 1 + 2N]
    inside = _halves(splits) @ per_block  # the in-sample half of each split; the other half is the rest
    n = m.shape[1]
    best = np.argmax(_sharpes(inside, n), axis=1)
    oos = _sharpes(per_block.sum(axis=0) - inside, n)
    chosen = oos[np.arange(len(oos)), best][:, None]
    rank = (oos < chosen).sum(axis=1) + ((oos == chosen).sum(axis=1) + 1) / 2
    omega = rank / (n + 1)
    logits = np.log(omega / (1 - omega))
    return Cscv(float(np.mean(logits <= 0)), splits, logits)


def spa_test(benchmark, returns, reps: int = 1000, seed: int = 0) -> dict | None:
    """Hansen's SPA and White's reality check p-values of the ``[T, N]`` strategies' ``returns`` against
    ``benchmark`` returns (``arch.bootstrap.SPA``, stationary bootstrap, arch's block size), with that block
    size; None below 10 windows or when no strategy differs from the benchmark."""
    b = np.asarray(benchmark, dtype=np.float64)
    m = np.asarray(returns, dtype=np.float64)
    keep = [j for j in range(m.shape[1]) if np.ptp(m[:, j] - b) > 0]
    if len(b) < 10 or not keep:
        return None
    from arch.bootstrap import SPA  # about a second to import (scipy, statsmodels): only when a run asks for SPA

    spa = SPA(-b, -m[:, keep], reps=reps, bootstrap="stationary", seed=seed)
    spa.compute()
    p = spa.pvalues
    return {"spa_pvalue": float(p["consistent"]), "reality_check_pvalue": float(p["upper"]),
            "spa_block_size": int(spa.block_size)}


def luck_sentence(trials: int, noun: str, dsr: float | None, pbo: float | None = None) -> str | None:
    """One plain sentence, "the best of 100 cells is not distinguishable from luck (DSR 0.41)", when ``dsr`` <
    0.95 or ``pbo`` > 0.5, else None (``noun``: what the trials are, plural; PBO is named when given)."""
    if not ((dsr is not None and dsr < DSR_LEVEL) or (pbo is not None and pbo > PBO_LEVEL)):
        return None
    who = f"the best of {trials} {noun}" if trials > 1 else "the only trial"
    figures = [f"DSR {'—' if dsr is None else f'{dsr:.2f}'}", *([] if pbo is None else [f"PBO {pbo:.2f}"])]
    return f"{who} is not distinguishable from luck ({', '.join(figures)})"


@dataclass(frozen=True)
class SelectionStats:
    """The multiple-testing figures of one symbol (per-period Sharpe units; ``expected_max_sharpe`` is
    annualised like the tables' Sharpe ratios)."""

    trials: int
    sharpe_variance: float | None
    expected_max_sharpe: float | None
    pick: str | None
    dsr_pick: float | None
    dsr_walk_forward: float | None
    pbo: float | None
    cscv_splits: int | None
    cscv_combinations: int | None
    spa_pvalue: float | None
    reality_check_pvalue: float | None
    spa_block_size: int | None
    spa_reps: int | None

    @property
    def lucky(self) -> bool:
        """The best is not distinguishable from luck: DSR below 0.95 or PBO above 0.5."""
        return self.pick is not None and ((self.dsr_pick is not None and self.dsr_pick < DSR_LEVEL)
                                          or (self.pbo is not None and self.pbo > PBO_LEVEL))

    def verdict(self) -> str | None:
        """One plain sentence when :attr:`lucky`, else None."""
        if not self.lucky:
            return None
        fmt = lambda x: "—" if x is None else f"{x:.2f}"  # noqa: E731
        who = f"the best of {self.trials} strategies" if self.trials > 1 else "the only strategy"
        return f"{who} is not distinguishable from luck (DSR {fmt(self.dsr_pick)}, PBO {fmt(self.pbo)})"

    def as_dict(self) -> dict:
        return {**asdict(self), "verdict": self.verdict()}


def assess(returns: Mapping[str, np.ndarray], pick: str | None, walk_forward, benchmark, periods_per_year: float,
           splits: int | None = None, reps: int = 1000, seed: int = 0, spa: bool = True) -> SelectionStats:
    """Every figure for strategies' per-window ``returns``, the in-sample ``pick``, the walk-forward record's
    returns and buy and hold's (``splits`` None: :func:`default_splits`; ``spa`` False skips arch)."""
    matrix = np.array([np.asarray(r, dtype=np.float64) for r in returns.values()]).T  # [T, N]
    trials = trial_count(len(returns))
    sharpes = [m[0] for m in map(moments, matrix.T) if m is not None]
    variance = float(np.var(sharpes, ddof=1)) if len(sharpes) > 1 else (0.0 if trials == 1 else None)
    sr0 = None if variance is None else expected_max_sharpe(trials, variance)
    dsr = (lambda r: None if sr0 is None else series_dsr(r, sr0))
    s = splits if splits is not None else default_splits(len(matrix))
    found = None if s is None or trials < 2 else cscv(matrix, s)
    test = spa_test(benchmark, matrix, reps, seed) if spa else None
    return SelectionStats(
        trials=trials, sharpe_variance=variance,
        expected_max_sharpe=None if sr0 is None else sr0 * math.sqrt(periods_per_year), pick=pick,
        dsr_pick=None if pick is None else dsr(returns[pick]), dsr_walk_forward=dsr(walk_forward),
        pbo=None if found is None else found.pbo, cscv_splits=None if found is None else s,
        cscv_combinations=None if found is None else len(found.logits),
        spa_pvalue=None if test is None else test["spa_pvalue"],
        reality_check_pvalue=None if test is None else test["reality_check_pvalue"],
        spa_block_size=None if test is None else test["spa_block_size"], spa_reps=reps if test else None,
    )
