"""Checkpoint folders in the public layout (config.json + model.safetensors), loaded offline with strict=True."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from marketcast.errors import ModelLoadError
from marketcast.forecast.registry import load_forecaster
from marketcast.forecast.toto import TotoForecaster
from marketcast.forecast.toto.loading import save_checkpoint
from tests.toto.conftest import windows


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # an empty cache


@pytest.mark.parametrize("packed", [True, False], ids=["fused-w12", "unfused"])
def test_folder_round_trip(tmp_path, tiny_model, tiny_config, packed):
    folder = save_checkpoint(tiny_model, tiny_config, tmp_path / "ckpt", packed=packed)
    keys = set(load_file(str(folder / "model.safetensors")))
    assert any(k.endswith("mlp.0.w12.weight") for k in keys) == packed
    assert any(k.endswith("mlp.2.weight") for k in keys) == (not packed)
    assert json.loads((folder / "config.json").read_text())["output_distribution_kwargs"] == {"k_components": 4}
    fc = TotoForecaster.from_pretrained(folder, compile="eager")
    for name, tensor in tiny_model.state_dict().items():
        assert torch.equal(fc.model.state_dict()[name], tensor), name


def test_loading_builds_on_meta_without_random_init(tmp_path, tiny_model, tiny_config, sp500, monkeypatch):
    """from_pretrained never initialises real memory (modules are built on the meta device, where torch's
    default init is a no-op, and the weights come straight from the file) and forecasts exactly like the
    model it was saved from (rotary tables rebuilt, nothing left on the meta device)."""
    folder = save_checkpoint(tiny_model, tiny_config, tmp_path / "ckpt")

    def no_init(tensor, *args, **kwargs):
        assert tensor.is_meta, "a random initialiser filled real memory while loading"
        return tensor

    monkeypatch.setattr(torch.nn.init, "kaiming_uniform_", no_init)
    monkeypatch.setattr(torch.nn.init, "uniform_", no_init)
    loaded = TotoForecaster.from_pretrained(folder, compile="eager")
    assert not any(t.is_meta for t in [*loaded.model.parameters(), *loaded.model.buffers()])
    batch = windows(sp500, 2, 100, 70)
    expected = TotoForecaster(tiny_model, compile="eager").forecast(batch, 70, 16, seed=1).samples
    np.testing.assert_array_equal(loaded.forecast(batch, 70, 16, seed=1).samples, expected)


def test_registry_loads_folder(tmp_path, tiny_model, tiny_config, sp500):
    folder = save_checkpoint(tiny_model, tiny_config, tmp_path / "ckpt")
    fc = load_forecaster("toto", weights=str(folder), compile="eager")
    out = fc.forecast(windows(sp500, 2, 100, 5), 5, 16)
    assert out.samples.shape == (2, 3, 16, 5) and np.isfinite(out.samples).all()


def test_truncated_file_is_a_clear_error(tmp_path, tiny_model, tiny_config):
    folder = save_checkpoint(tiny_model, tiny_config, tmp_path / "ckpt")
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(ModelLoadError, match=r"model\.safetensors.*truncated or corrupt"):
        TotoForecaster.from_pretrained(folder)


def test_wrong_shape_names_the_tensor(tmp_path, tiny_model, tiny_config):
    folder = save_checkpoint(tiny_model, tiny_config, tmp_path / "ckpt")
    state = load_file(str(folder / "model.safetensors"))
    state["model.unembed.weight"] = state["model.unembed.weight"][:-1].contiguous()
    save_file(state, str(folder / "model.safetensors"))
    with pytest.raises(ModelLoadError, match=r"model\.safetensors.*'model\.unembed\.weight' has shape"):
        TotoForecaster.from_pretrained(folder)


def test_missing_tensor_is_a_clear_error(tmp_path, tiny_model, tiny_config):
    folder = save_checkpoint(tiny_model, tiny_config, tmp_path / "ckpt")
    state = load_file(str(folder / "model.safetensors"))
    del state["model.patch_embed.projection.bias"]
    save_file(state, str(folder / "model.safetensors"))
    with pytest.raises(ModelLoadError, match="missing 1 tensor"):
        TotoForecaster.from_pretrained(folder)


def test_missing_folder_offline_says_how_to_fix(tmp_path):
    with pytest.raises(ModelLoadError, match="not a folder"):
        TotoForecaster.from_pretrained(tmp_path / "nowhere")
    with pytest.raises(ModelLoadError, match=r"offline.*hf download.*--weights"):
        load_forecaster("toto", weights=None, compile="eager")


def test_missing_config_json(tmp_path, tiny_model, tiny_config):
    folder = save_checkpoint(tiny_model, tiny_config, tmp_path / "ckpt")
    (folder / "config.json").unlink()
    with pytest.raises(ModelLoadError, match="config.json not found"):
        TotoForecaster.from_pretrained(folder)
