"""TotoForecaster end to end on embedded SP500 windows: shapes, prices, seeds, bf16, registry, OOM policy."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from marketcast.errors import ConfigError
from marketcast.forecast.base import Forecast, make_batch
from marketcast.forecast.registry import load_forecaster
from marketcast.forecast.toto import TotoForecaster, create
from marketcast.forecast.toto.config import TotoConfig
from tests.toto.conftest import windows

META_KEYS = {"model", "num_samples_used", "samples_per_batch_used", "compile_mode", "compiled", "fallback_reason"}


@pytest.fixture(scope="module")
def eager(tiny_model) -> TotoForecaster:
    return TotoForecaster(tiny_model, compile="eager", samples_per_batch=64)


@pytest.mark.parametrize("horizon", [1, 20, 64, 100, 130])
def test_shapes_and_prices(eager, sp500, horizon):
    batch = windows(sp500, 3, 150, horizon)
    out = eager.forecast(batch, horizon, 40, seed=5)
    assert isinstance(out, Forecast) and out.fields == ("close", "high", "low")
    assert out.samples.shape == (3, 3, 40, horizon)
    assert np.isfinite(out.samples).all()
    # random weights give heavy Student-T tails, so only the bulk of the paths is required to be a price
    assert (np.quantile(out.samples, 0.05, axis=2) > 0).all()
    assert META_KEYS <= set(out.meta) and out.meta["num_samples_used"] == 40
    assert out.meta["compiled"] is False and out.meta["compile_mode"] is None
    assert out.meta["decode_steps"] == (horizon - 1) // 64
    # random weights, but the scaler keeps samples at the price level of the context
    median = np.median(out.samples[:, 0], axis=1)[:, 0]
    assert np.all(np.abs(np.log(median / batch.last_close())) < 1.0)


def test_seeded_reproducible_and_batch_independent(eager, sp500):
    batch = windows(sp500, 3, 150, 100)
    a = eager.forecast(batch, 100, 48, seed=7).samples
    assert np.array_equal(a, eager.forecast(batch, 100, 48, seed=7).samples)
    assert not np.array_equal(a, eager.forecast(batch, 100, 48, seed=8).samples)
    # the first window alone (a different bucket and sample chunking) draws the same paths
    alone = TotoForecaster(eager.model, compile="eager", samples_per_batch=16).forecast(
        windows(sp500, 1, 150, 100), 100, 48, seed=7).samples
    np.testing.assert_allclose(alone[0], a[0], rtol=1e-4)


@pytest.mark.parametrize("horizon", [8, 100])
def test_a_windows_paths_do_not_depend_on_the_batch(tiny_model, sp500, horizon):
    """Streams are keyed by each window's last timestamp: a window alone, at another position, next to other
    windows, or in prefill chunks / decode groups of one window (tiny memory budget, 8 paths per decode call)
    gets the same paths up to float rounding of the batched matrix multiplies."""
    ends = [1000, 1400, 1900, 2600, 3100]
    batch = windows(sp500, 1, 150, horizon)
    together = TotoForecaster(tiny_model, compile="eager").forecast(
        make_batch(sp500, ends, 150, horizon), horizon, 24, seed=3).samples
    reordered = TotoForecaster(tiny_model, compile="eager").forecast(
        make_batch(sp500, ends[::-1], 150, horizon), horizon, 24, seed=3).samples
    small = TotoForecaster(tiny_model, compile="eager", memory_budget=1, samples_per_batch=8)
    chunked = small.forecast(make_batch(sp500, ends, 150, horizon), horizon, 24, seed=3)
    assert chunked.meta["prefill_windows"] == 1 and chunked.meta["decode_windows"] == 1
    alone = small.forecast(make_batch(sp500, ends[2:3], 150, horizon), horizon, 24, seed=3).samples
    np.testing.assert_allclose(reordered[::-1], together, rtol=1e-5)
    np.testing.assert_allclose(chunked.samples, together, rtol=1e-5)
    np.testing.assert_allclose(alone[0], together[2], rtol=1e-5)
    assert batch.batch_size == 1 and not np.allclose(together[0], together[1], rtol=0.01)  # windows differ


def test_left_padded_window(eager, sp500):
    """A window starting before the first bar is masked like toto-ts's padding (finite, positive)."""
    from marketcast.forecast.base import make_batch

    batch = make_batch(sp500, [30, 31], 200, 70)
    assert not batch.mask[:, 0].any()
    out = eager.forecast(batch, 70, 16)
    assert np.isfinite(out.samples).all() and (np.median(out.samples, axis=2) > 0).all()


