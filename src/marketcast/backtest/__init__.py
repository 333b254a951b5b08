"""Honest walk-forward backtest: forecast bar t+1 from bars <= t, decide, settle on bar t+1.

The live loop uses the same pieces: :func:`run_backtest` (whose ``next_decisions`` are each strategy's
orders for the bar after the last one), :func:`step` (decide, settle, advance) with :class:`StrategyParams`
for one bar at a time, :func:`marketcast.backtest.fills.settle` for fills and :class:`SelectionRule` for the
walk-forward pick.
"""

from marketcast.backtest.config import STRATEGY_NAMES, BacktestConfig
from marketcast.backtest.engine import StrategyRun, SymbolResult, decision_ends, run_backtest, run_many
from marketcast.backtest.fills import settle
from marketcast.backtest.orders import Bar, Costs, Decision, Settlement
from marketcast.backtest.selection import SelectionRule
from marketcast.backtest.strategies import STRATEGIES, StrategyParams, advance, decide, initial_state, step
from marketcast.backtest.views import ForecastReturns, WindowView

__all__ = [
    "STRATEGIES",
    "STRATEGY_NAMES",
    "BacktestConfig",
    "Bar",
    "Costs",
    "Decision",
    "ForecastReturns",
    "SelectionRule",
    "Settlement",
    "StrategyParams",
    "StrategyRun",
    "SymbolResult",
    "WindowView",
    "advance",
    "decide",
    "decision_ends",
    "initial_state",
    "run_backtest",
    "run_many",
    "step",
    "settle",
]
