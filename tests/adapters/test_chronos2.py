"""The Chronos-2 adapter against the package itself: on a tiny random-init model, our batched, NaN-padded call
gives what ``Chronos2Pipeline.predict_quantiles`` gives window by window; masked bars never matter; a window's
paths do not depend on its batch; close/high/low are forecast jointly; a missing extra, weights of another
model or a broken checkpoint is one line and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

chronos2_pkg = pytest.importorskip("chronos.chronos2", reason="the chronos extra: pip install 'marketcast[chronos]'")

from marketcast.commands import main  # noqa: E402
from marketcast.errors import ModelLoadError  # noqa: E402
from marketcast.forecast.adapters import chronos2 as adapter  # noqa: E402
from marketcast.forecast.base import ContextBatch, make_batch  # noqa: E402

from .helpers import assert_mask_unread  # noqa: E402
from tests.conftest import make_ohlcv  # noqa: E402

FIELDS = ("close", "high", "low")


@pytest.fixture(scope="module")
def model():
    return adapter.random_model(seed=3)


@pytest.fixture(scope="module")
def forecaster(model):
    return adapter.Chronos2Forecaster(model, chunk=2, source="random:tiny(seed=3)")


@pytest.fixture(scope="module")
def frame():
    return make_ohlcv(200, seed=5)


def _reference(model, window: np.ndarray, horizon: int) -> np.ndarray:
    """``[3, 21, H]``: the package's own pipeline on one window's real bars (``[3, L]``, no padding)."""
    pipeline = chronos2_pkg.Chronos2Pipeline(model=model)
    q, _ = pipeline.predict_quantiles(torch.tensor(window[None]), prediction_length=horizon,
                                      quantile_levels=list(adapter.QUANTILES))
    return q[0].permute(0, 2, 1).double().numpy()


def test_the_quantile_levels_are_the_public_checkpoints_21():
    assert len(adapter.QUANTILES) == 21 and adapter.QUANTILES[:3] == (0.01, 0.05, 0.1)
    assert adapter.QUANTILES[-3:] == (0.9, 0.95, 0.99) and adapter.QUANTILES[10] == 0.5
    assert np.allclose(np.diff(adapter.QUANTILES[2:-2]), 0.05)


def test_batched_padded_call_equals_the_pipeline_window_by_window(model, forecaster, frame):
    """Five windows of 48 bars in chunks of two; the first two start before bar 0 (left-padded, masked). The
    reference gets each window's real bars only, as a user of the package would pass them."""
    ends, context, horizon = [10, 30, 47, 120, 199], 48, 20
    batch = make_batch(frame, ends, context)
    raw = forecaster.raw_quantiles(batch, horizon)
    assert raw.shape == (5, 3, 21, horizon)
    err = 0.0
    for i, end in enumerate(ends):
        bars = frame.iloc[max(0, end - context + 1):end + 1]
        window = bars[list(FIELDS)].to_numpy().T  # [3, L]
        ref = _reference(model, window, horizon)
        err = max(err, float(np.abs(raw[i] - ref).max() / window.mean()))
    print(f"chronos2 adapter vs Chronos2Pipeline.predict_quantiles: max relative error {err:.2e}")
    assert err < 1e-6  # float32 on prices near 100: a few ulps
    q = forecaster.quantiles(batch, horizon)
    assert np.array_equal(q, np.sort(raw, axis=2)) and (np.diff(q, axis=2) >= 0).all()


def test_values_under_the_mask_are_never_read(forecaster, frame):
    assert_mask_unread(forecaster, frame)


def test_close_high_and_low_are_forecast_jointly(forecaster, frame):
    """Group attention: moving only the highs of the context moves the close forecast (a univariate close
    forecast would not see them)."""
    batch = make_batch(frame, [150], 64)
    values = np.array(batch.values)
    values[0, :, 1] = values[0, ::-1, 1]  # highs only, reversed in time (a rescale would be normalised away)
    moved = ContextBatch(values, np.array(batch.mask), np.array(batch.timestamps))
    base, shifted = forecaster.raw_quantiles(batch, 4), forecaster.raw_quantiles(moved, 4)
    assert np.abs(shifted[:, 0] - base[:, 0]).max() > 1e-6 * base[:, 0].mean()


