"""The tearsheet's metrics (:mod:`marketcast.backtest.breadth`) against quantstats 0.0.86, to 1e-9, on three symbols:
the embedded SP500 and NASDAQ daily closes (1999-2018) and a crypto-like 24/7 daily series made here (Student-t
returns, 365 periods a year). Each symbol gives two series: buy and hold (a return every day) and a strategy
that holds only after an up day (exact zeros on the other days, as the backtest's flat windows are).

Differences by design, spelled out at their assertions: quantstats' profit factor is inf without a loss
(marketcast: None); its drawdown ``end`` is the last day under water where marketcast's is the first day back
at the peak; its exposure is rounded up to a whole percent.
"""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pandas as pd
import pytest

with matplotlib.rc_context():  # quantstats sets a seaborn theme on import; keep it out of other tests
    import quantstats as qs

from marketcast.backtest.breadth import (
    breadth, drawdown_periods, longest_run, monthly_returns, rolling_stats, rolling_window, sample_moments,
    yearly_returns,
)
from marketcast.backtest.benchmark import relative_metrics
from marketcast.backtest.metrics import strategy_metrics

REL = 1e-9


def same(ours, theirs) -> bool:
    theirs = float(theirs)
    assert ours is not None and math.isfinite(theirs), (ours, theirs)
    return ours == pytest.approx(theirs, rel=REL, abs=1e-15)


def _btc(n: int = 4 * 365) -> pd.Series:
    rng = np.random.default_rng(7)
    r = 0.03 * rng.standard_t(3, n) / math.sqrt(3) + 0.0015
    close = 9000.0 * np.cumprod(1 + r)
    return pd.Series(close, index=pd.date_range("2019-01-01", periods=n, freq="D"), name="BTC")


@pytest.fixture(scope="module")
def closes(embedded_bars):
    """(symbol, daily closes, periods a year) of the three symbols."""
    out = [(b.symbol, b.frame["close"], 252.0) for b in embedded_bars]
    return out + [("BTC", _btc(), 365.0)]


def _series(closes: pd.Series) -> dict[str, pd.Series]:
    c = closes.to_numpy(dtype=np.float64)
    r = c[1:] / c[:-1] - 1.0
    index = pd.DatetimeIndex(closes.index[1:])
    if index.tz is not None:
        index = index.tz_convert("UTC").tz_localize(None)
    held = np.r_[False, r[:-1] > 0]  # long the day after an up day, flat (exactly 0) otherwise
    return {"buy_and_hold": pd.Series(r, index=index), "after_up_days": pd.Series(np.where(held, r, 0.0), index=index)}


def _cases(closes):
    for symbol, c, p in closes:
        for name, s in _series(c).items():
            yield f"{symbol}-{name}", s, p


def test_three_symbols_are_long_enough(closes):
    assert [s for s, _, _ in closes] == ["SP500", "NASDAQ", "BTC"]
    assert all(len(c) > 2 * p for _, c, p in closes)


