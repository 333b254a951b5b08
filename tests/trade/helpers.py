"""Small real inputs for the trade tests (no stand-ins for the code under test)."""

from __future__ import annotations

import pandas as pd

from marketcast.backtest.orders import Decision
from marketcast.commands import main
from marketcast.data.bars import Bars
from marketcast.trade.loop.planner import Signal


def bars_from_rows(symbol: str, rows: list[tuple[float, float, float, float]], start: str = "2024-01-01",
                   asset_class: str = "stock") -> Bars:
    index = pd.date_range(start, periods=len(rows), freq="D", tz="UTC", name="timestamp")
    frame = pd.DataFrame(rows, columns=["open", "high", "low", "close"], index=index).astype("float64")
    frame["volume"] = 1e6
    return Bars(symbol, frame, asset_class, "test")


def signal(symbol: str, side: int = 1, entry: float = 100.0, tp: float = 102.0, edge: float = 0.01,
           sharpe: float = 1.0, drawdown: float = 0.05, close: float = 100.0) -> Signal:
    return Signal(symbol, "2024-01-02T00:00:00+00:00", "maxdiff", Decision(side, entry, tp), close,
                  {"edge": edge, "sharpe": sharpe, "max_drawdown": drawdown})


class LongPlanner:
    """Long every symbol at 1 % under its last close, take-profit 1 % over, decided from the real bars: a
    planner with a known answer, for tests of what the loop does with an entry it wants."""

    model = "long"

    def plan(self, bars: Bars, costs, learn_from=None) -> Signal:
        close = float(bars.frame["close"].iloc[-1])
        return Signal(bars.symbol, bars.frame.index[-1].isoformat(), "long",
                      Decision(1, round(close * 0.99, 2), round(close * 1.01, 2)), close,
                      {"edge": 0.01, "sharpe": 1.0, "max_drawdown": 0.0, "total_return": 0.01})


def maxdiff_planner(forecaster=None):
    """The real planner choosing among maxdiff alone, eligible once it traded in the lookback (min_trades 1):
    for tests of the loop's mechanics (idempotency, restarts, caps, freshness), which want an order from each
    symbol on the 2017 bars whatever the selection's trade count (10 by default; NASDAQ's maxdiff has fewer
    on 2017-03-01 and would stay flat)."""
    from dataclasses import replace

    from marketcast.backtest.selection import SelectionRule
    from marketcast.forecast import load_forecaster
    from marketcast.trade.loop.planner import PLANNER_CONFIG, BacktestPlanner

    config = replace(PLANNER_CONFIG, selection=SelectionRule(PLANNER_CONFIG.selection.lookback, 1))
    return BacktestPlanner(forecaster or load_forecaster("baseline"), config, strategies=("maxdiff",))


def trade_main(argv: list[str]) -> int:
    """``marketcast trade ARGS`` in this process, through the CLI's one error path."""
    return main(["trade", *argv])
