"""Performance metrics of one strategy's per-window net returns (fractions; flat/unfilled windows are 0).

Definitions (``P`` = periods per year from the bar spacing and the market calendar, see
:func:`marketcast.data.calendar.annualise`; ``N`` = windows):

* ``return``           compounded total, prod(1 + r) - 1 (the period return)
* ``avg_daily_return`` mean(r)
* ``annual_return``    geometric: (1 + return) ** (P / N) - 1, only when the windows cover at least a year
                       (N >= P); below that None, and ``annual_reason`` says "n/a (< 1 year): ..." (raising a
                       few weeks' return to the power P / N turns noise into a figure that looks like signal,
                       and overflowed on short hourly runs)
* ``sharpe``           mean(r) / std(r, ddof=1) * sqrt(P); 0 when std is 0 or N < 2
* ``sortino``          mean(r) / DD * sqrt(P) with the downside deviation DD = sqrt(mean(min(r, 0)**2))
                       over all N returns (target 0); None when DD is 0
* ``max_drawdown``     largest fall of the equity curve (starting at 1) from its running peak, as a
                       positive fraction
* ``calmar``           annual_return / max_drawdown; None when max_drawdown is 0 or annual_return is None
* ``win_rate``         share of filled trades with net return > 0 (None without trades)
* ``exposure``         share of windows with a filled position
* ``trades``           number of filled trades
* ``turnover``         traded notional per window as a multiple of equity: every filled trade opens and
                       closes within bar t+1, so 2 * trades / N
* ``final_day``        the last window's net return

Every metric is a finite number or None. Powers are checked in log space before they are taken
(:func:`compound`): ``g ** e`` is computed only when ``e * log(g)`` is below log(max float), so no power raises
OverflowError; a compounded return or an equity curve that overflows a float is taken from the sums of
log(1 + r) instead. Where nothing overflows the numbers are exactly the plain formulas above.
"""

from __future__ import annotations

import math
import sys

import numpy as np

_LOG_MAX = math.log(sys.float_info.max)  # 709.78: exp of more overflows a float
UNDER_A_YEAR = "n/a (< 1 year)"


def under_a_year(n: int, periods_per_year: float) -> str | None:
    """Why annualised figures of ``n`` periods are not shown (``"n/a (< 1 year): ..."``), or None when the
    periods cover at least a year (n >= P)."""
    if n >= periods_per_year:
        return None
    return f"{UNDER_A_YEAR}: {n:,} bars, {periods_per_year:,g} a year"


def compound(growth: float, exponent: float) -> float | None:
    """``growth ** exponent - 1`` (``growth`` = 1 + a return), or None where that is not a finite float; -1 when
    ``growth`` <= 0 (everything lost). Whether it fits is decided in log space, so it never overflows."""
    if not math.isfinite(growth):
        return None
    if growth <= 0.0:
        return -1.0
    if exponent * math.log(growth) >= _LOG_MAX:
        return None
    return growth ** exponent - 1.0


def _finite(value):
    return None if isinstance(value, float) and not math.isfinite(value) else value


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
    r = np.asarray(returns, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        equity = np.concatenate([[1.0], equity_curve(r)])
    if not np.isfinite(equity).all():  # the curve overflowed: the same falls from log equity
        log_equity = np.concatenate([[0.0], np.cumsum(np.log1p(np.maximum(r, -1.0)))])
        return float(np.max(-np.expm1(log_equity - np.maximum.accumulate(log_equity))))
    return equity_drawdown(equity)


def equity_drawdown(equity) -> float:
    """The deepest fall of an equity curve (positive values) from its running peak, as a fraction of the peak."""
    e = np.asarray(equity, dtype=np.float64)
    return float(np.max(1.0 - e / np.maximum.accumulate(e)))


def strategy_metrics(returns: np.ndarray, filled: np.ndarray, periods_per_year: float) -> dict:
    """All metrics above for one strategy on one symbol."""
    r = np.asarray(returns, dtype=np.float64)
    filled = np.asarray(filled, dtype=bool)
    n = len(r)
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(np.prod(1.0 + r) - 1.0)
    why = under_a_year(n, periods_per_year)
    if why is not None:
        annual = None
    elif math.isfinite(total):
        annual = compound(1.0 + total, periods_per_year / n)
    elif total > 0 and (r > -1.0).all():  # the product overflowed a float: compound its logarithm instead
        x = periods_per_year / n * float(np.sum(np.log1p(r)))
        annual = math.expm1(x) if x < _LOG_MAX else None
    else:  # a short lost more than everything along the way
        annual = -1.0
    mdd = max_drawdown(r)
    trades = int(filled.sum())
    out = {
        "return": total,
        "sharpe": sharpe_ratio(r, periods_per_year),
        "sortino": sortino_ratio(r, periods_per_year),
        "final_day": float(r[-1]),
        "avg_daily_return": float(r.mean()),
        "annual_return": annual,
        "annual_reason": why,
        "max_drawdown": mdd,
        "calmar": None if mdd == 0 or annual is None else annual / mdd,
        "win_rate": float((r[filled] > 0).mean()) if trades else None,
        "exposure": trades / n,
        "trades": trades,
        "turnover": 2.0 * trades / n,
    }
    return {k: _finite(v) for k, v in out.items()}
