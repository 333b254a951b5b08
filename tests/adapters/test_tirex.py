"""The TiRex adapter against the package itself: on a tiny random-init TiRexZero, our batched, NaN-padded call
gives what the package's own ``forecast`` gives series by series; masked bars never matter; a window's paths do
not depend on its batch; it runs on CPU through the pure-torch sLSTM; a saved checkpoint loads through the
package; bad weights are one line and exit 2; the CLI backtests it on the embedded bars."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

pytest.importorskip("tirex", reason="the tirex extra: pip install 'marketcast[tirex]'")

from marketcast.commands import main  # noqa: E402
from marketcast.errors import ModelLoadError  # noqa: E402
from marketcast.forecast.adapters import tirex as adapter  # noqa: E402
from marketcast.forecast.base import make_batch  # noqa: E402

from .helpers import assert_mask_unread  # noqa: E402
from tests.conftest import make_ohlcv  # noqa: E402

FIELDS = ("close", "high", "low")
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def model():
    return adapter.random_model(CPU, seed=3)


@pytest.fixture(scope="module")
def forecaster(model):
    return adapter.TiRexForecaster(model, chunk=4, source="random(seed=3)")  # 4 series per package batch


@pytest.fixture(scope="module")
def frame():
    return make_ohlcv(200, seed=5)


def _reference(model, series: np.ndarray, horizon: int) -> np.ndarray:
    """``[9, H]``: the package's own forecast of one series' real bars (no padding), as a user would call it."""
    q, _ = model.forecast(torch.tensor(series), prediction_length=horizon)  # [1, H, 9]
    return q[0].T.double().numpy()


def test_batched_padded_call_equals_the_package_series_by_series(model, forecaster, frame):
    """Four windows of 48 bars, 12 series in batches of four; the first two windows start before bar 0 (left
    padding, masked). A 40-step horizon needs two 32-step patches, so the package's roll-out runs too."""
    ends, context, horizon = [10, 30, 120, 199], 48, 40
    batch = make_batch(frame, ends, context)
    raw = forecaster.raw_quantiles(batch, horizon)
    assert raw.shape == (4, 3, 9, horizon)
    worst = 0.0
    for i, end in enumerate(ends):
        bars = frame.iloc[max(0, end - context + 1):end + 1]
        for j, name in enumerate(FIELDS):
            ref = _reference(model, bars[name].to_numpy(), horizon)
            np.testing.assert_allclose(raw[i, j], ref, rtol=1e-5, atol=1e-4)
            worst = max(worst, float(np.abs(raw[i, j] - ref).max()))
    print(f"tirex batched vs package per series: max abs error {worst:.2e}")
    q = forecaster.quantiles(batch, horizon)
    assert np.array_equal(q, np.sort(raw, axis=2)) and (np.diff(q, axis=2) >= 0).all()
    assert 0.0 < forecaster.crossings < 1.0  # a random head crosses; the sort fixed it


def test_values_under_the_mask_are_never_read(forecaster, frame):
    assert_mask_unread(forecaster, frame)


