"""The tearsheet's numbers against hand-computed cases and against what the backtest itself reports."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from marketcast.backtest.engine import SymbolResult, decision_rows
from marketcast.errors import DataError
from marketcast.report.series import (
    BUY_AND_HOLD, WALK_FORWARD, drawdown, equity_frame, monthly_returns, rolling_skill, skill_window,
    walk_forward_trades,
)


def test_drawdown_hand_computed():
    np.testing.assert_allclose(drawdown([1.0, 1.1, 0.99, 1.21, 1.0]), [0.0, 0.0, -0.1, 0.0, 1.0 / 1.21 - 1.0])


def test_monthly_returns_compound_within_a_month():
    times = pd.DatetimeIndex(["2020-01-30", "2020-01-31", "2020-02-03", "2021-03-01"], tz="UTC")
    table = monthly_returns(np.array([0.10, -0.10, 0.05, -0.02]), times)
    assert table.index.tolist() == [2020, 2021] and table.columns.tolist() == list(range(1, 13))
    assert table.loc[2020, 1] == pytest.approx(1.1 * 0.9 - 1.0)  # -1 %
    assert table.loc[2020, 2] == pytest.approx(0.05) and table.loc[2021, 3] == pytest.approx(-0.02)
    assert np.isnan(table.loc[2020, 3]) and np.isnan(table.loc[2021, 1])


def test_equity_starts_at_one_and_ends_at_each_compounded_return(results):
    r = results[0]
    eq = equity_frame(r)
    assert eq.index[0] == r.decision_times[0] and eq.index[1:].equals(r.settle_times)
    assert (eq.iloc[0] == 1.0).all()
    for name, run in r.strategies.items():
        assert eq[name].iloc[-1] == pytest.approx(1.0 + run.metrics["return"])
    assert eq[WALK_FORWARD].iloc[-1] == pytest.approx(1.0 + r.walk_forward["metrics"]["return"])
    assert eq[BUY_AND_HOLD].iloc[-1] == pytest.approx(1.0 + r.benchmark.metrics["return"])
    assert -drawdown(eq[WALK_FORWARD]).min() == pytest.approx(r.walk_forward["metrics"]["max_drawdown"])


def test_walk_forward_trades_are_the_filled_picks(results):
    for r in results:
        trades = walk_forward_trades(r)
        wf = r.walk_forward
        assert len(trades) == int(wf["filled"].sum()) == wf["metrics"]["trades"]
        assert sum(t.net_return for t in trades) == pytest.approx(float(wf["returns"].sum()))
        for t in trades:
            k = r.settle_times.get_loc(t.settle_time)
            assert wf["picked"][k] == t.strategy and r.strategies[t.strategy].decisions[k].side == t.side
            assert t.side in (1, -1) and t.entry_price > 0 and t.exit_price > 0


def test_rolling_skill_over_the_whole_run_is_the_backtests_skill(results, bars):
    for r, b in zip(results, bars):
        whole = rolling_skill(r, b, window=r.windows).iloc[-1]
        assert whole["close"] == pytest.approx(r.skill["mase_close"], rel=1e-12)
        assert whole["high"] == pytest.approx(r.skill["mase_high_excursion"], rel=1e-12)
        assert whole["low"] == pytest.approx(r.skill["mase_low_excursion"], rel=1e-12)
        trailing = rolling_skill(r, b)
        w = skill_window(r.windows)
        assert trailing.iloc[: w - 1].isna().all().all() and trailing.iloc[w - 1:].notna().all().all()


def test_skill_window_is_a_fifth_of_the_run_within_bounds():
    assert [skill_window(n) for n in (3, 40, 70, 200, 5000)] == [3, 10, 14, 40, 60]


def test_other_bars_than_the_runs_are_refused(results, bars):
    r, b = results[0], bars[0]
    assert (b.frame.index[decision_rows(r, b)] == r.decision_times).all()
    with pytest.raises(DataError, match="not the ones its backtest read"):
        decision_rows(r, b.head(len(b) - 5))
    shifted = dataclasses.replace(r, settle_times=r.settle_times + pd.Timedelta("1h"))
    assert isinstance(shifted, SymbolResult)
    with pytest.raises(DataError, match="not the ones"):
        decision_rows(shifted, b)
