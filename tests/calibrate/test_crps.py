"""Ensemble CRPS against scoringrules (the maintained reference), the project's former sorted-form CRPS, brute
force, hand cases and the closed form for a normal forecast."""

import math

import numpy as np
import pytest
import scoringrules
from scipy.stats import norm

from marketcast.backtest.skill import crps_bruteforce, crps_samples, forecast_skill
from marketcast.calibrate.crps import crps_ensemble
from marketcast.errors import ConfigError


def _sorted_form(samples, observed):
    """The in-project CRPS before scoringrules (backtest/skill.py): for sorted x_1 <= ... <= x_S,
    1/2 E|X - X'| = sum_i (2i - S - 1) x_i / S**2."""
    x = np.sort(np.asarray(samples, dtype=np.float64), axis=-1)
    y = np.asarray(observed, dtype=np.float64)[..., None]
    s = x.shape[-1]
    weights = 2.0 * np.arange(1, s + 1) - s - 1.0
    return np.abs(x - y).mean(axis=-1) - (x * weights).sum(axis=-1) / s**2


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("n_samples", [1, 2, 7, 256])
def test_matches_the_former_implementation_to_1e10(seed, n_samples):
    rng = np.random.default_rng(seed)
    samples = rng.standard_t(4, size=(300, n_samples)) * 0.01 + rng.normal(0, 0.01, (300, 1))
    observed = rng.normal(0, 0.02, 300)
    new = crps_ensemble(samples, observed, axis=-1)
    assert np.abs(new - _sorted_form(samples, observed)).max() < 1e-10
    assert np.array_equal(crps_samples(samples, observed), new)  # the skill table calls it


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("estimator", ["qd", "nrg"])  # quantile decomposition and the energy V-statistic
def test_matches_scoringrules_to_1e10(seed, estimator):
    rng = np.random.default_rng(100 + seed)
    paths = rng.standard_t(3, size=(40, 129, 4)) * 0.02  # [B, S, H]
    observed = rng.normal(0, 0.02, (40, 4))
    observed[0, 0] = paths[0, 5, 0]  # an outcome equal to a sample
    reference = scoringrules.crps_ensemble(observed, paths, m_axis=-2, estimator=estimator, backend="numpy")
    assert np.abs(crps_ensemble(paths, observed) - reference).max() < 1e-10
    rows = paths[:, :, 0]
    reference_rows = scoringrules.crps_ensemble(observed[:, 0], rows, estimator=estimator, backend="numpy")
    assert np.abs(crps_samples(rows, observed[:, 0]) - reference_rows).max() < 1e-10


def test_matches_bruteforce_and_paths_layout():
    rng = np.random.default_rng(9)
    paths = rng.normal(0, 1, (5, 64, 3))  # Forecast layout [B, S, H]
    y = rng.normal(0, 1, (5, 3))
    scores = crps_ensemble(paths, y)
    assert scores.shape == (5, 3)
    for b in range(5):
        for h in range(3):
            assert scores[b, h] == pytest.approx(crps_bruteforce(paths[b, :, h], y[b, h]), abs=1e-12)


def test_by_hand():
    # samples {0, 1}, y = 0: E|X - y| = 0.5, E|X - X'| over the 4 pairs = 0.5 -> 0.5 - 0.25 = 0.25
    assert crps_ensemble(np.array([[1.0, 0.0]]), np.array([0.0]), axis=-1)[0] == pytest.approx(0.25)
    # one sample is a point forecast: CRPS = absolute error
    assert crps_ensemble(np.array([[0.3]]), np.array([0.1]), axis=-1)[0] == pytest.approx(0.2)


@pytest.mark.parametrize("y", [-1.5, 0.0, 0.4, 2.0])
def test_normal_closed_form(y):
    # CRPS(N(0, 1), y) = y (2 Phi(y) - 1) + 2 phi(y) - 1 / sqrt(pi) (Gneiting & Raftery 2007, eq. 21)
    exact = y * (2 * norm.cdf(y) - 1) + 2 * norm.pdf(y) - 1 / math.sqrt(math.pi)
    grid = norm.ppf((np.arange(20000) + 0.5) / 20000)  # a 20000-member ensemble at the normal's quantiles
    assert crps_ensemble(grid[None], np.array([y]), axis=-1)[0] == pytest.approx(exact, abs=2e-4)


def test_skill_table_crps_is_the_mean_of_crps_ensemble():
    rng = np.random.default_rng(2)
    fields = ("close", "high", "low")
    samples = {f: rng.normal(0, 0.01, (40, 32)) for f in fields}
    actual = {f: rng.normal(0, 0.01, 40) for f in fields}
    point = {f: np.median(samples[f], axis=1) for f in fields}
    skill = forecast_skill(point, samples, actual)
    for f in fields:
        assert skill[f"crps_{f}"] == pytest.approx(_sorted_form(samples[f], actual[f]).mean(), abs=1e-12)


def test_bad_input_is_one_line():
    with pytest.raises(ConfigError) as err:
        crps_ensemble(np.zeros((4, 8)), np.zeros(5), axis=-1)
    assert "\n" not in str(err.value)
