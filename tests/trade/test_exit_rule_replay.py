"""A default replay trades the exit rule the backtest scores (issue 53, items 1-2): under ``--exit close`` a stock
entry that filled is exited by a market-on-close (``cls``) order sent while its bar trades, after its take-profit
leg is cancelled; the paper broker holds as Alpaca does. Each entry's fills (time and price) and its round trip's
net return equal the backtest's trade of the same strategy and decision bar, on the embedded SP500 and NASDAQ.

The judge is the backtest's own trade list (``run_backtest(...).trades()``) and, for what the broker's price grid
changes, the backtest's settle rule applied to the order as sent; the broker's fills are read from its own
database."""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd
import pytest

from marketcast.backtest import run_backtest
from marketcast.backtest.fills import settle
from marketcast.backtest.orders import Bar, Costs, Decision
from marketcast.data import load_symbol
from marketcast.errors import ConfigError
from marketcast.forecast import load_forecaster
from marketcast.trade.journal.ids import ENTRY, ON_CLOSE
from marketcast.trade.journal.state import Journal
from marketcast.trade.loop.cycle import LoopConfig
from marketcast.trade.loop.planner import PLANNER_CONFIG, BacktestPlanner
from marketcast.trade.replay import replay
from marketcast.trade.risk.gates import GateConfig
from marketcast.trade.risk.rules import round_price
from marketcast.trade.types import CLS
from marketcast.trade.venues.paper import PaperBroker

OPEN_GATES = GateConfig(min_edge=-1.0, min_sharpe=-1e9, max_drawdown=1.01)
START, END = "2018-01-01", "2018-03-31"


def _backtest(bars, forecaster, journal, sym, config, last_decision):
    """The backtest over the replay's windows of ``sym``: from the planner's first window to the last decision."""
    frame = bars.frame
    first = int(frame.index.searchsorted(pd.Timestamp(journal.first_cycle()))) - PLANNER_CONFIG.windows
    last = frame.index.get_loc(pd.Timestamp(last_decision))
    cfg = replace(config, windows=last - first + 1, include_latest=False)
    return run_backtest(bars.head(last + 3), forecaster, cfg).trades().set_index(["strategy", "decision_time"])


@pytest.fixture(scope="module")
def close_replay(tmp_path_factory):
    syms = ("SP500", "NASDAQ")
    bars = {s: load_symbol(s) for s in syms}
    state = tmp_path_factory.mktemp("close")
    forecaster = load_forecaster("baseline")
    config = replace(PLANNER_CONFIG, exit="close")
    replay(bars, BacktestPlanner(forecaster, config), state, START, END, LoopConfig(syms, gates=OPEN_GATES, exit="close"))
    return bars, forecaster, config, state


def test_close_replay_exits_each_stock_entry_at_its_bars_close_as_the_backtest(close_replay):
    bars, forecaster, config, state = close_replay
    journal = Journal(state / "journal.db")
    broker = PaperBroker(state / "broker.db", bars, hold=True)
    intents = journal.intents()
    entries = [i for i in intents if i.kind == ENTRY and i.status == "submitted"]
    closes = {i.decision_ts + i.symbol: i for i in intents if i.kind == ON_CLOSE}
    assert {i.kind for i in intents} <= {ENTRY, ON_CLOSE}  # no leftover close: every position left at its close
    fills: dict[str, list] = {}
    for f in broker.fills():
        fills.setdefault(f.client_order_id, []).append(f)
    backtest = {s: _backtest(bars[s], forecaster, journal, s, config, max(i.decision_ts for i in entries
                                                                           if i.symbol == s)) for s in bars}
    counted = {"close": 0, "take_profit": 0, "unfilled": 0}
    for i in entries:
        row = backtest[i.symbol].loc[(i.strategy, i.decision_ts)]
        d = json.loads(i.decision)
        decision = Decision(d["side"], d["entry_limit"], d["take_profit"])
        assert (decision.side, decision.take_profit) == (row.side, None if pd.isna(row.take_profit) else row.take_profit)
        asset = broker.asset(i.symbol)
        side, exit_side = ("buy", "sell") if decision.side > 0 else ("sell", "buy")
        sent = Decision(decision.side,
                        None if decision.entry_limit is None else round_price(decision.entry_limit, asset, side),
                        None if decision.take_profit is None else round_price(decision.take_profit, asset, exit_side))
        frame = bars[i.symbol].frame
        pos = frame.index.get_loc(pd.Timestamp(i.decision_ts))
        nxt = frame.iloc[pos + 1]
        bar = Bar(nxt.open, nxt.high, nxt.low, nxt.close)
        costs = Costs.for_asset("stock", periods_per_year=bars[i.symbol].periods_per_year)
        s = settle(sent, bar, costs)
        raw = settle(decision, bar, costs)
        assert raw.filled == bool(row.filled) and (not raw.filled or (raw.exit_reason, raw.exit_price) ==
                                                   (row.exit_reason, row.exit_price))
        if not s.filled:
            counted["unfilled"] += 1
            assert fills.get(i.client_order_id, []) == [] and i.decision_ts + i.symbol not in closes
            continue
        stamp = frame.index[pos + 1].isoformat()
        entry = next(f for f in fills[i.client_order_id] if f.kind == "entry")
        assert (entry.timestamp, entry.price) == (stamp, s.entry_price)
        if s.exit_reason == "take_profit":  # the leg filled first: no cls
            counted["take_profit"] += 1
            (exit_,) = [f for f in fills[i.client_order_id] if f.kind == "take_profit"]
            assert i.decision_ts + i.symbol not in closes
        else:
            counted["close"] += 1
            cls = closes[i.decision_ts + i.symbol]
            assert cls.time_in_force == CLS and cls.qty == i.qty and cls.status == "submitted"
            (exit_,) = fills[cls.client_order_id]
            assert broker.order_by_client_id(cls.client_order_id).time_in_force == CLS
        assert (exit_.timestamp, exit_.price) == (stamp, s.exit_price)
        pnl = decision.side * i.qty * (exit_.price - entry.price) - entry.fee - exit_.fee
        assert pnl == pytest.approx(i.qty * s.entry_price * s.net_return, rel=1e-9, abs=1e-9)
        if sent == decision:  # off the grid's reach: the backtest's own net return
            assert s.net_return == pytest.approx(row.net_return, abs=1e-15)
    assert counted["close"] >= 20 and counted["take_profit"] >= 1, counted
    assert broker.positions() == [] and broker.open_orders() == []
    assert not any(outcome == "rejected" for _, outcome in broker.submit_log())


def test_a_state_folder_keeps_its_exit_rule(close_replay, tmp_path):
    bars, forecaster, config, state = close_replay
    with pytest.raises(ConfigError, match="was made with --exit close; run it with --exit close as it was made"):
        replay(bars, BacktestPlanner(forecaster, replace(config, exit="next-open")), state, START, END,
               LoopConfig(tuple(bars), gates=OPEN_GATES, exit="next-open"))
