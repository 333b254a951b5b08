"""Hansen's SPA in numpy (marketcast.backtest.spa) against arch, its reference: the same p-values resample for
resample when fed arch's own stationary-bootstrap indices, arch's variance estimator, arch's index recursion,
and, with this module's own draws, p-values within Monte Carlo error of arch's over seeds."""

import numpy as np
import pytest
from arch.bootstrap import SPA, StationaryBootstrap
from arch.bootstrap._samplers_python import stationary_bootstrap_sample_python

from marketcast.backtest import spa


def _arch_indices(diff: np.ndarray, block: int, reps: int, seed: int) -> np.ndarray:
    """The [reps, T] indices arch's SPA resamples with for ``seed`` (it builds this bootstrap from the seed)."""
    boot = StationaryBootstrap(block, diff, seed=seed)
    out = []
    for _ in boot.bootstrap(reps):
        out.append(boot.index.copy())
    return np.array(out)


def _arch_pvalues(benchmark: np.ndarray, models: np.ndarray, reps: int, seed: int) -> dict:
    test = SPA(-benchmark, -models, reps=reps, bootstrap="stationary", seed=seed)
    test.compute()
    return {k: float(v) for k, v in test.pvalues.items()}


def _case(rng, windows: int, models: int, edge: float) -> tuple[np.ndarray, np.ndarray]:
    """Benchmark and model returns; the last model loses 1 % a window, far below the benchmark (Hansen's
    consistent p-value leaves it uncentred, White's recentres it), the first has ``edge``."""
    bench = rng.normal(0.0, 0.01, windows)
    m = rng.normal(0.0, 0.01, (windows, models))
    m[:, 0] += edge
    if models > 1:
        m[:, -1] -= 0.01
    return bench, m


@pytest.mark.parametrize(("windows", "models", "edge"), [(70, 6, 0.0), (70, 6, 0.003), (250, 8, 0.001),
                                                         (12, 1, 0.0), (33, 3, 0.002)])
def test_p_values_equal_archs_for_archs_own_resamples(windows, models, edge):
    rng = np.random.default_rng(windows * 10 + models)
    bench, m = _case(rng, windows, models, edge)
    diff = m - bench[:, None]
    block = spa.block_size(windows)
    for seed in range(3):
        ours = spa.pvalues(diff, _arch_indices(diff, block, 400, seed), block)
        assert ours == _arch_pvalues(bench, m, 400, seed)
    if models > 1:  # the far-worse model is what tells the consistent p-value from White's
        assert ours["lower"] <= ours["consistent"] <= ours["upper"]


def test_variances_are_archs_stationary_bootstrap_variances():
    rng = np.random.default_rng(3)
    bench, m = _case(rng, 70, 6, 0.002)
    test = SPA(-bench, -m, reps=10, bootstrap="stationary", seed=0)
    test._compute_variance()
    assert spa.variances(m - bench[:, None], spa.block_size(70)) == pytest.approx(test._loss_diff_var, rel=1e-12)
    assert spa.block_size(70) == test.block_size == 8


def test_paths_follow_archs_recursion_for_the_same_draws():
    rng = np.random.default_rng(4)
    for windows, block in ((70, 8), (10, 3), (5, 1), (40, 40)):
        starts = rng.integers(windows, size=(200, windows))
        u = rng.random((200, windows))
        ours = spa.paths(starts, u <= 1.0 / block)
        loop = np.array([stationary_bootstrap_sample_python(s.copy(), v, 1.0 / block) for s, v in zip(starts, u)])
        assert np.array_equal(ours, loop)
    assert np.array_equal(spa.paths(np.array([[3, 0, 1, 4, 2]]), np.array([[False, False, True, False, False]])),
                          np.array([[3, 4, 1, 2, 3]]))  # a block from 3 wraps to 4, a new one starts at 1


def test_own_draws_land_within_monte_carlo_error_of_arch():
    """Other random numbers than arch's, the same distribution: over 6 seeds each p-value within 4 standard
    errors of the difference of two independent estimates, and the mean of the differences within 4 of its own."""
    rng = np.random.default_rng(5)
    bench, m = _case(rng, 70, 6, 0.0015)
    diff = m - bench[:, None]
    block = spa.block_size(70)
    gaps = []
    for seed in range(6):
        ours = spa.pvalues(diff, spa.stationary_indices(np.random.default_rng(seed), 70, block, spa.REPS), block)
        theirs = _arch_pvalues(bench, m, spa.REPS, seed)
        for key in ("consistent", "upper"):
            p = theirs[key]
            assert 0.02 < p < 0.98  # a case where the bootstrap has something to estimate
            assert abs(ours[key] - p) <= 4 * np.sqrt(2) * spa.mc_error(p, spa.REPS)
            gaps.append(ours[key] - p)
    assert abs(np.mean(gaps)) <= 4 * np.sqrt(2) * spa.mc_error(0.5, spa.REPS) / np.sqrt(6)


def test_stationary_indices_have_mean_block_length_block():
    """Politis & Romano's blocks: each position starts a new block with probability 1 / block."""
    idx = spa.stationary_indices(np.random.default_rng(6), 70, 8, 4000)
    assert idx.shape == (4000, 70) and idx.min() == 0 and idx.max() == 69
    continues = (idx[:, 1:] - idx[:, :-1]) % 70 == 1  # a new block may also start at the next index: rare
    assert 1 - continues.mean() == pytest.approx(1 / 8 * (1 - 1 / 70), abs=0.005)


def test_resample_count_puts_the_error_of_a_p_near_five_percent_at_half_a_point():
    assert spa.REPS == 1900
    assert spa.mc_error(0.05, spa.REPS) <= 0.005 < spa.mc_error(0.05, spa.REPS - 1)
    assert spa.mc_error(0.0, spa.REPS) == 0.0 and spa.mc_error(0.5, 100) == pytest.approx(0.05)


def test_hand_computed_p_values_of_three_resamples():
    """T = 10, one model, block 3: the model's mean differential is 0.1; resample 0 is the data itself (mean
    0.1, recentred 0, not above 0.1), resample 1 draws window 0 ten times (1.0 - 0.1 = 0.9 > 0.1), resample 2
    window 1 ten times (0 - 0.1 < 0.1): p = 1/3 for every recentring."""
    diff = np.zeros((10, 1))
    diff[0] = 1.0
    idx = np.array([np.arange(10), np.zeros(10, dtype=int), np.ones(10, dtype=int)])
    assert spa.pvalues(diff, idx, 3) == pytest.approx({"lower": 1 / 3, "consistent": 1 / 3, "upper": 1 / 3})
