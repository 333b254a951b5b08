"""Toto 2.0 fixtures: the toto-2 reference (skipped with the reason when it cannot import), reference models
with random weights, and the same weights loaded into marketcast's model through a checkpoint folder."""

from __future__ import annotations

import warnings
from dataclasses import fields
from pathlib import Path

import pytest
import torch

from marketcast.forecast.toto2.config import Toto2Config
from marketcast.forecast.toto2.loading import load_pretrained, save_checkpoint
from marketcast.forecast.toto2.model import Toto2Model


def reference_module():
    """toto-2 (needs Python >= 3.12 by its metadata; installed with --ignore-requires-python, it runs on 3.11)."""
    warnings.filterwarnings("ignore", message=".*json.*module.*")  # gluonts suggests orjson
    try:
        import toto2
    except Exception as exc:  # ImportError, or a dependency that fails on this Python
        pytest.skip(f"toto-2 reference not importable ({type(exc).__name__}: {exc}); run make install-dev")
    if not hasattr(toto2, "Toto2Model"):
        pytest.skip("the toto2 module found is not Datadog's toto-2 reference")
    return toto2


def reference_model(config: Toto2Config, seed: int):
    """The reference built from ``config`` with seeded random weights; biases and per-dim scales are made
    non-zero so every parameter affects the output."""
    toto2 = reference_module()
    known = {f.name for f in fields(toto2.Toto2ModelConfig)}
    torch.manual_seed(seed)
    model = toto2.Toto2Model(toto2.Toto2ModelConfig(**{k: v for k, v in config.to_dict().items() if k in known}))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or name.endswith("per_dim_scale"):
                p.normal_(0.0, 0.3)
    return model.eval()


def same_weights(reference, config: Toto2Config, folder: Path) -> Toto2Model:
    """The reference's weights written as a public checkpoint and loaded strictly into marketcast's model."""
    mine = Toto2Model(config)
    mine.load_state_dict(reference.state_dict(), strict=True)
    save_checkpoint(mine, folder)
    model, _ = load_pretrained(folder, torch.device("cpu"))
    return model


@pytest.fixture(scope="session")
def pair_4m(tmp_path_factory):
    ref = reference_model(Toto2Config.size("4m"), seed=1)
    return ref, same_weights(ref, Toto2Config.size("4m"), tmp_path_factory.mktemp("toto2_4m"))


@pytest.fixture(scope="session")
def pair_22m(tmp_path_factory):
    ref = reference_model(Toto2Config.size("22m"), seed=2)
    return ref, same_weights(ref, Toto2Config.size("22m"), tmp_path_factory.mktemp("toto2_22m"))


def random_walks(batch: int, variates: int, length: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Prices ``[B, V, T]`` around 100 and an all-True mask."""
    g = torch.Generator().manual_seed(seed)
    x = 100 + torch.randn(batch, variates, length, generator=g).cumsum(-1)
    return x, torch.ones(batch, variates, length, dtype=torch.bool)
