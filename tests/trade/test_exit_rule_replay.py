"""A default replay trades the exit rule the backtest scores (issue 53, items 1-2), judged window by window against
``marketcast backtest --exit RULE``'s walk-forward record (``run_backtest(...).walk_forward``: the pick, which
windows it trades and what each earns) and its trade list (``run_backtest(...).trades()``) over the replay's
windows, every gate open: the pick, the decision, the entry (bar and price; where the broker's price grid moved a
limit, the backtest's settle rule applied to the order as sent), the exit (bar and price) and the round trip's net
return, from the paper broker's own books, equal to the walk-forward record's return of the window.

* ``close``, embedded SP500 and NASDAQ: every window equal; a filled stock entry leaves by a market-on-close
  (``cls``) order at its bar's close, a take-profit that filled first sends none.
* ``next-open``, the same: equal, the exit at bar t+2's open; where the previous pick's position waits for that
  open (its close queued), the loop holds the symbol and sends no entry, and the walk-forward record refuses the
  window along the pick's path (among them every wash the pick's own record refuses, and none it refuses against
  its own previous window where the pick was another strategy).
* A synthetic 24/7 series under each rule: a position leaves by a market order at the next decision, filled at
  the next bar's open; the window after a traded one is skipped by the loop, which holds the symbol until that
  close fills, and refused by the walk-forward record.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pandas as pd
import pytest

from marketcast.backtest import run_backtest
from marketcast.backtest.fills import settle
from marketcast.backtest.orders import Bar, Costs, Decision
from marketcast.data import load_symbol
from marketcast.data.bars import Bars
from marketcast.errors import ConfigError
from marketcast.forecast import load_forecaster
from marketcast.trade.journal.ids import CLOSE, ENTRY, ON_CLOSE
from marketcast.trade.journal.state import Journal
from marketcast.trade.loop.cycle import LoopConfig
from marketcast.trade.loop.planner import PLANNER_CONFIG, BacktestPlanner
from marketcast.trade.replay import replay
from marketcast.trade.risk.gates import GateConfig
from marketcast.trade.risk.rules import round_price
from marketcast.trade.test_kit.synthetic import crypto_frame
from marketcast.trade.types import CLS
from marketcast.trade.venues.paper import PaperBroker

OPEN_GATES = GateConfig(min_edge=-1.0, min_sharpe=-1e9, max_drawdown=1.01)
START, END = "2018-01-01", "2018-03-31"


@pytest.fixture(scope="module")
def close_replay(tmp_path_factory):
    state = tmp_path_factory.mktemp("close")
    return state, compare(state, {s: load_symbol(s) for s in ("SP500", "NASDAQ")}, "close", START, END)


def test_close_replay_exits_each_stock_entry_at_its_bars_close_as_the_backtest(close_replay):
    state, counted = close_replay
    print(counted)
    # 2018-01 .. 03: 33 cls exits, 1 take-profit filled first (no cls sent), 34 limits unfilled, every window equal
    assert counted["exit close"] >= 20 and counted["exit take_profit"] >= 1, counted
    assert set(counted) <= {"flat", "unfilled", "exit close", "exit take_profit"}, counted
    journal = Journal(state / "journal.db")
    assert {i.kind for i in journal.intents()} == {ENTRY, ON_CLOSE}  # no leftover: every position left at its close
    journal.close()


def test_a_state_folder_keeps_its_exit_rule(close_replay):
    state, _ = close_replay
    bars = {s: load_symbol(s) for s in ("SP500", "NASDAQ")}
    with pytest.raises(ConfigError, match="was made with --exit close; run it with --exit close as it was made"):
        replay(bars, BacktestPlanner(load_forecaster("baseline"), replace(PLANNER_CONFIG, exit="next-open")), state,
               START, END, LoopConfig(tuple(bars), gates=OPEN_GATES, exit="next-open"))


# ---------------------------------------------------------------------------------------------- any rule, any bars
def _walk_forward(bars, forecaster, journal, config, last_decision):
    """The backtest of ``bars`` over the replay's windows: its trades by (strategy, decision time) and its
    walk-forward record by decision time: (pick, refused, return, fill)."""
    frame = bars.frame
    first = int(frame.index.searchsorted(pd.Timestamp(journal.first_cycle()))) - PLANNER_CONFIG.windows
    last = frame.index.get_loc(pd.Timestamp(last_decision))
    # decisions on rows first .. last + 1, the last one's bar t+2 (its next open) in the bars; it is not judged
    r = run_backtest(bars.head(last + 3), forecaster, replace(config, windows=last - first + 2, include_latest=False))
    wf = r.walk_forward
    record = {t.isoformat(): (p, bool(no), float(ret), fill)
              for t, p, no, ret, fill in zip(r.decision_times, wf["picked"], wf["refused"], wf["returns"], wf["fills"])}
    return r.trades().set_index(["strategy", "decision_time"]), record


def compare(tmp_path, bars: dict, rule: str, start: str, end: str) -> Counter:
    """Replay ``bars`` under exit rule ``rule`` (every gate open) and judge every window against the backtest with
    ``--exit rule``: the pick, the refusal, the decision, the entry (time, price on the broker's grid), the exit
    (time, price) and the round trip's net return, equal to the walk-forward record's; returns what was counted."""
    forecaster = load_forecaster("baseline")
    config = replace(PLANNER_CONFIG, exit=rule)
    syms = tuple(bars)
    replay(bars, BacktestPlanner(forecaster, config), tmp_path, start, end,
           LoopConfig(syms, gates=OPEN_GATES, exit=rule))
    journal = Journal(tmp_path / "journal.db")
    broker = PaperBroker(tmp_path / "broker.db", bars, hold=True)
    intents = journal.intents()
    entries = {(i.symbol, i.decision_ts): i for i in intents if i.kind == ENTRY}
    closes = {(i.symbol, i.decision_ts): i for i in intents if i.kind in (ON_CLOSE, CLOSE)}
    fills: dict[str, list] = {}
    for f in broker.fills():
        fills.setdefault(f.client_order_id, []).append(f)
    counted = Counter()
    for sym in syms:
        frame, crypto = bars[sym].frame, bars[sym].asset_class == "crypto"
        asset = broker.asset(sym)
        costs = Costs.for_asset(bars[sym].asset_class, periods_per_year=bars[sym].periods_per_year)
        days = _cycles(journal, frame.index)
        trades, record = _walk_forward(bars[sym], forecaster, journal, config, days[-1])
        for day in days:
            (pick, refused, earned, traded), i = record[day], entries.get((sym, day))
            row = None if pick is None else trades.loc[(pick, day)]
            if row is None or row.side == 0:
                assert i is None and not refused and earned == 0.0, (sym, day, i)  # flat: nothing sent
                counted["flat"] += 1
                continue
            if refused:
                # the previous window's position is closed at this decision, its exit waiting for the next open:
                # the loop holds the symbol until then and sends no entry, and the walk-forward record trades none
                assert i is None and earned == 0.0, (sym, day, i, row)
                close = closes.get((sym, day))
                assert close is not None and close.kind == CLOSE and close.status == "submitted", (sym, day, row)
                counted["wash" if row.exit_reason == "refused_wash" else "held, no wash"] += 1
                continue
            assert i is not None and i.status != "refused", (sym, day, i, row)  # the record trades it: so does the loop
            assert i.strategy == pick, (sym, day, i.strategy, pick)
            d = json.loads(i.decision)
            decision = Decision(d["side"], d["entry_limit"], d["take_profit"])
            assert (decision.side, decision.take_profit) == (row.side, None if pd.isna(row.take_profit)
                                                             else row.take_profit)
            own_wash = row.exit_reason == "refused_wash"  # refused in the pick's own walk, traded on the pick's path
            if own_wash:
                prev_day = _before(frame, day)
                assert record[prev_day][0] != pick, (sym, day, row)  # the own walk's previous window was not picked
                assert trades.loc[(pick, prev_day)].exit_reason == "next_open", (sym, day, row)
                counted["the pick's own walk refuses, its path trades"] += 1
            side, exit_side = ("buy", "sell") if decision.side > 0 else ("sell", "buy")
            sent = Decision(decision.side,
                            None if decision.entry_limit is None else round_price(decision.entry_limit, asset, side),
                            None if decision.take_profit is None else round_price(decision.take_profit, asset,
                                                                                  exit_side))
            pos = frame.index.get_loc(pd.Timestamp(day))
            nxt = frame.iloc[pos + 1]
            bar = Bar(nxt.open, nxt.high, nxt.low, nxt.close)
            at_open = rule == "next-open" or crypto  # a market order after the bar: bar t+2's open
            s = settle(sent, bar, costs, exit_open=float(frame["open"].iloc[pos + 2]) if at_open else None)
            got = fills.get(i.client_order_id, [])
            if not s.filled:
                assert not got and earned == 0.0 and (own_wash or not row.filled) and (sent != decision
                                                                                       or not traded.filled), (i, row)
                counted["unfilled"] += 1
                continue
            entry = next(f for f in got if f.kind == "entry")
            assert (entry.timestamp, entry.price) == (frame.index[pos + 1].isoformat(), s.entry_price)
            if s.exit_reason == "take_profit":
                (exit_,) = [f for f in got if f.kind == "take_profit"]
                stamp = frame.index[pos + 1]
            else:
                close = closes[(sym, day if not at_open else frame.index[pos + 1].isoformat())]
                (exit_,) = fills[close.client_order_id]
                stamp = frame.index[pos + 2] if at_open else frame.index[pos + 1]
                assert close.time_in_force == ("gtc" if crypto else CLS if not at_open else "day"), close
            assert (pd.Timestamp(exit_.timestamp), exit_.price) == (stamp, s.exit_price), (i, exit_, s)
            pnl = decision.side * i.qty * (exit_.price - entry.price) - entry.fee - exit_.fee
            assert pnl == pytest.approx(i.qty * s.entry_price * s.net_return, rel=1e-9, abs=1e-9)
            if sent == decision:  # the backtest's own trade, to the digit: the walk-forward record's fill and return
                assert (s.entry_price, s.exit_price, s.exit_reason) == (traded.entry_price, traded.exit_price,
                                                                        traded.exit_reason), (s, traded)
                assert s.net_return == pytest.approx(earned, abs=1e-15), (i, s, earned)
                if not own_wash:
                    assert (s.entry_price, s.exit_price) == (row.entry_price, row.exit_price), (s, row)
            counted[f"exit {s.exit_reason}"] += 1
    assert not any(outcome == "rejected" for _, outcome in broker.submit_log())
    broker.close()
    journal.close()
    return counted


def _cycles(journal, index) -> list[str]:
    """The replay's decision bars on ``index`` (a symbol's own bars)."""
    rows = journal.conn.execute("SELECT DISTINCT decision_ts FROM cycles ORDER BY decision_ts").fetchall()
    return [r[0] for r in rows if pd.Timestamp(r[0]) in index]


def _before(frame, day):
    return frame.index[frame.index.get_loc(pd.Timestamp(day)) - 1].isoformat()


def test_next_open_replay_trades_as_the_backtest_on_sp500_and_nasdaq(tmp_path):
    counted = compare(tmp_path, {s: load_symbol(s) for s in ("SP500", "NASDAQ")}, "next-open", START, END)
    print(counted)
    # 2018-01 .. 03: 38 next-open exits, 14 windows refused as washes along the pick's path, 1 the pick's own walk
    # refused against its previous window (another strategy was picked there) that the pick's path trades
    assert counted["wash"] >= 5 and counted["exit next_open"] >= 10, counted
    assert counted["the pick's own walk refuses, its path trades"] >= 1, counted


@pytest.mark.parametrize("rule", ["close", "next-open"])
def test_a_24_7_replay_trades_as_the_backtest_under_each_rule(tmp_path, rule):
    """A synthetic 24/7 series (no closing auction): a position leaves by a market order at the next decision,
    which fills at the next bar's open, equal to the bar's close on these continuous bars."""
    bars = {"ETHUSD": Bars("ETHUSD", crypto_frame("2016-01-01", "2018-03-31", seed=11), "crypto", "test")}
    counted = compare(tmp_path, bars, rule, "2018-01-01", "2018-02-28")
    print(counted)
    # 2018-01 .. 02: 15 next-open exits and 7 (close) or 8 (next-open) windows after a traded one, which the loop
    # skips while it holds the symbol, refused by the walk-forward record
    assert counted["exit next_open"] >= 10 and counted["held, no wash"] >= 5, counted


def test_trade_replay_states_its_rule_and_a_folder_made_under_the_other_is_one_line_exit_2(tmp_path, capsys):
    from .helpers import trade_main

    state = tmp_path / "st"
    args = ["replay", "--symbols", "SP500", "--start", "2015-01-05", "--end", "2015-01-16", "--state-dir", str(state)]
    assert trade_main([*args, "--exit", "close", "--cash", "20000"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("exit `close`: each decision at bar t is settled on bar t+1")
    assert "allows 3 day trades in 5 business days" in out  # $20,000 under close: the pattern-day-trader note
    log = (state / "trade.log").read_text()
    assert trade_main([*args, "--exit", "next-open"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: {state} was made with --exit close; run it with --exit close as it was made, or use a new "
                   "state folder")
    assert (state / "trade.log").read_text() == log  # refused before the lock or the log
