"""Metrics by hand and against independent pandas/loop computations; CRPS against brute force."""

import math

import numpy as np
import pandas as pd
import pytest

from marketcast.backtest.metrics import max_drawdown, sharpe_ratio, sortino_ratio, strategy_metrics
from marketcast.backtest.skill import crps_bruteforce, crps_samples, forecast_skill

R = np.array([0.02, -0.01, 0.015, 0.0, -0.005])
FILLED = np.array([True, True, True, False, True])


def test_metrics_by_hand():
    m = strategy_metrics(R, FILLED, 252)
    assert m["return"] == pytest.approx(1.02 * 0.99 * 1.015 * 0.995 - 1)  # 0.01982226...
    assert m["avg_daily_return"] == pytest.approx(0.004)
    # deviations .016 -.014 .011 -.004 -.009 -> sum of squares 670e-6, / 4 -> var 167.5e-6
    assert m["sharpe"] == pytest.approx(0.004 / math.sqrt(167.5e-6) * math.sqrt(252))
    assert m["sharpe"] == pytest.approx(4.9063, abs=1e-4)
    # downside deviation sqrt((0.01^2 + 0.005^2) / 5) = 0.005
    assert m["sortino"] == pytest.approx(0.004 / 0.005 * math.sqrt(252))
    # equity 1.02, 1.0098, 1.02495, 1.02495, 1.01982: worst fall 1.02 -> 1.0098 = the 1 % loss
    assert m["max_drawdown"] == pytest.approx(0.01)
    # five daily windows are not a year: no annual return or Calmar, and the reason
    assert m["annual_return"] is None and m["calmar"] is None
    assert m["annual_reason"] == "n/a (< 1 year): 5 bars, 252 a year"
    # over 5 bars of a year of 5 periods (P = 5) they are the plain formulas
    y = strategy_metrics(R, FILLED, 5)
    assert y["annual_return"] == pytest.approx(m["return"], rel=1e-15) and y["annual_reason"] is None
    assert y["calmar"] == pytest.approx(y["annual_return"] / y["max_drawdown"])
    assert (m["trades"], m["exposure"], m["win_rate"], m["turnover"]) == (4, 0.8, 0.5, 1.6)
    assert m["final_day"] == -0.005
    assert strategy_metrics(R, FILLED, 365)["sharpe"] == pytest.approx(m["sharpe"] * math.sqrt(365 / 252))


def _independent(returns, periods):
    """Straightforward pandas + loops, sharing no code with metrics.py."""
    s = pd.Series(returns)
    sharpe = s.mean() / s.std() * periods**0.5 if s.std() > 0 else 0.0
    downside = [min(x, 0.0) ** 2 for x in returns]
    dd = (sum(downside) / len(returns)) ** 0.5
    sortino = s.mean() / dd * periods**0.5 if dd > 0 else None
    equity, peak, worst = 1.0, 1.0, 0.0
    for x in returns:
        equity *= 1 + x
        peak = max(peak, equity)
        worst = max(worst, (peak - equity) / peak)
    return sharpe, sortino, worst


@pytest.mark.parametrize("seed", range(5))
def test_metrics_match_an_independent_computation(seed):
    rng = np.random.default_rng(seed)
    r = rng.normal(0.0005, 0.01, 70) * (rng.random(70) < 0.7)
    sharpe, sortino, mdd = _independent(list(r), 252)
    assert sharpe_ratio(r, 252) == pytest.approx(sharpe, rel=1e-12)
    assert sortino_ratio(r, 252) == pytest.approx(sortino, rel=1e-12)
    assert max_drawdown(r) == pytest.approx(mdd, rel=1e-12, abs=1e-15)


def test_degenerate_returns():
    zeros = np.zeros(4)
    m = strategy_metrics(zeros, np.zeros(4, bool), 252)
    assert (m["return"], m["sharpe"], m["sortino"], m["max_drawdown"], m["calmar"], m["win_rate"]) == (
        0.0, 0.0, None, 0.0, None, None)
    assert max_drawdown(np.array([0.1, 0.1])) == 0.0
    assert max_drawdown(np.array([-0.5])) == pytest.approx(0.5)  # the first loss counts from the start


def test_crps_sorted_form_equals_bruteforce():
    rng = np.random.default_rng(1)
    samples = rng.standard_t(4, size=(6, 257)) * 0.01
    observed = rng.normal(0, 0.01, 6)
    fast = crps_samples(samples, observed)
    for i in range(6):
        assert fast[i] == pytest.approx(crps_bruteforce(samples[i], observed[i]), rel=1e-12, abs=1e-15)