def test_bf16_close_to_fp32(tiny_model, sp500):
    batch = windows(sp500, 2, 256, 80)
    fp32 = TotoForecaster(tiny_model, compile="eager").forecast(batch, 80, 256, seed=1)
    bf16 = TotoForecaster(copy.deepcopy(tiny_model), dtype="bfloat16", compile="eager").forecast(batch, 80, 256, seed=1)
    assert bf16.meta["dtype"] == "bfloat16" and np.isfinite(bf16.samples).all()
    m32, m16 = np.median(fp32.samples, axis=2), np.median(bf16.samples, axis=2)
    assert np.median(np.abs(m16 / m32 - 1)) < 0.01


def test_registry_random_weights_warn(monkeypatch):
    monkeypatch.setattr(TotoConfig, "base", classmethod(lambda cls: TotoConfig.tiny()))
    with pytest.warns(UserWarning, match="meaningless"):
        fc = load_forecaster("toto", weights="random", compile="eager", seed=2)
    assert isinstance(fc, TotoForecaster) and fc.steps.mode is None


def test_compile_setting_comes_from_settings(monkeypatch, tiny_model):
    monkeypatch.setenv("TOTO_DISABLE_COMPILE", "1")
    monkeypatch.setattr(TotoConfig, "base", classmethod(lambda cls: TotoConfig.tiny()))
    with pytest.warns(UserWarning):
        assert create(weights="random", compile=None).steps.mode is None
    monkeypatch.setenv("TOTO_DISABLE_COMPILE", "0")
    monkeypatch.setenv("TOTO_COMPILE", "1")
    monkeypatch.setenv("TOTO_COMPILE_MODE", "max-autotune-no-cudagraphs")
    with pytest.warns(UserWarning):
        assert create(weights="random", compile=None).steps.mode == "max-autotune-no-cudagraphs"


def test_compile_backend_comes_from_settings(monkeypatch, sp500):
    """TOTO_COMPILE_BACKEND reaches every compiled step (aot_eager: same numbers as eager); an unknown backend
    is one clear error before anything runs. On CPU the default reduce-overhead mode runs as default."""
    monkeypatch.setenv("TOTO_COMPILE", "1")
    monkeypatch.setenv("TOTO_COMPILE_BACKEND", "aot_eager")
    monkeypatch.setattr(TotoConfig, "base", classmethod(lambda cls: TotoConfig.tiny()))
    with pytest.warns(UserWarning):
        fc = create(weights="random", compile=None, seed=1)
    with pytest.warns(UserWarning):
        eager = create(weights="random", compile="eager", seed=1)
    batch = windows(sp500, 2, 100, 70)
    out = fc.forecast(batch, 70, 16, seed=0)
    assert out.meta["compile_mode"] == "default" and out.meta["compile_backend"] == "aot_eager"
    assert out.meta["compiled"] is True
    assert {g.backend for g in fc.compile_guards()} == {"aot_eager"} and len(fc.compile_guards()) == 2
    np.testing.assert_allclose(out.samples, eager.forecast(batch, 70, 16, seed=0).samples, rtol=1e-5)
    monkeypatch.setenv("TOTO_COMPILE_BACKEND", "turbo")
    with pytest.warns(UserWarning), pytest.raises(ConfigError, match="backend 'turbo'.*unknown; use one of"):
        create(weights="random", compile=None)


def test_bad_dtype_and_device(tiny_model):
    with pytest.raises(ConfigError, match="dtype"):
        TotoForecaster(tiny_model, dtype="float16")
    with pytest.raises(ConfigError, match="device"):
        TotoForecaster(tiny_model, device="tpu:7")


def test_oom_halves_the_budget_then_the_samples(tiny_model, sp500, monkeypatch, caplog):
    """The retry policy, driven by a real OutOfMemoryError raised for decode calls above 32 paths: the
    budget halves until the decode group fits, the forecast completes with every sample."""
    fc = TotoForecaster(tiny_model, compile="eager", memory_budget=1 << 30)
    real = fc._sample

    def limited(x, mask, streams, horizon, plan):
        if plan.per * plan.group > 32:
            raise torch.OutOfMemoryError("simulated device memory limit")
        return real(x, mask, streams, horizon, plan)

    monkeypatch.setattr(fc, "_sample", limited)
    with caplog.at_level("WARNING", logger="marketcast.toto"):
        out = fc.forecast(windows(sp500, 2, 100, 70), 70, 200)
    assert out.meta["samples_per_batch_used"] * out.meta["decode_windows"] <= 32
    assert out.meta["num_samples_used"] == 200 and out.samples.shape == (2, 3, 200, 70)
    assert "out of memory, retrying" in caplog.text

    def always(x, mask, streams, horizon, plan):
        raise torch.OutOfMemoryError("simulated: nothing fits")

    monkeypatch.setattr(fc, "_sample", always)
    caplog.clear()
    with caplog.at_level("WARNING", logger="marketcast.toto"), pytest.raises(torch.OutOfMemoryError):
        fc.forecast(windows(sp500, 2, 100, 70), 70, 200)
    assert "num_samples=100" in caplog.text and "num_samples=50" in caplog.text  # then below the 32 floor: raise
