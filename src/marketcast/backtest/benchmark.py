"""The benchmark: a true buy-and-hold of the symbol over the scored windows, and each strategy against it.

Buy and hold enters once at the open of the first settled bar (the first bar any strategy trades), holds
through every close and overnight gap, and exits once at the close of the last settled bar. It pays the
per-side cost ``c`` (fee plus half the spread) once on entry and once on exit. With ``O_1`` that first open and
``C_k`` the close of window k's settle bar, its equity after window k is ``(1 - c) * C_k / O_1`` until the
exit, and ``(1 - c)**2 * C_N / O_1`` at the end. Its per-window returns line up with the strategies':

    r_1 = (1 - c) * C_1 / O_1 - 1,   r_k = C_k / C_(k-1) - 1,   r_N = (1 - c) * C_N / C_(N-1) - 1

(one window: r_1 = (1 - c)**2 * C_1 / O_1 - 1). Unlike the ``buy_hold`` strategy (long each bar from its open,
exited by the run's exit rule: a round trip and two costs per bar) it earns every overnight move and pays costs
once.

Each strategy's per-window net returns ``r`` against the benchmark's ``b`` (``P`` periods a year):

* ``beta``              cov(r, b) / var(b) (ddof 1 both); None when b never varies
* ``alpha``             Jensen's alpha with a zero risk-free rate, compounded to a year as empyrical does:
                        (1 + mean(r - beta * b)) ** P - 1; only when the windows cover at least a year (N >= P),
                        else None with ``alpha_reason`` "n/a (< 1 year): ..." (compounding a few weeks' mean
                        P times showed alpha +142 % for a 9 % loss); None too where it would overflow a float
* ``information_ratio`` mean(r - b) / std(r - b, ddof=1) * sqrt(P), annualised like the Sharpe ratio; None
                        when r - b never varies
"""

from __future__ import annotations

import math

import numpy as np

from marketcast.backtest.metrics import compound, strategy_metrics, under_a_year

NAME = "buy_and_hold"
DESCRIPTION = ("buy once at the first open, hold through every close and gap, sell once at the last close; "
               "costs once each way")


def buy_and_hold_returns(first_open: float, closes: np.ndarray, cost_per_side: float) -> np.ndarray:
    """Per-window returns of buy and hold entered at ``first_open`` with window closes ``closes``."""
    c = np.asarray(closes, dtype=np.float64)
    prev = np.concatenate([[first_open], c[:-1]])
    growth = c / prev
    growth[0] *= 1.0 - cost_per_side
    growth[-1] *= 1.0 - cost_per_side
    return growth - 1.0


INTRADAY_DESCRIPTION = ("long every settle bar from its open to its close; a round trip of costs a bar")


def intraday_returns(opens: np.ndarray, closes: np.ndarray, cost_per_side: float) -> np.ndarray:
    """Per-window returns of buy and hold *intraday*: long each settle bar from its open to its close (bar t+1
    only, the bar the window settles on), paying the per-side cost ``c`` of :func:`buy_and_hold_returns` on
    entry and on exit of every bar: ``(1 - c)**2 * C / O - 1``. What a strategy that never holds overnight could
    have earned by always being long: the benchmark SPA tests intraday strategies against beside close to
    close buy and hold, whose overnight gaps they never hold (:mod:`marketcast.backtest.overfit`)."""
    o = np.asarray(opens, dtype=np.float64)
    c = np.asarray(closes, dtype=np.float64)
    return (1.0 - cost_per_side) ** 2 * (c / o) - 1.0


def buy_and_hold_metrics(returns: np.ndarray, periods_per_year: float) -> dict:
    """The strategy metrics of buy and hold, counted as the one round trip it is."""
    r = np.asarray(returns, dtype=np.float64)
    m = strategy_metrics(r, np.ones(len(r), dtype=bool), periods_per_year)
    m.update(trades=1, turnover=2.0 / len(r), win_rate=float(m["return"] > 0))
    return m


def relative_metrics(returns: np.ndarray, benchmark: np.ndarray, periods_per_year: float) -> dict:
    """Alpha, beta and information ratio of ``returns`` against ``benchmark`` (see the module docstring)."""
    r = np.asarray(returns, dtype=np.float64)
    b = np.asarray(benchmark, dtype=np.float64)
    why = under_a_year(len(r), periods_per_year)
    out = {"alpha": None, "alpha_reason": why, "beta": None, "information_ratio": None}
    if len(r) < 2:
        return out
    var_b = b.var(ddof=1)
    if var_b > 0:
        beta = float(np.cov(r, b, ddof=1)[0, 1] / var_b)
        alpha_per_period = float(np.mean(r - beta * b))
        out["beta"] = beta
        if why is None:
            out["alpha"] = compound(1.0 + alpha_per_period, periods_per_year)
    active = r - b
    sd = active.std(ddof=1)
    if sd > 0:
        out["information_ratio"] = float(active.mean() / sd * math.sqrt(periods_per_year))
    return out
