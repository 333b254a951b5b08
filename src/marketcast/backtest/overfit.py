"""Is the best strategy better than luck? Multiple-testing statistics of a backtest's choice among its trials.

A backtest compares N strategies (trials) on the same windows and reports the best; the best of N noisy Sharpe
ratios is high even when no strategy has an edge. The corrections below are computed on the choice the
selection rule (:mod:`marketcast.backtest.selection`) actually makes: its candidates are the *eligible*
strategies, those with at least ``min_trades`` filled trades, ranked by compounded net return (ties: the higher
Sharpe ratio). A strategy that never trades is no trial: it could never be picked, and counting it (Sharpe 0,
mid-rank on a losing symbol) made PBO look low and N look large. Each figure, from its paper:

* **Deflated Sharpe ratio** (DSR; Bailey and López de Prado, "The Deflated Sharpe Ratio: Correcting for
  Selection Bias, Backtest Overfitting and Non-Normality", Journal of Portfolio Management 40(5), 2014). The
  Sharpe ratio the best of N zero-edge trials is expected to reach,

      SR0 = sqrt(V[SR]) * ((1 - g) * Z^-1(1 - 1/N) + g * Z^-1(1 - 1/(N e)))        (g: Euler-Mascheroni)

  with V[SR] the variance of the trials' Sharpe ratios (0 for a single trial), is the benchmark of the
  probabilistic Sharpe ratio: DSR = Z((SR - SR0) sqrt(T - 1) / sqrt(1 - g3 SR + (g4 - 1) / 4 SR^2)), where
  SR, g3 (skewness) and g4 (kurtosis, 3 for a normal) are the chosen series' per-period Sharpe ratio and
  population moments over its T returns. Z is the standard normal CDF (``statistics.NormalDist``). For the
  in-sample pick, V[SR] is taken over the eligible strategies and N is their *effective* number (below).
* **Effective number of trials**: strategies that share a signal (``simple``, ``entry_takeprofit`` and
  ``unprofit_shutdown`` read the same forecast) are not independent trials. N is the eigenvalue count of Li and
  Ji ("Adjusting multiple testing in multi-locus analyses using the eigenvalues of a correlation matrix",
  Heredity 95, 2005) on the correlation matrix of the eligible strategies' per-window returns: M_eff =
  sum_i [I(l_i >= 1) + (l_i - floor(l_i))] over its eigenvalues l_i. Independent trials (every eigenvalue
  below 2) give M_eff = N exactly; N copies of one series give 1. As a correlation matrix's eigenvalues sum to
  N, M_eff = N - sum over l >= 1 of (floor(l) - 1): a whole number, up to rounding. SR0 still takes a real N
  (an effective count by another method may be fractional): the formula above, floored at 0 (below about 1.3
  trials it would turn negative; one trial deflates nothing).
* **The walk-forward record** is one pre-declared rule, not a choice among the strategies: its PSR against 0
  (``psr_walk_forward``) and its DSR deflated by the number of *selection rules* tried
  (``dsr_walk_forward``; one in a backtest, where it equals the PSR).
* **Probability of backtest overfitting** (PBO; Bailey, Borwein, López de Prado and Zhu, "The Probability of
  Backtest Overfitting", Journal of Computational Finance 20(4), 2017), by combinatorially symmetric
  cross-validation (CSCV): the T x N return matrix is cut into S contiguous blocks of rows (sizes differ by
  at most one when S does not divide T); for each of the C(S, S/2) ways to take half the blocks as in-sample,
  the in-sample winner gets its out-of-sample relative rank w = rank / (n + 1) among the n strategies that
  competed (rank 1 = worst; ties share their mean rank) and the logit l = log(w / (1 - w)). PBO is the share
  of splits with l <= 0: how often the in-sample winner is at or below the out-of-sample median.
  :func:`cscv` with the strategies' fills applies the selection rule (see there); without, the winner is the
  best Sharpe ratio among every series that varies (a sweep's rule for its best cell).
* **Reality check / SPA** (White, "A Reality Check for Data Snooping", Econometrica 68(5), 2000; Hansen, "A
  Test for Superior Predictive Ability", JBES 23(4), 2005), on losses = -returns by
  :mod:`marketcast.backtest.spa` (``arch.bootstrap.SPA``'s statistic in numpy, every resample at once; the
  formulas are there): the p-value of "no eligible strategy beats the benchmark", with the stationary
  bootstrap, against three benchmarks (:data:`SPA_BENCHMARKS`): buy and hold close to close, buy and hold
  intraday (open to close of the settle bar, what a strategy that never holds overnight could have earned) and
  cash. ``consistent`` is Hansen's SPA p-value, ``upper`` White's reality check; each comes with its Monte
  Carlo standard error over the :data:`marketcast.backtest.spa.REPS` resamples.

The figures here are per symbol; the trials are its strategies (one setting each). A sweep's trials are its
cells: :func:`marketcast.runs.overview.selection` deflates the best cell of a run with these functions
(:func:`expected_max_sharpe` over the cells' Sharpe variance, :func:`deflated_sharpe` of the best cell's
walk-forward record, :func:`cscv` on the cells' walk-forward returns, the best cell by Sharpe) and says so with
:func:`luck_sentence`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Mapping

import numpy as np

from marketcast.backtest import spa as spa_bootstrap
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


def expected_max_sharpe(trials: float, sharpe_variance: float) -> float:
    """SR0: the Sharpe ratio the best of ``trials`` zero-edge trials reaches on average (same units as the
    Sharpe ratios whose variance is ``sharpe_variance``); 0 for one trial. ``trials`` may be an effective,
    fractional count: between 1 and 2 the formula is floored at 0 (it turns negative below about 1.3)."""
    if trials <= 1:
        return 0.0
    z = (1 - EULER_GAMMA) * _NORMAL.inv_cdf(1 - 1 / trials) + EULER_GAMMA * _NORMAL.inv_cdf(1 - 1 / (trials * math.e))
    return math.sqrt(sharpe_variance) * max(z, 0.0)


EFFECTIVE_TRIALS_METHOD = "eigenvalues, Li & Ji 2005"


def effective_trials(returns) -> float | None:
    """Li and Ji's (2005) effective number of the ``[T, N]`` series: sum over the eigenvalues l of their
    correlation matrix of I(l >= 1) + (l - floor(l)) (module docstring); a series that never varies counts as
    one independent trial. None for no series."""
    m = np.asarray(returns, dtype=np.float64)
    if m.ndim != 2 or m.shape[1] == 0:
        return None
    varies = np.array([moments(col) is not None for col in m.T], dtype=bool)
    flat = float((~varies).sum())
    if varies.sum() < 2:
        return flat + float(varies.sum())
    eigen = np.abs(np.linalg.eigvalsh(np.corrcoef(m[:, varies], rowvar=False)))
    eigen = np.minimum(eigen, varies.sum())  # rounding can lift the largest a hair above N
    return flat + float(np.sum((eigen >= 1.0) + (eigen - np.floor(eigen))))


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
    """The PBO of one return matrix: ``logits`` of the splits counted (those with at least two candidates),
    ``combinations`` = C(S, S/2) in all."""

    pbo: float
    splits: int
    logits: np.ndarray
    combinations: int = 0

    @property
    def counted(self) -> int:
        return len(self.logits)


def _sharpes(sums: np.ndarray, n_series: int) -> np.ndarray:
    """[C, N] Sharpe ratios from rows of (count, sum of r per series, sum of r**2 per series); 0 where a series
    never varies."""
    n = sums[:, :1]
    mean, mean_square = sums[:, 1:n_series + 1] / n, sums[:, n_series + 1:2 * n_series + 1] / n
    with np.errstate(divide="ignore", invalid="ignore"):  # a half of one window has no variance (NaN: not > 0)
        var = (mean_square - mean * mean) * n / (n - 1)
    varies = var > _ROUNDING * mean_square
    return np.where(varies, mean / np.sqrt(np.where(varies, var, 1.0)), 0.0)


@lru_cache(maxsize=4)
def _halves(splits: int) -> np.ndarray:
    """[C(S, S/2), S]: row c is 1 on the blocks of the c-th in-sample half (itertools' order), else 0. Built from
    the S-bit masks with S/2 bits set, block i on bit S-1-i: itertools' lexicographic order of the block tuples
    is the masks' descending order (the first block where two halves differ is in the earlier one, on the higher
    bit), so no tuple is made one at a time."""
    masks = np.arange((1 << splits) - 1, -1, -1)
    masks = masks[sum((masks >> i) & 1 for i in range(splits)) == splits // 2]  # S/2 blocks in sample
    inside = ((masks[:, None] >> np.arange(splits - 1, -1, -1)) & 1).astype(np.float64)  # block 0 on the top bit
    inside.flags.writeable = False
    return inside


def _block_sums(m: np.ndarray, splits: int, *extra: np.ndarray) -> np.ndarray:
    """[S, 1 + 2N + ...]: per block the count, the sums of r and r**2 per series, then the sums of ``extra``."""
    blocks = np.array_split(np.arange(len(m)), splits)
    return np.array([[len(b), *m[b].sum(axis=0), *(m[b] ** 2).sum(axis=0), *(x for e in extra for x in e[b].sum(axis=0))]
                     for b in blocks])


def _logits(rank: np.ndarray, competed: np.ndarray) -> np.ndarray:
    omega = rank / (competed + 1)
    return np.log(omega / (1 - omega))


def cscv(returns, splits: int, filled=None, min_trades: int = 1) -> Cscv | None:
    """PBO of the ``[T windows, N strategies]`` matrix by CSCV over ``splits`` blocks (module docstring).

    With ``filled`` (bool ``[T, N]``, the windows each strategy traded) each split follows the selection rule
    (:class:`marketcast.backtest.selection.SelectionRule`): the candidates are the strategies with at least
    ``min_trades`` fills in the in-sample half; the winner is the candidate with the highest compounded net
    return there (ties: the higher Sharpe ratio, then the first listed); its out-of-sample rank is taken by the
    same key (compounded return, then Sharpe) among the same candidates, ``n`` of them. The same candidates on
    both halves is CSCV's design (Bailey et al. 2017, section 3: the rank of the in-sample optimum among the same
    N trials out of sample, so that every split's out-of-sample half is another split's in-sample half): a
    winner that stops trading out of sample is ranked by what it then earned, which is the overfitting PBO
    measures, rather than dropped. A split with fewer than two candidates involves no choice (the rule is flat
    or has one option) and is left out of the share; a strategy that never trades is never a candidate. None
    when no split has two candidates.

    Without ``filled`` the winner is the best in-sample Sharpe ratio among every series, ranked by Sharpe out
    of sample (a sweep picks its best cell by Sharpe); None with fewer than 2 series that vary."""
    m = np.asarray(returns, dtype=np.float64)
    check_splits(splits, len(m))
    halves = _halves(splits)
    if filled is None:
        if sum(moments(col) is not None for col in m.T) < 2:
            return None
        n = m.shape[1]
        per_block = _block_sums(m, splits)
        inside = halves @ per_block  # the in-sample half of each split; the other half is the rest
        best = np.argmax(_sharpes(inside, n), axis=1)
        oos = _sharpes(per_block.sum(axis=0) - inside, n)
        chosen = oos[np.arange(len(oos)), best][:, None]
        rank = (oos < chosen).sum(axis=1) + ((oos == chosen).sum(axis=1) + 1) / 2
        logits = _logits(rank, np.full(len(rank), n))
        return Cscv(float(np.mean(logits <= 0)), splits, logits, len(logits))
    f = np.asarray(filled, dtype=bool)
    trials = f.any(axis=0)  # a strategy that never trades is no trial
    m, f = m[:, trials], f[:, trials]
    n = m.shape[1]
    if n < 2:
        return None
    growth = 1.0 + m  # the compounded return of a half is the product of its growths: log |.|, sign and zeros
    zero = growth == 0
    log_abs = np.log(np.abs(np.where(zero, 1.0, growth)))
    per_block = _block_sums(m, splits, f.astype(np.float64), log_abs, (growth < 0).astype(np.float64),
                            zero.astype(np.float64))
    inside = halves @ per_block
    outside = per_block.sum(axis=0) - inside

    def keys(sums):  # [C, N] compounded growth and Sharpe ratio of one half
        cols = lambda k: sums[:, 1 + (2 + k) * n:1 + (3 + k) * n]  # noqa: E731  (k: fills, log, negatives, zeros)
        sign = 1.0 - 2.0 * (np.rint(cols(2)).astype(np.int64) & 1)  # an odd count of negative growths
        return np.where(cols(3) > 0, 0.0, sign * np.exp(cols(1))), _sharpes(sums, n)

    candidates = inside[:, 1 + 2 * n:1 + 3 * n] >= min_trades
    g_in, s_in = keys(inside)
    top = np.where(candidates, g_in, -np.inf).max(axis=1, keepdims=True)
    tied = candidates & (g_in == top)
    top_sharpe = np.where(tied, s_in, -np.inf).max(axis=1, keepdims=True)
    winner = np.argmax(tied & (s_in == top_sharpe), axis=1)
    competed = candidates.sum(axis=1)
    counted = competed >= 2
    if not counted.any():
        return None
    g_out, s_out = keys(outside)
    rows = np.arange(len(winner))
    gc, sc = g_out[rows, winner][:, None], s_out[rows, winner][:, None]
    below = candidates & ((g_out < gc) | ((g_out == gc) & (s_out < sc)))
    same = candidates & (g_out == gc) & (s_out == sc)
    rank = below.sum(axis=1) + (same.sum(axis=1) + 1) / 2
    logits = _logits(rank[counted], competed[counted])
    return Cscv(float(np.mean(logits <= 0)), splits, logits, len(rows))


def spa_test(benchmark, returns, reps: int = spa_bootstrap.REPS, seed: int = 0) -> dict | None:
    """Hansen's SPA and White's reality check p-values of the ``[T, N]`` strategies' ``returns`` against
    ``benchmark`` returns (:mod:`marketcast.backtest.spa`: stationary bootstrap, arch's block size, ``reps``
    resamples drawn from ``numpy.random.default_rng(seed)``, so the three benchmarks of a symbol share their
    resamples), with that block size and each p-value's Monte Carlo standard error; None below 10 windows or
    when no strategy differs from the benchmark."""
    b = np.asarray(benchmark, dtype=np.float64)
    m = np.asarray(returns, dtype=np.float64)
    keep = [j for j in range(m.shape[1]) if np.ptp(m[:, j] - b) > 0]
    if len(b) < 10 or not keep:
        return None
    block = spa_bootstrap.block_size(len(b))
    indices = spa_bootstrap.seeded_indices(seed, len(b), block, reps)
    p = spa_bootstrap.pvalues(m[:, keep] - b[:, None], indices, block)  # losses -r: benchmark's minus strategy's
    return {"spa_pvalue": p["consistent"], "reality_check_pvalue": p["upper"], "spa_block_size": block,
            "spa_mc_error": spa_bootstrap.mc_error(p["consistent"], reps),
            "reality_check_mc_error": spa_bootstrap.mc_error(p["upper"], reps)}


SPA_BENCHMARKS = {  # key prefix in SelectionStats -> what the strategies are tested against
    "spa": "buy & hold close -> close",
    "spa_intraday": "buy & hold intraday (open -> close of bar t+1, a round trip of costs a bar)",
    "spa_cash": "cash (0 return)",
}


def luck_sentence(trials: float, noun: str, dsr: float | None, pbo: float | None = None, *,
                  best: str | None = None, best_return: float | None = None, effective: float | None = None,
                  need: int | None = None) -> str | None:
    """One plain sentence that agrees with the figures, or None when there is nothing to warn of (``noun``:
    what the trials are, plural; ``best``: the pick's name and ``best_return`` its compounded return where
    known; ``effective``: the effective number of trials; ``need``: the trades a pick needs).

    * no pick (``best`` None with ``need``): "no strategy has the 10 trades the rule needs, so none is picked",
      and the PBO when it is above 0.5;
    * a best that loses: "the best of 7 eligible strategies (4.3 effective), maxdiff, loses money (-7.21%): no
      edge to test (DSR 0.00, PBO 0.09)";
    * DSR below 0.95 or PBO above 0.5: "the best of 100 cells is not distinguishable from luck (DSR 0.41)";
    * else None."""
    fmt = lambda x: "—" if x is None else f"{x:.2f}"  # noqa: E731
    figures = [f"DSR {fmt(dsr)}", *([] if pbo is None else [f"PBO {pbo:.2f}"])]
    high_pbo = pbo is not None and pbo > PBO_LEVEL
    if best is None and need is not None:
        one = "strategy" if "strateg" in noun else noun.removesuffix("s")
        said = f"no {one} has the {need} trades the rule needs, so none is picked"
        return said + (f"; PBO {pbo:.2f} is above {PBO_LEVEL}: the in-sample winner is below the out-of-sample "
                       "median more often than not" if high_pbo else "")
    n = f"{trials:g}" if float(trials).is_integer() else f"{trials:.1f}"
    many = f" ({effective:.1f} effective)" if effective is not None and abs(effective - trials) >= 0.05 else ""
    who = f"the best of {n} {noun}{many}" if trials > 1 else "the only trial"
    who += f", {best}," if best else ""
    if best_return is not None and best_return < 0:
        return f"{who} loses money ({100 * best_return:+.2f}%): no edge to test ({', '.join(figures)})"
    if not ((dsr is not None and dsr < DSR_LEVEL) or high_pbo):
        return None
    return f"{who} is not distinguishable from luck ({', '.join(figures)})"


@dataclass(frozen=True)
class SelectionStats:
    """The multiple-testing figures of one symbol (per-period Sharpe units; ``expected_max_sharpe`` is
    annualised like the tables' Sharpe ratios). ``strategies`` were compared; ``trials`` of them were eligible
    (the rule could pick them over all windows), worth ``effective_trials`` independent ones
    (``effective_trials_method``). ``walk_forward_rules``: the selection rules the walk-forward record is one
    of. SPA p-values against each of :data:`SPA_BENCHMARKS`, each with its Monte Carlo standard error over the
    ``spa_reps`` resamples (``*_mc_error``)."""

    strategies: int
    trials: int
    effective_trials: float | None
    sharpe_variance: float | None
    expected_max_sharpe: float | None
    pick: str | None
    pick_return: float | None
    min_trades: int
    dsr_pick: float | None
    psr_walk_forward: float | None
    dsr_walk_forward: float | None
    walk_forward_rules: int
    pbo: float | None
    cscv_splits: int | None
    cscv_combinations: int | None
    cscv_counted: int | None
    spa_pvalue: float | None
    reality_check_pvalue: float | None
    spa_block_size: int | None
    spa_intraday_pvalue: float | None
    spa_intraday_block_size: int | None
    spa_cash_pvalue: float | None
    spa_cash_block_size: int | None
    spa_reps: int | None
    spa_mc_error: float | None = None
    reality_check_mc_error: float | None = None
    spa_intraday_mc_error: float | None = None
    spa_cash_mc_error: float | None = None
    effective_trials_method: str = EFFECTIVE_TRIALS_METHOD

    @property
    def lucky(self) -> bool:
        """There is something to warn of: :meth:`verdict` says it."""
        return self.verdict() is not None

    def verdict(self) -> str | None:
        """One plain sentence (:func:`luck_sentence`) over the eligible strategies, or None."""
        return luck_sentence(self.trials, "eligible strategies" if self.trials > 1 else "strategies", self.dsr_pick,
                             self.pbo, best=self.pick, best_return=self.pick_return,
                             effective=self.effective_trials, need=self.min_trades)

    def as_dict(self) -> dict:
        return {**asdict(self), "verdict": self.verdict()}


def assess(returns: Mapping[str, np.ndarray], filled: Mapping[str, np.ndarray], pick: str | None, walk_forward,
           benchmarks: Mapping[str, np.ndarray | None], periods_per_year: float, min_trades: int,
           splits: int | None = None, reps: int = spa_bootstrap.REPS, seed: int = 0, spa: bool = True,
           rules: int = 1, rules_sharpe_variance: float | None = None) -> SelectionStats:
    """Every figure for strategies' per-window ``returns`` and ``filled`` windows, the in-sample ``pick`` (the
    rule's over all windows), the walk-forward record's returns (one of ``rules`` selection rules tried) and
    the SPA ``benchmarks`` (keys of :data:`SPA_BENCHMARKS`; None: not available); with more than one rule its
    DSR needs the rules' Sharpe variance ``rules_sharpe_variance`` (None: not computed). ``splits`` None:
    :func:`default_splits`; ``spa`` False skips the SPA tests (``reps`` resamples each). The eligible strategies
    (at least ``min_trades`` fills) are the trials of the DSR, its N (effective) and V[SR], and of the SPA; CSCV
    applies the rule per split."""
    names = list(returns)
    matrix = np.array([np.asarray(returns[n], dtype=np.float64) for n in names]).T.reshape(-1, len(names))  # [T, N]
    fills = np.array([np.asarray(filled[n], dtype=bool) for n in names]).T.reshape(matrix.shape)
    eligible = fills.sum(axis=0) >= min_trades
    trials = int(eligible.sum())
    chosen = matrix[:, eligible]
    sharpes = [m[0] for m in map(moments, chosen.T) if m is not None]
    effective = effective_trials(chosen) if trials else None
    variance = float(np.var(sharpes, ddof=1)) if len(sharpes) > 1 else (0.0 if trials == 1 else None)
    sr0 = None if variance is None or effective is None else expected_max_sharpe(effective, variance)
    s = splits if splits is not None else default_splits(len(matrix))
    found = None if s is None or trials < 2 else cscv(matrix, s, fills, min_trades)
    tests = {key: (spa_test(b, chosen, reps, seed) if spa and b is not None and trials else None)
             for key, b in ((k, benchmarks.get(k)) for k in SPA_BENCHMARKS)}
    p = lambda key, field: None if tests[key] is None else tests[key][field]  # noqa: E731
    psr = series_dsr(walk_forward, 0.0)  # the PSR against 0: one pre-declared rule deflates nothing
    rule_sr0 = 0.0 if rules == 1 else None if rules_sharpe_variance is None else expected_max_sharpe(
        rules, rules_sharpe_variance)
    return SelectionStats(
        strategies=len(names), trials=trials, effective_trials=effective, sharpe_variance=variance,
        expected_max_sharpe=None if sr0 is None else sr0 * math.sqrt(periods_per_year), pick=pick,
        pick_return=None if pick is None else float(np.prod(1.0 + np.asarray(returns[pick], dtype=np.float64)) - 1),
        min_trades=min_trades,
        dsr_pick=None if pick is None or sr0 is None else series_dsr(returns[pick], sr0),
        psr_walk_forward=psr, dsr_walk_forward=None if rule_sr0 is None else series_dsr(walk_forward, rule_sr0),
        walk_forward_rules=rules,
        pbo=None if found is None else found.pbo, cscv_splits=None if found is None else s,
        cscv_combinations=None if found is None else found.combinations,
        cscv_counted=None if found is None else found.counted,
        spa_pvalue=p("spa", "spa_pvalue"), reality_check_pvalue=p("spa", "reality_check_pvalue"),
        spa_block_size=p("spa", "spa_block_size"),
        spa_intraday_pvalue=p("spa_intraday", "spa_pvalue"), spa_intraday_block_size=p("spa_intraday", "spa_block_size"),
        spa_cash_pvalue=p("spa_cash", "spa_pvalue"), spa_cash_block_size=p("spa_cash", "spa_block_size"),
        spa_reps=reps if any(tests.values()) else None,
        spa_mc_error=p("spa", "spa_mc_error"), reality_check_mc_error=p("spa", "reality_check_mc_error"),
        spa_intraday_mc_error=p("spa_intraday", "spa_mc_error"), spa_cash_mc_error=p("spa_cash", "spa_mc_error"),
    )
