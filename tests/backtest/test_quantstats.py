"""marketcast's backtest metrics against quantstats 0.0.86 (a test-only reference, requirements-reference.txt).

Every metric both libraries compute is compared to 1e-10 relative on seeded daily, crypto-calendar and
intraday-spaced return series (three years with a drift, a crash, a strategy that is flat most days), with
the same periods a year and rf = 0. Where a definition differs by design, what is comparable is compared and
the difference is spelled out next to the assertion:

* ``max_drawdown``: quantstats reports it negative, marketcast as a positive fraction (same magnitude; both
  start the equity curve at 1 before the first return).
* ``annual_return`` / ``calmar``: quantstats 0.0.86's ``cagr`` counts years as observations / periods (not
  calendar days), so it is marketcast's annual return wherever marketcast shows one. Below a year marketcast
  gives None (``annual_reason`` "n/a (< 1 year)") where quantstats still annualises.
* ``win_rate``: marketcast counts filled trades (a trade that returned exactly 0 is a loss), quantstats counts
  non-zero periods; they agree when the filled windows are the non-zero returns, as here.
* ``exposure``: quantstats rounds the share of non-zero periods up to a whole percent.
* ``avg_daily_return``: marketcast averages all windows (flat ones are 0), quantstats' ``avg_return`` only the
  non-zero ones.
* volatility: marketcast shows none; its Sharpe ratio's denominator (std, ddof 1, times sqrt(P)) is compared
  with quantstats' ``volatility`` through mean(r) * P / sharpe.
* ``alpha``: marketcast compounds the per-period alpha to a year, (1 + a) ** P - 1, as empyrical does;
  quantstats' ``greeks`` multiplies it by P. The per-period alphas are compared. ``beta`` is the same.
* ``information_ratio``: marketcast annualises it like the Sharpe ratio (times sqrt(P)); quantstats does not.
* PSR: the same Bailey and Lopez de Prado formula, but quantstats takes the sample (bias-corrected) skewness
  and excess kurtosis of pandas where marketcast takes population moments as in the paper; with quantstats'
  moments swapped for population ones the two agree to 1e-10.
* a series that never moves: marketcast's Sharpe is 0 and its Sortino, Calmar and win rate None where
  quantstats gives NaN (and a win rate of 0.0 with a warning).
"""

from __future__ import annotations

import math
import warnings

import matplotlib
import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

# quantstats applies a seaborn theme to matplotlib's global rcParams on import; keep it out of other tests.
with matplotlib.rc_context():
    import quantstats as qs

from marketcast.backtest.benchmark import buy_and_hold_returns, relative_metrics
from marketcast.backtest.metrics import compound, strategy_metrics
from marketcast.backtest.stats import probabilistic_sharpe

REL = 1e-10


def same(ours, theirs):
    """``ours`` equals quantstats' ``theirs`` to 1e-10 relative (both finite)."""
    theirs = float(theirs)
    assert ours is not None and math.isfinite(theirs)
    return ours == pytest.approx(theirs, rel=REL, abs=0.0)


def _drift(rng, n):
    return rng.normal(0.0006, 0.011, n)


