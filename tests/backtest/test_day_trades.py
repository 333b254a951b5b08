"""Pattern-day-trader refusals scored by the backtest (:mod:`marketcast.backtest.day_trades`, ``--equity``): by
hand on session numbers, on six day-trade windows across a holiday (business days, not calendar days), which
round trips count under each exit rule, and perturb-the-future with the rule on."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.day_trades import DayTrades, refused
from marketcast.backtest.engine import run_backtest
from marketcast.backtest.fills import CLOSE, NEXT_OPEN, TAKE_PROFIT, Fills
from marketcast.data.bars import Bars
from marketcast.errors import ConfigError

from .helpers import MomentumForecaster, TableForecaster, random_bars
from .test_no_lookahead import garbage_after

ALL = np.ones(6, dtype=bool)


def _exits(day, session, equity):
    entries, exits = refused(np.asarray(day, dtype=bool), np.asarray(session), equity)
    assert not entries.any()  # no entry has a take-profit leg here
    return list(exits)


def test_the_fourth_and_fifth_of_six_daily_day_trades_are_refused_and_the_sixth_rolls_in():
    assert _exits(ALL, np.arange(6), 20_000.0) == [False, False, False, True, True, False]
    assert not any(_exits(ALL, np.arange(6), 25_000.0))  # at $25,000 the rule no longer applies
    assert not any(_exits(ALL, np.arange(6), None))
    # a refused one is not made: after sessions 0, 1, 2 and a refused 3, session 5 sees 1 and 2 only
    assert _exits([1, 1, 1, 1, 1], [0, 1, 2, 3, 5], 1_000.0) == [False, False, False, True, False]
    # session 6 is 6 business days after 0 and 5 after 1: only session 2's counts
    assert _exits([1, 1, 1, 1], [0, 1, 2, 6], 1_000.0) == [False] * 4
    # windows that are no day trade neither count nor are refused; two day trades in one session both count
    assert _exits([1, 0, 1, 1, 0, 1], [0, 1, 1, 1, 2, 2], 1_000.0) == [False, False, False, False, False, True]


def test_an_entry_with_a_take_profit_leg_is_refused_once_three_day_trades_were_made_before_it_is_sent():
    """Day trades in sessions 0, 1, 2; then entries in sessions 3..6. An entry with a leg is sent the evening
    before its session, so it counts the 5 sessions before its own: in session 3 (0, 1, 2 made) it is refused
    and nothing trades; an entry without a leg in session 4 trades and only its closing order is refused (0..4
    hold 3 made); in session 5 the leg's entry counts sessions 0..4, still 3: refused; in session 6 only 1 and 2
    count: sent, and its take-profit inside the session is a day trade that is made."""
    day = np.array([1, 1, 1, 1, 1, 1, 1], bool)
    leg = np.array([0, 0, 0, 1, 0, 1, 1], bool)
    entries, exits = refused(day, np.array([0, 1, 2, 3, 4, 5, 6]), 20_000.0, leg)
    assert list(entries) == [False, False, False, True, False, True, False]
    assert list(exits) == [False, False, False, False, True, False, False]
    assert not refused(day, np.arange(7), 30_000.0, leg)[0].any()


def sessions_bars(asset_class: str = "stock") -> Bars:
    """13 NYSE sessions, 2024-01-02 .. 2024-01-19 (Monday 2024-01-15, Martin Luther King Jr. Day, is none)."""
    days = pd.to_datetime(["2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05", "2024-01-08", "2024-01-09",
                           "2024-01-10", "2024-01-11", "2024-01-12", "2024-01-16", "2024-01-17", "2024-01-18",
                           "2024-01-19"], utc=True)
    o = np.array([100, 101, 102, 101, 100, 101, 102.0, 103.0, 101.0, 104.0, 106.0, 105.0, 107.0])
    c = np.array([101, 102, 101, 100, 101, 102, 103.0, 102.0, 103.0, 105.0, 104.0, 106.0, 108.0])
    frame = pd.DataFrame({"open": o, "high": np.maximum(o, c) + 1, "low": np.minimum(o, c) - 1, "close": c},
                         index=pd.DatetimeIndex(days, name="timestamp"))
    return Bars("PDT", frame, asset_class, "test")


CONFIG = BacktestConfig(windows=6, context=3, num_samples=8, strategies=("simple",), fee=0.001, spread=0.0,
                        slippage=0.0, borrow_rate=0.0, exit="close", bootstrap_reps=10, spa=False,
                        include_latest=False, equity=20_000.0)


def test_six_day_trade_windows_by_hand_across_a_holiday():
    """Long decisions at rows 6..11, each entered at bar t+1's open (Jan 11, 12, 16, 17, 18, 19) and exited at its
    close: six day trades. Under $25,000 the 4th (Jan 17) and 5th (Jan 18) are refused and carried to the next
    session's open; the 6th (Jan 19) is the 5th business day after the 1st (Jan 11; the holiday Jan 15 is no
    session), so only two count: taken. Counted in calendar days the 4th would be taken (Jan 17 is 6 days after
    Jan 11, the 5 calendar days to it hold one day trade)."""
    bars = sessions_bars()
    o, c = bars.frame["open"].to_numpy(), bars.frame["close"].to_numpy()
    when = bars.frame.index
    table = {when[r]: (0.01, 0.02, -0.02) for r in range(6, 12)}
    run = run_backtest(bars, TableForecaster(table), CONFIG).strategies["simple"]
    assert list(run.decisions.side) == [1] * 6
    assert list(run.settlements.reason) == [CLOSE, CLOSE, CLOSE, NEXT_OPEN, NEXT_OPEN, CLOSE]
    expected = [c[7] / o[7], c[8] / o[8], c[9] / o[9], o[11] / o[10], o[12] / o[11], c[12] / o[12]]
    np.testing.assert_allclose(run.returns, np.array(expected) - 1 - 0.002, rtol=0, atol=1e-15)
    for equity in (None, 25_000.0):  # the rule not applied: every window exits at its close
        free = run_backtest(bars, TableForecaster(table), replace(CONFIG, equity=equity)).strategies["simple"]
        assert list(free.settlements.reason) == [CLOSE] * 6
    crypto = run_backtest(sessions_bars("crypto"), TableForecaster(table), CONFIG).strategies["simple"]
    assert list(crypto.settlements.reason) == [CLOSE] * 6  # crypto is not counted


def test_which_round_trips_are_day_trades_under_each_rule():
    """A close or a take-profit in bar t+1 exits in the entry's session; an exit at bar t+2's open does only when
    bar t+2 is in the same session (an intraday bar), never on daily bars."""
    rules = DayTrades(20_000.0, entry=np.array([3, 3, 3, 3, 3]), after=np.array([4, 4, 4, 3, 4]),
                      carried=np.full(5, 1.0))
    reason = np.array([CLOSE, TAKE_PROFIT, NEXT_OPEN, NEXT_OPEN, 0], dtype=np.int8)
    fills = Fills(reason > 0, np.ones(5), np.ones(5), reason, np.zeros(5), np.zeros(5))
    assert list(rules.day_trades(fills)) == [True, True, False, True, False]


def test_under_next_open_only_a_take_profit_inside_the_entry_session_is_a_day_trade():
    bars = sessions_bars()
    when = bars.frame.index
    table = {when[r]: (0.01, 0.02, -0.02) for r in range(6, 12)}
    run = run_backtest(bars, TableForecaster(table), replace(CONFIG, exit="next-open")).strategies["simple"]
    assert TAKE_PROFIT not in run.settlements.reason  # every exit at the next open: no day trade, none refused
    plain = run_backtest(bars, TableForecaster(table), replace(CONFIG, exit="next-open", equity=None))
    np.testing.assert_array_equal(run.returns, plain.strategies["simple"].returns)


def test_equity_is_a_positive_number_of_dollars():
    for bad in (0.0, -5.0, float("nan"), float("inf"), True):
        with pytest.raises(ConfigError, match="--equity must be a positive number of dollars"):
            BacktestConfig(equity=bad)
    assert BacktestConfig(equity=20_000).equity == 20_000


def test_perturbing_the_future_changes_nothing_decided_before_it_with_the_rule_on():
    """Garbage after row t: every decision and walk-forward pick up to t is unchanged, and every settlement whose
    bars (t+1, and t+2 where a refusal carries it) lie at or before t; the rule refuses some windows here."""
    bars = random_bars(260, seed=5)
    config = BacktestConfig(windows=150, context=64, num_samples=32, maxdiff_min_history=5, equity=20_000.0)
    a = run_backtest(bars, MomentumForecaster(), config)
    assert sum(int((r.settlements.reason == NEXT_OPEN).sum()) for r in a.strategies.values()) > 20
    assert a.settle_delay == 1
    for t in (150, 200, 240):
        b = run_backtest(garbage_after(bars, t, seed=t), MomentumForecaster(), config)
        stamp = bars.frame.index[t]
        at = list(a.decision_times).index(stamp)
        for k in range(at + 1):
            assert a.walk_forward["picked"][k] == b.walk_forward["picked"][k], (t, k)
            for name, ra in a.strategies.items():
                rb = b.strategies[name]
                assert ra.decisions[k] == rb.decisions[k], (t, k, name)
                if k + 2 <= at:
                    assert ra.settlements[k] == rb.settlements[k], (t, k, name)