def test_crps_by_hand():
    # samples {0, 1}, y = 0: E|X - y| = 0.5; E|X - X'| over all 4 pairs = 0.5 -> CRPS = 0.25
    assert crps_samples(np.array([[1.0, 0.0]]), np.array([0.0]))[0] == pytest.approx(0.25)
    # a single sample is a point forecast: CRPS = absolute error
    assert crps_samples(np.array([[0.3]]), np.array([0.1]))[0] == pytest.approx(0.2)


def test_mae_and_mase_against_no_change():
    actual = {f: np.array([0.01, -0.02]) for f in ("close", "high", "low")}
    point = {f: np.array([0.0, -0.01]) for f in ("close", "high", "low")}
    samples = {f: point[f][:, None] for f in point}
    s = forecast_skill(point, samples, actual)
    assert s["close_val_loss"] == pytest.approx(0.01)  # |0.01| and |-0.01|
    assert s["close_naive_mae"] == pytest.approx(0.015)
    assert s["mase"] == pytest.approx(0.01 / 0.015)
    assert s["crps"] == pytest.approx(0.01)  # one sample: CRPS = MAE


def test_excursion_naive_by_hand():
    from marketcast.backtest.skill import excursion_naive

    close = np.array([100.0, 101.0, 99.0, 100.0])
    high = np.array([100.5, 102.0, 101.0, 101.5])
    low = np.array([99.5, 99.0, 98.0, 99.0])
    out = excursion_naive(high, low, close, np.array([1, 2, 3]), context=3)
    # window ending at t holds bars t-2..t; bar i's excursion needs close_(i-1) inside it
    assert out["high"] == pytest.approx([102 / 100 - 1, (102 / 100 + 101 / 101) / 2 - 1,
                                         (101 / 101 + 101.5 / 99) / 2 - 1])
    assert out["low"] == pytest.approx([99 / 100 - 1, (99 / 100 + 98 / 101) / 2 - 1, (98 / 101 + 99 / 99) / 2 - 1])


def test_mase_against_the_excursion_naive():
    actual = {"close": np.array([0.01, -0.02]), "high": np.array([0.02, 0.01]), "low": np.array([-0.01, -0.03])}
    point = {"close": np.array([0.0, 0.0]), "high": np.array([0.015, 0.015]), "low": np.array([-0.02, -0.02])}
    naive = {"high": np.array([0.025, 0.025]), "low": np.array([-0.015, -0.015])}
    s = forecast_skill(point, {f: point[f][:, None] for f in point}, actual, naive)
    assert s["mase_high"] == pytest.approx(0.005 / 0.015)  # against high = close_t
    assert s["high_excursion_naive_mae"] == pytest.approx((0.005 + 0.015) / 2)
    assert s["mase_high_excursion"] == pytest.approx(0.005 / 0.01)
    # low: the forecast misses by .01 and .01, the naive by .005 and .015
    assert s["mase_low_excursion"] == pytest.approx(0.01 / 0.01)
    assert "mase_close_excursion" not in s


@pytest.mark.parametrize("freq, asset_class, periods", [("h", "crypto", 24 * 365), ("MS", "crypto", 12),
                                                        ("h", "forex", 24 * 261)])
def test_sharpe_is_annualised_by_the_bar_spacing(freq, asset_class, periods):
    from marketcast.backtest.config import BacktestConfig
    from marketcast.backtest.engine import run_backtest
    from marketcast.data.bars import Bars

    from .helpers import MomentumForecaster, random_bars

    bars = random_bars(140, seed=2, asset_class=asset_class)
    start = "2024-01-07 22:00" if asset_class == "forex" else "2010-01-01"  # forex: Sunday 17:00 New York
    index = pd.date_range(start, periods=140, freq=freq, tz="UTC", name="timestamp")
    if asset_class == "forex":  # five 24-hour sessions a week, Sunday 22:00 to Friday 22:00 UTC in winter
        index = pd.DatetimeIndex([t for t in pd.date_range(start, periods=400, freq="h", tz="UTC")
                                  if (t - pd.Timestamp(start, tz="UTC")).total_seconds() % (7 * 86400)
                                  < 5 * 86400][:140], name="timestamp")
    frame = bars.frame.set_axis(index)
    result = run_backtest(Bars("X", frame, asset_class), MomentumForecaster(),
                          BacktestConfig(windows=40, context=32, num_samples=16))
    assert result.periods_per_year == periods
    r = result.strategies["simple"].returns
    assert result.strategies["simple"].metrics["sharpe"] == pytest.approx(
        r.mean() / r.std(ddof=1) * math.sqrt(periods), rel=1e-12)
    m = result.strategies["simple"].metrics
    if periods <= 40:  # 40 monthly bars: over three years, annualised as before
        assert m["annual_return"] == pytest.approx(np.prod(1 + r) ** (periods / 40) - 1, rel=1e-9)
    else:  # 40 hourly bars are days, not a year
        assert m["annual_return"] is None and m["annual_reason"] == f"n/a (< 1 year): 40 bars, {periods:,} a year"