def _crash(rng, n):  # a calm drift, then 60 bad days, then a recovery: a deep drawdown in the middle
    r = rng.normal(0.0005, 0.01, n)
    r[n // 3:n // 3 + 60] = rng.normal(-0.012, 0.025, 60)
    return r


def _mostly_flat(rng, n):  # a strategy that trades one window in ten; flat windows are exactly 0
    return rng.normal(0.002, 0.015, n) * (rng.random(n) < 0.1)


def _fat_tails(rng, n):  # crypto-like: Student-t with 3 degrees of freedom
    return 0.02 * rng.standard_t(3, n) / math.sqrt(3) + 0.001


# (name, generator, bars, periods a year): three years of daily bars on the stock and the crypto calendar,
# two years of 6.5-hour sessions' hourly bars, and exactly one year (the first length that is annualised)
CASES = [
    ("drift", _drift, 756, 252),
    ("crash", _crash, 756, 252),
    ("mostly_flat", _mostly_flat, 756, 252),
    ("fat_tails_crypto", _fat_tails, 3 * 365, 365),
    ("hourly", _drift, 2 * 1638, 1638.0),
    ("one_year", _crash, 252, 252),
]


def _series(r):
    return pd.Series(r, index=pd.bdate_range("2015-01-01", periods=len(r)), name="strategy")


@pytest.fixture(params=[(case, seed) for case in CASES for seed in range(3)],
                ids=lambda p: f"{p[0][0]}-seed{p[1]}")
def case(request):
    (name, make, n, periods), seed = request.param
    r = make(np.random.default_rng(seed), n)
    return r, _series(r), periods


def test_strategy_metrics_equal_quantstats(case):
    r, s, p = case
    n = len(r)
    filled = r != 0  # the filled windows are the non-zero returns (see win_rate below)
    m = strategy_metrics(r, filled, p)
    assert n >= p and m["annual_reason"] is None  # every case covers at least a year

    assert same(m["return"], qs.stats.comp(s))
    assert same(m["sharpe"], qs.stats.sharpe(s, rf=0.0, periods=p))  # mean / std(ddof=1) * sqrt(P)
    # downside deviation over all N returns (target 0) in both
    assert same(m["sortino"], qs.stats.sortino(s, rf=0.0, periods=p))
    # the same fall from the running peak; quantstats reports it negative
    assert same(m["max_drawdown"], -qs.stats.max_drawdown(s))
    # quantstats 0.0.86's CAGR: (1 + comp) ** (1 / (count / periods)) - 1, marketcast's annual return
    assert same(m["annual_return"], qs.stats.cagr(s, rf=0.0, compounded=True, periods=p))
    assert same(m["calmar"], qs.stats.calmar(s, compounded=True, periods=p))
    # marketcast shows no volatility: its Sharpe's denominator std(ddof=1) * sqrt(P) is quantstats' volatility
    assert same(m["avg_daily_return"] * p / m["sharpe"], qs.stats.volatility(s, periods=p))
    # win rate: filled trades with r > 0 (marketcast) vs r > 0 among non-zero periods (quantstats); the same
    # here because the filled windows are exactly the non-zero ones
    assert same(m["win_rate"], qs.stats.win_rate(s))
    # exposure: quantstats rounds the share of non-zero periods up to a whole percent
    assert same(math.ceil(m["exposure"] * 100) / 100, qs.stats.exposure(s))
    # average return: marketcast over all windows, quantstats over the non-zero ones
    assert same(m["avg_daily_return"] * n / np.count_nonzero(r), qs.stats.avg_return(s))


def test_psr_equals_quantstats_with_population_moments(case, monkeypatch):
    r, s, p = case
    ours = probabilistic_sharpe(r)
    # quantstats' own moments are pandas' sample (bias-corrected) skewness and excess kurtosis: the same
    # formula, a slightly different estimate (closer for longer series): within 1e-4 in probability
    assert ours == pytest.approx(qs.stats.probabilistic_sharpe_ratio(s, rf=0.0, periods=p), rel=0.0, abs=1e-4)
    # with population moments, as in Bailey and Lopez de Prado and marketcast, quantstats' PSR is ours
    monkeypatch.setattr(qs.stats, "skew", lambda x, prepare_returns=True: sps.skew(x, bias=True))
    monkeypatch.setattr(qs.stats, "kurtosis", lambda x, prepare_returns=True: sps.kurtosis(x, bias=True))
    assert same(ours, qs.stats.probabilistic_sharpe_ratio(s, rf=0.0, periods=p))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("n", [756, 100])
def test_relative_metrics_against_quantstats(seed, n):
    rng = np.random.default_rng(100 + seed)
    p = 252
    closes = 100 * np.exp(np.cumsum(rng.normal(0.0003, 0.012, n)))
    b = buy_and_hold_returns(100.0, closes, 0.0005)  # the backtest's own benchmark
    r = 0.6 * b + rng.normal(0.0002, 0.006, n)  # a strategy partly exposed to it
    s, bs = _series(r), _series(b)
    m = relative_metrics(r, b, p)
    greeks = qs.stats.greeks(s, bs, periods=p)
    assert same(m["beta"], greeks["beta"])  # cov(r, b) / var(b), ddof 1 both
    # information ratio: marketcast annualises it by sqrt(P), quantstats does not
    assert same(m["information_ratio"], qs.stats.information_ratio(s, bs) * math.sqrt(p))
    per_period = greeks["alpha"] / p  # quantstats: mean(r - beta * b) * P, simple
    if n >= p:  # marketcast compounds the same per-period alpha to a year: (1 + a) ** P - 1
        assert same(m["alpha"], compound(1.0 + per_period, p))
        assert same(math.expm1(math.log1p(m["alpha"]) / p), per_period)
    else:  # under a year marketcast shows no alpha; quantstats still annualises
        assert m["alpha"] is None and m["alpha_reason"].startswith("n/a (< 1 year)")
        assert math.isfinite(greeks["alpha"])


@pytest.mark.parametrize("seed", range(3))
def test_under_a_year_annualised_figures_are_none_where_quantstats_gives_numbers(seed):
    rng = np.random.default_rng(200 + seed)
    n, p = 100, 252
    r = _crash(rng, n)
    s = _series(r)
    m = strategy_metrics(r, r != 0, p)
    # documented difference: 100 daily bars are not a year, marketcast does not annualise them
    assert m["annual_return"] is None and m["calmar"] is None
    assert m["annual_reason"] == "n/a (< 1 year): 100 bars, 252 a year"
    # quantstats raises the 100 days' return to the power 252 / 100 all the same
    cagr = qs.stats.cagr(s, periods=p)
    assert same(compound(1.0 + m["return"], p / n), cagr)
    assert same(compound(1.0 + m["return"], p / n) / m["max_drawdown"], qs.stats.calmar(s, periods=p))
    # what is not annualised still matches
    assert same(m["return"], qs.stats.comp(s))
    assert same(m["sharpe"], qs.stats.sharpe(s, periods=p))
    assert same(m["sortino"], qs.stats.sortino(s, periods=p))
    assert same(m["max_drawdown"], -qs.stats.max_drawdown(s))
    assert same(m["win_rate"], qs.stats.win_rate(s))


def test_a_series_that_never_moves():
    r = np.zeros(300)
    s = _series(r)
    m = strategy_metrics(r, r != 0, 252)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # quantstats warns about dividing by 0 and about no non-zero returns
        theirs = {k: float(f(s)) for k, f in {
            "return": qs.stats.comp, "max_drawdown": qs.stats.max_drawdown, "annual_return": qs.stats.cagr,
            "sharpe": qs.stats.sharpe, "sortino": qs.stats.sortino, "calmar": qs.stats.calmar,
            "win_rate": qs.stats.win_rate, "exposure": qs.stats.exposure}.items()}
    # the same where both are defined
    assert m["return"] == theirs["return"] == 0.0
    assert m["max_drawdown"] == -theirs["max_drawdown"] == 0.0
    assert m["annual_return"] == theirs["annual_return"] == 0.0
    assert m["exposure"] == theirs["exposure"] == 0.0
    # documented differences: marketcast's Sharpe of a series without variance is 0, its Sortino and Calmar
    # None, its win rate None without trades; quantstats gives NaN and a win rate of 0.0
    assert m["sharpe"] == 0.0 and math.isnan(theirs["sharpe"])
    assert m["sortino"] is None and math.isnan(theirs["sortino"])
    assert m["calmar"] is None and math.isnan(theirs["calmar"])
    assert m["win_rate"] is None and theirs["win_rate"] == 0.0