def test_every_overlapping_metric_equals_quantstats(closes):
    checked = 0
    for case, s, p in _cases(closes):
        r = s.to_numpy()
        m = breadth(r, s.index, p).metrics
        base = strategy_metrics(r, r != 0, p)
        assert same(m["volatility"], qs.stats.volatility(s, periods=p)), case
        assert same(m["omega"], qs.stats.omega(s, rf=0.0, required_return=0.0, periods=p)), case
        assert same(m["tail_ratio"], qs.stats.tail_ratio(s)), case
        assert same(m["var"], qs.stats.value_at_risk(s)), case  # parametric, 95%
        assert same(m["cvar"], qs.stats.conditional_value_at_risk(s)), case
        assert same(m["win_rate"], qs.stats.win_rate(s)), case
        assert same(m["profit_factor"], qs.stats.profit_factor(s)), case
        assert same(m["payoff_ratio"], qs.stats.payoff_ratio(s)), case
        assert same(m["avg_win"], qs.stats.avg_win(s)) and same(m["avg_loss"], qs.stats.avg_loss(s)), case
        assert same(m["kelly"], qs.stats.kelly_criterion(s)), case
        assert same(m["best"], qs.stats.best(s)) and same(m["worst"], qs.stats.worst(s)), case
        assert m["consecutive_wins"] == qs.stats.consecutive_wins(s), case
        assert m["consecutive_losses"] == qs.stats.consecutive_losses(s), case
        assert same(m["skew"], qs.stats.skew(s)) and same(m["kurtosis"], qs.stats.kurtosis(s)), case
        assert same(m["gain_to_pain"], qs.stats.gain_to_pain_ratio(s)), case  # one bar a calendar day here
        assert same(m["common_sense"], qs.stats.common_sense_ratio(s)), case
        assert same(m["ulcer_index"], qs.stats.ulcer_index(s)), case
        assert same(m["expected_return"], qs.stats.expected_return(s)), case
        assert same(m["best_month"], qs.stats.best(s, aggregate="ME")), case
        assert same(m["worst_month"], qs.stats.worst(s, aggregate="ME")), case
        assert same(m["best_year"], qs.stats.best(s, aggregate="YE")), case
        assert same(m["worst_year"], qs.stats.worst(s, aggregate="YE")), case
        # the headline metrics of marketcast.backtest.metrics, for the same series
        assert same(base["annual_return"], qs.stats.cagr(s, periods=p)), case  # CAGR: over a year here
        assert same(base["calmar"], qs.stats.calmar(s, periods=p)), case
        assert same(base["sortino"], qs.stats.sortino(s, periods=p)), case
        assert same(base["sharpe"], qs.stats.sharpe(s, periods=p)), case
        assert same(-base["max_drawdown"], qs.stats.max_drawdown(s)), case
        assert same(math.ceil(base["exposure"] * 100) / 100, qs.stats.exposure(s)), case  # qs rounds up
        checked += 1
    assert checked == 6


def test_alpha_beta_and_information_ratio_against_buy_and_hold_equal_quantstats(closes):
    for symbol, c, p in closes:
        series = _series(c)
        s, b = series["after_up_days"], series["buy_and_hold"]
        m = relative_metrics(s.to_numpy(), b.to_numpy(), p)
        greeks = qs.stats.greeks(s, b, periods=p)
        assert same(m["beta"], greeks["beta"]), symbol
        # marketcast annualises the information ratio by sqrt(P) and compounds the per-period alpha to a year
        assert same(m["information_ratio"], qs.stats.information_ratio(s, b) * math.sqrt(p)), symbol
        assert same(math.expm1(math.log1p(m["alpha"]) / p), greeks["alpha"] / p), symbol


def test_monthly_and_yearly_returns_equal_quantstats(closes):
    for case, s, p in _cases(closes):
        r = s.to_numpy()
        ours = monthly_returns(r, s.index)
        theirs = qs.stats.monthly_returns(s)  # missing months as 0, the year's total as EOY
        np.testing.assert_allclose(ours.fillna(0.0).to_numpy(), theirs.iloc[:, :12].to_numpy(), rtol=REL, atol=1e-15)
        yearly = yearly_returns(r, s.index)
        np.testing.assert_allclose(yearly.to_numpy(), theirs["EOY"].to_numpy(), rtol=REL, atol=1e-15)
        assert [str(y) for y in yearly.index] == list(theirs.index), case


def test_rolling_sharpe_and_volatility_equal_quantstats(closes):
    for case, s, p in _cases(closes):
        w = rolling_window(len(s), p)
        assert w == round(p / 2)  # half a year: quantstats' 126 of 252 days
        ours = rolling_stats(s.to_numpy(), s.index, p)
        sharpe = qs.stats.rolling_sharpe(s, rolling_period=w, periods_per_year=p).to_numpy()
        vol = qs.stats.rolling_volatility(s, rolling_period=w, periods_per_year=p).to_numpy()
        assert np.isnan(ours["sharpe"].to_numpy()[:w - 1]).all() and np.isfinite(ours["sharpe"].to_numpy()[w:]).all()
        np.testing.assert_allclose(ours["sharpe"].to_numpy(), sharpe, rtol=REL, atol=1e-12)
        np.testing.assert_allclose(ours["volatility"].to_numpy(), vol, rtol=REL, atol=1e-15)


