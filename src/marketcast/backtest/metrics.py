"""Performance metrics of one strategy's per-window net returns (fractions; flat/unfilled windows are 0).

Definitions (``P`` = periods per year from the bar spacing and the market calendar, see
:func:`marketcast.data.calendar.annualise`; ``N`` = windows):

* ``return``           compounded total, prod(1 + r) - 1
* ``avg_daily_return`` mean(r)
* ``annual_return``    geometric: (1 + return) ** (P / N) - 1
* ``sharpe``           mean(r) / std(r, ddof=1) * sqrt(P); 0 when std is 0 or N < 2
* ``sortino``          mean(r) / DD * sqrt(P) with the downside deviation DD = sqrt(mean(min(r, 0)**2))
                       over all N returns (target 0); None when DD is 0
* ``max_drawdown``     largest fall of the equity curve (starting at 1) from its running peak, as a
                       positive fraction
* ``calmar``           annual_return / max_drawdown; None when max_drawdown is 0
* ``win_rate``         share of filled trades with net return > 0 (None without trades)
* ``exposure``         share of windows with a filled position
* ``trades``           number of filled trades
* ``turnover``         traded notional per window as a multiple of equity: every filled trade opens and
                       closes within bar t+1, so 2 * trades / N
* ``final_day``        the last window's net return
"""

from __future__ import annotations

import math

import numpy as np


def equity_curve(returns: np.ndarray) -> np.ndarray:
    """Equity after each window, starting from 1."""
    return np.cumprod(1.0 + np.asarray(returns, dtype=np.float64))


def sharpe_ratio(returns: np.ndarray, periods_per_year: float) -> float:
    r = np.asarray(returns, dtype=np.float64)
    if len(r) < 2:
        return 0.0
    sd = r.std(ddof=1)
    return 0.0 if sd == 0 else float(r.mean() / sd * math.sqrt(periods_per_year))


def sortino_ratio(returns: np.ndarray, periods_per_year: float) -> float | None:
    r = np.asarray(returns, dtype=np.float64)
    if len(r) == 0:
        return None
    dd = math.sqrt(float(np.mean(np.minimum(r, 0.0) ** 2)))
    return None if dd == 0 else float(r.mean() / dd * math.sqrt(periods_per_year))


def max_drawdown(returns: np.ndarray) -> float:
    equity = np.concatenate([[1.0], equity_curve(returns)])
    peak = np.maximum.accumulate(equity)
    return float(np.max(1.0 - equity / peak))


def strategy_metrics(returns: np.ndarray, filled: np.ndarray, periods_per_year: float) -> dict:
    """All metrics above for one strategy on one symbol."""
    r = np.asarray(returns, dtype=np.float64)
    filled = np.asarray(filled, dtype=bool)
    n = len(r)
    total = float(np.prod(1.0 + r) - 1.0)
    annual = float((1.0 + total) ** (periods_per_year / n) - 1.0) if total > -1.0 else -1.0
    mdd = max_drawdown(r)
    trades = int(filled.sum())
    return {
        "return": total,
        "sharpe": sharpe_ratio(r, periods_per_year),
        "sortino": sortino_ratio(r, periods_per_year),
        "final_day": float(r[-1]),
        "avg_daily_return": float(r.mean()),
        "annual_return": annual,
        "max_drawdown": mdd,
        "calmar": None if mdd == 0 else annual / mdd,
        "win_rate": float((r[filled] > 0).mean()) if trades else None,
        "exposure": trades / n,
        "trades": trades,
        "turnover": 2.0 * trades / n,
    }
