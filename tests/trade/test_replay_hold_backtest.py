"""``trade replay --hold`` trades what ``backtest --hold --exit next-open`` scores: on the embedded SP500 and NASDAQ
and a synthetic 24/7 series, the replay's held positions enter and leave at the times and prices of the
backtest's held trades (on the broker's price grid: the backtest's held scoring of the orders as sent) and earn the
same per-trade returns (sizing apart: the replay sizes by its portfolio, the backtest by the unit of capital).

One stateless strategy is traded (a market entry with a take-profit; a limit entry) (the walk-forward pick is then that strategy on both sides whatever its lookback),
so the comparison is of holding, not of the pick: the pick's exit-rule lag in the live planner is the loop's
change (issue 53). Each replay starts on a day the backtest holds nothing, as the replay does.
(``--exit close`` with ``--hold``: tests/trade/test_replay_close_hold.py, with these helpers.)"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from marketcast.backtest import run_backtest
from marketcast.backtest.execution import session_last
from marketcast.backtest.holding import MARKED, REASON_NAMES, hold
from marketcast.data import load_symbol
from marketcast.data.bars import Bars
from marketcast.forecast import load_forecaster
from marketcast.trade.loop.cycle import LoopConfig
from marketcast.trade.loop.planner import PLANNER_CONFIG, BacktestPlanner
from marketcast.trade.replay import replay
from marketcast.trade.risk.portfolio import PortfolioConfig
from marketcast.trade.risk.rules import round_price
from marketcast.trade.test_kit.synthetic import crypto_frame
from marketcast.trade.venues.paper import PaperBroker

from .test_replay import OPEN_GATES

TAKE_PROFIT = ("entry_takeprofit",)  # a market entry with a take-profit at the forecast's high (low for a short)
LIMIT = ("highlow",)  # a limit entry at the forecast's low (high for a short), no take-profit


def crypto() -> Bars:
    return Bars("ETHUSD", crypto_frame("2014-01-01", "2015-12-31", seed=11), "crypto", "test")


def backtest(bars: Bars, first: int, last: int, strategy: tuple[str], rule: str = "next-open"):
    """``backtest --hold --exit RULE`` of the one strategy, windows deciding on rows ``first`` .. ``last``."""
    config = replace(PLANNER_CONFIG, windows=last - first + 1, include_latest=False, strategies=strategy,
                     exit=rule, hold=True)
    return run_backtest(bars.head(last + 2), load_forecaster("baseline"), config)


def replay_trades(broker: PaperBroker, symbol: str) -> list[tuple]:
    """(side, entry time, entry price, exit time, exit price) of each position the replay opened and closed,
    from the broker's fills: a top-up adds to a position, it opens none."""
    out, pos, opened = [], 0.0, None
    for f in broker.fills():
        if f.symbol != symbol:
            continue
        signed = f.qty if f.side == "buy" else -f.qty
        if abs(pos) < 1e-9:
            opened = (1 if signed > 0 else -1, pd.Timestamp(f.timestamp), f.price)
        pos += signed
        if abs(pos) < 1e-9:
            out.append((*opened, pd.Timestamp(f.timestamp), f.price))
            opened = None
    return out + ([(*opened, None, None)] if opened is not None else [])


def as_sent(result, bars: Bars, broker: PaperBroker, size: float) -> list[tuple]:
    """The backtest's held trades scored on its walk-forward picks' orders as the broker took them (their prices
    on the grid: a buy rounded down, a sell up) at ``size`` of the equity, as (side, entry time, entry price, exit
    time, exit price, reason)."""
    runs, n = result.strategies, result.windows
    picked = result.config.selection.walk_forward({k: r.returns for k, r in runs.items()},
                                                  {k: r.filled for k, r in runs.items()}, result.settle_delay)["picked"]

    def of_pick(field: str, none: float) -> np.ndarray:  # each window's decision of its walk-forward pick
        return np.array([none if p is None else float(getattr(runs[p].decisions, field)[k])
                         for k, p in enumerate(picked)])

    side, limit, tp = of_pick("side", 0.0), of_pick("entry_limit", np.nan), of_pick("take_profit", np.nan)
    asset = broker.asset(bars.symbol)

    def grid(prices, buy) -> np.ndarray:
        return np.array([np.nan if p != p else round_price(float(p), asset, "buy" if b else "sell")
                         for p, b in zip(prices, buy)])

    limit, tp = grid(limit, side > 0), grid(tp, side < 0)
    frame = bars.frame
    rows = frame.index.get_indexer(result.decision_times)
    rows = np.append(rows, rows[-1] + 1)
    ohlc = tuple(frame[c].to_numpy()[rows] for c in ("open", "high", "low", "close"))
    held = hold(side, limit, tp, np.full(n, size), ohlc, result.costs, result.config.exit,
                session_last(frame.index, bars.asset_class)[rows[1:]], bars.asset_class == "crypto")
    return trades_of(held.trades, result.settle_times)