def test_forecast_shapes_monotone_quantiles_and_paths_keyed_on_windows(forecaster, frame):
    ends = [60, 61, 90, 150]
    batch = make_batch(frame, ends, 40)
    fc = forecaster.forecast(batch, horizon=6, num_samples=32, seed=11)
    assert fc.samples.shape == (4, 3, 32, 6) and fc.quantiles.shape == (4, 3, 21, 6)
    assert fc.fields == FIELDS and fc.quantile_levels == adapter.QUANTILES
    assert (np.diff(fc.quantiles, axis=2) >= 0).all() and np.isfinite(fc.samples).all()
    assert fc.meta["model"] == "chronos2" and fc.meta["compiled"] is False and fc.meta["device"] == "cpu"
    assert 0.0 < fc.meta["quantile_crossings"] < 1.0  # random heads cross; the sort fixed them
    # each path's median over 2,000 draws sits near the 0.5 knot (samples drawn from the quantiles)
    many = forecaster.forecast(batch, horizon=6, num_samples=2000, seed=11)
    spread = fc.quantiles[:, :, -1] - fc.quantiles[:, :, 0]
    assert (np.abs(np.median(many.samples, axis=2) - fc.quantiles[:, :, 10]) <= 0.1 * spread + 1e-9).all()
    # window 90 alone gives the paths it got in the batch; the same seed the same paths, another seed others
    alone = forecaster.forecast(make_batch(frame, [90], 40), horizon=6, num_samples=32, seed=11)
    np.testing.assert_allclose(alone.samples[0], fc.samples[2], rtol=1e-6)
    again = forecaster.forecast(batch, horizon=6, num_samples=32, seed=11)
    assert np.array_equal(again.samples, fc.samples)
    other = forecaster.forecast(batch, horizon=6, num_samples=32, seed=12)
    assert not np.allclose(other.samples, fc.samples)


def test_sorting_crossed_quantiles_never_raises_the_summed_quantile_loss(forecaster, frame):
    """The rearrangement, checked on the tiny model's crossed output against the bars that followed."""
    ends, horizon = [60, 100, 140, 180], 8
    batch = make_batch(frame, ends, 48)
    raw = forecaster.raw_quantiles(batch, horizon)
    sorted_q = forecaster.quantiles(batch, horizon)
    outcome = np.stack([frame[list(FIELDS)].to_numpy()[e + 1:e + 1 + horizon].T for e in ends])  # [B, 3, H]
    levels = np.asarray(adapter.QUANTILES)[None, None, :, None]

    def loss(q):  # pinball loss summed over the 21 levels, per window, field and step
        y = outcome[:, :, None, :]
        return ((y < q).astype(float) - levels) * (q - y)

    assert (np.diff(raw, axis=2) < 0).any()  # there was something to sort
    assert (loss(sorted_q).sum(axis=2) <= loss(raw).sum(axis=2) + 1e-9).all()
    assert loss(sorted_q).sum() < loss(raw).sum()


def test_long_horizons_unroll_through_the_package(forecaster, frame):
    """Past one forward pass (the tiny config keeps the public 64 patches x 16 = 1,024 steps) the package
    unrolls; the adapter passes that through and keeps its shapes."""
    batch = make_batch(frame, [199], 64)
    q = forecaster.quantiles(batch, 1030)
    assert q.shape == (1, 3, 21, 1030) and np.isfinite(q).all()


def test_bfloat16_stays_near_float32(model, frame):
    batch = make_batch(frame, [100, 199], 64)
    f32 = adapter.Chronos2Forecaster(adapter.random_model(seed=3)).quantiles(batch, 8)
    b16 = adapter.Chronos2Forecaster(adapter.random_model(seed=3), dtype="bfloat16").quantiles(batch, 8)
    scale = frame["close"].iloc[-64:].std()
    err = np.abs(b16 - f32).max() / scale
    print(f"chronos2 bf16 vs fp32: max abs error {err:.4f} context std")
    assert err < 0.1


def test_a_saved_folder_loads_strictly_and_forecasts_the_same(model, frame, tmp_path):
    model.save_pretrained(tmp_path / "w")
    with pytest.warns(UserWarning, match="randomly initialised Chronos-2"):
        rand = adapter.create(weights="random", seed=3)
    loaded = adapter.create(weights=str(tmp_path / "w"))
    assert loaded.source == str(tmp_path / "w") and rand.source == "random:tiny(seed=3)"
    batch = make_batch(frame, [120], 32)
    np.testing.assert_array_equal(loaded.raw_quantiles(batch, 5), rand.raw_quantiles(batch, 5))


