"""The walk-forward record as the loop trades the picks (:meth:`marketcast.backtest.engine.Exits.traded`,
:func:`marketcast.backtest.execution.held_refused`): window k trades its pick's order unless the trade made at
k - 1 on the pick's path still waits for its exit at bar t+2's open (the loop holds the symbol and sends no
entry), by hand and against a window-by-window walk of the picks with the one-window :func:`settle`."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import Exits, run_backtest
from marketcast.backtest.execution import closing_auction, held_refused, market_exit, wash_refused
from marketcast.backtest.fills import NEXT_OPEN, settle, settle_all
from marketcast.backtest.orders import Bar, Costs
from marketcast.backtest.strategies import StrategyParams
from marketcast.backtest.vectorised import Orders
from marketcast.data.bars import Bars

from .helpers import MomentumForecaster, random_bars

COSTS = Costs(0.001, borrow=0.0002)  # 0.1 % a side, one bar of a short's borrow 0.02 %
PARAMS = StrategyParams(costs=COSTS)
NAN = np.nan


def _bars_t1(opens) -> Bar:
    """Each window's bar t+1: open as given, high 1.5 above, low 1 below, close 0.5 above."""
    o = np.asarray(opens, dtype=np.float64)
    return Bar(o, o + 1.5, o - 1.0, o + 0.5)


def _own_walk(side, tp, bar: Bar, exit_open, queues):
    """One strategy's own record: settled at ``exit_open`` (NaN: bar t+1's close), its own washes refused."""
    orders = Orders(np.asarray(side, dtype=np.int8), np.full(len(side), NAN), np.asarray(tp, dtype=np.float64))
    f = settle_all(orders.side, orders.entry_limit, orders.take_profit, bar.open, bar.high, bar.low, bar.close,
                   COSTS, exit_open=exit_open)
    refused = wash_refused(orders.side, orders.take_profit, f.filled & (f.reason == NEXT_OPEN) & queues)
    return orders, f.refused(refused)


def test_held_refused_any_side_after_a_waiting_trade_and_every_other_one_in_a_run():
    assert list(held_refused([1, 1, 1, 1, 1], [True] * 5)) == [False, True, False, True, False]
    # the other side without a take-profit is refused too (no wash, but the loop holds the symbol)
    assert list(held_refused([1, -1, 1], [True] * 3)) == [False, True, False]
    # nothing waits (a take-profit exit, an unfilled entry, an exit at the close): nothing refused; flat never is
    assert list(held_refused([1, 1, 0, 1, -1], [False, True, False, True, True])) == [False, False, False, False,
                                                                                      True]


def _held_one_by_one(side, waits) -> list[bool]:
    """The judge: walk the windows in order, holding whether the previous one traded and still waits."""
    out, holding = [], False
    for s, w in zip(side, waits):
        refused = bool(holding and s != 0)
        out.append(refused)
        holding = bool(w) and not refused
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([-1, 0, 1]), st.booleans()), min_size=1, max_size=40))
def test_held_refusals_equal_a_window_by_window_walk(rows):
    side = np.array([r[0] for r in rows])
    waits = np.array([r[1] and r[0] != 0 for r in rows])
    assert list(held_refused(side, waits)) == _held_one_by_one(side, waits)


def test_market_exit_is_every_window_under_next_open_and_each_without_an_auction_under_close():
    auction = np.array([True, False, True])
    assert list(market_exit("next-open", auction)) == [True, True, True]
    assert list(market_exit("close", auction)) == [False, True, False]


def test_the_pick_path_by_hand_under_next_open_on_a_daily_stock():
    """Five windows, bars t+1 opening 101..105, every exit at the next window's bar's open (the last window's
    at 105's bar close: no bar t+2). Strategy a: long every window; b: short four windows, then long. Each own
    walk refuses windows 1 and 3 as washes (the same side as its own queued close). Picks: none, a, b, b, a.

    * window 1 (a): refused in a's own walk (against a's window 0, never traded on this path): traded here,
      entered at 102, out at 103's open;
    * window 2 (b, short, no take-profit): no wash, but window 1's close waits for the open: the loop holds the
      symbol, so it is refused;
    * window 3 (b): refused in b's own walk, free on this path: short at 104, covered at 105's open;
    * window 4 (a, long): window 3's close waits: refused."""
    bar = _bars_t1([101.0, 102.0, 103.0, 104.0, 105.0])
    exit_open = np.array([102.0, 103.0, 104.0, 105.0, NAN])
    exits = Exits(exit_open, np.isfinite(exit_open), 1, exit_open)
    a = _own_walk([1, 1, 1, 1, 1], [NAN] * 5, bar, exit_open, exits.queues)
    b = _own_walk([-1, -1, -1, -1, 1], [NAN] * 5, bar, exit_open, exits.queues)
    assert list(a[1].filled) == list(b[1].filled) == [True, False, True, False, True]  # own washes
    got = exits.traded([None, "a", "b", "b", "a"], {"a": a[0], "b": b[0]}, {"a": a[1], "b": b[1]}, bar, PARAMS)
    assert list(got["refused"]) == [False, False, True, False, True]
    assert list(got["filled"]) == [False, True, False, True, False]
    expected = [0.0, 103.0 / 102.0 - 1 - 0.002, 0.0, -(105.0 / 104.0 - 1) - 0.002 - 0.0002, 0.0]
    np.testing.assert_allclose(got["returns"], expected, rtol=0, atol=1e-15)


