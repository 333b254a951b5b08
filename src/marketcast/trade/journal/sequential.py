"""The promotion test: a one-sided e-process on per-day differences, safe to check after every cycle, whose
validity does not rest on Gaussian or symmetric differences.

H0: the mean daily difference (shadow - live) is <= 0, given the days before; H1: it is > 0. The evidence is a
Catoni-style nonnegative supermartingale (Catoni 2012, "Challenging the empirical mean and empirical variance",
Ann. IHP 48; Wang & Ramdas 2023, "Catoni-style confidence sequences for heavy-tailed mean estimation", Stochastic
Process. Appl. 163) with a bet ``lambda_i >= 0`` chosen from the days before day i::

    E_t = prod_{i <= t} exp(phi(lambda_i X_i)) / (1 + lambda_i**2 v_i / 2)
    phi(y) = log(1 + y) for y >= 0,   -log(1 - y + y**2 / 2) for y < 0

Why it is an e-process: ``exp(phi(y)) <= 1 + y + min(y, 0)**2 / 2`` for every real y (for y < 0,
``(1 - y + y**2/2)(1 + y + y**2/2) = 1 + y**4/4 >= 1``), so for ``lambda >= 0`` and a day whose conditional mean is
<= 0, ``E[exp(phi(lambda X))] <= 1 + lambda**2 E[min(X, 0)**2] / 2``. When ``v_i`` bounds the day's conditional
*downside* second moment ``E[min(X_i, 0)**2 | past]``, each factor has conditional mean <= 1 and E is a
nonnegative supermartingale under H0; Ville's inequality gives ``P(sup_t E_t >= 1 / alpha) <= alpha``, so
promoting whenever it crosses keeps the false-promotion rate at most alpha. Only losses need the bound: the
upside enters through ``log(1 + y)``, the betting payoff (Waudby-Smith & Ramdas 2024, "Estimating means of
bounded random variables by betting", JRSS-B 86), which needs none. A heavy left tail costs at most
``-2 log |y|`` a day instead of ruining the bet.

The assumption that remains. No test of a mean is valid for every distribution with a finite variance (Bahadur &
Savage 1956, Ann. Math. Stat. 27), and the scale of the P&L is not known in advance, so ``v_i`` is estimated from
the days before day i (predictable): :data:`INFLATION` times the mean of ``min(X_j, 0)**2`` over them. The test is
valid when every day's conditional downside second moment is finite and at most that estimate. It bets nothing
for the first :data:`WARM_UP` days (they only estimate ``v``) and nothing before a losing day was seen (no
estimate of the downside: a never-losing stream is what a rare large loss looks like until it comes). The bet is
the plug-in ``lambda_i = max(mean, 0) / (mean of max(X, 0)**2 + v_i)`` over the days before (it maximises the
first two terms of E's growth). The two constants were chosen on the simulation below (an estimate from few days is
too low more often than too high): with no inflation and no warm-up 1 - Exp(1) promoted 13.7% and bootstrapped
SP500 returns 6%; with the inflation and a 10-day warm-up 1 - Exp(1) promoted 5.3%; larger ones slow a real
edge. Simulated (benchmarks/promotion_nulls.py, the shapes and seed of
tests/trade/test_promote_sequential.py: 2,000 runs x 500 days asked daily, alpha 0.05) it promotes 3.0%, 1.85%
and 2.6% of runs for +0.1 w.p. 0.9 / -0.9, +0.02 w.p. 0.98 / -0.98 and 1 - Exp(1), and 1.35-1.6% on
bootstrapped index returns, where the normal-mixture t-test it replaced promoted 37.8%, 82% and 8.1%.

The confidence sequence: with the same bets, ``E_t(m)`` on ``X - m`` (``v_i(m)`` from ``min(X_j - m, 0)**2``)
falls as m rises, so the means it does not reject are ``[low, inf)``, ``E_t(low) = 1 / alpha``: a one-sided
lower confidence bound valid at every t at once under the same assumption about the true mean.

One observation is one day: all symbols' decisions of a day summed, since same-day decisions across symbols move
together. Every function works along the last axis of an array of days, so the command (one run) and the
simulation in the tests (thousands of runs at once) call the same code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NAME = "one-sided Catoni-style e-process (Wang & Ramdas 2023; downside variance estimated from past days)"
WARM_UP = 20  # days that only estimate the downside before the first bet
INFLATION = 2.0  # the downside bound: twice the running mean of the squared losses
ASSUMPTION = (f"valid when each day's downside second moment is at most {INFLATION:g}x the mean of the squared "
              f"losses of the days before it; no bet in the first {WARM_UP} days or before a losing day")


@dataclass(frozen=True)
class Sequential:
    """One day-level test: ``n`` days, the mean daily difference, its one-sided confidence-sequence bound
    ``[low, high)`` (``high`` is inf), the e-value against ``threshold`` (1 / alpha); ``passes`` when the e-value
    crossed it with a positive mean; ``bet_days``: the days it bet on (0: no evidence can have been gathered)."""

    n: int
    mean: float
    low: float
    high: float
    e_value: float
    threshold: float
    bet_days: int = 0

    @property
    def passes(self) -> bool:
        return bool(decide(self.e_value, self.mean, self.threshold))

    def as_json(self) -> dict:
        """The test's fields for ``trade promote --json`` (an unbounded interval end is null)."""
        end = lambda x: x if np.isfinite(x) else None
        return {"test": NAME, "days": self.n, "interval": [end(self.low), end(self.high)],
                "e_value": self.e_value, "threshold": self.threshold}

    def line(self) -> str:
        return (f"{NAME}: n={self.n} days, mean daily difference {self.mean:+.6f} "
                f"[{self.low:+.6f}, {self.high:+.6f}], e-value {self.e_value:.4g} vs threshold {self.threshold:g}")


