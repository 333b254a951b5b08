"""Buy and hold (enter once, exit once, costs once) and alpha, beta, information ratio, by hand."""

import math

import numpy as np
import pytest

from marketcast.backtest.benchmark import buy_and_hold_metrics, buy_and_hold_returns, relative_metrics


def test_buy_and_hold_by_hand():
    r = buy_and_hold_returns(100.0, np.array([102.0, 99.0, 105.0]), 0.001)
    assert r == pytest.approx([0.999 * 1.02 - 1, 99 / 102 - 1, 0.999 * 105 / 99 - 1], abs=1e-15)
    assert np.prod(1 + r) - 1 == pytest.approx(0.999**2 * 1.05 - 1, abs=1e-15)  # costs once each way
    assert buy_and_hold_returns(100.0, np.array([102.0]), 0.001) == pytest.approx([0.999**2 * 1.02 - 1])
    m = buy_and_hold_metrics(r, 252)
    assert (m["trades"], m["turnover"], m["exposure"], m["win_rate"]) == (1, 2 / 3, 1.0, 1.0)
    assert m["return"] == pytest.approx(0.999**2 * 1.05 - 1)


B = np.array([0.005, 0.01, -0.005, 0.0])  # mean 0.0025; deviations .0025 .0075 -.0075 -.0025


YEAR = np.tile(B, 63)  # 252 daily returns with B's mean and pattern: a year, so alpha is annualised


def test_alpha_beta_information_ratio_by_hand():
    sd = math.sqrt((0.0025**2 + 0.0075**2 + 0.0075**2 + 0.0025**2) / 3)  # 0.0064550
    m = relative_metrics(2 * B, B, 252)  # twice the benchmark: beta 2, no alpha, active return = B
    assert m["beta"] == pytest.approx(2.0)
    assert m["information_ratio"] == pytest.approx(0.0025 / sd * math.sqrt(252))
    m = relative_metrics(2 * B + 0.001, B, 252)  # plus 0.1 % a period
    assert m["beta"] == pytest.approx(2.0)
    assert m["information_ratio"] == pytest.approx(0.0035 / sd * math.sqrt(252))  # 8.6075
    assert m["information_ratio"] == pytest.approx(8.6075, abs=1e-4)
    # four days are not a year: no annualised alpha
    assert m["alpha"] is None and m["alpha_reason"] == "n/a (< 1 year): 4 bars, 252 a year"
    # over a year of the same pattern: beta 2 and alpha 0.1 % a period, compounded as empyrical does
    assert relative_metrics(2 * YEAR, YEAR, 252)["alpha"] == pytest.approx(0.0, abs=1e-12)
    m = relative_metrics(2 * YEAR + 0.001, YEAR, 252)
    assert m["beta"] == pytest.approx(2.0) and m["alpha_reason"] is None
    assert m["alpha"] == pytest.approx(1.001**252 - 1, rel=1e-12)  # 0.28643
    assert m["alpha"] == pytest.approx(0.28643, abs=1e-5)


def test_a_nine_percent_loss_over_three_weeks_has_no_annual_alpha():
    """The issue's case: a strategy that lost about 9 % in 15 trading days, beta 2 to a falling market with
    0.35 % a day above it, was shown alpha +141 %: (1 + 0.0035) ** 252 - 1 = 1.4120, a few weeks' mean
    compounded 252 times. Under a year of bars there is no annual figure; the table says so."""
    from marketcast.backtest.tables import annual

    b = np.array([-0.006, -0.004] * 7 + [-0.004])  # 15 days
    r = 2 * b + 0.0035
    assert np.prod(1 + r) - 1 == pytest.approx(0.9915**7 * 0.9955**8 - 1, rel=1e-12)
    assert np.prod(1 + r) - 1 == pytest.approx(-0.0914, abs=1e-4)
    assert (1 + np.mean(r - 2 * b)) ** 252 - 1 == pytest.approx(1.4120, abs=1e-4)  # what was shown
    m = relative_metrics(r, b, 252)
    assert m["beta"] == pytest.approx(2.0) and m["alpha"] is None
    assert m["alpha_reason"] == "n/a (< 1 year): 15 bars, 252 a year"
    assert annual(m, "alpha", "alpha_reason") == "n/a (< 1 year)"


def test_relative_metrics_that_do_not_exist():
    assert relative_metrics(B, np.zeros(4), 252)["beta"] is None  # a flat benchmark has no beta
    assert relative_metrics(B, B, 252)["information_ratio"] is None  # no active return at all
    assert relative_metrics(np.zeros(4), B, 252)["beta"] == 0.0
