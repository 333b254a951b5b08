"""Toto fixtures: a tiny config with the base structure, its random weights, and real SP500 windows."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from marketcast.data import load_symbol
from marketcast.forecast.base import make_batch
from marketcast.forecast.toto.config import TotoConfig
from marketcast.forecast.toto.model import TotoModel, init_weights

warnings.filterwarnings("ignore", category=ImportWarning)  # toto-ts warns that xFormers is absent


@pytest.fixture(scope="session")
def tiny_config() -> TotoConfig:
    return TotoConfig.tiny()


@pytest.fixture(scope="session")
def tiny_model(tiny_config) -> TotoModel:
    return init_weights(TotoModel(tiny_config), seed=3).eval()


@pytest.fixture(scope="session")
def sp500():
    return load_symbol("SP500").frame


def windows(frame, count: int, context: int, horizon: int, first: int = 1000):
    """``count`` consecutive SP500 windows of ``context`` bars."""
    return make_batch(frame, list(range(first, first + count)), context, horizon)


def random_series(batch: int, variates: int, length: int, seed: int = 0, pad: int = 0):
    """Random-walk prices ``[B, V, T]`` and a mask with ``pad`` left-padded steps in row 0."""
    rng = np.random.default_rng(seed)
    x = 100 + np.cumsum(rng.normal(0, 1, (batch, variates, length)), axis=-1)
    mask = np.ones_like(x, dtype=bool)
    mask[0, :, :pad] = False
    x[~mask] = 0.0
    return torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(mask)
