"""The tearsheet's metrics at quantstats' breadth, from one per-window net return series and its settle times.

:mod:`marketcast.backtest.metrics` holds the headline metrics every output shows; this module adds the rest a
tearsheet lists (like backtesting.py's ``_stats.py``, every number in one place, computed from the returns): the
report formats them and computes nothing. ``r`` = the per-window net returns (flat windows are 0), ``N`` = windows,
``P`` = periods a year (:func:`marketcast.data.calendar.annualise`). Definitions follow quantstats 0.0.86 with
rf = 0 (``tests/backtest/test_breadth.py`` cross-checks each one against it to 1e-9):

* ``volatility``        std(r, ddof=1) * sqrt(P), scaled like the Sharpe ratio (not compounded)
* ``omega``             sum of the gains / sum of the losses (threshold 0; Keating & Shadwick 2002)
* ``tail_ratio``        |95th percentile / 5th percentile| of r (linear interpolation)
* ``var`` / ``cvar``    95% parametric (normal) value at risk mu + sd * z(0.05), and its expected shortfall
                        mu - sd * phi(z) / 0.05; one window's return, negative = a loss
* ``win_rate``          share of the non-zero windows that gained (quantstats' period win rate; the trade win rate
                        of :mod:`metrics` counts filled trades)
* ``profit_factor``     sum(r >= 0) / |sum(r < 0)|; None without a loss
* ``payoff_ratio``      mean gain / |mean loss|; ``kelly`` = (payoff * W - (1 - W)) / payoff with W the win rate
* ``best`` / ``worst``  the best and worst window; ``consecutive_wins`` / ``_losses`` the longest runs of r > 0, r < 0
* ``skew`` / ``kurtosis`` sample (bias-corrected) skewness and excess kurtosis, as pandas computes them
* ``gain_to_pain``      sum(r) / |sum(r < 0)| (Schwager); ``common_sense`` = profit factor * tail ratio
* ``ulcer_index``       sqrt(sum(dd**2) / (N - 1)) of the drawdowns dd (Martin 1987, quantstats' N - 1)
* ``expected_return``   geometric mean per window, prod(1 + r) ** (1 / N) - 1
* ``best_month`` ...    the best and worst calendar month and year (UTC, by settle time), compounded

A calendar month's or year's return is its windows' compounded return, never annualised; CAGR and Calmar stay
:mod:`metrics`' ``annual_return`` and ``calmar`` (None below a year). Drawdown periods and rolling Sharpe and
volatility are below. Every scalar is a finite float, an int, or None.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd

from marketcast.backtest.metrics import compound

VAR_CONFIDENCE = 0.95
TAIL_CUTOFF = 0.95


def _none(value):
    return None if value is None or not math.isfinite(value) else float(value)


def _ratio(num: float, den: float):
    return None if den == 0 else _none(num / den)


def longest_run(mask: np.ndarray) -> int:
    """The longest run of True in ``mask``."""
    best = run = 0
    for m in np.asarray(mask, dtype=bool):
        run = run + 1 if m else 0
        best = max(best, run)
    return best


def drawdowns(returns: np.ndarray) -> np.ndarray:
    """Fall of the equity (start 1 before the first window) from its running peak after each window, <= 0."""
    equity = np.concatenate([[1.0], np.cumprod(1.0 + np.asarray(returns, dtype=np.float64))])
    return (equity / np.maximum.accumulate(equity) - 1.0)[1:]


def sample_moments(r: np.ndarray) -> tuple[float | None, float | None]:
    """Sample skewness G1 and sample excess kurtosis G2 (the bias-corrected estimators pandas uses)."""
    n = len(r)
    d = r - r.mean()
    m2 = float(np.mean(d ** 2))
    if n < 3 or m2 == 0:
        return None, None
    g1 = float(np.mean(d ** 3)) / m2 ** 1.5
    skew = math.sqrt(n * (n - 1)) / (n - 2) * g1
    if n < 4:
        return _none(skew), None
    g2 = float(np.mean(d ** 4)) / m2 ** 2 - 3.0
    kurt = ((n + 1) * g2 + 6.0) * (n - 1) / ((n - 2) * (n - 3))
    return _none(skew), _none(kurt)


def period_metrics(returns: np.ndarray, periods_per_year: float) -> dict:
    """The scalars of the module docstring that need no calendar."""
    r = np.asarray(returns, dtype=np.float64)
    n = len(r)
    gains, losses = r[r > 0], r[r < 0]
    nonzero = int(np.count_nonzero(r))
    sd = float(r.std(ddof=1)) if n >= 2 else None
    mu = float(r.mean()) if n else None
    win = len(gains) / nonzero if nonzero else None
    payoff = float(gains.mean()) / abs(float(losses.mean())) if len(gains) and len(losses) else None
    lo, hi = (np.quantile(r, [1 - TAIL_CUTOFF, TAIL_CUTOFF]) if n else (0.0, 0.0))
    tail = _ratio(abs(float(hi)), abs(float(lo)))
    loss_sum = abs(float(losses.sum()))
    profit_factor = _ratio(float(r[r >= 0].sum()), loss_sum)
    alpha = 1.0 - VAR_CONFIDENCE
    z = NormalDist().inv_cdf(alpha)
    var = cvar = None
    if sd is not None:
        var = mu + sd * z
        cvar = mu if sd == 0 else mu - sd * math.exp(-z * z / 2) / math.sqrt(2 * math.pi) / alpha
    skew, kurt = sample_moments(r)
    dd = drawdowns(r)
    total = float(np.prod(1.0 + r)) if n else 1.0
    return {
        "volatility": None if sd is None else _none(sd * math.sqrt(periods_per_year)),
        "omega": _ratio(float(gains.sum()), loss_sum) if n >= 2 else None,
        "tail_ratio": tail,
        "var": _none(var) if var is not None else None,
        "cvar": _none(cvar) if cvar is not None else None,
        "win_rate": win,
        "profit_factor": profit_factor,
        "payoff_ratio": _none(payoff) if payoff is not None else None,
        "avg_win": float(gains.mean()) if len(gains) else None,
        "avg_loss": float(losses.mean()) if len(losses) else None,
        "kelly": None if not payoff or win is None else _none((payoff * win - (1.0 - win)) / payoff),
        "best": float(r.max()) if n else None,
        "worst": float(r.min()) if n else None,
        "consecutive_wins": longest_run(r > 0),
        "consecutive_losses": longest_run(r < 0),
        "skew": skew,
        "kurtosis": kurt,
        "gain_to_pain": _ratio(float(r.sum()), loss_sum),
        "common_sense": None if profit_factor is None or tail is None else _none(profit_factor * tail),
        "ulcer_index": _none(math.sqrt(float(np.sum(dd ** 2)) / (n - 1))) if n >= 2 else None,
        "expected_return": compound(total, 1.0 / n) if n else None,
    }


def monthly_returns(returns: np.ndarray, times) -> pd.DataFrame:
    """Compounded return of each calendar month (UTC, by settle time): years as rows, months 1..12 as columns,
    NaN where the run has no window."""
    index = pd.DatetimeIndex(times)
    if index.tz is not None:
        index = index.tz_convert("UTC")
    growth = pd.Series(1.0 + np.asarray(returns, dtype=np.float64), index=index)
    months = growth.groupby([index.year, index.month]).prod() - 1.0
    return months.unstack().reindex(columns=range(1, 13)).rename_axis(index="year", columns="month")


def yearly_returns(returns: np.ndarray, times) -> pd.Series:
    """Compounded return of each calendar year (UTC) the run has windows in (a partial year is its part)."""
    index = pd.DatetimeIndex(times)
    if index.tz is not None:
        index = index.tz_convert("UTC")
    growth = pd.Series(1.0 + np.asarray(returns, dtype=np.float64), index=index)
    return (growth.groupby(index.year).prod() - 1.0).rename_axis("year")


@dataclass(frozen=True)
class DrawdownPeriod:
    """One spell under water. Positions index the windows (settle bars): ``start`` the first under the peak,
    ``valley`` the lowest, ``end`` the first back at the peak (None while still under water)."""

    start: int
    valley: int
    end: int | None
    depth: float  # the fall at the valley, negative

    def length(self, windows: int) -> int:
        """Windows under water (to the last window when not recovered)."""
        return (self.end if self.end is not None else windows) - self.start

    @property
    def recovery(self) -> int | None:
        """Windows from the valley back to the peak (None: not recovered)."""
        return None if self.end is None else self.end - self.valley


def drawdown_periods(returns: np.ndarray) -> list[DrawdownPeriod]:
    """Every drawdown period, in time order."""
    dd = drawdowns(returns)
    under = dd < 0
    out, k, n = [], 0, len(dd)
    while k < n:
        if not under[k]:
            k += 1
            continue
        j = k
        while j < n and under[j]:
            j += 1
        valley = k + int(np.argmin(dd[k:j]))
        out.append(DrawdownPeriod(k, valley, j if j < n else None, float(dd[valley])))
        k = j
    return out


def rolling_window(windows: int, periods_per_year: float) -> int:
    """Windows in the rolling Sharpe and volatility: half a year of periods (quantstats' 126 of 252 days), at
    most half the run, at least 2."""
    return int(max(2, min(round(periods_per_year / 2), windows // 2)))


def rolling_stats(returns: np.ndarray, times, periods_per_year: float, window: int | None = None) -> pd.DataFrame:
    """Trailing Sharpe (mean / std, ddof 1, times sqrt(P)) and volatility (std times sqrt(P)) over ``window``
    windows (:func:`rolling_window`), indexed by settle time; NaN until ``window`` windows settled."""
    w = window or rolling_window(len(returns), periods_per_year)
    s = pd.Series(np.asarray(returns, dtype=np.float64))
    roll = s.rolling(w)
    sd = roll.std()
    scale = math.sqrt(periods_per_year)
    sharpe = (roll.mean() / sd.where(sd > 0)) * scale
    return pd.DataFrame({"sharpe": sharpe.to_numpy(), "volatility": (sd * scale).to_numpy()},
                        index=pd.DatetimeIndex(times))


@dataclass(frozen=True)
class Breadth:
    """Everything the tearsheet's metrics table, drawdown table and rolling chart show for one series."""

    metrics: dict
    monthly: pd.DataFrame
    yearly: pd.Series
    drawdowns: list[DrawdownPeriod]


def breadth(returns: np.ndarray, times, periods_per_year: float) -> Breadth:
    """:func:`period_metrics` plus the calendar figures of one return series settled at ``times``."""
    r = np.asarray(returns, dtype=np.float64)
    monthly = monthly_returns(r, times)
    yearly = yearly_returns(r, times)
    months = monthly.stack().to_numpy(dtype=np.float64)
    periods = drawdown_periods(r)
    m = period_metrics(r, periods_per_year)
    m.update({
        "best_month": float(months.max()) if len(months) else None,
        "worst_month": float(months.min()) if len(months) else None,
        "best_year": float(yearly.max()) if len(yearly) else None,
        "worst_year": float(yearly.min()) if len(yearly) else None,
        "drawdown_periods": len(periods),
        "avg_drawdown": float(np.mean([p.depth for p in periods])) if periods else None,
        "longest_drawdown": max((p.length(len(r)) for p in periods), default=0),
    })
    return Breadth(m, monthly, yearly, periods)
