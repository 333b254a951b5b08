"""The numbers behind the tearsheet's charts, derived from a backtest result and the bars it read.

Everything here is computed from what the backtest already settled (per-window net returns, the views'
point forecasts) and the realised bars after each decision, which is what a report may look at: the
charts show what happened, they decide nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from marketcast.backtest.breadth import monthly_returns as breadth_monthly
from marketcast.backtest.engine import SymbolResult, decision_rows
from marketcast.backtest.fans import Fan
from marketcast.backtest.metrics import equity_curve
from marketcast.backtest.orders import LONG
from marketcast.backtest.skill import excursion_naive
from marketcast.data.bars import Bars

WALK_FORWARD = "walk-forward (out of sample)"
BUY_AND_HOLD = "buy & hold (benchmark)"
HISTORY = 2  # closes shown before a fan, in horizons


def fan_path(fan: Fan, bars: Bars) -> tuple[pd.Series, pd.Series]:
    """The closes a fan is drawn against: ``HISTORY`` horizons up to and including its decision bar, and the
    (up to a horizon of) realised closes after it."""
    close = bars.frame["close"]
    t, h = close.index.get_loc(fan.decision_time), len(fan.times)
    return close.iloc[max(0, t - HISTORY * h):t + 1], close.iloc[t + 1:t + 1 + h]


def equity_frame(result: SymbolResult) -> pd.DataFrame:
    """Equity (start 1 on the first decision bar) of every strategy, the walk-forward pick and buy and hold,
    indexed by the decision bar then each settle bar."""
    curves = {name: run.equity for name, run in result.strategies.items()}
    curves[WALK_FORWARD] = equity_curve(result.walk_forward["returns"])
    curves[BUY_AND_HOLD] = result.benchmark.equity
    index = result.decision_times[:1].append(result.settle_times)
    return pd.DataFrame({k: np.concatenate([[1.0], v]) for k, v in curves.items()}, index=index)


def drawdown(equity: pd.Series | np.ndarray) -> np.ndarray:
    """Fall from the running peak, as a negative fraction (0 at every new high)."""
    e = np.asarray(equity, dtype=np.float64)
    return e / np.maximum.accumulate(e) - 1.0


def monthly_returns(returns: np.ndarray, settle_times: pd.DatetimeIndex) -> pd.DataFrame:
    """Compounded return of each calendar month (by settle time, UTC): years as rows, months 1..12 as
    columns, NaN where the run has no window (:func:`marketcast.backtest.breadth.monthly_returns`)."""
    return breadth_monthly(returns, settle_times)


@dataclass(frozen=True)
class Trade:
    """One filled window of the walk-forward record: entered and left within the settle bar."""

    settle_time: pd.Timestamp
    strategy: str
    side: int
    entry_price: float
    exit_price: float
    exit_reason: str
    net_return: float

    @property
    def label(self) -> str:
        return "long" if self.side == LONG else "short"


def walk_forward_trades(result: SymbolResult) -> list[Trade]:
    """The trades of the walk-forward record: at each window, the picked strategy's fill (if it filled), as the
    loop trades the picks (the record's own ``fills``, where it has them: ``Exits.traded``)."""
    out = []
    wf = result.walk_forward
    for k, name in enumerate(wf["picked"]):
        if name is None:
            continue
        run = result.strategies[name]
        s = wf["fills"][k] if "fills" in wf else run.settlements[k]
        if s.filled:
            out.append(Trade(result.settle_times[k], name, run.decisions[k].side, float(s.entry_price),
                             float(s.exit_price), s.exit_reason or "close", float(s.net_return)))
    return out


def skill_window(windows: int) -> int:
    """Windows in the trailing mean of the skill chart: a fifth of the run, between 10 and 60 (at most all)."""
    return int(min(windows, 60, max(10, windows // 5)))


def rolling_skill(result: SymbolResult, bars: Bars, window: int | None = None) -> pd.DataFrame:
    """Trailing MASE of the point forecasts of bar t+1 (``window`` windows, default :func:`skill_window`):
    close against no change, high and low against the context's average excursion (the backtest's fair
    naives, :mod:`marketcast.backtest.skill`). Indexed by settle time; NaN until ``window`` windows settled.
    Over the whole run it equals the backtest's ``mase_close`` and ``mase_*_excursion``."""
    rows = decision_rows(result, bars)
    w = window or skill_window(result.windows)
    frame = bars.frame
    c, h, lo = (frame[col].to_numpy(dtype=np.float64) for col in ("close", "high", "low"))
    actual = {"close": c[rows + 1] / c[rows] - 1.0, "high": h[rows + 1] / c[rows] - 1.0,
              "low": lo[rows + 1] / c[rows] - 1.0}
    naive = {"close": np.zeros(len(rows)), **excursion_naive(h, lo, c, rows, result.config.context)}
    out = {}
    for f in ("close", "high", "low"):
        point = np.array([getattr(v, f"{f}_ret") for v in result.views])
        model = pd.Series(np.abs(point - actual[f])).rolling(w).sum()
        base = pd.Series(np.abs(naive[f] - actual[f])).rolling(w).sum()
        out[f] = (model / base.where(base > 0)).to_numpy()
    return pd.DataFrame(out, index=result.settle_times)


def rolling_beta(returns: np.ndarray, benchmark: np.ndarray, times, window: int) -> pd.Series:
    """Trailing beta of the record against buy and hold over ``window`` windows: cov(r, b) / var(b), both with
    ddof 1 (the slope of the least-squares line of r on b; quantstats' ``rolling_greeks`` beta,
    corr * std(r) / std(b), is the same number). Indexed by settle time; NaN until ``window`` windows settled
    and where buy and hold did not move."""
    r = pd.Series(np.asarray(returns, dtype=np.float64))
    b = pd.Series(np.asarray(benchmark, dtype=np.float64))
    var = b.rolling(window).var()
    beta = r.rolling(window).cov(b) / var.where(var > 0)
    return pd.Series(beta.to_numpy(), index=pd.DatetimeIndex(times), name="beta")


def return_bins(n: int) -> int:
    """Bins of the return histogram: about sqrt(n) (the square-root rule), between 10 and 60."""
    return int(np.clip(round(np.sqrt(n)), 10, 60))


def return_histogram(returns: np.ndarray, benchmark: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distribution of per-window net returns (quantstats' ``histogram``, per window rather than per
    month): shared bin edges over both series (:func:`return_bins`), then each series' share of windows per
    bin (each sums to 1). Returns (edges, record shares, buy-and-hold shares)."""
    r, b = (np.asarray(x, dtype=np.float64) for x in (returns, benchmark))
    edges = np.histogram_bin_edges(np.concatenate([r, b]), bins=return_bins(len(r)))
    return edges, np.histogram(r, edges)[0] / len(r), np.histogram(b, edges)[0] / len(b)
