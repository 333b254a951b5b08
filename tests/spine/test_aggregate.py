"""Aggregation specs against numpy/scipy on hand-made samples."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from marketcast.errors import ConfigError
from marketcast.forecast import Forecast
from marketcast.forecast.aggregate import aggregate, validate_spec

# 10 samples x 2 horizon steps; step 0 is 1..10, step 1 has an outlier.
SAMPLES = np.stack([np.arange(1.0, 11.0), np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 100.0])], axis=-1)


def test_mean_and_median_by_hand():
    np.testing.assert_allclose(aggregate(SAMPLES, "mean"), [5.5, 14.5])
    np.testing.assert_allclose(aggregate(SAMPLES, "median"), [5.5, 5.5])


def test_percentiles_and_quantiles():
    np.testing.assert_allclose(aggregate(SAMPLES, "p10"), np.quantile(SAMPLES, 0.1, axis=0))
    np.testing.assert_allclose(aggregate(SAMPLES, "p90"), [9.1, 18.1])
    np.testing.assert_allclose(aggregate(SAMPLES, "quantile_0.25"), np.quantile(SAMPLES, 0.25, axis=0))
    np.testing.assert_allclose(aggregate(SAMPLES, "quantile_25"), aggregate(SAMPLES, "quantile_0.25"))


def test_trimmed_mean_drops_each_tail():
    # 10 % of 10 samples = 1 per tail: step 1 drops 1 and 100 -> mean(2..9) = 5.5
    np.testing.assert_allclose(aggregate(SAMPLES, "trimmed_mean_10"), [5.5, 5.5])
    np.testing.assert_allclose(aggregate(SAMPLES, "trimmed_mean_20"), stats.trim_mean(SAMPLES, 0.2, axis=0))
    np.testing.assert_allclose(aggregate(SAMPLES, "trimmed_mean_0.2"), aggregate(SAMPLES, "trimmed_mean_20"))


def test_one_sided_trims():
    # lower_trimmed_mean drops the top tail, upper_trimmed_mean the bottom tail
    np.testing.assert_allclose(aggregate(SAMPLES, "lower_trimmed_mean_10"), [5.0, 5.0])
    np.testing.assert_allclose(aggregate(SAMPLES, "upper_trimmed_mean_10"), [6.0, (44 + 100) / 9])


def test_std_combinations_use_ddof_1():
    mean, std = SAMPLES.mean(axis=0), SAMPLES.std(axis=0, ddof=1)
    np.testing.assert_allclose(aggregate(SAMPLES, "mean_minus_std_1.5"), mean - 1.5 * std)
    np.testing.assert_allclose(aggregate(SAMPLES, "mean_plus_std_2"), mean + 2 * std)
    q30 = np.quantile(SAMPLES, 0.3, axis=0)
    np.testing.assert_allclose(aggregate(SAMPLES, "mean_quantile_mix_0.3_0.25"), 0.25 * mean + 0.75 * q30)
    np.testing.assert_allclose(aggregate(SAMPLES, "quantile_plus_std_0.3_0.5"), q30 + 0.5 * std)


@pytest.mark.parametrize("spec", ["avg", "trimmed_mean_60", "quantile_1.5x", "p200", "mean_quantile_mix_0.5_2"])
def test_bad_specs_are_clear_errors(spec):
    with pytest.raises(ConfigError, match="spec|must lie"):
        validate_spec(spec)


def test_forecast_helpers_reduce_the_sample_axis():
    samples = np.broadcast_to(SAMPLES[None, None], (3, 2, 10, 2)).copy()  # [B, fields, S, H]
    fc = Forecast(samples=samples, fields=("close", "high"))
    assert fc.quantile(0.5, "high").shape == (3, 2)
    np.testing.assert_allclose(fc.aggregate("trimmed_mean_10", "close")[1], [5.5, 5.5])
    with pytest.raises(KeyError):
        fc.field("low")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=5, max_size=60), st.integers(0, 45))
def test_trimmed_mean_matches_scipy(values, pct):
    x = np.asarray(values)[:, None]
    expected = stats.trim_mean(x, pct / 100, axis=0)
    if int(len(values) * pct / 100) * 2 >= len(values):
        return
    spec = f"trimmed_mean_{pct}" if pct >= 1 else "mean"
    np.testing.assert_allclose(aggregate(x, spec), expected, rtol=1e-9, atol=1e-6)
