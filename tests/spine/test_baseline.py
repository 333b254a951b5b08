"""The baseline forecaster: shapes, determinism by seed, consistent bars, no look-ahead."""

from __future__ import annotations

import numpy as np
import pytest

from marketcast.errors import ConfigError
from marketcast.forecast import Forecaster, load_forecaster, make_batch
from marketcast.forecast.baseline import BaselineForecaster
from tests.conftest import make_ohlcv


@pytest.fixture
def frame():
    return make_ohlcv(300, seed=3)


def test_protocol_and_shapes(frame):
    model = load_forecaster("baseline")
    assert isinstance(model, Forecaster)
    batch = make_batch(frame, [100, 200, 299], context=64, horizon=5)
    fc = model.forecast(batch, horizon=5, num_samples=128, seed=1)
    assert fc.samples.shape == (3, 4, 128, 5)
    assert fc.fields == ("close", "high", "low", "open")
    assert fc.meta["num_samples_used"] == 128


def test_same_seed_same_paths_other_seed_other_paths(frame):
    model = BaselineForecaster()
    batch = make_batch(frame, [150, 299], context=128, horizon=3)
    a = model.forecast(batch, 3, 64, seed=7).samples
    b = model.forecast(batch, 3, 64, seed=7).samples
    c = model.forecast(batch, 3, 64, seed=8).samples
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_paths_are_consistent_bars(frame):
    fc = BaselineForecaster().forecast(make_batch(frame, [299], 200, 10), 10, 256, seed=0)
    close, high, low, open_ = (fc.field(n) for n in ("close", "high", "low", "open"))
    assert (high >= np.maximum(open_, close) * (1 - 1e-12)).all()
    assert (low <= np.minimum(open_, close) * (1 + 1e-12)).all()


def test_one_step_without_vol_scaling_replays_history_exactly(frame):
    """With a flat volatility filter every 1-step sample is a real past bar scaled to today's close."""
    model = BaselineForecaster(lookback=20, max_vol_ratio=1.0)
    batch = make_batch(frame, [299], 100, 1)
    fc = model.forecast(batch, 1, 500, seed=0)
    hist = frame.iloc[200:300]
    moves = np.log(hist["close"].to_numpy()[1:] / hist["close"].to_numpy()[:-1])[-20:]
    got = np.log(fc.field("close")[0, :, 0] / hist["close"].iloc[-1])
    assert np.isin(np.round(got, 12), np.round(moves, 12)).all()
    assert len(np.unique(np.round(got, 12))) > 15  # the draws cover most of the 20 bars


def test_a_window_forecast_does_not_depend_on_its_batch_company(frame):
    """The live loop forecasts one window where the backtest forecasts seventy: same paths for day t."""
    model = BaselineForecaster()
    together = model.forecast(make_batch(frame, [120, 200, 299], 100, 2), 2, 32, seed=3)
    alone = model.forecast(make_batch(frame, [200], 100, 2), 2, 32, seed=3)
    np.testing.assert_array_equal(together.samples[1], alone.samples[0])


def test_future_bars_do_not_change_the_forecast(frame):
    perturbed = frame.copy()
    perturbed.iloc[201:, :4] *= 3.0
    batch_a = make_batch(frame, [150, 200], 128, 4)
    batch_b = make_batch(perturbed, [150, 200], 128, 4)
    a = BaselineForecaster().forecast(batch_a, 4, 64, seed=1).samples
    b = BaselineForecaster().forecast(batch_b, 4, 64, seed=1).samples
    np.testing.assert_array_equal(a, b)


def test_padded_short_window(frame):
    batch = make_batch(frame, [9], context=64, horizon=1)
    assert batch.mask.sum() == 10 and not batch.mask[0, 0]
    fc = BaselineForecaster().forecast(batch, 1, 100, seed=0)
    assert np.isfinite(fc.samples).all()


def test_too_short_window_is_a_clear_error(frame):
    with pytest.raises(ConfigError, match="at least 3 real bars"):
        BaselineForecaster().forecast(make_batch(frame, [1], 16, 1), 1, 10)


def test_baseline_has_no_weights():
    with pytest.raises(ConfigError, match="no weights"):
        load_forecaster("baseline", weights="random")


def test_warmup_runs_one_forecast_of_the_announced_shapes(monkeypatch):
    model, seen = BaselineForecaster(), []
    real = model.forecast
    monkeypatch.setattr(model, "forecast", lambda batch, h, s, seed=0: seen.append(
        (batch.values.shape, h, s)) or real(batch, h, s, seed))
    seconds = model.warmup(context=40, horizon=3, num_samples=16, batch_size=5)
    assert seen == [((5, 40, 5), 3, 16)] and seconds > 0
    with pytest.raises(ConfigError, match="batch_size >= 1"):
        model.warmup(context=40, horizon=3, num_samples=16, batch_size=0)
