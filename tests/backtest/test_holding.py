"""Holding (``--hold``, :mod:`marketcast.backtest.holding`) on hand-computed bars: which position is held, where
it leaves under each exit rule, which take-profit rests, the top-up beyond the band, and each window's return
(costs only where the position changes)."""

from __future__ import annotations

import numpy as np
import pytest

from marketcast.backtest.costs import Costs
from marketcast.backtest.holding import REASON_NAMES, hold

NAN = np.nan
# bar 0 is window 0's bar t; window k trades on bar k + 1
#          0      1      2      3      4      5
OPEN = [100.0, 101.0, 103.0, 105.0, 104.0, 100.0]
HIGH = [101.0, 103.0, 104.0, 106.0, 105.0, 112.0]
LOW = [99.0, 100.0, 101.0, 104.0, 100.0, 99.0]
CLOSE = [100.0, 102.0, 104.0, 105.0, 101.0, 111.0]
BARS = (OPEN, HIGH, LOW, CLOSE)
FEE = 0.001  # per side, nothing else
STOCK_DAYS = np.ones(5, dtype=bool)  # daily stock bars: every bar ends its session


def trades(held) -> list[tuple]:
    t = held.trades
    return [(int(t.side[i]), int(t.entry_window[i]), int(t.exit_window[i]), float(t.entry_price[i]),
             float(t.exit_price[i]), REASON_NAMES[int(t.reason[i])]) for i in range(len(t))]


def run(side, tp, rule, auction=STOCK_DAYS, apart=False, costs=Costs(FEE), size=None, bars=BARS, limit=None):
    n = len(side)
    return hold(np.array(side), np.full(n, NAN) if limit is None else np.array(limit), np.array(tp, dtype=float),
                np.ones(n) if size is None else np.array(size), bars, costs, rule, auction, apart)


def test_next_open_holds_while_the_decision_agrees_and_leaves_at_the_open_after_it_turns():
    # long, long (held, no new entry), flat (leaves at bar 3's open), short with a take-profit touched in its entry
    # bar, long with a take-profit touched in its entry bar
    held = run([1, 1, 0, -1, 1], [NAN, NAN, NAN, 100.0, 110.0], "next-open")
    assert trades(held) == [(1, 0, 2, 101.0, 105.0, "next_open"), (-1, 3, 3, 104.0, 100.0, "take_profit"),
                            (1, 4, 4, 100.0, 110.0, "take_profit")]
    u = 1 / 101  # units bought with the starting equity at bar 1's open
    r0 = -FEE * u * 101 + u * (102 - 101)  # the entry's side, then marked to bar 1's close
    e1 = 1 + r0
    r1 = u * (104 - 102) / e1  # held: marked, nothing paid
    e2 = e1 + u * (104 - 102)
    r2 = (u * (105 - 104) - FEE * u * 101) / e2  # out at bar 3's open, the exit side on the entry notional
    r3 = -FEE + 4 / 104 - FEE  # a round trip within bar 4: the size is the equity, so it is the unit return
    r4 = -FEE + 10 / 100 - FEE
    assert held.returns == pytest.approx([r0, r1, r2, r3, r4], abs=1e-15)
    assert held.filled.tolist() == [True] * 5 and held.entered.tolist() == [True, False, False, True, True]
    assert held.trades.gross == pytest.approx([105 / 101 - 1, 1 - 100 / 104, 0.1], abs=1e-15)


