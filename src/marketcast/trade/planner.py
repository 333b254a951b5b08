"""The seam between backtesting and trading: ``plan(bars, costs) -> Signal``.

:class:`BacktestPlanner` runs the walk-forward backtest (:func:`marketcast.backtest.run_backtest`) over the
last ``windows`` bars up to the decision bar; the window ending at the decision bar rides in the same
batched forecast call. The strategy with the best record over the settled windows (the best-so-far pick)
gives the :class:`Decision` for the next bar, with its backtest metrics for the entry gates. Strategies,
fills and metrics are the backtest's own: nothing is re-implemented here, so a replay reproduces the
backtest's decisions and fills day by day.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Protocol

from marketcast.backtest import BacktestConfig, WindowView, run_backtest
from marketcast.backtest.orders import FLAT, Costs, Decision
from marketcast.data.bars import Bars
from marketcast.forecast.base import Forecaster

# The original live loop ran 70 walk-forward simulations per symbol before each decision.
PLANNER_CONFIG = BacktestConfig(windows=70)
# Bars a cycle must load so every backtest window sees a full context, exactly as the offline backtest does.
PLANNER_HISTORY = PLANNER_CONFIG.context + PLANNER_CONFIG.windows + 1


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


def expected_edge(decision: Decision, view: WindowView, costs: Costs) -> float:
    """Forecast net return of ``decision`` if it fills, after the round-trip cost.

    Entry at the limit (a market order enters near close_t, the best estimate of the next open); exit at
    the take-profit when there is one, else at the forecast close.
    """
    if decision.side == FLAT:
        return 0.0
    entry = view.close if decision.entry_limit is None else decision.entry_limit
    exit_ = view.price(view.close_ret) if decision.take_profit is None else decision.take_profit
    return decision.side * (exit_ / entry - 1.0) - 2.0 * costs.per_side


class BacktestPlanner:
    """Backtest the symbol up to the decision bar, trade the best strategy's next decision."""

    def __init__(self, forecaster: Forecaster, config: BacktestConfig = PLANNER_CONFIG,
                 strategies: tuple[str, ...] | None = None) -> None:
        self.forecaster = forecaster
        self.model = getattr(forecaster, "name", type(forecaster).__name__)
        self.config = replace(config, strategies=strategies, include_latest=True) if strategies else replace(
            config, include_latest=True)

    def plan(self, bars: Bars, costs: Costs) -> Signal:
        config = replace(self.config, fee=costs.fee, spread=costs.spread)
        started = time.perf_counter()
        result = run_backtest(bars, self.forecaster, config)
        latency = time.perf_counter() - started
        name = result.best_strategy
        view = result.latest_view
        decision = result.next_decisions[name]
        m = result.strategies[name].metrics
        metrics = {
            "sharpe": m["sharpe"],
            "max_drawdown": m["max_drawdown"],
            "total_return": m["return"],
            "trades": m["trades"],
            "edge": expected_edge(decision, view, costs),
            "forecast_low": view.price(view.low_ret),
            "forecast_high": view.price(view.high_ret),
        }
        meta = dict(result.forecast_meta)
        return Signal(bars.symbol, bars.frame.index[-1].isoformat(), name, decision, float(view.close), metrics,
                      meta.get("latency_s", latency), meta)