def test_weights_of_another_model_or_a_broken_file_are_one_line(model, tmp_path):
    from safetensors.torch import load_file, save_file

    from marketcast.forecast.toto2 import Toto2Config
    from marketcast.forecast.toto2.loading import save_checkpoint
    from marketcast.forecast.toto2.model import random_model

    save_checkpoint(random_model(Toto2Config.size("4m")), tmp_path / "toto2")
    with pytest.raises(ModelLoadError, match=r"not a Chronos-2 checkpoint .*pick the --model") as info:
        adapter.create(weights=str(tmp_path / "toto2"))
    assert "\n" not in str(info.value)

    model.save_pretrained(tmp_path / "cut")
    state = load_file(str(tmp_path / "cut" / "model.safetensors"))
    dropped = sorted(state)[0]
    save_file({k: v for k, v in state.items() if k != dropped}, str(tmp_path / "cut" / "model.safetensors"),
              metadata={"format": "pt"})
    with pytest.raises(ModelLoadError, match=rf"1 missing keys e\.g\. '{dropped}'") as info:
        adapter.create(weights=str(tmp_path / "cut"))
    assert "\n" not in str(info.value)

    proc = subprocess.run([sys.executable, "-m", "marketcast.commands", "backtest", "SP500", "--model", "chronos2",
                           "--weights", str(tmp_path / "toto2"), "--windows", "2"],
                          capture_output=True, text=True, cwd=tmp_path, env=_env())
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "not a Chronos-2 checkpoint" in proc.stderr


def _env() -> dict:
    return {**os.environ, "PYTHONWARNINGS": "ignore", "HF_HUB_OFFLINE": "1"}


def test_a_missing_extra_is_one_line_exit_2_and_breaks_nothing_else(tmp_path):
    """``chronos`` made unimportable (a None entry in sys.modules): --help, import_models() and the hub's
    catalogue still work; choosing chronos2 says which extra to install."""
    code = (
        "import sys; sys.modules['chronos'] = None\n"
        "from marketcast.forecast.registry import import_models\n"
        "from marketcast.forecast.hub import catalogue\n"
        "import_models(); assert 'chronos2' in catalogue() and 'toto2' in catalogue()\n"
        "from marketcast.commands import main\n"
        "assert main(['--help']) == 0 and main(['backtest', '--help']) == 0\n"
        "print('HELP-OK', flush=True)\n"
        "sys.exit(main(['backtest', 'SP500', '--model', 'chronos2', '--weights', 'random', '--windows', '5']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=_env())
    assert proc.returncode == 2, proc.stderr
    assert "HELP-OK" in proc.stdout and "chronos2" in proc.stdout  # backtest --help lists the model
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].endswith("--model chronos2 needs the optional package chronos-forecasting: "
                                             "pip install 'marketcast[chronos]'"), err
    assert not list(tmp_path.rglob("*.json"))  # nothing written


def test_require_names_the_extra_and_tells_a_broken_install_apart(tmp_path, monkeypatch):
    from marketcast.errors import ConfigError
    from marketcast.forecast.adapters.extras import require

    assert require("json", "x", "y") is json
    monkeypatch.setitem(sys.modules, "tirex", None)  # absent
    with pytest.raises(ConfigError, match=r"^--model tirex needs the optional package tirex-ts: "
                                          r"pip install 'marketcast\[tirex\]'$"):
        require("tirex", "tirex", "tirex")
    # installed, but one of its own imports fails: reinstalling is the advice, with the library's line
    (tmp_path / "brokenpkg_mc").mkdir()
    (tmp_path / "brokenpkg_mc" / "__init__.py").write_text("import a_dependency_that_is_gone_mc\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"installed but does not import \(No module named "
                                          r"'a_dependency_that_is_gone_mc'\); reinstall it") as info:
        require("brokenpkg_mc", "chronos", "chronos2")
    assert "\n" not in str(info.value)


def test_the_cli_backtests_chronos2_on_the_embedded_bars(tmp_path, capsys):
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["backtest", "SP500", "--model", "chronos2", "--weights", "random", "--windows", "5",
                     "--samples", "16", "--context", "64", "--output-dir", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc[0]["symbol"] == "SP500" and doc[0]["runs"] == 5 and doc[0]["config"]["model"] == "chronos2"
    assert np.isfinite(doc[0]["metrics"]["crps"]) and doc[0]["metrics"]["crps"] > 0
