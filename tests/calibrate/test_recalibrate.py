"""Walk-forward recalibration: the settlement rule, warm-up, fixing a too-narrow forecaster, and no leak from
outcomes that are not yet settled."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from marketcast.calibrate.coverage import coverage, format_coverage
from marketcast.calibrate.pit import pit_uniformity, pit_values
from marketcast.calibrate.recalibrate import recalibrate, settled_mask
from marketcast.errors import ConfigError


def _windows(seed, n_windows=1500, n_samples=200, horizon=1, width=1.0, bias=0.0):
    """Heteroscedastic normal windows: outcome ~ N(mu, sigma^2), samples ~ N(mu + bias*sigma, (width*sigma)^2)."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(0, 1, (n_windows, 1, horizon))
    sigma = np.exp(rng.normal(0, 0.5, (n_windows, 1, horizon)))
    samples = mu + bias * sigma + width * sigma * rng.standard_normal((n_windows, n_samples, horizon))
    outcomes = (mu + sigma * rng.standard_normal((n_windows, 1, horizon)))[:, 0]
    return samples, outcomes


def test_settled_mask_by_hand():
    m = settled_mask(5, horizon=2)
    # window j settles before k when j + 2 <= k
    assert m.astype(int).tolist() == [[0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0], [1, 1, 0, 0, 0],
                                      [1, 1, 1, 0, 0]]
    # windows 2 bars apart, horizon 3: ceil(3 / 2) = 2 windows of lag
    assert np.array_equal(settled_mask(6, horizon=3, step=2), settled_mask(6, horizon=2))
    assert np.array_equal(settled_mask(4, horizon=1), np.tril(np.ones((4, 4), bool), -1))


def test_warm_up_returns_samples_unchanged_and_flagged():
    samples, outcomes = _windows(1, n_windows=120, width=0.5)
    r = recalibrate(samples, outcomes, "conformal", horizon=3, min_windows=50)
    # window k has k - 2 settled windows (j <= k - 3): 50 first at k = 52
    assert r.n_settled[:5].tolist() == [0, 0, 0, 1, 2] and r.n_settled[-1] == 117
    assert r.calibrated.tolist() == [False] * 52 + [True] * 68
    assert np.array_equal(r.samples[:52], samples[:52])
    assert not np.allclose(r.samples[52:], samples[52:])
    none = recalibrate(samples, outcomes, "none", horizon=3, min_windows=50)
    assert np.array_equal(none.samples, samples) and not none.calibrated.any()


def test_two_times_too_narrow_is_fixed_by_conformal():
    samples, outcomes = _windows(2, width=0.5)
    (raw,) = coverage(samples[50:], outcomes[50:], levels=[0.8], confidence=0.999)
    assert raw.lo <= 2 * norm.cdf(norm.ppf(0.9) / 2) - 1 <= raw.hi and raw.hi < 0.5  # 80 % -> ~48 %
    r = recalibrate(samples, outcomes, "conformal", horizon=1, min_windows=50)
    after = r.calibrated
    assert after.sum() == 1500 - 50
    for c in coverage(r.samples[after], outcomes[after]):
        assert abs(c.rate - c.nominal) <= 0.03, format_coverage(c)
    assert pit_uniformity(pit_values(r.samples[after], outcomes[after])).ks_p > 0.01


def test_true_distribution_stays_calibrated_after_conformal():
    samples, outcomes = _windows(3, horizon=2)
    r = recalibrate(samples, outcomes, "conformal", horizon=2, min_windows=50)
    # the calibrator's own estimation noise (a quantile of >= 50 residuals) costs a point or two, no more
    for c in coverage(r.samples[r.calibrated], outcomes[r.calibrated]):
        assert abs(c.rate - c.nominal) <= 0.03, format_coverage(c)


def test_quantile_mapping_fixes_bias_and_width():
    samples, outcomes = _windows(4, n_samples=400, horizon=2, width=0.75, bias=0.3)
    before = pit_uniformity(pit_values(samples[50:], outcomes[50:]))
    r = recalibrate(samples, outcomes, "quantile", horizon=2, min_windows=50)
    after = r.calibrated
    for c in coverage(r.samples[after], outcomes[after], levels=(0.5, 0.8, 0.9)):
        assert abs(c.rate - c.nominal) <= 0.03, format_coverage(c)
    assert pit_uniformity(pit_values(r.samples[after], outcomes[after])).ks_stat < before.ks_stat / 5


