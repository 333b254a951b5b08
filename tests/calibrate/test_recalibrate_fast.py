"""The O(W log W) route of walk-forward recalibration gives the general (masked, O(W^2)) route's samples bit for
bit, and its median and quantiles read from the sorted samples are numpy's, bit for bit."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marketcast.calibrate.recalibrate import _median, _sorted_quantile, recalibrate, settled_mask


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.sampled_from(["normal", "ties", "rounded"]),
       st.floats(0.0, 1.0))
def test_median_and_quantile_of_the_sorted_samples_equal_numpy(seed, n, kind, level):
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(1, 6)), n, int(rng.integers(1, 3)))
    x = {"normal": lambda: rng.normal(size=shape), "ties": lambda: rng.integers(-2, 3, shape).astype(float),
         "rounded": lambda: np.round(rng.normal(size=shape), 1)}[kind]()
    ordered = np.sort(x, axis=1)
    np.testing.assert_array_equal(_median(ordered), np.median(x, axis=1))
    for q in (level, 0.025, 0.1, 0.25, 0.75, 0.9, 0.975, (1 - 0.8) / 2, (1 + 0.95) / 2):
        np.testing.assert_array_equal(_sorted_quantile(ordered, q), np.quantile(x, q, axis=1))


@pytest.mark.parametrize("method", ["conformal", "quantile"])
@pytest.mark.parametrize("horizon, step", [(1, 1), (3, 1), (5, 2)])
def test_the_sorted_pass_equals_the_masked_route(method, horizon, step):
    """Windows of different scales, a window without spread, tied samples, and the last windows' outcomes
    unknown (they settle before no window)."""
    rng = np.random.default_rng(horizon * 10 + step)
    w, s, h = 240, 33, 2
    x = rng.normal(0, 1, (w, s, h)) * rng.uniform(0.2, 3.0, (w, 1, 1))
    x[7] = 1.5  # no spread
    x[11, :10] = x[11, 0]  # ties
    y = rng.normal(0, 2, (w, h))
    lag = -(-horizon // step)
    y[w - lag:] = np.nan
    fast = recalibrate(x, y, method, horizon=horizon, step=step, min_windows=20, seed=5)
    slow = recalibrate(x, y, method, settled_before=settled_mask(w, horizon, step), min_windows=20, seed=5)
    np.testing.assert_array_equal(fast.samples, slow.samples)
    np.testing.assert_array_equal(fast.calibrated, slow.calibrated)
    assert fast.calibrated.sum() == w - 20 - lag + 1 and not np.array_equal(fast.samples, x)
