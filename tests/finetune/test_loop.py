"""The shared training loop: early stopping hands back the best weights, and the learning-rate schedule."""

from __future__ import annotations

import math

import pytest
import torch

from marketcast.data.bars import Bars
from marketcast.finetune.data import make_windows
from marketcast.finetune.loop import Hyper, learning_rate, train
from marketcast.finetune.toto import TotoObjective
from marketcast.forecast.toto.config import TotoConfig
from marketcast.forecast.toto.model import random_model
from tests.finetune.conftest import planted


def _hyper(**kw) -> Hyper:
    values = dict(steps=40, lr=3e-3, batch_size=4, context=32, horizon=4, lora=None, dtype="float32", seed=0,
                  eval_every=2, patience=2, checkpoint_every=100)
    return Hyper(**{**values, **kw})


def test_a_tuning_that_only_gets_worse_stops_early_and_returns_the_base(tmp_path):
    """lr 0.1 wrecks the tiny model: two validations without improvement (patience 2) stop it at step 4, and
    the weights handed back are the base's, bit for bit (the base is the best seen)."""
    bars = Bars("SYN", planted(), "stock", "SYN.csv")
    windows = make_windows([bars], bars.frame.index[300].date(), 32, 4, 8)
    model = random_model(TotoConfig.tiny(patch_size=8, stride=8), 0).train().requires_grad_(True)
    base = {k: v.clone() for k, v in model.state_dict().items()}
    outcome = train(TotoObjective(model, 32, 4, None, torch.device("cpu")), windows, _hyper(lr=0.1),
                    torch.device("cpu"), tmp_path)
    assert (outcome.steps, outcome.stopped, outcome.best_step) == (4, "early", 0)
    assert [h["step"] for h in outcome.history] == [2, 4]
    assert all(h["validation"] > outcome.base_validation_loss for h in outcome.history)
    assert outcome.validation_loss == outcome.base_validation_loss and outcome.train_loss is None
    for key, value in model.state_dict().items():
        assert torch.equal(value, base[key]), key
    assert torch.load(tmp_path / "checkpoint.pt", weights_only=False)["stopped"] == "early"


def test_learning_rate_warms_up_linearly_then_decays_to_a_tenth():
    h = _hyper(steps=1000, lr=1e-3)
    assert learning_rate(0, h) == pytest.approx(1e-5)  # warmup: 100 steps (a tenth of 1000, at most 100)
    assert learning_rate(49, h) == pytest.approx(5e-4)
    assert learning_rate(100, h) == pytest.approx(1e-3)
    assert learning_rate(550, h) == pytest.approx(1e-3 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 2))))
    assert learning_rate(1000, h) == pytest.approx(1e-4)
    short = _hyper(steps=5, lr=1.0)  # one warmup step, then the cosine over the 4 left
    quarter = 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 4))
    assert [learning_rate(s, short) for s in range(3)] == [1.0, 1.0, pytest.approx(quarter)]