def test_the_pick_path_by_hand_on_24_7_bars_under_close():
    """Four windows of one strategy, long each (bars t+1 opening 101..104). Its own record exits at bar t+1's
    close (``close``); the loop exits by a market order filled at bar t+2's open. Window 0's take-profit (101.5)
    fills inside its bar: nothing waits, window 1 trades (102 -> 103's open); window 2 is refused while that
    close waits; window 3 trades and, with no bar t+2, is marked at its close (104.5)."""
    bar = _bars_t1([101.0, 102.0, 103.0, 104.0])
    closes = np.full(4, NAN)
    exits = Exits(closes, np.zeros(4, dtype=bool), 0, np.array([102.0, 103.0, 104.0, NAN]))
    orders, fills = _own_walk([1, 1, 1, 1], [101.5, NAN, NAN, NAN], bar, closes, exits.queues)
    assert list(fills.exit_price) == [101.5, 102.5, 103.5, 104.5]  # its own record: the take-profit, the closes
    got = exits.traded(["a"] * 4, {"a": orders}, {"a": fills}, bar, PARAMS)
    assert list(got["refused"]) == [False, False, True, False]
    expected = [101.5 / 101.0 - 1 - 0.002, 103.0 / 102.0 - 1 - 0.002, 0.0, 104.5 / 104.0 - 1 - 0.002]
    np.testing.assert_allclose(got["returns"], expected, rtol=0, atol=1e-15)


def _walk_the_picks(result, bars, rule):
    """The judge: the loop's trades of the result's picks, window by window, with :func:`settle`: an exit at
    bar t+2's open where the loop's is a market order (``next-open``; 24/7 and intraday bars under either rule:
    the loop sends a market-on-close order on daily stock bars only), and no entry while the previous window's
    position waits for that open."""
    frame = bars.frame
    intraday = np.median(np.diff(frame.index.asi8)) < 86_400 * 10**9
    params = StrategyParams.from_config(result.config, bars.asset_class, bars.periods_per_year)
    rows = frame.index.get_indexer(result.settle_times)
    market = rule == "next-open" or bars.asset_class == "crypto" or intraday
    returns, refused, holding = [], [], False
    for k, (pick, t1) in enumerate(zip(result.walk_forward["picked"], rows)):
        d = None if pick is None else result.strategies[pick].decisions[k]
        if d is None or d.side == 0 or holding:
            refused.append(d is not None and d.side != 0)
            returns.append(0.0)
            holding = False
            continue
        bar = Bar(*map(float, frame.iloc[t1][["open", "high", "low", "close"]]))
        nxt = float(frame.iloc[t1 + 1]["open"]) if market and t1 + 1 < len(frame) else None
        size = float(result.strategies[pick].sizes[k])
        s = settle(d, bar, params.costs, params.fill_mode, params.same_bar, size, exit_open=nxt)
        returns.append(s.net_return)
        refused.append(False)
        holding = s.filled and s.exit_reason == "next_open"
    return np.array(returns), np.array(refused)


@pytest.mark.parametrize("rule, asset_class", [("next-open", "stock"), ("close", "crypto")])
def test_a_sized_walk_forward_record_equals_the_loops_walk_of_the_picks(rule, asset_class):
    """``--sizing kelly``: each traded window earns its size times the unit return, a window sized to 0 trades
    nothing (and holds nothing after it)."""
    bars = random_bars(300, seed=8, asset_class=asset_class)
    config = BacktestConfig(windows=220, context=64, num_samples=32, maxdiff_min_history=5, exit=rule,
                            sizing="kelly", bootstrap_reps=50, spa=False, include_latest=False)
    result = run_backtest(bars, MomentumForecaster(), config)
    returns, refused = _walk_the_picks(result, bars, rule)
    sizes = [result.strategies[p].sizes[k] for k, p in enumerate(result.walk_forward["picked"]) if p]
    assert 0 < min(s for s in sizes if s > 0) < 1.0  # sized, not all at 1
    assert list(result.walk_forward["refused"]) == list(refused) and refused.sum() >= 3
    np.testing.assert_allclose(result.walk_forward["returns"], returns, rtol=0, atol=1e-15)


