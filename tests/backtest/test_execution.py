"""The execution rule (:mod:`marketcast.backtest.execution`, ``--exit``): an exit at the next bar's open, the
overnight gap and a short's borrow, and the wash refusal of an entry against the previous window's queued close,
by hand on a few bars and against a one-window-at-a-time reference."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import run_backtest
from marketcast.backtest.execution import EXIT_RULES, check_exit, session_last, wash_refused
from marketcast.backtest.fills import settle, settle_all
from marketcast.backtest.orders import Bar, Costs, Decision
from marketcast.backtest.strategies import StrategyParams, decide, initial_state, step
from marketcast.errors import ConfigError

from .helpers import MomentumForecaster, TableForecaster, make_bars, random_bars

COSTS = Costs(0.001, borrow=0.0002)


def test_an_exit_at_the_next_open_books_the_gap_and_the_same_costs():
    bar = Bar(100.0, 104.0, 99.0, 103.0)
    long = settle(Decision(1), bar, COSTS, exit_open=101.0)
    assert (long.entry_price, long.exit_price, long.exit_reason) == (100.0, 101.0, "next_open")
    assert long.gross_return == pytest.approx(0.01) and long.fees == pytest.approx(0.002)
    short = settle(Decision(-1), bar, COSTS, exit_open=105.0)  # a gap up overnight: the short loses 5 %
    assert short.gross_return == pytest.approx(-0.05) and short.fees == pytest.approx(0.002 + 0.0002)
    assert settle(Decision(1), bar, COSTS).exit_price == 103.0  # no exit_open: the close, as before


def test_a_take_profit_inside_bar_t_plus_1_is_unchanged_and_one_missed_waits_for_the_open():
    bar = Bar(100.0, 104.0, 99.0, 103.0)
    hit = settle(Decision(1, None, 102.0), bar, COSTS, exit_open=90.0)
    assert (hit.exit_price, hit.exit_reason) == (102.0, "take_profit")
    missed = settle(Decision(1, None, 110.0), bar, COSTS, exit_open=90.0)
    assert (missed.exit_price, missed.exit_reason) == (90.0, "next_open")
    # a limit entry inside the bar (at 99.5) whose take-profit (103.5) the close did not reach after it
    inside = settle(Decision(1, 99.5, 103.5), bar, COSTS, exit_open=101.0)
    assert (inside.entry_price, inside.exit_price, inside.exit_reason) == (99.5, 101.0, "next_open")


def test_settle_all_equals_settle_with_an_exit_at_the_next_open():
    rng = np.random.default_rng(9)
    n = 3000
    o = 100 * np.exp(rng.normal(0, 0.01, n))
    c = o * np.exp(rng.normal(0, 0.01, n))
    h = np.maximum(o, c) * np.exp(np.abs(rng.normal(0, 0.01, n)))
    lo = np.minimum(o, c) * np.exp(-np.abs(rng.normal(0, 0.01, n)))
    side = rng.choice([-1, 0, 1], n)
    limit = np.where(rng.random(n) < 0.5, np.nan, o * (1 + rng.normal(0, 0.01, n)))
    tp = np.where(rng.random(n) < 0.5, np.nan, o * (1 + side * np.abs(rng.normal(0, 0.01, n))))
    nxt = np.where(rng.random(n) < 0.3, np.nan, c * np.exp(rng.normal(0, 0.01, n)))
    for same_bar in ("pessimistic", "nearest"):
        fills = settle_all(side, limit, tp, o, h, lo, c, COSTS, "touch", same_bar, nxt)
        for k in range(n):
            d = Decision(int(side[k]), None if np.isnan(limit[k]) else limit[k], None if np.isnan(tp[k]) else tp[k])
            assert fills[k] == settle(d, Bar(o[k], h[k], lo[k], c[k]), COSTS, "touch", same_bar,
                                      exit_open=None if np.isnan(nxt[k]) else nxt[k]), k


def _refused_one_by_one(side, take_profit, queues) -> list[bool]:
    """The judge: walk the windows in order, holding whether the previous one left a close queued."""
    out, queued_before, prev = [], False, 0
    for s, tp, q in zip(side, take_profit, queues):
        meets = s != 0 and (s == prev or (s == -prev and tp == tp))
        refused = bool(queued_before and meets)
        out.append(refused)
        queued_before, prev = bool(q) and not refused, s
    return out


def test_a_run_of_same_side_entries_trades_every_other_one():
    n = np.nan
    assert list(wash_refused([1, 1, 1, 1, 1], [n] * 5, [True] * 5)) == [False, True, False, True, False]
    # the other side without a take-profit does not wash (its market sell meets no buy); with one it does
    assert list(wash_refused([1, -1, 1], [n, n, n], [True] * 3)) == [False, False, False]
    assert list(wash_refused([1, -1], [n, 99.0], [True, True])) == [False, True]
    # nothing queued (a take-profit exit, an unfilled entry, a crypto close): nothing refused; flat never is
    assert list(wash_refused([1, 1, 0, 1], [n] * 4, [False, True, True, True])) == [False, False, False, False]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([-1, 0, 1]), st.booleans(), st.booleans()), min_size=1, max_size=40))
def test_wash_refusals_equal_a_window_by_window_walk(rows):
    side = np.array([r[0] for r in rows])
    tp = np.array([99.0 if r[1] else np.nan for r in rows])
    queues = np.array([r[2] and r[0] != 0 for r in rows])
    assert list(wash_refused(side, tp, queues)) == _refused_one_by_one(side, tp, queues)


def test_four_windows_by_hand_entry_exit_at_the_next_open_borrow_and_a_wash():
    """Eight daily bars, windows decided at rows 3..6 (long, short, short, long), settled under next-open:
    window 0 long 4 -> 5 open; window 1 short, the other side without a take-profit: trades 5 -> 6 open and pays
    borrow; window 2 short again: refused (window 1's close is queued); window 3 long: trades, and the bars end
    before its bar t+2, so it is marked at bar 7's close."""
    o = [100, 101, 102, 103, 104.0, 106.0, 103.0, 101.0]
    c = [100.5, 101.5, 102.5, 103.5, 105.0, 104.0, 102.0, 102.5]
    ohlc = [(a, max(a, b) + 1, min(a, b) - 1, b) for a, b in zip(o, c)]
    bars = make_bars(ohlc)
    when = bars.frame.index
    table = {when[3]: (0.01, 0.02, -0.02), when[4]: (-0.01, 0.02, -0.02), when[5]: (-0.01, 0.02, -0.02),
             when[6]: (0.01, 0.02, -0.02)}
    config = BacktestConfig(windows=4, context=3, num_samples=8, strategies=("simple",), fee=0.001, spread=0.0,
                            slippage=0.0, borrow_rate=0.5, exit="next-open", bootstrap_reps=10, spa=False,
                            include_latest=False)
    result = run_backtest(bars, TableForecaster(table), config)
    run = result.strategies["simple"]
    borrow = 0.5 / result.periods_per_year
    assert list(run.decisions.side) == [1, -1, -1, 1]
    assert [run.settlements[k].exit_reason for k in range(4)] == ["next_open", "next_open", None, "close"]
    assert list(run.settlements.reason) == [3, 3, 4, 1]  # next_open, next_open, refused_wash, close
    expected = [106.0 / 104.0 - 1 - 0.002, -(103.0 / 106.0 - 1) - 0.002 - borrow, 0.0, 102.5 / 101.0 - 1 - 0.002]
    np.testing.assert_allclose(run.returns, expected, rtol=0, atol=1e-15)
    # the same decisions under close: each exits at its own bar t+1's close, none refused
    closed = run_backtest(bars, TableForecaster(table), replace(config, exit="close")).strategies["simple"]
    np.testing.assert_allclose(closed.returns, [105.0 / 104.0 - 1 - 0.002, -(104.0 / 106.0 - 1) - 0.002 - borrow,
                                                -(102.0 / 103.0 - 1) - 0.002 - borrow, 102.5 / 101.0 - 1 - 0.002],
                               rtol=0, atol=1e-15)
    assert [s.exit_reason for s in closed.settlements] == ["close"] * 4


@pytest.mark.parametrize("asset_class", ["stock", "crypto"])
def test_the_engine_under_next_open_equals_the_one_window_step_and_the_judge(asset_class):
    bars = random_bars(300, seed=21, asset_class=asset_class)
    config = BacktestConfig(windows=200, context=64, num_samples=32, maxdiff_min_history=5, exit="next-open")
    result = run_backtest(bars, MomentumForecaster(), config)
    params = StrategyParams.from_config(config, bars.asset_class, bars.periods_per_year)
    frame = bars.frame
    rows = frame.index.get_indexer(result.settle_times)
    queued = asset_class == "stock"  # a daily stock's close waits for the open; a crypto close fills at once
    refusals = 0
    for name, run in result.strategies.items():
        state, settled = initial_state(name), []
        for k, (view, t1) in enumerate(zip(result.views, rows)):
            bar = Bar(*map(float, frame.iloc[t1][["open", "high", "low", "close"]]))
            nxt = float(frame.iloc[t1 + 1]["open"]) if t1 + 1 < len(frame) else None
            d, s, state = step(name, view, state, bar, params, exit_open=nxt)
            assert run.decisions[k] == d, (name, k)
            settled.append(s)
        if name == "maxdiff":  # the last window's grid waits for its exit, in the state the next decision reads
            final = run.final_state
            assert (final.count, len(final.pending)) == (state.count, 1) == (len(rows) - 1, 1)
            assert np.array_equal(final.scores, state.scores) and np.array_equal(final.pending[0], state.pending[0])
        assert run.next_decision == decide(name, result.latest_view, state, params), name
        queues = [queued and s.filled and s.exit_reason == "next_open" for s in settled]
        refused = _refused_one_by_one(run.decisions.side, run.decisions.take_profit, queues)
        refusals += sum(refused)
        for k, s in enumerate(settled):
            assert run.settlements[k] == (replace(s, filled=False, entry_price=None, exit_price=None,
                                                  exit_reason=None, gross_return=0.0, fees=0.0)
                                          if refused[k] else s), (name, k)
    assert (refusals > 50) == queued and (refusals == 0) != queued
    # the walk-forward pick at window k reads windows k - 2 and before: window 1 is flat as window 0 is
    assert result.settle_delay == 1 and result.walk_forward["picked"][:2] == [None, None]


def test_the_rule_is_checked_and_a_daily_stock_bar_ends_its_session():
    assert check_exit("next-open") == "next-open" and EXIT_RULES == ("close", "next-open")
    with pytest.raises(ConfigError, match="--exit must be one of close, next-open, got 'open'"):
        BacktestConfig(exit="open")
    daily = random_bars(10).frame.index
    assert session_last(daily, "stock").all() and not session_last(daily, "crypto").any()
    import pandas as pd

    hours = pd.DatetimeIndex(["2024-03-04 14:30", "2024-03-04 19:30", "2024-03-04 20:30", "2024-03-05 14:30",
                              "2024-03-05 20:30"], tz="UTC")  # NYSE closes 21:00 UTC in March (EST)
    assert list(session_last(hours, "stock")) == [False, False, True, False, True]