@pytest.mark.parametrize("method", ["conformal", "quantile"])
def test_samples_keep_their_ranks(method):
    samples, outcomes = _windows(5, n_windows=200, n_samples=50, horizon=3, width=0.6)
    r = recalibrate(samples, outcomes, method, horizon=3, min_windows=20)
    # a monotone map per (window, step): in the input's sort order the output never decreases (ties allowed)
    in_input_order = np.take_along_axis(r.samples, np.argsort(samples, axis=1), axis=1)
    assert (np.diff(in_input_order, axis=1) >= 0).all()
    if method == "conformal":  # scaled about the median, which stays put
        assert np.allclose(np.median(r.samples, axis=1), np.median(samples, axis=1), rtol=0, atol=1e-12)


@pytest.mark.parametrize(("method", "horizon", "step", "k"), [
    ("conformal", 1, 1, 140), ("conformal", 5, 1, 97), ("conformal", 5, 2, 160),
    ("quantile", 1, 1, 61), ("quantile", 3, 1, 150), ("quantile", 4, 3, 120),
])
def test_perturbing_the_future_changes_nothing_before_settlement(method, horizon, step, k):
    samples, outcomes = _windows(6, n_windows=220, n_samples=60, horizon=horizon, width=0.6)
    lag = -(-horizon // step)
    base = recalibrate(samples, outcomes, method, horizon=horizon, step=step, min_windows=40, seed=3)
    rng = np.random.default_rng(k)
    future = outcomes.copy()
    future[k:] = rng.normal(0, 50, future[k:].shape)  # wildly different outcomes from window k on
    moved = recalibrate(samples, future, method, horizon=horizon, step=step, min_windows=40, seed=3)
    assert np.array_equal(moved.samples[:k + lag], base.samples[:k + lag])
    assert not np.allclose(moved.samples[k + lag:], base.samples[k + lag:])  # the test can see a change
    # the samples of windows k.. may change too: windows before k keep theirs
    wild = samples.copy()
    wild[k:] *= 7.0
    assert np.array_equal(recalibrate(wild, future, method, horizon=horizon, step=step, min_windows=40,
                                      seed=3).samples[:k], base.samples[:k])
    # unsettled outcomes may be unknown
    unknown = outcomes.copy()
    unknown[-lag:] = np.nan
    assert np.array_equal(recalibrate(samples, unknown, method, horizon=horizon, step=step, min_windows=40,
                                      seed=3).samples, base.samples)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["conformal", "quantile"]), st.integers(1, 6), st.integers(1, 3), st.integers(0, 79),
       st.integers(0, 2**32 - 1))
