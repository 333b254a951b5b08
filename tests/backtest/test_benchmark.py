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


def test_alpha_beta_information_ratio_by_hand():
    sd = math.sqrt((0.0025**2 + 0.0075**2 + 0.0075**2 + 0.0025**2) / 3)  # 0.0064550
    m = relative_metrics(2 * B, B, 252)  # twice the benchmark: beta 2, no alpha, active return = B
    assert m["beta"] == pytest.approx(2.0)
    assert m["alpha"] == pytest.approx(0.0, abs=1e-12)
    assert m["information_ratio"] == pytest.approx(0.0025 / sd * math.sqrt(252))
    m = relative_metrics(2 * B + 0.001, B, 252)  # plus 0.1 % a period
    assert m["beta"] == pytest.approx(2.0)
    assert m["alpha"] == pytest.approx(1.001**252 - 1)  # 0.28643, compounded as empyrical does
    assert m["alpha"] == pytest.approx(0.28643, abs=1e-5)
    assert m["information_ratio"] == pytest.approx(0.0035 / sd * math.sqrt(252))  # 8.6075
    assert m["information_ratio"] == pytest.approx(8.6075, abs=1e-4)


def test_relative_metrics_that_do_not_exist():
    assert relative_metrics(B, np.zeros(4), 252)["beta"] is None  # a flat benchmark has no beta
    assert relative_metrics(B, B, 252)["information_ratio"] is None  # no active return at all
    assert relative_metrics(np.zeros(4), B, 252)["beta"] == 0.0
