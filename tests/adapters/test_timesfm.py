"""The TimesFM 2.5 adapter against the package itself: on the (fixed, 200M) architecture with seeded random
weights, our batched call of every window's close/high/low gives what the package's own ``forecast`` gives series
by series on the real bars; masked bars never matter; a window's paths do not depend on its batch; a saved
checkpoint loads strictly; bad weights are one line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

timesfm_pkg = pytest.importorskip("timesfm", reason="the timesfm extra: pip install 'marketcast[timesfm]'")

from marketcast.errors import ConfigError, ModelLoadError  # noqa: E402
from marketcast.forecast.adapters import timesfm as adapter  # noqa: E402
from marketcast.forecast.base import ContextBatch, make_batch  # noqa: E402
from marketcast.forecast.copula import joint_paths  # noqa: E402
from tests.conftest import make_ohlcv  # noqa: E402

FIELDS = ("close", "high", "low")
CPU = torch.device("cpu")
# The flags the TimesFM README recommends for 2.5 (https://github.com/google-research/timesfm).
README = dict(normalize_inputs=True, use_continuous_quantile_head=True, force_flip_invariance=True,
              infer_is_positive=True, fix_quantile_crossing=True)
BF16_BOUND = 0.75  # measured 0.21-0.38 context std on random 200M weights (autocast through 20 layers)


@pytest.fixture(scope="module")
def tfm():
    model, source = adapter.load_model("random", CPU, seed=3)
    assert source == "random:200m(seed=3)"
    return model


@pytest.fixture(scope="module")
def forecaster(tfm):
    return adapter.TimesFMForecaster(tfm, chunk=4, source="random(seed=3)")  # at most 4 series per package batch


@pytest.fixture(scope="module")
def frame():
    return make_ohlcv(200, seed=5)


def _reference(tfm, series: np.ndarray, context: int, horizon: int) -> np.ndarray:
    """``[9, H]``: the package's own forecast of one series' real bars, one series per batch."""
    tfm.compile(timesfm_pkg.ForecastConfig(max_context=context, max_horizon=128, per_core_batch_size=1, **README))
    _, q = tfm.forecast(horizon, [series])  # [1, H, 10]: mean, then 0.1 .. 0.9
    return q[0, :, 1:].T.astype(np.float64)


ENDS, CONTEXT, HORIZON = (12, 199), 40, 5


@pytest.fixture(scope="module")
def case(forecaster, frame):
    """Two windows of 40 bars (64 after the package's patch rounding), 6 series in two package batches; the
    first window starts before bar 0 and has garbage under its mask (27 bars). Every 200M forward pass is
    seconds on a busy CPU, so the tests share this one forecast."""
    batch = make_batch(frame, list(ENDS), CONTEXT)
    values = np.array(batch.values)
    values[0, :27] = [1e6, 1e6, -1e6, 0.0, 0.0]
    batch = ContextBatch(values, np.array(batch.mask), np.array(batch.timestamps))
    return batch, forecaster.forecast(batch, horizon=HORIZON, num_samples=32, seed=11)


def test_batched_call_equals_the_package_series_by_series(tfm, frame, case):
    """The reference gets each series' real bars only (the garbage under the mask never reaches the model):
    every field of the padded window, and the close of the full one."""
    _, fc = case
    worst = 0.0
    for i, j in [(0, 0), (0, 1), (0, 2), (1, 0)]:
        end = ENDS[i]
        bars = frame.iloc[max(0, end - CONTEXT + 1):end + 1]
        ref = _reference(tfm, bars[FIELDS[j]].to_numpy(), 64, HORIZON)
        np.testing.assert_allclose(fc.quantiles[i, j], ref, rtol=2e-5, atol=2e-4)
        worst = max(worst, float(np.abs(fc.quantiles[i, j] - ref).max()))
    print(f"timesfm batched vs package per series: max abs error {worst:.2e}")
    assert abs(fc.quantiles[0, 0, 4, 0] - fc.quantiles[1, 0, 4, 0]) > 1e-3  # the windows differ


def test_forecast_shapes_monotone_quantiles_and_paths_keyed_on_windows(forecaster, frame, case):
    batch, fc = case
    assert fc.samples.shape == (2, 3, 32, HORIZON) and fc.quantiles.shape == (2, 3, 9, HORIZON)
    assert fc.fields == FIELDS and fc.quantile_levels == (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    assert (np.diff(fc.quantiles, axis=2) >= 0).all()  # fix_quantile_crossing
    assert np.isfinite(fc.samples).all() and (fc.quantiles >= 0).all()  # positive inputs: infer_is_positive
    meta = fc.meta
    assert meta["model"] == "timesfm" and meta["compiled"] is False and meta["max_context"] == 64
    assert meta["forecast_flags"] == README and meta["source"] == "random(seed=3)"
    # window 199 alone gets the quantiles and paths it got in the batch
    alone = forecaster.forecast(make_batch(frame, [199], CONTEXT), horizon=HORIZON, num_samples=32, seed=11)
    np.testing.assert_allclose(alone.quantiles[0], fc.quantiles[1], rtol=1e-5)
    np.testing.assert_allclose(alone.samples[0], fc.samples[1], rtol=1e-5)
    assert np.array_equal(joint_paths(fc.quantiles, adapter.NINE, batch, 11, 32)[0], fc.samples)
    assert not np.allclose(joint_paths(fc.quantiles, adapter.NINE, batch, 12, 32)[0], fc.samples)


def test_random_weights_reach_every_block_and_horizons_are_bounded(tfm, forecaster, frame):
    """The package zero-initialises its RMSNorm scales (every block would be an identity); ours draws every
    parameter, reproducibly. Horizons past the quantile head's 1,024 steps are refused in one line."""
    params = dict(tfm.model.named_parameters())
    assert sum(p.numel() for p in params.values()) == 231_289_280  # the fixed 200M architecture (+ heads)
    scale = params["stacked_xf.0.post_attn_ln.scale"]
    assert (scale > 0.8).all() and (scale < 1.2).all()
    again = adapter.fill_random(torch.nn.Linear(4, 3), seed=3).weight
    assert torch.equal(again, adapter.fill_random(torch.nn.Linear(4, 3), seed=3).weight)
    assert not torch.equal(again, adapter.fill_random(torch.nn.Linear(4, 3), seed=4).weight)
    with pytest.raises(ConfigError, match=r"at most 1024 steps .* lower --horizon"):
        forecaster.quantiles(make_batch(frame, [90], 32), 1100)


def test_bfloat16_stays_near_float32(tfm, frame, case):
    b16 = adapter.TimesFMForecaster(tfm, dtype="bfloat16").quantiles(make_batch(frame, [199], CONTEXT), HORIZON)
    scale = frame["close"].iloc[-CONTEXT:].std()
    err = np.abs(b16[0] - case[1].quantiles[1]).max() / scale
    print(f"timesfm bf16 (autocast) vs fp32: max abs error {err:.4f} context std")
    assert 0 < err < BF16_BOUND


def test_a_saved_checkpoint_loads_strictly_and_bad_weights_are_one_line(tfm, tmp_path):
    from safetensors.torch import save_file

    (tmp_path / "w").mkdir()
    path = tmp_path / "w" / "model.safetensors"
    try:  # the real architecture: a 925 MB file, removed at once
        save_file({k: v.contiguous() for k, v in tfm.model.state_dict().items()}, str(path))
        loaded = adapter.create(weights=str(tmp_path / "w"))
    finally:
        path.unlink(missing_ok=True)
    assert loaded.source == str(tmp_path / "w") and loaded.device == CPU
    mine = tfm.model.state_dict()
    assert all(torch.equal(v, mine[k]) for k, v in loaded.tfm.model.state_dict().items())
    del loaded

    (tmp_path / "other").mkdir()  # another model's file: one line naming the first missing tensor
    save_file({"encoder.weight": torch.zeros(2, 2)}, str(tmp_path / "other" / "model.safetensors"))
    with pytest.raises(ModelLoadError, match=r"missing \d+ tensor\(s\) e\.g\. '.*'; unexpected 1 e\.g\. "
                                             r"'encoder\.weight'; the file is not a TimesFM 2\.5 checkpoint") as info:
        adapter.create(weights=str(tmp_path / "other"))
    assert "\n" not in str(info.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match=r"model\.safetensors not found") as info:
        adapter.create(weights=str(tmp_path / "empty"))
    assert "\n" not in str(info.value)
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "marketcast.commands", "backtest", "SP500", "--model", "timesfm",
                           "--weights", str(tmp_path / "other"), "--windows", "2"],
                          capture_output=True, text=True, cwd=tmp_path, env=env)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "not a TimesFM 2.5 checkpoint" in proc.stderr
