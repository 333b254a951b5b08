"""Sample paths at or below zero are floored at 0.1 % of close_t and counted; non-finite ones are an error
naming the symbol and window. A random-weights Toto, whose paths cross zero, backtests to the end."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from marketcast.backtest import BacktestConfig
from marketcast.backtest.engine import run_many
from marketcast.backtest.report import symbol_json
from marketcast.data import load_symbol
from marketcast.errors import ForecastError, ForecastWarning
from marketcast.forecast.base import Forecast
from marketcast.forecast.floor import FLOOR_FRACTION, floor_paths
from marketcast.forecast.toto import TotoConfig, TotoForecaster

ENDS = pd.DatetimeIndex(["2018-12-27", "2018-12-28"], tz="UTC")


def _forecast() -> Forecast:
    """Two windows (close_t 100 and 50), three samples, two steps of close/high/low."""
    s = np.empty((2, 3, 3, 2))
    s[0, :, 0] = [[-5.0, 120.0], [130.0, 125.0], [-10.0, 110.0]]  # path 0 of window 0 crosses zero
    s[0, :, 1] = [[101.0, 102.0], [103.0, 104.0], [99.0, 100.0]]
    s[0, :, 2] = [[0.0, 101.0], [1.0, 102.0], [0.0, 100.0]]  # path 2 touches zero
    s[1, :, 0] = [[51.0, 52.0], [53.0, 54.0], [49.0, 50.0]]
    s[1, :, 1] = [[50.0, 50.0], [51.0, 50.0], [0.04, 49.0]]  # path 1: a low of 0.04 < 0.05 = 0.1 % of 50
    s[1, :, 2] = [[48.0, 49.0], [49.0, 50.0], [47.0, 48.0]]
    return Forecast(s, ("close", "high", "low"), {"model": "test"})


def test_paths_below_the_floor_are_floored_and_counted():
    with pytest.warns(ForecastWarning, match=r"test: 3 of 6 SP500 sample paths went below 0.1% .* window ending "
                                             r"2018-12-27"):
        out = floor_paths(_forecast(), np.array([100.0, 50.0]), ENDS, "SP500")
    assert FLOOR_FRACTION == 1e-3
    assert out.meta == {"model": "test", "floored_paths": 3, "paths": 6, "floor_fraction": 1e-3}
    np.testing.assert_array_equal(out.samples[0, :, 0], [[0.1, 120.0], [130.0, 125.0], [0.1, 110.0]])
    np.testing.assert_array_equal(out.samples[0, 0, 2], [0.1, 101.0])
    np.testing.assert_array_equal(out.samples[1, 2, 1], [0.05, 49.0])
    untouched = _forecast().samples
    mask = np.ones_like(untouched, dtype=bool)
    mask[0, 0, 0, 0] = mask[0, 2, 0, 0] = mask[0, 0, 2, 0] = mask[0, 2, 2, 0] = mask[1, 2, 1, 0] = False
    np.testing.assert_array_equal(out.samples[mask], untouched[mask])


def test_positive_paths_pass_unchanged_without_a_warning(recwarn):
    fc = _forecast()
    fc.samples[...] = np.abs(fc.samples) + 1.0
    out = floor_paths(fc, np.array([100.0, 50.0]), ENDS, "SP500")
    np.testing.assert_array_equal(out.samples, fc.samples)
    assert out.meta["floored_paths"] == 0 and not recwarn.list


def test_a_non_finite_sample_names_symbol_and_window():
    fc = _forecast()
    fc.samples[1, 0, 2, 1] = np.nan
    with pytest.raises(ForecastError) as info:
        floor_paths(fc, np.array([100.0, 50.0]), ENDS, "NASDAQ")
    assert str(info.value).startswith("test returned 1 non-finite sample values (of 18) for the NASDAQ window "
                                      "ending 2018-12-28; its forecast cannot be used")


def test_random_weights_toto_backtests_to_the_end_with_floored_paths():
    """The tiny Toto reproduces what the base model does with random weights: samples at or below zero."""
    bars = load_symbol("SP500")
    forecaster = TotoForecaster.from_config(TotoConfig.tiny(), seed=0)
    with pytest.warns(ForecastWarning, match="SP500 sample paths went below"):
        (result,) = run_many([bars], forecaster, BacktestConfig(windows=70, num_samples=256, seed=0))
    meta = symbol_json(result)["forecast_meta"]
    assert meta["paths"] == 71 * 256 and 0 < meta["floored_paths"] < meta["paths"]
    assert meta["floor_fraction"] == 1e-3 and result.windows == 70
    assert all(np.isfinite(r.returns).all() for r in result.strategies.values())
