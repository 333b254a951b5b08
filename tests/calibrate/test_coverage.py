"""Coverage of central intervals and its Wilson interval: hand cases, a true and a too-narrow forecaster."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from marketcast.calibrate.coverage import Coverage, coverage, format_coverage, interval_bounds, wilson_interval
from marketcast.errors import ConfigError


def _wilson_by_hand(k, n, z=norm.ppf(0.975)):
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


@pytest.mark.parametrize(("k", "n"), [(8, 10), (71, 100), (0, 20), (20, 20), (478, 1000)])
def test_wilson_matches_the_formula(k, n):
    lo, hi = wilson_interval(k, n)
    assert (lo, hi) == pytest.approx(_wilson_by_hand(k, n), abs=1e-12)


def test_wilson_textbook_value():
    # 8 of 10: the Wilson 95 % interval is [0.4902, 0.9433] (Brown, Cai & DasGupta 2001 style example)
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)


def test_format():
    lo, hi = wilson_interval(71, 100)
    c = Coverage(0.8, 71, 100, 0.71, lo, hi)
    assert format_coverage(c) == "coverage 80%: 71% [61, 79]" == str(c)
    assert format_coverage(Coverage(0.95, 1, 2, 0.5, 0.1, 0.9)) == "coverage 95%: 50% [10, 90]"


def test_interval_bounds_and_coverage_by_hand():
    samples = np.tile(np.arange(101.0), (6, 1))[:, :, None]  # [6 windows, 101 samples, H=1]: 0..100
    lo, hi = interval_bounds(samples, 0.8)
    assert lo[:, 0] == pytest.approx(np.full(6, 10.0)) and hi[:, 0] == pytest.approx(np.full(6, 90.0))
    outcomes = np.array([[5.0], [10.0], [50.0], [90.0], [95.0], [100.5]])
    c50, c80, c90, c95 = coverage(samples, outcomes)
    # 50 %: [25, 75] holds 50 -> 1/6; 80 %: [10, 90] holds 10, 50, 90 (bounds count) -> 3/6
    # 90 %: [5, 95] holds 5..95 -> 5/6; 95 %: [2.5, 97.5] -> 5/6
    assert [(c.nominal, c.covered, c.n) for c in (c50, c80, c90, c95)] == [
        (0.5, 1, 6), (0.8, 3, 6), (0.9, 5, 6), (0.95, 5, 6)]
    assert c80.rate == 0.5 and (c80.lo, c80.hi) == pytest.approx(_wilson_by_hand(3, 6))


def test_axis_minus_one_reads_rows():
    rows = np.tile(np.arange(101.0), (3, 1))
    (c,) = coverage(rows, np.array([0.0, 50.0, 89.0]), levels=[0.8], axis=-1)
    assert (c.covered, c.n) == (2, 3)


def _normal_windows(seed, n_windows=2000, n_samples=500, horizon=2, width=1.0):
    rng = np.random.default_rng(seed)
    mu = rng.normal(0, 0.02, (n_windows, 1, horizon))
    sigma = np.exp(rng.normal(np.log(0.01), 0.4, (n_windows, 1, horizon)))
    samples = mu + width * sigma * rng.standard_normal((n_windows, n_samples, horizon))
    outcomes = (mu + sigma * rng.standard_normal((n_windows, 1, horizon)))[:, 0]
    return samples, outcomes


def test_true_distribution_is_covered_within_the_binomial_ci():
    samples, outcomes = _normal_windows(seed=11)
    for c in coverage(samples, outcomes):
        assert c.n == 4000
        assert c.lo <= c.nominal <= c.hi, format_coverage(c)


def test_two_times_too_narrow_covers_far_less():
    samples, outcomes = _normal_windows(seed=12, width=0.5)
    by_level = {c.nominal: c for c in coverage(samples, outcomes)}
    for level, c in by_level.items():
        expected = 2 * norm.cdf(norm.ppf((1 + level) / 2) / 2) - 1  # the half-width interval's true mass
        assert c.rate == pytest.approx(expected, abs=0.025)
        assert c.hi < level
    assert by_level[0.8].rate == pytest.approx(0.478, abs=0.025)  # 80 % -> ~48 %


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(1, 30))
def test_coverage_grows_with_level(seed, n_windows, n_samples):
    rng = np.random.default_rng(seed)
    samples = rng.standard_t(3, (n_windows, n_samples, 1))
    outcomes = rng.standard_t(3, (n_windows, 1))
    counts = [c.covered for c in coverage(samples, outcomes, levels=[0.1, 0.5, 0.8, 0.9, 0.95, 0.99])]
    assert counts == sorted(counts)  # central intervals are nested
    assert all(c.lo <= c.rate <= c.hi for c in coverage(samples, outcomes))


@pytest.mark.parametrize("call", [
    lambda: coverage(np.zeros((4, 10, 2)), np.zeros((4, 3))),
    lambda: coverage(np.zeros((4, 10, 2)), np.full((4, 2), np.nan)),
    lambda: coverage(np.full((4, 10, 2), np.inf), np.zeros((4, 2))),
    lambda: coverage(np.zeros((4, 10, 2)), np.zeros((4, 2)), levels=[1.0]),
    lambda: coverage(np.zeros((4, 10, 2)), np.zeros((4, 2)), axis=3),
    lambda: wilson_interval(3, 0),
    lambda: wilson_interval(5, 4),
])
def test_bad_input_is_one_line(call):
    with pytest.raises(ConfigError) as err:
        call()
    assert "\n" not in str(err.value) and str(err.value)


def test_the_bounds_coverage_counts_against_are_numpys_quantiles():
    rng = np.random.default_rng(11)
    x = rng.standard_t(4, (3000, 97))
    y = rng.standard_t(4, 3000)
    for c in coverage(x, y, levels=[0.5, 0.8, 0.9, 0.95, 0.99], axis=-1):
        lo, hi = np.quantile(x, [(1 - c.nominal) / 2, (1 + c.nominal) / 2], axis=-1)
        assert c.covered == int(((y >= lo) & (y <= hi)).sum())
    on_bounds = np.quantile(x, 0.1, axis=-1)  # outcomes exactly on the 80 % interval's lower bound count
    assert coverage(x, on_bounds, levels=[0.8], axis=-1)[0].covered == 3000