def test_no_leak_property(method, horizon, step, k, seed):
    samples, outcomes = _windows(seed % 1000, n_windows=80, n_samples=16, horizon=horizon, width=0.7)
    lag = -(-horizon // step)
    run = lambda y: recalibrate(samples, y, method, horizon=horizon, step=step, min_windows=10).samples  # noqa: E731
    future = outcomes.copy()
    future[k:] = np.random.default_rng(seed).normal(0, 100, future[k:].shape)
    assert np.array_equal(run(future)[:k + lag], run(outcomes)[:k + lag])


@pytest.mark.parametrize("method", ["conformal", "quantile"])
def test_mask_and_horizon_agree_and_flat_input_works(method):
    samples, outcomes = _windows(7, n_windows=150, n_samples=40)
    by_horizon = recalibrate(samples, outcomes, method, horizon=2, min_windows=30)
    by_mask = recalibrate(samples, outcomes, method, settled_before=settled_mask(150, 2), min_windows=30)
    assert np.array_equal(by_horizon.samples, by_mask.samples)
    assert np.array_equal(by_horizon.calibrated, by_mask.calibrated)
    flat = recalibrate(samples[:, :, 0], outcomes[:, 0], method, horizon=2, min_windows=30)
    assert flat.samples.shape == (150, 40) and np.array_equal(flat.samples, by_horizon.samples[:, :, 0])


def test_conformal_bounds_by_hand():
    """Five samples -2..2 (median 0); window 11 sees the outcomes of windows 0..10. The 50 % bounds are the
    samples -1 and 1 (numpy's positions 4 x 0.25 = 1 and 3). Scores: below, (0 - y) / 1; above, y / 1; each
    bound's factor is the (11 + 1) x 0.75 = 9th smallest of its 11 scores: 4 below, 1.5 above. The map scales
    each side about the fixed median by its factor: -2, -1 -> -8, -4 and 1, 2 -> 1.5, 3."""
    samples = np.tile(np.array([-2.0, -1.0, 0.0, 1.0, 2.0]), (12, 1))
    outcomes = np.array([-6, -5, -4, -3, -2, -1, 0.5, 1, 1.5, 2, 2.5, 0.0])
    r = recalibrate(samples, outcomes, "conformal", horizon=1, min_windows=11, levels=(0.5,))
    assert r.calibrated.tolist() == [False] * 11 + [True]
    assert r.samples[11].tolist() == [-8.0, -4.0, 0.0, 1.5, 3.0]
    # with the 80 % interval too its bounds (positions 0.4 and 3.6) are 1.6 from the median; its factors sit at the
    # virtual rank 12 x 0.9 = 10.8, between the 10th and the 11th smallest score with weight 0.8 (the 50 %'s
    # 12 x 0.75 = 9 is a whole rank: unchanged): below (5 + 0.8 x 1) / 1.6 = 3.625, above (2 + 0.8 x 0.5) / 1.6
    # = 1.5. Below, the 50 % bound's factor 4 is the larger at sample -1, so the 80 % bound moves out further than
    # its own -5.8 (an outer bound reaches at least as far as an inner one): -2 -> -7.25, the 10 % quantile
    # -7.25 + 0.4 x 3.25 = -5.95. Above, both factors are 1.5: 1, 2 -> 1.5, 3, the 90 % quantile exactly 2.4
    both = recalibrate(samples, outcomes, "conformal", horizon=1, min_windows=11, levels=(0.5, 0.8))
    assert both.samples[11].tolist() == pytest.approx([-7.25, -4.0, 0.0, 1.5, 3.0], abs=1e-12)
    assert np.quantile(both.samples[11], [0.1, 0.9]).tolist() == pytest.approx([-5.95, 2.4], abs=1e-12)


@pytest.mark.parametrize("kwargs", [
    dict(method="isotonic", horizon=1),
    dict(method="conformal", horizon=1, min_windows=9),
    dict(method="conformal", horizon=1, min_windows=61),
    dict(method="conformal"),
    dict(method="conformal", horizon=1, settled_before=settled_mask(60, 1)),
    dict(method="conformal", settled_before=settled_mask(60, 1).T),
    dict(method="conformal", settled_before=np.ones((60, 60))),
    dict(method="conformal", horizon=0),
    dict(method="conformal", horizon=1, levels=(0.8, 1.2)),
    dict(method="conformal", horizon=1, levels=()),
    dict(method="conformal", horizon=1, levels=(0.8, 0.8)),
    dict(method="conformal", horizon=1, levels=0.8),
])
def test_bad_input_is_one_line(kwargs):
    samples, outcomes = _windows(8, n_windows=60, n_samples=10)
    kwargs.setdefault("min_windows", 20)
    with pytest.raises(ConfigError) as err:
        recalibrate(samples, outcomes, **kwargs)
    assert "\n" not in str(err.value)


def test_unknown_outcome_of_a_settled_window_is_refused():
    samples, outcomes = _windows(9, n_windows=60, n_samples=10)
    outcomes[10] = np.nan
    with pytest.raises(ConfigError, match="window 10"):
        recalibrate(samples, outcomes, "quantile", horizon=1, min_windows=20)
    with pytest.raises(ConfigError):
        recalibrate(samples[:, :, 0], outcomes[:, :1], "conformal", horizon=1, min_windows=20)  # [W,S] vs [W,1]


def _skewed(seed, n_windows=2000, n_samples=200, width=0.6):
    """Outcomes mu + sigma * z with z a mirrored, standardised lognormal (sigma 0.53: skewness about -1.9, the
    issue's crypto daily low) and heteroscedastic sigma; samples symmetric, N(mu, (width * sigma)^2)."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(0, 1, n_windows)
    sigma = np.exp(rng.normal(0, 0.4, n_windows))
    s2 = 0.53 ** 2
    z = -(rng.lognormal(0.0, 0.53, n_windows) - np.exp(s2 / 2)) / np.sqrt((np.exp(s2) - 1) * np.exp(s2))
    samples = mu[:, None] + width * sigma[:, None] * rng.standard_normal((n_windows, n_samples))
    return samples, mu + sigma * z, z


def _tail_misses(samples, outcomes, level):
    lo, hi = np.quantile(samples, [(1 - level) / 2, (1 + level) / 2], axis=1)
    return float(np.mean(outcomes < lo)), float(np.mean(outcomes > hi))


def test_conformal_targets_each_tail_of_a_skewed_outcome():
    """A symmetric forecaster 0.6 times too narrow against outcomes with skewness -1.9: after conformal the
    equal-tailed intervals the coverage report scores hold their nominal share, each tail half the rest."""
    samples, outcomes, z = _skewed(11)
    m = len(z)
    assert ((z - z.mean()) ** 3).mean() / z.std() ** 3 == pytest.approx(-1.9, abs=0.3)
    r = recalibrate(samples, outcomes, "conformal", horizon=1, min_windows=100)
    after = r.calibrated
    assert after.sum() == m - 100 and not after[:100].any()
    below, above = _tail_misses(samples[after], outcomes[after], 0.8)
    assert below + above > 0.35  # raw: 18 % below, 21 % above (the test can tell)
    for level in (0.5, 0.8, 0.9, 0.95):
        below, above = _tail_misses(r.samples[after], outcomes[after], level)
        tail = (1 - level) / 2
        assert abs(below - tail) <= 0.03 and abs(above - tail) <= 0.03, (level, below, above)
    (c80,) = coverage(r.samples[after], outcomes[after], levels=[0.8], axis=-1)
    assert abs(c80.rate - 0.8) <= 0.03, format_coverage(c80)
    # the point forecast stays: the median of every window bit for bit, and the samples keep their ranks
    assert np.array_equal(np.median(r.samples, axis=1), np.median(samples, axis=1))
    assert (np.diff(np.take_along_axis(r.samples, np.argsort(samples, axis=1), axis=1), axis=1) >= 0).all()
    # the skew shows in the corrections: the lower 10 % bound moves out further than the upper one
    lo0, hi0 = np.quantile(samples[after], [0.1, 0.9], axis=1)
    lo1, hi1 = np.quantile(r.samples[after], [0.1, 0.9], axis=1)
    assert np.median((lo0 - lo1) / (hi1 - hi0)) > 1.3


def test_quantile_mapping_also_splits_the_tails_of_a_skewed_outcome():
    """Quantile mapping recalibrates every probability, so its equal-tailed 80 % interval is already what is
    scored (no mismatch); it stays inside each window's sample range, which a too-narrow forecaster's outer
    levels need to leave: 95 % is short."""
    samples, outcomes, _ = _skewed(11)
    r = recalibrate(samples, outcomes, "quantile", horizon=1, min_windows=100)
    after = r.calibrated
    below, above = _tail_misses(r.samples[after], outcomes[after], 0.8)
    assert abs(below - 0.1) <= 0.03 and abs(above - 0.1) <= 0.03, (below, above)
    below, above = _tail_misses(r.samples[after], outcomes[after], 0.95)
    assert below + above > 0.08  # beyond the samples' range: the outermost sample is as far as it can map


@pytest.mark.parametrize("n_samples", [199, 200])
def test_the_median_is_unchanged_bit_for_bit_with_a_median_knot(n_samples):
    samples, outcomes, _ = _skewed(12, n_windows=300, n_samples=n_samples)
    levels = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)
    knots = np.quantile(samples, levels, axis=1).T + 0.01  # a model's own quantiles, not the samples'
    r = recalibrate(samples, outcomes, "conformal", horizon=1, min_windows=50, knots=knots, knot_levels=levels)
    assert r.calibrated.sum() == 250
    assert np.array_equal(np.median(r.samples, axis=1), np.median(samples, axis=1))
    assert np.array_equal(r.knots[:, 3], knots[:, 3])  # the model's median knot
    assert (np.diff(r.knots, axis=1) >= 0).all() and not np.allclose(r.knots, knots)