def test_close_leaves_by_the_close_after_the_decision_turns_and_a_stock_take_profit_rests_while_held():
    borrow = 0.0002
    costs = Costs(FEE, borrow=borrow)
    # long with a take-profit not reached in its entry bar but resting into bar 2, which gaps to it; a short
    # entered on bar 3 whose decision turns flat: out by bar 4's close, one bar of borrow; a long on bar 5
    held = run([1, 1, -1, 0, 1], [103.5, NAN, NAN, NAN, 110.0], "close", costs=costs)
    assert trades(held) == [(1, 0, 1, 101.0, 103.5, "take_profit"), (-1, 2, 3, 105.0, 101.0, "close"),
                            (1, 4, 4, 100.0, 110.0, "take_profit")]
    u = 1 / 101
    r0 = -FEE * u * 101 + u * (102 - 101)
    e1 = 1 + r0
    p1 = u * (103.5 - 102) - FEE * u * 101  # the resting take-profit at its limit (bar 2 opens below it)
    e2 = e1 + p1
    r2 = -FEE  # short at bar 3's open = its close: only the entry's side
    e3 = e2 * (1 - FEE)
    s = e2 / 105
    p3 = -s * (101 - 105) - FEE * s * 105 - borrow * s * 105  # by the close of bar 4, one bar borrowed
    r4 = -FEE + 0.1 - FEE
    assert held.returns == pytest.approx([r0, p1 / e1, r2, p3 / e3, r4], abs=1e-15)
    # the same decisions under next-open: no resting stock take-profit (a day leg); the short leaves at bar 4's open
    nxt = run([1, 1, -1, 0, 1], [103.5, NAN, NAN, NAN, 110.0], "next-open", costs=costs)
    assert trades(nxt) == [(1, 0, 2, 101.0, 105.0, "next_open"), (1, 4, 4, 100.0, 110.0, "take_profit")]
    assert nxt.entered.tolist() == [True, False, False, False, True]  # the short on bar 3 is not sent while held


def test_a_crypto_take_profit_sent_apart_fills_in_its_entry_bar_only_at_a_close_beyond_it_then_rests():
    # 24/7 bars: no closing auction, so the exit is the next open under both rules
    for rule in ("close", "next-open"):
        held = run([1, 1, 1, 1, -1], [102.5, NAN, 104.5, NAN, NAN], rule, auction=np.zeros(5, dtype=bool),
                   apart=True)
        # bar 1 trades through 102.5 but closes below it: still open; bar 2 opens above it: filled at its open.
        # Bar 3's entry at 105 with its take-profit at 104.5 sent once it filled: bar 3 closes at 105, beyond it.
        # The long on bar 4 leaves at bar 5's open when the decision turns short.
        assert trades(held) == [(1, 0, 1, 101.0, 103.0, "take_profit"), (1, 2, 2, 105.0, 104.5, "take_profit"),
                                (1, 3, 4, 104.0, 100.0, "next_open")], rule
    stock = run([1, 1, 1, 1, -1], [102.5, NAN, 104.5, NAN, NAN], "next-open")
    assert trades(stock)[0] == (1, 0, 0, 101.0, 102.5, "take_profit")  # a leg: the backtest's same-bar rule


def test_a_held_position_short_of_its_size_beyond_the_band_is_topped_up_at_the_open():
    bars = ([100.0, 100.0, 92.0], [100.0, 100.0, 93.0], [100.0, 89.0, 91.0], [100.0, 90.0, 91.0])
    held = run([-1, -1], [NAN, NAN], "next-open", size=[0.5, 0.5], bars=bars)
    u = 0.5 / 100
    p0 = -FEE * u * 100 - u * (90 - 100)
    e1 = 1 + p0
    target = 0.5 * e1 / 90  # the short fell to 0.5 * 0.9 / 1.05 of the equity: below 0.45, so it is sold up
    add = target - u
    p1 = -FEE * add * 92 - add * (90 - 92) - target * (91 - 90)  # sold at bar 2's open, marked to its close
    assert held.returns == pytest.approx([p0, p1 / e1], abs=1e-15)
    assert trades(held) == [(-1, 0, 1, 100.0, 91.0, "marked")] and held.trades.top_ups.tolist() == [1]
    within = run([-1, -1], [NAN, NAN], "next-open", size=[0.5, 0.5],
                 bars=([100.0, 100.0, 96.0], [100.0, 100.0, 97.0], [100.0, 94.0, 95.0], [100.0, 95.0, 96.0]))
    assert within.trades.top_ups.tolist() == [0]  # 0.5 * 0.95 / 1.025 = 0.463: inside the band, left alone


def test_a_decision_sized_to_nothing_is_flat_and_turns_a_held_position_out():
    held = run([1, 1, 1], [NAN, NAN, NAN], "next-open", size=[1.0, 0.0, 1.0])
    assert trades(held) == [(1, 0, 1, 101.0, 103.0, "next_open"), (1, 2, 2, 105.0, 105.0, "marked")]