def phi(y):
    """Catoni's influence function, one-sided: ``log(1 + y)`` on gains, ``-log(1 - y + y**2 / 2)`` on losses."""
    y = np.asarray(y, dtype=float)
    gain, loss = np.maximum(y, 0.0), np.minimum(y, 0.0)
    return np.where(y >= 0, np.log1p(gain), -np.log1p(-loss + 0.5 * loss**2))


def downside(daily, m=0.0):
    """``v_i``: :data:`INFLATION` x the mean of ``min(X_j - m, 0)**2`` over the days j before each day i (0 on the
    first day)."""
    x = np.asarray(daily, dtype=float)
    return INFLATION * _mean_before(np.minimum(x - m, 0.0) ** 2)


def bets(daily):
    """``lambda_i`` from the days before each day (predictable): the plug-in ``max(mean, 0) / (mean of gains**2 +
    v_i)``; 0 in the first :data:`WARM_UP` days and while no day has lost."""
    x = np.asarray(daily, dtype=float)
    before = np.arange(x.shape[-1])
    v, mean = downside(x), _mean_before(x)
    scale = _mean_before(np.maximum(x, 0.0) ** 2) + v
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.maximum(mean, 0.0) / scale
    return np.where((before >= WARM_UP) & (v > 0) & np.isfinite(lam), lam, 0.0)


def log_e_path(daily, m=0.0, lam=None):
    """``log E_t`` after each day of ``daily`` against the mean ``m`` (the bets: :func:`bets` unless given)."""
    x = np.asarray(daily, dtype=float)
    lam = bets(x) if lam is None else lam
    return np.cumsum(phi(lam * (x - m)) - np.log1p(0.5 * lam**2 * downside(x, m)), axis=-1)


def decide(evidence, mean, threshold):
    """The promotion rule, the one place it lives: the e-value reached the threshold (1 / alpha) and the mean
    difference is positive."""
    return (np.asarray(evidence) >= threshold) & (np.asarray(mean) > 0)


def crossed(daily, alpha: float):
    """:func:`decide` after each day (what the simulation in the tests calls on many runs at once)."""
    x = np.asarray(daily, dtype=float)
    mean = np.cumsum(x, axis=-1) / np.arange(1, x.shape[-1] + 1)
    return decide(_exp(log_e_path(x)), mean, 1.0 / alpha)


def lower_bound(daily, alpha: float) -> float:
    """The confidence sequence's lower end: the m where ``E_t(m) = 1 / alpha`` with the test's bets (-inf when no
    bet was made). ``E_t(m)`` falls as m rises, so bisection finds it."""
    x = np.asarray(daily, dtype=float)
    lam, target = bets(x), np.log(1.0 / alpha)
    if not len(x) or not (lam > 0).any():
        return -np.inf
    above = lambda m: log_e_path(x, m, lam)[-1] >= target
    hi = float(x.max())  # every phi(lam (x - max)) <= 0: log E <= 0 < target
    span = max(float(x.max() - x.min()), float(np.abs(x).max()), 1e-300)
    lo = hi - span
    for _ in range(2100):  # doubling reaches -inf (log E = inf) long before: no loop without end, NaN included
        if above(lo):
            break
        lo, span = lo - span, 2 * span
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if above(mid) else (lo, mid)
    return lo


def evaluate(daily, alpha: float) -> Sequential:
    """The test on the days seen so far (``daily``: one difference a day, oldest first)."""
    x = np.asarray(daily, dtype=float)
    n, lam = len(x), bets(x)
    e = float(_exp(log_e_path(x, 0.0, lam)[-1])) if n else 1.0
    return Sequential(n, float(x.mean()) if n else 0.0, lower_bound(x, alpha), np.inf, e, 1.0 / alpha,
                      int((lam > 0).sum()))


def _mean_before(a):
    """The mean of ``a`` over the days before each day along the last axis (0 on the first day)."""
    total = np.cumsum(a, axis=-1)
    total = np.concatenate([np.zeros_like(total[..., :1]), total[..., :-1]], axis=-1)
    return total / np.maximum(np.arange(a.shape[-1]), 1)


def _exp(log_e):
    return np.exp(np.minimum(log_e, 700.0))
