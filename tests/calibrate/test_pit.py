"""Randomised PIT: hand cases, uniform for the true distribution (continuous and discrete), U-shaped when
too narrow, and reliability points."""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chi2, kstest

from marketcast.calibrate.pit import (
    chi2_sf, ks_uniform, pit_histogram, pit_uniformity, pit_values, reliability_points,
)
from marketcast.errors import ConfigError


def test_pit_by_hand():
    v = np.random.default_rng(3).random((2,))
    samples = np.array([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 2.0, 3.0]])
    u = pit_values(samples, np.array([2.5, 2.0]), axis=-1, seed=3)
    # two samples below 2.5, no tie: (2 + V) / 5 in [0.4, 0.6]
    assert u[0] == pytest.approx((2 + v[0]) / 5)
    # one below 2, two ties: (1 + 3V) / 5 in [0.2, 0.8], between the "<" and "<=" ranks
    assert u[1] == pytest.approx((1 + 3 * v[1]) / 5)
    # below every sample / above every sample: V / 5 and (4 + V) / 5
    edge = pit_values(samples[:1].repeat(2, 0), np.array([0.0, 9.0]), axis=-1, seed=5)
    assert 0 <= edge[0] <= 0.2 and 0.8 <= edge[1] <= 1


def test_seed_fixes_the_randomisation():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(50, 20, 3)), rng.normal(size=(50, 3))
    assert np.array_equal(pit_values(x, y, seed=4), pit_values(x, y, seed=4))
    assert not np.array_equal(pit_values(x, y, seed=4), pit_values(x, y, seed=5))
    assert pit_values(x, y).shape == (50, 3)


def test_true_distribution_gives_uniform_pit():
    rng = np.random.default_rng(21)
    mu = rng.normal(0, 1, (3000, 1, 1))
    samples = mu + rng.standard_normal((3000, 100, 1))
    outcomes = (mu + rng.standard_normal((3000, 1, 1)))[:, 0]
    test = pit_uniformity(pit_values(samples, outcomes, seed=1))
    assert test.n == 3000 and sum(test.counts) == 3000
    assert test.ks_p > 0.01 and test.chi2_p > 0.01


def test_discrete_samples_with_ties_still_give_uniform_pit():
    # Poisson(3) outcomes and samples: most outcomes tie with samples, the randomisation spreads them
    rng = np.random.default_rng(22)
    samples = rng.poisson(3.0, (4000, 30)).astype(float)
    outcomes = rng.poisson(3.0, 4000).astype(float)
    test = pit_uniformity(pit_values(samples, outcomes, axis=-1, seed=2))
    assert test.ks_p > 0.01 and test.chi2_p > 0.01


def test_too_narrow_is_u_shaped_and_rejected():
    rng = np.random.default_rng(23)
    samples = 0.5 * rng.standard_normal((2000, 100, 1))
    outcomes = rng.standard_normal((2000, 1))
    u = pit_values(samples, outcomes)
    counts = pit_histogram(u)
    # P(PIT < 0.1) = P(Z < 0.5 * z_0.1) = Phi(-0.6408) = 0.261 against 0.1 for a calibrated forecast
    assert counts[0] / 2000 == pytest.approx(0.261, abs=0.03) and counts[-1] / 2000 == pytest.approx(0.261, abs=0.03)
    assert counts[0] > 2 * counts[4] and counts[-1] > 2 * counts[5]
    test = pit_uniformity(u)
    assert test.ks_p < 1e-6 and test.chi2_p < 1e-6


def test_histogram_by_hand():
    assert pit_histogram([0.0, 0.05, 0.15, 0.95, 1.0]).tolist() == [2, 1, 0, 0, 0, 0, 0, 0, 0, 2]
    assert pit_histogram([0.2, 0.7], bins=2).tolist() == [1, 1]


def test_reliability_points():
    tau, observed = reliability_points([0.1, 0.2, 0.3, 0.9], levels=[0.15, 0.3, 0.5, 0.95])
    assert tau.tolist() == [0.15, 0.3, 0.5, 0.95] and observed.tolist() == [0.25, 0.75, 0.75, 1.0]
    u = np.random.default_rng(0).random(20000)
    tau, observed = reliability_points(u)
    assert len(tau) == 19 and tau[0] == 0.05 and tau[-1] == 0.95
    assert np.abs(observed - tau).max() < 0.015  # calibrated: on the diagonal


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 30), st.integers(1, 25))
def test_pit_lies_between_the_fraction_below_and_at_or_below(seed, n_windows, n_samples):
    rng = np.random.default_rng(seed)
    samples = rng.integers(0, 5, (n_windows, n_samples)).astype(float)  # many ties
    outcomes = rng.integers(0, 5, n_windows).astype(float)
    u = pit_values(samples, outcomes, axis=-1, seed=seed)
    below = (samples < outcomes[:, None]).sum(1)
    at_or_below = (samples <= outcomes[:, None]).sum(1)
    assert np.all(u >= below / (n_samples + 1)) and np.all(u <= (at_or_below + 1) / (n_samples + 1))
    assert np.all((u >= 0) & (u <= 1))


@pytest.mark.parametrize("call", [
    lambda: pit_values(np.zeros((3, 5, 2)), np.zeros((3, 5))),
    lambda: pit_histogram([0.5, 1.5]),
    lambda: pit_histogram([0.5], bins=1),
    lambda: pit_uniformity([]),
    lambda: reliability_points([0.5], levels=[0.0, 0.5]),
])
def test_bad_input_is_one_line(call):
    with pytest.raises(ConfigError) as err:
        call()
    assert "\n" not in str(err.value)


def test_the_scipy_free_p_values_match_scipy():
    for df in (1, 2, 3, 9, 10, 99):
        for x in (0.01, 0.5, 3.0, 9.0, 20.0, 200.0):
            assert chi2_sf(x, df) == pytest.approx(chi2.sf(x, df), rel=1e-9, abs=1e-15)
    rng = np.random.default_rng(7)
    for n in (20, 100, 400, 5000):
        for power in (0.7, 0.9, 1.0, 1.1, 1.4):
            u = rng.random(n) ** power
            d, p = ks_uniform(u)
            exact = kstest(u, "uniform")
            assert d == pytest.approx(exact.statistic, abs=1e-12)
            assert p == pytest.approx(exact.pvalue, abs=0.005 if exact.pvalue < 0.1 else 0.025)


def test_pit_uniformity_imports_no_scipy():
    code = ("import sys, numpy as np; from marketcast.calibrate.summary import calibration_block; "
            "r = np.random.default_rng(0); calibration_block({'close': r.random((50, 20))}, {'close': r.random(50)}); "
            "print('scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr
