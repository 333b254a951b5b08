"""Toto's training objective against references: the inference path, torch.distributions, and LoRA merging."""

from __future__ import annotations

import pytest
import torch
from torch.distributions import Categorical, MixtureSameFamily, StudentT

from marketcast.finetune.toto import add_lora, merge_lora, mixture_log_prob, sequence_mixture, window_nll
from marketcast.forecast.toto.config import TotoConfig
from marketcast.forecast.toto.model import MixtureParams, random_model

CONFIG = TotoConfig.tiny(patch_size=8, stride=8)


def _series(batch, length, seed=0):
    g = torch.Generator().manual_seed(seed)
    return 100 + torch.randn(batch, 3, length, generator=g).cumsum(-1)


def test_every_patch_of_the_training_pass_matches_the_inference_prefill():
    """The training forward's mixture for the last patch is the forecaster's (TotoModel.prefill); each earlier
    patch's equals prefill on the context cut after it (causality: later bars change nothing before them)."""
    model = random_model(CONFIG, 1)
    x = _series(2, 40)
    mask = torch.ones_like(x, dtype=torch.bool)
    with torch.no_grad():
        params, loc, scale = sequence_mixture(model, x, mask)
        for n in (1, 3, 5):
            ref = model.prefill(x[..., :n * 8], mask[..., :n * 8])
            # xPos centres on half the positions of the call, so only the full-length call is bit-comparable;
            # a cut context is compared through loc/scale (no rotary) and through the last patch below
            torch.testing.assert_close(loc[..., n - 1], ref.loc)
            torch.testing.assert_close(scale[..., n - 1], ref.scale)
        ref = model.prefill(x, mask)
    for got, want in zip(params, ref.params):
        torch.testing.assert_close(got[:, :, -1], want, rtol=1e-5, atol=1e-5)


def test_mixture_log_prob_equals_torch_distributions():
    g = torch.Generator().manual_seed(2)
    shape = (4, 3, 5, 6)
    params = MixtureParams(logits=torch.randn(shape, generator=g), df=2.5 + 5 * torch.rand(shape, generator=g),
                           loc=torch.randn(shape, generator=g), scale=0.2 + torch.rand(shape, generator=g))
    y = 2 * torch.randn(shape[:-1], generator=g)
    ref = MixtureSameFamily(Categorical(logits=params.logits), StudentT(params.df, params.loc, params.scale))
    torch.testing.assert_close(mixture_log_prob(params, y), ref.log_prob(y), rtol=1e-5, atol=1e-5)


def test_window_nll_is_the_mean_nll_of_the_next_patch_in_scaled_space():
    """By hand for one window: input = first 32 steps, target = the window shifted by one patch, each target
    step normalised by the loc/scale of the input patch that predicts it."""
    model = random_model(CONFIG, 3)
    w = _series(1, 40, seed=4)
    x, target = w[..., :32], w[..., 8:]
    with torch.no_grad():
        params, loc, scale = sequence_mixture(model, x, torch.ones_like(x, dtype=torch.bool))
        y = (target.view(1, 3, 4, 8) - loc[..., None]) / (scale[..., None] + torch.finfo(torch.float32).eps)
        ref = StudentT(params.df, params.loc, params.scale)
        logp = torch.logsumexp(torch.log_softmax(params.logits, -1) + ref.log_prob(y[..., None]), -1)
        ref = -logp.mean()
        ref_tail = -logp.reshape(1, 3, 32)[..., 24:28].mean()  # window steps 32..35 = target steps 24..27
        torch.testing.assert_close(window_nll(model, w)[0], ref, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(window_nll(model, w, slice(32, 36))[0], ref_tail, rtol=1e-5, atol=1e-5)


def test_lora_trains_only_the_adapters_and_merges_to_the_same_function():
    pytest.importorskip("peft")
    model = add_lora(random_model(CONFIG, 5), rank=4, seed=0)
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n and (".wQKV." in n or ".wO." in n) for n in names)
    assert len(names) == 2 * 2 * 3  # A and B on wQKV and wO of each of the 3 layers (time- and space-wise)
    with torch.no_grad():  # B starts at zero (the base function); give it weight so the merge matters
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.1, generator=torch.Generator().manual_seed(6))
    w = _series(3, 40, seed=7)
    with torch.no_grad():
        before = window_nll(model, w)
        merged = merge_lora(model)
        after = window_nll(merged, w)
    assert set(merged.state_dict()) == set(random_model(CONFIG, 5).state_dict())  # the public key layout again
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(after, window_nll(random_model(CONFIG, 5), w))  # the adapters did change it


def test_lora_init_is_a_function_of_the_seed_alone():
    pytest.importorskip("peft")
    a = add_lora(random_model(CONFIG, 5), rank=2, seed=9)
    torch.manual_seed(123)  # the global generator must not matter
    b = add_lora(random_model(CONFIG, 5), rank=2, seed=9)
    c = add_lora(random_model(CONFIG, 5), rank=2, seed=10)
    key = "model.transformer.layers.0.attention.wQKV.lora_A.default.weight"
    assert torch.equal(a.state_dict()[key], b.state_dict()[key])
    assert not torch.equal(a.state_dict()[key], c.state_dict()[key])
