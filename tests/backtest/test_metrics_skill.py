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
    assert m["annual_return"] == pytest.approx((1 + m["return"]) ** (252 / 5) - 1)
    assert m["calmar"] == pytest.approx(m["annual_return"] / m["max_drawdown"])
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


def test_walk_forward_selection_uses_only_earlier_windows():
    from marketcast.backtest.metrics import walk_forward_selection

    returns = {"a": np.array([0.01, -0.02, 0.01]), "b": np.array([-0.01, 0.03, -0.01])}
    filled = {"a": np.array([True, True, True]), "b": np.array([True, False, True])}
    sel = walk_forward_selection(returns, filled)
    # k=0: nothing known -> flat; k=1: a (1.01 > 0.99); k=2: b (0.99*1.03 = 1.0197 > 1.01*0.98 = 0.9898)
    assert sel["picked"] == [None, "a", "b"]
    assert list(sel["returns"]) == [0.0, -0.02, -0.01]
    assert list(sel["filled"]) == [False, True, True]
