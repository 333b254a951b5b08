"""Replay over embedded history: decisions and fills equal the backtest's for the same strategies and days;
the CLI replays a year and writes the PNG and records."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from marketcast.backtest import run_backtest
from marketcast.backtest.fills import settle
from marketcast.backtest.orders import Bar, Costs, Decision
from marketcast.data import load_symbol
from marketcast.forecast import load_forecaster
from marketcast.trade.loop.cycle import LoopConfig
from marketcast.trade.venues.paper import PaperBroker
from marketcast.trade.risk.gates import GateConfig
from marketcast.trade.loop.planner import PLANNER_CONFIG, BacktestPlanner
from marketcast.trade.replay import replay
from marketcast.trade.risk.rules import round_price
from marketcast.trade.journal.state import Journal

SRC = str(Path(__file__).resolve().parents[2] / "src")
SYMS = ("SP500", "NASDAQ")


# Every strategy, MaxDiff included: the planner carries its walk-forward backtest from the replay's first day
# (starting PLANNER_CONFIG.windows bars before it), so its learned MaxDiff offsets are those of one backtest
# over the same days. (Re-running a 70-window backtest each day learned them from a rolling 70 windows and
# disagreed with the long backtest on about a third of the days.)
OPEN_GATES = GateConfig(min_edge=-1.0, min_sharpe=-1e9, max_drawdown=1.01)
# Fills the penny grid moved in 2017 (docs/trading.md: how much). 14 of 92 while a strategy with one or two trades
# could be picked (ci_guard was, 55 times); with min_trades = 10 the picks are limit-entry strategies more often
# (highlow, maxdiff), so more entries fill at a sub-penny limit: 70 of 208, the count the backtest's own trades give
# (entries filled between the rounded and the decided limit, derived below without the broker). With the stock
# class's default costs (marketcast.backtest.costs: 1 bp half-spread and 1 bp slippage a side on top of the 5 bp
# fee, 0.5 % a year borrow on shorts; before, the fee alone) the picks shift: 79 of 195. With MaxDiff's grid in
# multiples of each window's ATR% (the default; before, a fixed +-1 %) its offsets and so the picks shift again:
# 70 of 198.
CHANGED_2017 = 70


def test_replay_of_a_year_reproduces_the_backtest_decisions_and_fills(tmp_path):
    bars = {s: load_symbol(s) for s in SYMS}
    forecaster = load_forecaster("baseline")
    config = replace(PLANNER_CONFIG, exit="close")  # the rule settle() scores: the exit at bar t+1's close
    result = replay(bars, BacktestPlanner(forecaster, config), tmp_path, "2017-01-01", "2017-12-31",
                    LoopConfig(SYMS, gates=OPEN_GATES, exit="close"))
    journal = Journal(tmp_path / "journal.db")
    broker = PaperBroker(tmp_path / "broker.db", bars, hold=True)
    exits = {(i.symbol, i.decision_ts): i.client_order_id for i in journal.intents() if i.kind == "on_close"}
    intents = [i for i in journal.intents() if i.status == "submitted" and i.kind == "entry"]
    strategies = Counter(i.strategy for i in intents)
    assert result.cycles_run == 250 and len(intents) >= 120 and strategies["maxdiff"] >= 80, strategies
    fills = {}
    for f in broker.fills():
        fills.setdefault(f.client_order_id, []).append(f)

    backtest = {}
    for sym in SYMS:  # one backtest per symbol over the replay's days, after the planner's 70 windows
        frame = bars[sym].frame
        first = int(frame.index.searchsorted(pd.Timestamp(journal.first_cycle()))) - PLANNER_CONFIG.windows
        last = frame.index.get_loc(pd.Timestamp(max(i.decision_ts for i in intents if i.symbol == sym)))
        config = replace(PLANNER_CONFIG, windows=last - first + 1, include_latest=False, exit="close")
        trades = run_backtest(bars[sym].head(last + 2), forecaster, config).trades()
        backtest[sym] = trades.set_index(["strategy", "decision_time"])

    pnl_total, filled, changed, at_sub_penny = 0.0, Counter(), [], 0
    asset = broker.asset("SP500")
    for i in intents:
        d = json.loads(i.decision)
        decision = Decision(d["side"], d["entry_limit"], d["take_profit"])  # as decided, before rounding
        row = backtest[i.symbol].loc[(i.strategy, i.decision_ts)]
        same = lambda a, b: (a is None and pd.isna(b)) or a == b  # noqa: E731
        assert decision.side == row.side and same(decision.entry_limit, row.entry_limit), (i, row)
        assert same(decision.take_profit, row.take_profit)
        # what was sent: the decision on the penny grid, buy prices down and sell prices up
        side, exit_side = ("buy", "sell") if decision.side > 0 else ("sell", "buy")
        sent = Decision(decision.side, None if decision.entry_limit is None else round_price(decision.entry_limit, asset, side),
                        None if decision.take_profit is None else round_price(decision.take_profit, asset, exit_side))
        assert (i.limit_price, i.take_profit) == (sent.entry_limit, sent.take_profit)
        if row.filled and sent.entry_limit is not None and sent.entry_limit != decision.entry_limit:
            # the backtest filled between the rounded limit and the decided one: the rounded order fills at its
            # own limit instead (buy limits round down, sell limits up)
            low, high = sorted((sent.entry_limit, decision.entry_limit))
            at_sub_penny += (low < row.entry_price <= high) if decision.side > 0 else (low <= row.entry_price < high)
        frame = bars[i.symbol].frame
        pos = frame.index.get_loc(pd.Timestamp(i.decision_ts))
        nxt = frame.iloc[pos + 1]
        bar = Bar(nxt.open, nxt.high, nxt.low, nxt.close)
        costs = Costs.for_asset("stock", periods_per_year=bars[i.symbol].periods_per_year)  # + a short's borrow
        s, raw = settle(sent, bar, costs), settle(decision, bar, costs)
        assert raw.filled == bool(row.filled) and (not raw.filled or raw.net_return == pytest.approx(row.net_return,
                                                                                                      abs=1e-15))
        got = fills.get(i.client_order_id, [])
        if (s.filled, s.entry_price, s.exit_price) != (raw.filled, raw.entry_price, raw.exit_price):
            changed.append((i.client_order_id, raw, s))
        if not s.filled:
            assert got == [] and broker.order_by_client_id(i.client_order_id).status == "expired"
            continue
        filled[i.strategy] += 1
        # the exit: the take-profit leg (under the entry's id), or the cls order sent while the bar traded
        entry, exit_ = got if len(got) == 2 else (*got, *fills[exits[(i.symbol, i.decision_ts)]])
        assert entry.timestamp == exit_.timestamp == frame.index[pos + 1].isoformat()
        reason = "take_profit" if exit_.kind == "take_profit" else "close"  # the broker books a cls fill as its own
        assert (entry.price, exit_.price, reason) == (s.entry_price, s.exit_price, s.exit_reason)
        pnl = decision.side * i.qty * (exit_.price - entry.price) - entry.fee - exit_.fee
        assert pnl == pytest.approx(i.qty * s.entry_price * s.net_return, abs=1e-9)
        pnl_total += pnl
    # The penny grid changes a fill where an entry fills at its limit: it fills at the rounded limit instead, at
    # most a cent better. In 2017 that is 70 of 208 fills; rounding lost no fill and added none, and no exit moved.
    for cid, raw, s in changed:
        assert s.filled and raw.filled and 0 < abs(s.entry_price - raw.entry_price) < 0.01, (cid, raw, s)
        assert s.exit_price == raw.exit_price and s.exit_reason == raw.exit_reason
    assert len(changed) == at_sub_penny == CHANGED_2017, (len(changed), at_sub_penny)
    # 2017: 198 of 375 orders fill, 6 of them maxdiff's (of 85 sent; its limits sit at the forecast's extremes). With
    # the fixed +-1 % grid it was 195 of 396 and 17, with the fee alone 208 of 406 and 21: the ATR grid changed which
    # days maxdiff is picked on (over all of 2017 its backtest fills more often: 19 of 250 windows, not 2).
    assert sum(filled.values()) >= 80 and filled["maxdiff"] >= 5, filled
    assert broker.account().cash == pytest.approx(100_000 + pnl_total, abs=1e-6)
    assert result.equity.iloc[-1] == pytest.approx(broker.account().cash)


def test_cli_replay_a_year_then_status(tmp_path):
    env = dict(os.environ, PYTHONPATH=SRC)
    state = tmp_path / "state"
    out = subprocess.run([sys.executable, "-m", "marketcast.commands", "trade", "replay", "--from", "2017-01-01", "--to",
                          "2017-12-31", "--state-dir", str(state)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "250 cycles run" in out.stdout
    png = state / "equity.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    records = [json.loads(x) for x in (state / "records.jsonl").read_text().splitlines()]
    assert len(records) == 250
    assert {"forecast_latency_s", "compile_mode", "recompiles_since_start", "fallbacks_to_eager", "peak_memory_mb",
            "quotes", "orders_submitted", "orders_filled", "orders_cancelled", "equity"} <= set(records[0])
    assert records[0]["quotes"] == {"real": 0, "synthetic": 2}
    status = subprocess.run([sys.executable, "-m", "marketcast.commands", "trade", "status", "--state-dir", str(state)],
                            capture_output=True, text=True, env=env, timeout=60)
    assert status.returncode == 0, status.stderr
    assert "cycles" in status.stdout and "250" in status.stdout
    # the journal's submitted orders: each cycle's entries and the closes it sent (a leftover queued to the next
    # open under the default next-open exit is a close of its own)
    submitted = sum(r["orders_submitted"] + r["closes"] for r in records)
    shown = re.search(r"orders_submitted\s*│\s*(\d+)", status.stdout)
    assert shown and int(shown.group(1)) == submitted > 0


def test_replay_rejects_inverted_dates(tmp_path):
    env = dict(os.environ, PYTHONPATH=SRC)
    out = subprocess.run([sys.executable, "-m", "marketcast.commands", "trade", "replay", "--from", "2017-05-01", "--to",
                          "2017-01-01", "--state-dir", str(tmp_path)], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 2 and "must be after" in out.stderr


def test_replay_of_hourly_goog_across_the_split_exits_0(tmp_path):
    """The issue's GOOG crash: two months of hourly NYSE bars whose history is split-adjusted and whose last two
    weeks are raw (20x, tests/backtest/helpers.goog_hourly). The planner scores the window that settles on the
    jump alone, and (1 + 19) ** 1764 overflowed in strategy_metrics. Ranges before, across and after the jump
    replay, and so do ranges that start at the file's first bars: the planner plans on the windows the bars
    hold, flat ("warming up") until one settled window exists."""
    from tests.backtest.helpers import goog_hourly

    data = tmp_path / "data"
    data.mkdir()
    goog_hourly().to_csv(data / "GOOG.csv")
    env = dict(os.environ, PYTHONPATH=SRC, COLUMNS="250")
    for start, end in (("2022-07-05", "2022-07-29"), ("2022-06-21", "2022-07-01"), ("2022-07-15", "2022-07-19"),
                       ("2022-06-01", "2022-06-03"), ("2022-06-02", "2022-06-15")):
        state = tmp_path / f"state-{start}"
        out = subprocess.run([sys.executable, "-m", "marketcast.commands", "trade", "replay", "--symbols", "GOOG", "--data-dir",
                              str(data), "--start", start, "--end", end, "--state-dir", str(state)],
                             capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr
        assert f"replay {start} .. {end} GOOG:" in out.stdout and "broker refusals 0;" in out.stdout
        records = [json.loads(x) for x in (state / "records.jsonl").read_text().splitlines()]
        assert records and all(r["clock"] == "stock" for r in records)
        if start == "2022-06-01":  # the first cycles hold fewer bars than one settled window needs
            assert "warming_up" in json.dumps(records[0])
