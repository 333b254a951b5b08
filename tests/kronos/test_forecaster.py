"""End to end on the embedded SP500 bars: Forecast shape, finite positive prices, seeded reproducibility,
predict_series against upstream's KronosPredictor, the registry entry."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from marketcast.errors import ConfigError
from marketcast.forecast import load_forecaster, make_batch
from marketcast.forecast.kronos import KronosForecaster


@pytest.fixture(scope="module")
def forecaster(tiny_model, tiny_tokenizer):
    return KronosForecaster(tiny_model, tiny_tokenizer, mode=None)


def test_forecast_shape_positive_reproducible(forecaster, sp500):
    batch = make_batch(sp500, [len(sp500) - 1, len(sp500) - 30, 20], context=28, horizon=6)  # the last one padded
    out = forecaster.forecast(batch, 6, 5, seed=7)
    assert out.samples.shape == (3, 4, 5, 6) and out.fields == ("close", "high", "low", "open")
    assert np.isfinite(out.samples).all() and (out.samples > 0).all()
    np.testing.assert_array_equal(out.samples, forecaster.forecast(batch, 6, 5, seed=7).samples)
    assert not np.array_equal(out.samples, forecaster.forecast(batch, 6, 5, seed=8).samples)
    assert out.meta["model"] == "kronos" and out.meta["num_samples_used"] == 5
    assert out.meta["samples_per_batch_used"] == 4 * 8 and out.meta["compiled"] is False  # 4 windows x 8 paths
    assert out.meta["fallback_reason"] is None and out.meta["compile_mode"] is None
    # prices stay near the window's level (the de-normalisation uses each window's own statistics)
    last = batch.last_close()
    assert (np.abs(np.log(out.field("close")[:, :, 0] / last[:, None])) < 1.0).all()


@pytest.mark.parametrize("horizon", [1, 3])
def test_a_windows_paths_do_not_depend_on_the_batch(forecaster, sp500, horizon):
    """Random streams are keyed by each window's last timestamp: the same window alone, first or last in a
    batch, or cut into chunks of one window by a tiny memory budget, gets the same paths (horizon 1 is the
    one-graph path: prefill, draw and de-tokenizing together)."""
    ends = [len(sp500) - 1, len(sp500) - 30, len(sp500) - 60]
    batch = make_batch(sp500, ends, context=28, horizon=horizon)
    together = forecaster.forecast(batch, horizon, 6, seed=4).samples
    alone = forecaster.forecast(make_batch(sp500, ends[1:2], context=28, horizon=horizon), horizon, 6, seed=4).samples
    reversed_ = forecaster.forecast(make_batch(sp500, ends[::-1], context=28, horizon=horizon), horizon, 6,
                                    seed=4).samples
    np.testing.assert_allclose(alone[0], together[1], rtol=1e-6)
    np.testing.assert_allclose(reversed_[::-1], together, rtol=1e-6)
    small = KronosForecaster(forecaster.decoder.model, forecaster.decoder.tokenizer, memory_budget=1)
    chunked = small.forecast(batch, horizon, 6, seed=4)
    assert chunked.meta["samples_per_batch_used"] == 8  # one window of 8 paths per chunk
    np.testing.assert_allclose(chunked.samples, together, rtol=1e-6)
    assert not np.allclose(together[0], together[1], rtol=1e-3)  # the windows' paths differ


def test_horizon_beyond_max_context_is_one_clear_error(forecaster, sp500):
    with pytest.raises(ConfigError, match="horizon 40 exceeds its max_context 32"):
        forecaster.forecast(make_batch(sp500, [len(sp500) - 1], context=28, horizon=40), 40, 2)


def test_short_horizons_never_re_prefill(forecaster, sp500):
    """A full 32-bar window (the tiny max_context) with horizon 4 keeps 29 bars and decodes from the cache;
    horizon 6 (more than an eighth of the window) keeps all 32 bars and re-prefills the last 5 steps."""
    batch = make_batch(sp500, [len(sp500) - 1], context=40, horizon=6)
    short = forecaster.forecast(batch, 4, 2, seed=0)
    assert (short.meta["lookback_used"], short.meta["re_prefills"]) == (29, 0)
    long = forecaster.forecast(batch, 6, 2, seed=0)
    assert (long.meta["lookback_used"], long.meta["re_prefills"]) == (32, 5)


def test_predict_series_matches_upstream_predictor(forecaster, tiny_model, tiny_tokenizer, sp500):
    """Greedy (top_k=1): our sample path equals upstream KronosPredictor.predict's mean path."""
    from kronos_finance._vendor.kronos_model import KronosPredictor

    from tests.kronos.conftest import upstream_pair

    df = sp500.iloc[-40:].copy()
    df.index = df.index.tz_localize(None)
    res = forecaster.predict_series(df, ("open", "close", "volume"), pred_len=6, lookback=24, top_k=1, sample_count=3)
    assert res.absolute.shape == (3, 6, 3) and res.percent.shape == (3, 6, 3)
    np.testing.assert_allclose(res.percent, res.absolute / df[["open", "close", "volume"]].to_numpy()[-1] - 1)
    ref_model, ref_tok = upstream_pair(tiny_model, tiny_tokenizer)
    predictor = KronosPredictor(ref_model, ref_tok, device="cpu", max_context=32)
    hist = df.iloc[-24:]
    ref = predictor.predict(hist[["open", "high", "low", "close", "volume"]].reset_index(drop=True),
                            pd.Series(hist.index), pd.Series(res.timestamps), pred_len=6, top_k=1, sample_count=1,
                            verbose=False)
    np.testing.assert_allclose(res.absolute[0], ref[["open", "close", "volume"]].to_numpy(), rtol=1e-4)
    np.testing.assert_allclose(res.mean().to_numpy(), res.absolute[0], rtol=1e-9)  # greedy: all paths equal


def test_registry_random_small(sp500, caplog):
    with caplog.at_level(logging.WARNING, logger="marketcast.kronos"):
        fc = load_forecaster("kronos", weights="random", compile="eager", seed=0)
    assert "meaningless" in caplog.text
    out = fc.forecast(make_batch(sp500, [len(sp500) - 1], context=16, horizon=2), 2, 2, seed=0)
    assert out.samples.shape == (1, 4, 2, 2) and np.isfinite(out.samples).all()
    assert out.meta["model"] == "kronos-small-random"


def test_bad_arguments(forecaster, sp500):
    with pytest.raises(ConfigError, match="compile mode|not a mode"):
        load_forecaster("kronos", weights="random", compile="fastest")
    with pytest.raises(ConfigError, match="dtype"):
        load_forecaster("kronos", weights="random", dtype="int8")
    with pytest.raises(ConfigError, match="columns"):
        forecaster.predict_series(sp500, ("close", "vwap"), pred_len=2, lookback=16)