@pytest.mark.parametrize("rule", ["close", "next-open"])
@pytest.mark.parametrize("asset_class", ["stock", "crypto"])
def test_the_walk_forward_record_equals_the_loops_walk_of_the_picks(asset_class, rule):
    bars = random_bars(260, seed=33, asset_class=asset_class)
    config = BacktestConfig(windows=180, context=64, num_samples=32, maxdiff_min_history=5, exit=rule,
                            bootstrap_reps=50, spa=False, include_latest=False)
    result = run_backtest(bars, MomentumForecaster(), config)
    wf = result.walk_forward
    returns, refused = _walk_the_picks(result, bars, rule)
    assert list(wf["refused"]) == list(refused)
    np.testing.assert_allclose(wf["returns"], returns, rtol=0, atol=1e-15)
    held = refused.sum()
    if rule == "close" and asset_class == "stock":
        assert held == 0  # each exit at its own close (market-on-close): nothing waits
    else:
        assert held >= 5, held
    if rule == "next-open" and asset_class == "stock":  # some window the pick's own walk refused trades here
        own = [result.strategies[p].settlements.reason[k] == 4 for k, p in enumerate(wf["picked"]) if p]
        assert any(o and not r for o, r in zip(own, refused[[p is not None for p in wf["picked"]]]))
    # the Monte Carlo error is the record's: its full-run value is the record's total return
    assert result.monte_carlo is None or result.monte_carlo.walk_forward.value == pytest.approx(
        float(np.prod(1.0 + returns) - 1.0), abs=1e-12)


def test_hold_keeps_its_own_record():
    """``--hold`` scores the held picks (marketcast.backtest.holding), not this path."""
    bars = random_bars(200, seed=5)
    config = BacktestConfig(windows=100, context=64, num_samples=16, maxdiff_min_history=5, exit="next-open",
                            bootstrap_reps=20, spa=False, hold=True)
    result = run_backtest(bars, MomentumForecaster(), config)
    assert np.array_equal(result.walk_forward["returns"], result.held.returns)
    assert "refused" not in result.walk_forward
    plain = run_backtest(bars, MomentumForecaster(), replace(config, hold=False))
    assert plain.walk_forward["picked"] == result.walk_forward["picked"]


def hourly_stock_bars(sessions: int, seed: int) -> Bars:
    """Random stock bars stamped 14:30 .. 20:30 UTC (NYSE's regular session in January, 7 bars a day) over the
    first ``sessions`` weekdays of 2024 from 2 January (1 January is a holiday)."""
    days = pd.bdate_range("2024-01-02", periods=sessions + 5)
    holidays = {pd.Timestamp("2024-01-15"), pd.Timestamp("2024-02-19")}  # MLK Day, Washington's Birthday
    days = [d for d in days if d not in holidays][:sessions]
    index = pd.DatetimeIndex([d + pd.Timedelta(hours=14, minutes=30 + 60 * h) for d in days for h in range(7)],
                             tz="UTC", name="timestamp")
    frame = random_bars(len(index), seed=seed).frame.set_axis(index)
    return Bars("HRLY", frame, "stock", "test")


def test_intraday_stock_bars_under_close_exit_at_the_next_open_a_session_last_one_included():
    """The loop sends ``cls`` on daily bars only: under ``close`` an intraday position, on a session's last bar
    too, leaves by a market order at the bar's end, at the next bar's open (the next session's)."""
    bars = hourly_stock_bars(40, seed=5)
    index = bars.frame.index
    assert not closing_auction(index, "stock", "close").any()
    last = closing_auction(index, "stock", "next-open")
    assert last.sum() == 40 and list(index[last].hour) == [20] * 40  # next-open: each session's last, queued
    assert closing_auction(random_bars(10).frame.index, "stock", "close").all()  # daily: every bar, cls
    config = BacktestConfig(windows=220, context=64, num_samples=32, maxdiff_min_history=5, exit="close",
                            bootstrap_reps=50, spa=False, include_latest=False)
    result = run_backtest(bars, MomentumForecaster(), config)
    returns, refused = _walk_the_picks(result, bars, "close")
    assert list(result.walk_forward["refused"]) == list(refused) and refused.sum() >= 5
    np.testing.assert_allclose(result.walk_forward["returns"], returns, rtol=0, atol=1e-15)
    rows = index.get_indexer(result.settle_times)
    traded_on_last = [k for k, (p, t1) in enumerate(zip(result.walk_forward["picked"], rows))
                      if p and index[t1].hour == 20 and not refused[k] and result.strategies[p].decisions[k].side]
    assert traded_on_last, "no window traded on a session's last bar"
