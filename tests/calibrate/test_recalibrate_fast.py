"""The O(W log W) route of walk-forward recalibration gives the general (masked, O(W^2)) route's samples bit for
bit, and its single-selection median and quantile are numpy's, bit for bit."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marketcast.calibrate.recalibrate import _median, _quantile, recalibrate, settled_mask


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.sampled_from(["normal", "ties", "rounded"]),
       st.floats(0.001, 0.999))
def test_single_selection_median_and_quantile_equal_numpy(seed, n, kind, level):
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(1, 6)), n, int(rng.integers(1, 3)))
    x = {"normal": lambda: rng.normal(size=shape), "ties": lambda: rng.integers(-2, 3, shape).astype(float),
         "rounded": lambda: np.round(rng.normal(size=shape), 1)}[kind]()
    np.testing.assert_array_equal(_median(x), np.median(x, axis=1))
    for q in (level, 0.8, 0.5, 0.95):
        np.testing.assert_array_equal(_quantile(x, q), np.quantile(x, q, axis=1))


@pytest.mark.parametrize("method", ["conformal", "quantile"])
@pytest.mark.parametrize("horizon, step", [(1, 1), (3, 1), (5, 2)])
@pytest.mark.parametrize("spread", ["std", "iqr"])
def test_the_sorted_pass_equals_the_masked_route(method, horizon, step, spread):
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
    fast = recalibrate(x, y, method, horizon=horizon, step=step, min_windows=20, spread=spread, seed=5)
    slow = recalibrate(x, y, method, settled_before=settled_mask(w, horizon, step), min_windows=20, spread=spread,
                       seed=5)
    np.testing.assert_array_equal(fast.samples, slow.samples)
    np.testing.assert_array_equal(fast.calibrated, slow.calibrated)
    assert fast.calibrated.sum() == w - 20 - lag + 1 and not np.array_equal(fast.samples, x)