def trades_of(t, settle_times) -> list[tuple]:
    return [(int(t.side[i]), settle_times[t.entry_window[i]], float(t.entry_price[i]),
             None if t.reason[i] == MARKED else settle_times[t.exit_window[i]],
             None if t.reason[i] == MARKED else float(t.exit_price[i]), REASON_NAMES[int(t.reason[i])])
            for i in range(len(t))]


@pytest.mark.parametrize("symbol, start, end, strategy", [("SP500", "2017-03-01", "2017-06-30", TAKE_PROFIT),
                                                          ("NASDAQ", "2016-09-01", "2016-12-30", TAKE_PROFIT),
                                                          ("ETHUSD", "2015-03-01", "2015-05-31", TAKE_PROFIT),
                                                          ("SP500", "2017-04-10", "2017-07-31", LIMIT)])
def test_a_held_replay_enters_and_exits_as_the_held_backtest(tmp_path, symbol, start, end, strategy):
    bars = crypto() if symbol == "ETHUSD" else load_symbol(symbol)
    index = bars.frame.index
    lo, hi = (int(index.searchsorted(pd.Timestamp(day, tz="UTC"))) for day in (start, end))
    first_look = backtest(bars, lo - PLANNER_CONFIG.windows, hi - 1, strategy)
    flat = first_look.held.entered | ~first_look.held.filled  # nothing carried into the window's decision
    k0 = PLANNER_CONFIG.windows + int(np.argmax(flat[PLANNER_CONFIG.windows:]))  # the first such day from start
    begin = index[lo - PLANNER_CONFIG.windows + k0]

    planner = BacktestPlanner(load_forecaster("baseline"), strategies=strategy)
    replay({symbol: bars}, planner, tmp_path, begin.isoformat(), index[hi].isoformat(),
           LoopConfig((symbol,), gates=OPEN_GATES), hold=True)
    broker = PaperBroker(tmp_path / "broker.db", {symbol: bars}, hold=True)
    got = replay_trades(broker, symbol)

    # the backtest from the replay's first decision: its first window flat, as the replay starts
    result = backtest(bars, index.get_loc(begin) - PLANNER_CONFIG.windows, hi - 1, strategy)
    first = int(np.searchsorted(result.decision_times, begin))
    scored = [t for t in trades_of(result.held.trades, result.settle_times) if t[1] > begin]
    # the replay sizes each symbol to its cap: a held position bought up beyond the band gets a new take-profit
    sent = [t for t in as_sent(result, bars, broker, PortfolioConfig().per_symbol_cap) if t[1] > begin]
    assert result.held.entered[first] or not result.held.filled[first]
    assert len(got) >= 8 and len(got) == len(sent), (got, sent)
    reasons = {r for *_, r in sent}
    assert {"next_open", "take_profit"} <= reasons or strategy == LIMIT, reasons  # both ways out, held across bars:
    assert sum(t[3] is not None and t[3] > t[1] for t in sent) >= 3
    for g, s in zip(got, sent):
        assert g[:3] == s[:3], (g, s)  # side, entry bar, entry price (the open, or the limit as sent)
        assert g[3:5] == s[3:5], (g, s)  # exit bar and price (None: still open when the replay ends)
        if s[4] is not None:
            assert g[0] * (g[4] / g[2] - 1) == pytest.approx(s[0] * (s[4] / s[2] - 1), abs=1e-12)
    if strategy == LIMIT:  # entries at their limit, inside the bar, on the penny grid
        inside = [g for g in got if g[2] != bars.frame.at[g[1], "open"]]
        assert len(inside) >= 3 and all(round(g[2], 2) == g[2] for g in inside), inside
    # the backtest's own held trades are the scoring of its orders at the unit size (on the grid: on the same bars)
    unit = [t for t in as_sent(result, bars, broker, 1.0) if t[1] > begin]
    assert [(t[0], t[1], t[3], t[5]) for t in scored] == [(t[0], t[1], t[3], t[5]) for t in unit]
    broker.close()
