"""Toto 2.0 checkpoints: a saved folder round-trips strictly; weights of another architecture, a tensor of the
wrong shape or an unknown random size is one ModelLoadError line (exit 2 from the CLI), never a traceback."""

from __future__ import annotations

import json

import pytest
import torch

from marketcast.commands import main
from marketcast.errors import ExitCode, ModelLoadError
from marketcast.forecast.registry import MODEL_NAMES, load_forecaster
from marketcast.forecast.toto.config import TotoConfig
from marketcast.forecast.toto.loading import save_checkpoint as save_toto1
from marketcast.forecast.toto.model import TotoModel, init_weights
from marketcast.forecast.toto2 import Toto2Config, Toto2Forecaster
from marketcast.forecast.toto2.loading import load_pretrained, random_size, save_checkpoint
from marketcast.forecast.toto2.model import random_model


def test_round_trip_is_exact_and_strict(tmp_path):
    model = random_model(Toto2Config.size("4m"), seed=7)
    save_checkpoint(model, tmp_path / "w")
    loaded, folder = load_pretrained(tmp_path / "w", torch.device("cpu"))
    assert folder == tmp_path / "w" and loaded.config == model.config
    a, b = model.state_dict(), loaded.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert sum(p.numel() for p in loaded.parameters()) == 4_144_448  # Datadog/Toto-2.0-4m's count


def test_22m_size_matches_the_published_checkpoint_size():
    n = sum(p.numel() for p in random_model(Toto2Config.size("22m")).parameters())
    assert n == 21_915_584 and round(n * 4 / 2**20) == 84  # 84 MiB in float32, as published


def test_published_layouts_have_one_variate_layer_last():
    """Layer group = the whole stack in every published config (4m's file; 22m per Toto2Config.size's sources):
    the layout decides which layers mix variates, and the parameter count cannot tell it."""
    c4, c22 = Toto2Config.size("4m"), Toto2Config.size("22m")
    assert c4.variate_layers() == [False] * 3 + [True]
    assert c22.variate_layers() == [False] * 5 + [True]
    assert (c22.d_ff, c22.num_groups, c22.qk_dim, c22.layer_group_size) == (1368, 8, 64, 6)


def test_toto1_weights_are_the_wrong_architecture(tmp_path):
    save_toto1(init_weights(TotoModel(TotoConfig.tiny()), seed=1), TotoConfig.tiny(), tmp_path / "toto1")
    with pytest.raises(ModelLoadError, match=r"not a Toto 2\.0 config\.json .*--model toto2") as info:
        load_pretrained(tmp_path / "toto1", torch.device("cpu"))
    assert "\n" not in str(info.value)


def test_wrong_shape_names_the_tensor(tmp_path):
    save_checkpoint(random_model(Toto2Config.size("4m")), tmp_path / "w")
    raw = json.loads((tmp_path / "w" / "config.json").read_text())
    (tmp_path / "w" / "config.json").write_text(json.dumps({**raw, "d_ff": 512}))
    with pytest.raises(ModelLoadError, match=r"tensor 'transformer\.layers\.0\.ffn\.fc1\.weight' has shape"):
        load_pretrained(tmp_path / "w", torch.device("cpu"))


def test_random_weight_names():
    assert [random_size(w) for w in ("random", "random:4m", "random-22m", "auto", None, "x/random")] == \
        ["22m", "4m", "22m", None, None, None]
    with pytest.raises(ModelLoadError, match="unknown Toto 2.0 size '7b'; use one of 4m, 22m"):
        load_forecaster("toto2", weights="random:7b")
    with pytest.warns(UserWarning, match="randomly initialised Toto 2.0"):
        fc = load_forecaster("toto2", weights="random:4m", compile="eager")
    assert isinstance(fc, Toto2Forecaster) and fc.config == Toto2Config.size("4m") and "toto2" in MODEL_NAMES


def test_cli_wrong_architecture_is_one_line_exit_2(tmp_path, capsys):
    save_toto1(init_weights(TotoModel(TotoConfig.tiny()), seed=1), TotoConfig.tiny(), tmp_path / "toto1")
    code = main(["backtest", "SP500", "--model", "toto2", "--weights", str(tmp_path / "toto1"), "-n", "2"])
    err = capsys.readouterr().err.strip()
    assert code == ExitCode.USAGE == 2
    assert "not a Toto 2.0 config.json" in err and "Traceback" not in err and len(err.splitlines()) == 1
