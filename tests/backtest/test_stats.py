"""PSR and the bootstrap Sharpe interval, by hand and against direct, independent computations."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from marketcast.backtest.stats import bootstrap_sharpes, probabilistic_sharpe, sharpe_interval

R = np.array([0.02, -0.01, 0.015, 0.0, -0.005])


def test_psr_by_hand():
    # mean 0.004; deviations .016 -.014 .011 -.004 -.009
    sr = 0.004 / math.sqrt(670e-6 / 4)  # sample std (ddof 1): 0.30907 per period
    var = 670e-6 / 5  # population moments, as in Bailey and Lopez de Prado
    skew = (0.016**3 - 0.014**3 + 0.011**3 - 0.004**3 - 0.009**3) / 5 / var**1.5  # 0.2437
    kurt = (0.016**4 + 0.014**4 + 0.011**4 + 0.004**4 + 0.009**4) / 5 / var**2  # 1.3969 (normal: 3)
    z = sr * math.sqrt(5 - 1) / math.sqrt(1 - skew * sr + (kurt - 1) / 4 * sr**2)
    assert z == pytest.approx(0.63955, abs=1e-5)
    assert probabilistic_sharpe(R) == pytest.approx(0.5 * (1 + math.erf(z / math.sqrt(2))), rel=1e-12)
    assert probabilistic_sharpe(R) == pytest.approx(0.7388, abs=1e-4)
    # against scipy's moments and normal CDF
    ref = sps.norm.cdf(sr * 2 / math.sqrt(1 - sps.skew(R) * sr + (sps.kurtosis(R, fisher=False) - 1) / 4 * sr**2))
    assert probabilistic_sharpe(R) == pytest.approx(ref, rel=1e-12)
    # a benchmark equal to the observed Sharpe gives exactly one half
    assert probabilistic_sharpe(R, benchmark=sr) == pytest.approx(0.5)


def test_psr_is_undefined_without_variation_or_length():
    assert probabilistic_sharpe(np.zeros(10)) is None
    assert probabilistic_sharpe(np.array([0.01, 0.02])) is None


def test_bootstrap_equals_a_direct_loop():
    rng = np.random.default_rng(3)
    r = rng.normal(0.001, 0.01, 37)
    fast = bootstrap_sharpes(r, reps=250, seed=11)
    direct = np.random.default_rng(11)
    slow = []
    for _ in range(250):
        x = r[direct.integers(0, len(r), len(r))]
        slow.append(x.mean() / x.std(ddof=1))
    np.testing.assert_allclose(fast, slow, rtol=1e-12)
    lo, hi = sharpe_interval(r, 252, reps=250, level=0.9, seed=11)
    assert (lo, hi) == pytest.approx(tuple(np.quantile(slow, [0.05, 0.95]) * math.sqrt(252)), rel=1e-12)


def test_bootstrap_width_matches_the_asymptotic_standard_error():
    # iid normal returns: SE(SR) ~ sqrt((1 + SR^2 / 2) / n) per period (Lo 2002)
    r = np.random.default_rng(5).normal(0.001, 0.01, 2000)
    sr = r.mean() / r.std(ddof=1)
    lo, hi = sharpe_interval(r, 1, reps=2000, level=0.95, seed=0)
    half = 1.959964 * math.sqrt((1 + sr**2 / 2) / len(r))
    assert (hi - lo) / 2 == pytest.approx(half, rel=0.1)
    assert lo < sr < hi


def test_no_interval_for_a_strategy_that_never_traded():
    assert sharpe_interval(np.zeros(50), 252) is None


def test_bootstrap_of_a_strategy_that_rarely_trades_equals_the_direct_loop():
    # one trade in 20 windows: about a third of the resamples never draw it and must have Sharpe exactly 0
    r = np.zeros(20)
    r[3] = 0.012
    fast = bootstrap_sharpes(r, reps=400, seed=2)
    direct = np.random.default_rng(2)
    slow = []
    for _ in range(400):
        x = r[direct.integers(0, len(r), len(r))]
        sd = x.std(ddof=1)
        slow.append(x.mean() / sd if sd > 0 else 0.0)
    assert 80 < np.sum(np.array(slow) == 0.0) < 200
    np.testing.assert_array_equal(fast == 0.0, np.array(slow) == 0.0)
    np.testing.assert_allclose(fast, slow, rtol=1e-12)


def test_every_series_of_one_length_shares_the_resampled_windows():
    from marketcast.backtest.stats import resample_counts

    counts = resample_counts(30, 50, 7)
    assert counts.shape == (50, 30) and (counts.sum(axis=1) == 30).all()
    assert not counts.flags.writeable
    again = np.random.default_rng(7).integers(0, 30, size=(50, 30))  # the draws, counted
    np.testing.assert_array_equal(counts, np.stack([np.bincount(row, minlength=30) for row in again]))


def test_several_series_at_once_equal_each_alone():
    from marketcast.backtest.stats import sharpe_intervals

    rng = np.random.default_rng(9)
    series = np.stack([rng.normal(0.001, 0.01, 60), np.zeros(60), np.where(rng.random(60) < 0.1, 0.02, 0.0)])
    together = sharpe_intervals(series, 252, reps=300, seed=4)
    assert together[1] is None
    for row, got in zip(series, together):
        alone = sharpe_interval(row, 252, reps=300, seed=4)
        assert got == alone or got == pytest.approx(alone, rel=1e-12)
    np.testing.assert_allclose(bootstrap_sharpes(series, 300, 4)[2], bootstrap_sharpes(series[2], 300, 4), rtol=1e-12)
