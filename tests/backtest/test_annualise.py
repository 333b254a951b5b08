"""Annualising honestly: below a year of bars the annual figures are n/a, nothing overflows, and a year or more
is annualised exactly as before (hand computations; the issue's overflowing hourly GOOG run end to end)."""

import json
import math

import numpy as np
import pytest

from marketcast.backtest.benchmark import relative_metrics
from marketcast.backtest.metrics import compound, max_drawdown, strategy_metrics
from marketcast.commands import main

from .helpers import goog_hourly

HOURLY_STOCK = 7 * 252  # 1,764: seven hourly bars a NYSE session


def _finite_or_none(metrics: dict) -> bool:
    """Every figure is finite or None (a list, such as the Monte Carlo batches' returns, element by element)."""
    values = [x for v in metrics.values() for x in (v if isinstance(v, list) else [v])]
    return all(v is None or isinstance(v, (str, bool)) or math.isfinite(v) for v in values)


def test_a_short_hourly_series_that_overflowed_gives_finite_or_none():
    """Two hourly windows of +50 % (the bar across an unadjusted split): (1 + 1.25) ** (1764 / 2) raised
    OverflowError in strategy_metrics, and (1 + 0.5) ** 1764 in alpha. Now the period figures stay and the
    annual ones are None with the reason."""
    r = np.array([0.5, 0.5])
    m = strategy_metrics(r, np.ones(2, bool), HOURLY_STOCK)
    assert _finite_or_none(m)
    assert m["return"] == pytest.approx(1.25) and m["max_drawdown"] == 0.0 and m["sharpe"] == 0.0  # never varies
    assert (m["annual_return"], m["calmar"]) == (None, None)
    assert m["annual_reason"] == "n/a (< 1 year): 2 bars, 1,764 a year"
    rel = relative_metrics(np.array([0.6, 0.4, 0.55]), np.array([0.01, -0.01, 0.0]), HOURLY_STOCK)
    assert _finite_or_none(rel) and rel["alpha"] is None and rel["beta"] == pytest.approx(10.0)


def test_one_minute_crypto_overflowed_on_a_small_gain():
    """1-minute bars of a crypto pair are 525,600 a year: ten minutes that gain 1.5 % compounded to
    1.015 ** 52,560, which overflowed. Under a year: n/a."""
    r = np.full(10, 0.0015)
    m = strategy_metrics(r, np.ones(10, bool), 1440 * 365)
    assert _finite_or_none(m) and m["annual_return"] is None
    assert m["return"] == pytest.approx(1.0015**10 - 1, rel=1e-12)


def test_two_years_are_annualised_as_before():
    """504 daily returns alternating +1 % and -0.5 %: growth (1.01 * 0.995) ** 252 over two years, so the CAGR
    is (1.01 * 0.995) ** 126 - 1 (= 0.8630); the plain formula, unchanged."""
    r = np.tile([0.01, -0.005], 252)
    m = strategy_metrics(r, np.ones(504, bool), 252)
    assert m["annual_reason"] is None
    assert m["annual_return"] == pytest.approx((1.01 * 0.995) ** 126 - 1, rel=1e-12)
    assert m["annual_return"] == pytest.approx(0.8630, abs=1e-4)
    assert m["annual_return"] == (1 + m["return"]) ** (252 / 504) - 1  # bit for bit the formula used before
    assert m["calmar"] == pytest.approx(m["annual_return"] / 0.005)  # worst fall: one -0.5 % day


def test_exactly_a_year_is_annualised():
    r = np.full(252, 0.001)
    m = strategy_metrics(r, np.ones(252, bool), 252)
    assert m["annual_reason"] is None and m["annual_return"] == pytest.approx(m["return"], rel=1e-12)
    assert strategy_metrics(r[:251], np.ones(251, bool), 252)["annual_return"] is None  # one bar short


def test_growth_beyond_a_float_is_compounded_from_its_logarithm():
    """2,000 doublings: 2 ** 2000 overflows a float, so the return is None, but over 2 years of 1,000 bars the
    annual growth is 2 ** 1000 (1.07e301), which fits: taken from the sum of log(1 + r)."""
    r = np.ones(2000)
    m = strategy_metrics(r, np.ones(2000, bool), 1000)
    assert _finite_or_none(m) and m["return"] is None
    assert m["annual_return"] == pytest.approx(2.0**1000, rel=1e-9)
    assert m["max_drawdown"] == 0.0 and max_drawdown(np.r_[r, -0.5]) == pytest.approx(0.5, rel=1e-12)


def test_compound_decides_in_log_space():
    assert compound(1.5, 1764) is None  # 1764 * log 1.5 = 715 > log(max float) = 709.78
    assert compound(1.5, 1700) == pytest.approx(1.5**1700 - 1, rel=1e-12)  # 689: fits
    assert compound(0.0, 3.0) == -1.0 and compound(-0.2, 0.5) == -1.0  # everything lost
    assert compound(float("inf"), 0.5) is None


@pytest.mark.parametrize("seed", range(3))
def test_extreme_series_give_only_finite_metrics_or_none(seed):
    rng = np.random.default_rng(seed)
    for n, periods in ((1, HOURLY_STOCK), (3, 98_280), (40, 8760), (300, 252)):
        r = rng.choice([-0.99, -0.5, 0.0, 2.0, 19.0], n)
        filled = r != 0
        assert _finite_or_none(strategy_metrics(r, filled, periods)), (n, periods)
        assert _finite_or_none(relative_metrics(r, rng.normal(0, 0.5, n), periods)), (n, periods)


def test_a_short_hourly_goog_backtest_across_the_split_runs(tmp_path, capsys):
    """The issue's crash: four hourly GOOG windows across the 20x jump (split-adjusted history joined to raw
    bars) raised OverflowError. Now it exits 0, the JSON has no annual figure, and the tables say n/a."""
    data = tmp_path / "data"
    data.mkdir()
    goog_hourly().loc[:"2022-07-18 16:30"].to_csv(data / "GOOG.csv")
    out = tmp_path / "out"
    assert main(["backtest", "GOOG", "--windows", "4", "--data-dir", str(data), "--output-dir", str(out),
                 "--samples", "32", "--context", "64", "--verbose"]) == 0  # the tables' notes say n/a
    shown = capsys.readouterr().out
    assert "GOOG · stock · 1h bars · 1,764 periods a year · 4 windows" in shown
    line = " ".join(shown.split())
    assert "alpha n/a (< 1 year)" in line and "Annual figures n/a (< 1 year): 4 bars, 1,764 a year" in line
    report = json.loads((out / "latest" / "GOOG.json").read_text())
    for m in (*report["strategies"].values(), report["walk_forward"], report["benchmark"]):
        assert m["annual_return"] is None and m["annual_reason"] == "n/a (< 1 year): 4 bars, 1,764 a year"
        assert _finite_or_none(m)
    assert report["strategies"]["buy_hold"]["return"] > 15  # the long across the jump: +1,900 % less costs
    assert report["best_strategy"] is None  # 4 windows: nobody has 10 trades
    md = (out / "latest" / "summary.md").read_text()
    assert "| walk-forward | +0.00% | n/a (< 1 year) |" in md
