"""The seam between forecasting/backtesting and trading: ``plan(bars, costs) -> Signal``.

A :class:`Planner` looks at one symbol's bars up to the decision bar, picks a strategy from a
walk-forward over recent bars, and returns the :class:`Decision` for the next bar with the stats the
entry gates need. :class:`MaxDiffPlanner` is a small, honest in-module version (forecast quantiles ->
MaxDiff limit entry/take-profit, recent decisions settled with the backtest's own ``settle``). At
integration, an engine-backed planner replaces it: ``run_backtest(bars, forecaster, config)`` picks
``best_strategy`` and ``decide(strategy, ...)`` gives the Decision -- nothing else in ``trade`` changes.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from marketcast.backtest.fills import settle
from marketcast.backtest.orders import FLAT, LONG, SHORT, Bar, Costs, Decision
from marketcast.data.bars import Bars
from marketcast.forecast.base import Forecaster, make_batch


@dataclass(frozen=True)
class Signal:
    """What the planner wants for the bar after ``decision_ts``, and why."""

    symbol: str
    decision_ts: str
    strategy: str
    decision: Decision
    close: float
    metrics: dict = field(default_factory=dict)  # sharpe, max_drawdown, total_return, trades, edge
    forecast_latency_s: float = 0.0
    forecast_meta: dict = field(default_factory=dict)


class Planner(Protocol):
    """Per-symbol strategy choice and next-bar decision."""

    model: str

    def plan(self, bars: Bars, costs: Costs) -> Signal: ...


def maxdiff_decision(close: float, low: float, high: float, allow_short: bool = True) -> Decision:
    """Buy at the forecast low and take profit at the forecast high when the upside from the close is at
    least the downside; otherwise sell short at the high and cover at the low (flat if shorts are off)."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return Decision(FLAT)
    if (high - close) >= (close - low):
        return Decision(LONG, entry_limit=low, take_profit=high)
    return Decision(SHORT, entry_limit=high, take_profit=low) if allow_short else Decision(FLAT)


def expected_edge(decision: Decision, costs: Costs) -> float:
    """Return if both limits fill, after the round-trip cost (0 for flat or market orders)."""
    if decision.side == FLAT or decision.entry_limit is None or decision.take_profit is None:
        return 0.0
    return decision.side * (decision.take_profit / decision.entry_limit - 1.0) - 2.0 * costs.per_side


def performance(returns: np.ndarray, periods_per_year: int) -> dict:
    """Annualised Sharpe (ddof=1; 0 when flat), max drawdown of the compounded curve, total return."""
    r = np.asarray(returns, dtype=np.float64)
    if len(r) == 0:
        return {"sharpe": 0.0, "max_drawdown": 0.0, "total_return": 0.0, "trades": 0}
    sd = r.std(ddof=1) if len(r) > 1 else 0.0
    sharpe = float(r.mean() / sd * math.sqrt(periods_per_year)) if sd > 0 else 0.0
    curve = np.cumprod(1.0 + r)
    peak = np.maximum.accumulate(np.concatenate([[1.0], curve]))[1:]
    return {
        "sharpe": sharpe,
        "max_drawdown": float(np.max(1.0 - curve / peak)),
        "total_return": float(curve[-1] - 1.0),
        "trades": int(np.count_nonzero(r)),
    }


STRATEGIES: dict[str, Callable[[float, float, float], Decision]] = {
    "maxdiff": lambda c, lo, hi: maxdiff_decision(c, lo, hi, allow_short=True),
    "maxdiff_long": lambda c, lo, hi: maxdiff_decision(c, lo, hi, allow_short=False),
}


class MaxDiffPlanner:
    """Forecast the next bar's low/high (median over samples) for the last ``lookback + 1`` bars in one
    batch, settle each past decision on its next bar, keep the strategy with the best Sharpe."""

    def __init__(self, forecaster: Forecaster, *, context: int = 64, lookback: int = 40,
                 num_samples: int = 32, seed: int = 0, strategies: tuple[str, ...] = tuple(STRATEGIES)) -> None:
        self.forecaster = forecaster
        self.model = getattr(forecaster, "name", type(forecaster).__name__)
        self.context, self.lookback, self.num_samples, self.seed = context, lookback, num_samples, seed
        self.strategies = strategies

    def _low_high(self, bars: Bars, ends: np.ndarray):
        batch = make_batch(bars.frame, ends, self.context, horizon=1)
        start = time.perf_counter()
        fc = self.forecaster.forecast(batch, horizon=1, num_samples=self.num_samples, seed=self.seed)
        latency = time.perf_counter() - start
        if "low" in fc.fields and "high" in fc.fields:
            low, high = fc.quantile(0.5, "low")[:, 0], fc.quantile(0.5, "high")[:, 0]
        else:  # close-only models: the 10 % / 90 % quantiles of the close stand in for the range
            low, high = fc.quantile(0.1, "close")[:, 0], fc.quantile(0.9, "close")[:, 0]
        return low, high, latency, dict(fc.meta)

    def plan(self, bars: Bars, costs: Costs) -> Signal:
        frame = bars.frame
        t = len(frame) - 1
        ends = np.arange(max(0, t - self.lookback), t + 1)
        low, high, latency, meta = self._low_high(bars, ends)
        o, h, lo, c = (frame[k].to_numpy(np.float64) for k in ("open", "high", "low", "close"))
        best = None
        for name in self.strategies:
            rule = STRATEGIES[name]
            rets = [settle(rule(c[j], low[i], high[i]), Bar(o[j + 1], h[j + 1], lo[j + 1], c[j + 1]), costs).net_return
                    for i, j in enumerate(ends[:-1])]
            stats = performance(np.array(rets), bars.periods_per_year)
            if best is None or stats["sharpe"] > best[1]["sharpe"]:
                best = (name, stats)
        name, stats = best
        decision = STRATEGIES[name](c[t], low[-1], high[-1])
        if bars.is_crypto and decision.side == SHORT:
            decision = Decision(FLAT)  # no crypto shorts
        stats = dict(stats, edge=expected_edge(decision, costs), forecast_low=float(low[-1]),
                     forecast_high=float(high[-1]))
        return Signal(bars.symbol, frame.index[t].isoformat(), name, decision, float(c[t]), stats, latency, meta)