def test_forecast_shapes_monotone_quantiles_and_paths_keyed_on_windows(forecaster, frame):
    ends = [60, 61, 90, 150]
    batch = make_batch(frame, ends, 40)
    fc = forecaster.forecast(batch, horizon=6, num_samples=32, seed=11)
    assert fc.samples.shape == (4, 3, 32, 6) and fc.quantiles.shape == (4, 3, 9, 6)
    assert fc.fields == FIELDS and fc.quantile_levels == (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    assert (np.diff(fc.quantiles, axis=2) >= 0).all() and np.isfinite(fc.samples).all()
    meta = fc.meta
    assert meta["model"] == "tirex" and meta["compiled"] is False and meta["device"] == "cpu"
    assert meta["slstm_backend"] == "torch" and meta["context_used"] == 40
    # every sample lies on the interpolated distribution: inside [q0.1, q0.9] for about 80% of the draws
    inside = (fc.samples >= fc.quantiles[:, :, :1]) & (fc.samples <= fc.quantiles[:, :, -1:])
    assert 0.6 < inside.mean() < 0.95
    # window 90 alone gives the paths it got in the batch; the same seed the same paths, another seed others
    alone = forecaster.forecast(make_batch(frame, [90], 40), horizon=6, num_samples=32, seed=11)
    np.testing.assert_allclose(alone.samples[0], fc.samples[2], rtol=1e-6)
    again = forecaster.forecast(batch, horizon=6, num_samples=32, seed=11)
    assert np.array_equal(again.samples, fc.samples)
    other = forecaster.forecast(batch, horizon=6, num_samples=32, seed=12)
    assert not np.allclose(other.samples, fc.samples)


def test_cpu_runs_the_pure_torch_slstm_and_random_weights_are_seeded(model, frame):
    """No CUDA kernel anywhere on CPU; every parameter drawn (the package leaves its sLSTM kernels
    uninitialised), reproducibly from the seed."""
    assert adapter.backend_for(CPU) == "torch"
    assert all(block.slstm_layer.slstm_cell.backend == "torch" for block in model.blocks)
    assert len(model.blocks) == 2 and model.config.train_ctx_len == adapter.RANDOM_CONTEXT
    same, other = adapter.random_model(CPU, seed=3), adapter.random_model(CPU, seed=4)
    for (name, p), q, r in zip(model.named_parameters(), same.parameters(), other.parameters()):
        assert torch.isfinite(p).all() and p.abs().max() > 0, name
        assert torch.equal(p, q) and not torch.equal(p, r), name
    batch = make_batch(frame, [150, 199], 600)  # longer than the 512-step training context: the last 512 bars
    longer = adapter.TiRexForecaster(model).forecast(batch, horizon=3, num_samples=4)
    assert longer.meta["context_used"] == 512


def test_bfloat16_stays_near_float32(model, frame):
    batch = make_batch(frame, [100, 199], 64)
    f32 = adapter.TiRexForecaster(model).quantiles(batch, 8)
    b16 = adapter.TiRexForecaster(model, dtype="bfloat16").quantiles(batch, 8)
    scale = frame["close"].iloc[-64:].std()
    err = np.abs(b16 - f32).max() / scale
    print(f"tirex bf16 vs fp32: max abs error {err:.4f} context std")
    assert 0 < err < 0.1


def test_a_saved_checkpoint_loads_through_the_package_and_forecasts_the_same(model, frame, tmp_path):
    """A Lightning checkpoint as NX-AI/TiRex ships it (hyper_parameters + state_dict, the old "block_stack."
    prefix the package renames on load), in a folder and as the file itself."""
    state = {k.replace("blocks.", "block_stack.blocks.", 1): v for k, v in model.state_dict().items()}
    (tmp_path / "w").mkdir()
    torch.save({"hyper_parameters": {"model_config": adapter.RANDOM_CONFIG, "train_ctx_len": adapter.RANDOM_CONTEXT},
                "state_dict": state}, tmp_path / "w" / "model.ckpt")
    with pytest.warns(UserWarning, match="randomly initialised tiny TiRex"):
        rand = adapter.create(weights="random", seed=3)
    assert rand.source == "random:tiny(seed=3)"
    batch = make_batch(frame, [120], 32)
    want = rand.raw_quantiles(batch, 5)
    for weights in (tmp_path / "w", tmp_path / "w" / "model.ckpt"):
        loaded = adapter.create(weights=str(weights))
        assert loaded.source == str(tmp_path / "w" / "model.ckpt")
        np.testing.assert_array_equal(loaded.raw_quantiles(batch, 5), want)


def _env() -> dict:
    return {**os.environ, "PYTHONWARNINGS": "ignore", "HF_HUB_OFFLINE": "1"}


def test_bad_weights_are_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match=r"the folder has no model\.ckpt") as info:
        adapter.create(weights=str(tmp_path / "empty"))
    assert "\n" not in str(info.value)
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "model.ckpt").write_bytes(b"not a checkpoint")
    with pytest.raises(ModelLoadError, match=r"not a TiRex checkpoint") as info:
        adapter.create(weights=str(tmp_path / "junk"))
    assert "\n" not in str(info.value)
    with monkeypatch.context() as patch:  # offline: the HF cache only, never the network
        patch.setattr(adapter, "offline", lambda: True)
        with pytest.raises(ModelLoadError, match=r"no folder 'NX-AI/TiRex-nope' here .*, and no hub repo 'NX-AI/TiRex-nope' in the Hugging Face "
                                                      r"cache \(offline.*\); run `hf download "
                                                      r"NX-AI/TiRex-nope model\.ckpt`.* holding model\.ckpt$") as info:
            adapter.checkpoint_path("NX-AI/TiRex-nope")
    assert "\n" not in str(info.value)
    # `marketcast models download tirex` fetches the one file TiRex ships, and says so when it cannot
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["models", "download", "tirex"]) == 2
    assert "`hf download NX-AI/TiRex model.ckpt`" in capsys.readouterr().err
    proc = subprocess.run([sys.executable, "-m", "marketcast.commands", "backtest", "SP500", "--model", "tirex",
                           "--weights", str(tmp_path / "junk"), "--windows", "2"],
                          capture_output=True, text=True, cwd=tmp_path, env=_env())
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "not a TiRex checkpoint" in proc.stderr


def test_the_cli_backtests_tirex_on_the_embedded_bars(tmp_path, capsys):
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["backtest", "--model", "tirex", "--weights", "random", "--windows", "3", "--samples", "32",
                     "--output-dir", str(tmp_path), "--json"]) == 0
    docs = json.loads(capsys.readouterr().out)
    assert [d["symbol"] for d in docs] == ["SP500", "NASDAQ"]
    for doc in docs:
        assert doc["runs"] == 3 and doc["config"]["model"] == "tirex"
        meta = doc["forecast_meta"]
        assert meta["source"] == "random:tiny(seed=0)" and meta["slstm_backend"] == "torch"
        assert np.isfinite(doc["metrics"]["crps"]) and doc["metrics"]["crps"] > 0
