"""Public checkpoint layout (config.json + model.safetensors): strict offline loads and one-line errors."""

from __future__ import annotations

import json

import pytest
import torch

from marketcast.errors import ModelLoadError
from marketcast.forecast.kronos import Kronos, KronosTokenizer, from_pretrained, save_pretrained
from marketcast.forecast.kronos.loading import load_pair


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))  # an empty cache


@pytest.fixture
def folder(tmp_path, tiny_model, tiny_tokenizer):
    save_pretrained(tiny_model, tmp_path / "ckpt" / "model")
    save_pretrained(tiny_tokenizer, tmp_path / "ckpt" / "tokenizer")
    return tmp_path / "ckpt"


def test_round_trip_is_strict_and_exact(folder, tiny_model, tiny_tokenizer):
    model = from_pretrained(Kronos, folder / "model", max_context=32)
    tok = from_pretrained(KronosTokenizer, folder / "tokenizer")
    for ours, theirs in ((model, tiny_model), (tok, tiny_tokenizer)):
        got = ours.state_dict()
        assert set(got) == set(theirs.state_dict())
        assert all(torch.equal(got[k], v) for k, v in theirs.state_dict().items())
    assert model.config == tiny_model.config


def test_loading_builds_on_meta_and_forecasts_like_the_saved_model(folder, tiny_model, tiny_tokenizer, sp500,
                                                                   monkeypatch):
    """Both modules are built on the meta device (no random initialiser touches real memory), nothing stays
    on meta, and the loaded pair forecasts exactly like the pair it was saved from."""
    import numpy as np

    from marketcast.forecast import make_batch
    from marketcast.forecast.kronos import KronosForecaster

    def no_init(tensor, *args, **kwargs):
        assert tensor.is_meta, "a random initialiser filled real memory while loading"
        return tensor

    for name in ("kaiming_uniform_", "uniform_", "normal_", "xavier_normal_", "zeros_", "ones_"):
        monkeypatch.setattr(torch.nn.init, name, no_init)
    model = from_pretrained(Kronos, folder / "model", max_context=32, device="cpu")
    tok = from_pretrained(KronosTokenizer, folder / "tokenizer", device="cpu")
    monkeypatch.undo()
    assert not any(t.is_meta for m in (model, tok) for t in [*m.parameters(), *m.buffers()])
    batch = make_batch(sp500, [len(sp500) - 1, len(sp500) - 40], context=28, horizon=3)
    expected = KronosForecaster(tiny_model, tiny_tokenizer).forecast(batch, 3, 4, seed=2).samples
    np.testing.assert_array_equal(KronosForecaster(model, tok).forecast(batch, 3, 4, seed=2).samples, expected)


def test_upstream_can_read_our_folder(folder, tiny_model):
    """The files are what PyTorchModelHubMixin expects: upstream's own from_pretrained loads them."""
    from kronos_finance._vendor.kronos_model import Kronos as RefKronos

    ref = RefKronos.from_pretrained(str(folder / "model"))
    assert all(torch.equal(ref.state_dict()[k], v) for k, v in tiny_model.state_dict().items())


def test_load_pair_from_folder(folder):
    model, tok, label = load_pair(str(folder))
    assert isinstance(model, Kronos) and isinstance(tok, KronosTokenizer) and label == str(folder)


def test_wrong_shape_names_the_tensor(folder):
    cfg = json.loads((folder / "model" / "config.json").read_text())
    cfg["ff_dim"] = 96
    (folder / "model" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelLoadError, match=r"transformer\.0\.ffn\.w1\.weight.*shape \(64, 32\).*\(96, 32\)"):
        from_pretrained(Kronos, folder / "model")


def test_truncated_file(folder):
    path = folder / "tokenizer" / "model.safetensors"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(ModelLoadError, match="truncated or corrupt"):
        from_pretrained(KronosTokenizer, folder / "tokenizer")


def test_missing_subfolder_and_key(folder, tmp_path):
    (folder / "tokenizer" / "config.json").rename(tmp_path / "moved.json")
    with pytest.raises(ModelLoadError, match="config.json not found"):
        load_pair(str(folder))
    cfg = json.loads((tmp_path / "moved.json").read_text())
    del cfg["d_model"]
    (folder / "tokenizer" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelLoadError, match="missing key.*d_model"):
        load_pair(str(folder))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelLoadError, match="no model/ subfolder"):
        load_pair(str(empty))


def test_hub_weights_missing_offline():
    with pytest.raises(ModelLoadError, match="no folder .* here .*, and no hub repo .* in the Hugging Face cache .*offline.*hf download"):
        load_pair(None)
    with pytest.raises(ModelLoadError, match="not a folder"):
        load_pair("no-such-thing")