def test_drawdown_periods_equal_quantstats(closes):
    for case, s, p in _cases(closes):
        r = s.to_numpy()
        ours = drawdown_periods(r)
        theirs = qs.stats.drawdown_details(qs.stats.to_drawdown_series(s))
        assert len(ours) == len(theirs) > 10, case
        day = s.index.strftime("%Y-%m-%d")
        for d, (_, row) in zip(ours, theirs.iterrows()):
            assert (day[d.start], day[d.valley]) == (row["start"], row["valley"]), case
            assert same(100 * d.depth, row["max drawdown"]), case
            # quantstats' end is the last day under water; marketcast's the first day back at the peak
            assert day[d.end - 1 if d.end is not None else len(r) - 1] == row["end"], case


def test_drawdown_periods_by_hand():
    r = np.array([0.1, -0.5, 0.2, 1.0, -0.1, 0.0, 0.05])
    # equity 1.1, 0.55, 0.66, 1.32, 1.188, 1.188, 1.2474: under water at 1-2 (valley 1), and from 4 on
    periods = drawdown_periods(r)
    assert [(d.start, d.valley, d.end) for d in periods] == [(1, 1, 3), (4, 4, None)]
    assert periods[0].depth == pytest.approx(-0.5) and periods[1].depth == pytest.approx(1.188 / 1.32 - 1)
    assert [d.length(len(r)) for d in periods] == [2, 3] and [d.recovery for d in periods] == [2, None]
    assert longest_run(r > 0) == 2 and longest_run(r < 0) == 1 and longest_run(np.zeros(3) > 0) == 0


def test_hand_computed_ratios():
    r = np.array([0.02, -0.01, 0.0, 0.03, -0.02])
    m = breadth(r, pd.date_range("2020-01-01", periods=5, freq="D"), 252).metrics
    assert m["omega"] == pytest.approx(0.05 / 0.03) and m["profit_factor"] == pytest.approx(0.05 / 0.03)
    assert m["win_rate"] == pytest.approx(0.5)  # 2 gains of 4 non-zero windows
    assert m["payoff_ratio"] == pytest.approx(0.025 / 0.015)
    assert m["kelly"] == pytest.approx((0.025 / 0.015 * 0.5 - 0.5) / (0.025 / 0.015))
    assert m["gain_to_pain"] == pytest.approx(0.02 / 0.03)
    assert m["best"] == 0.03 and m["worst"] == -0.02 and m["consecutive_wins"] == 1
    assert m["expected_return"] == pytest.approx(np.prod(1 + r) ** 0.2 - 1)


def test_no_loss_no_gain_and_short_series_give_none_not_inf():
    up = np.full(30, 0.01)
    m = breadth(up, pd.date_range("2020-01-01", periods=30, freq="D"), 252).metrics
    # quantstats: profit factor inf, omega and payoff NaN; marketcast shows none of them
    assert m["profit_factor"] is None and m["omega"] is None and m["payoff_ratio"] is None and m["kelly"] is None
    assert m["win_rate"] == 1.0 and m["consecutive_wins"] == 30 and m["drawdown_periods"] == 0
    flat = breadth(np.zeros(10), pd.date_range("2020-01-01", periods=10, freq="D"), 252).metrics
    assert flat["win_rate"] is None and flat["skew"] is None and flat["volatility"] == 0.0
    for v in (*m.values(), *flat.values()):
        assert v is None or (isinstance(v, (int, float)) and math.isfinite(v))
    assert sample_moments(np.array([0.1, 0.2])) == (None, None)
