"""Our Toto against toto-ts 0.2.0 with identical weights: mixture parameters, scaler, and sample statistics."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from marketcast.forecast.toto import TotoConfig, TotoForecaster
from marketcast.forecast.toto.model import TotoModel, count_parameters, init_weights
from marketcast.forecast.toto.reference import model_from_reference, reference_backbone, reference_forecast
from tests.toto.conftest import random_series


def _reference_step(ref, x, mask, kv, prefix):
    out = ref(x, mask, torch.zeros_like(x, dtype=torch.int), kv_cache=kv, scaling_prefix_length=prefix)
    mix = out.distribution
    comp = mix.component_distribution
    return mix.mixture_distribution.logits, comp.df, comp.loc, comp.scale, out.loc, out.scale


def _assert_close(ours, theirs, patch, atol):
    logits, df, loc, scale = ours.params
    ref_logits, ref_df, ref_loc, ref_scale, ref_sloc, ref_sscale = theirs
    torch.testing.assert_close(torch.log_softmax(logits, -1), ref_logits[:, :, -patch:], atol=atol, rtol=0)
    for a, b in ((df, ref_df), (loc, ref_loc), (scale, ref_scale)):
        torch.testing.assert_close(a, b[:, :, -patch:], atol=atol, rtol=atol)
    torch.testing.assert_close(ours.loc, ref_sloc[:, :, -1], atol=atol, rtol=atol)
    torch.testing.assert_close(ours.scale, ref_sscale[:, :, -1], atol=atol, rtol=atol)


def _prefill_and_decode(model: TotoModel, ref, batch: int, length: int, decode_steps: int, atol: float):
    """Prefill a padded context, then feed ``decode_steps`` patches through our static cache and toto-ts's."""
    p = model.config.patch_size
    x, mask = random_series(batch, 3, length, seed=1, pad=length // 3)
    kv = ref.allocate_kv_cache(batch, 3, length + decode_steps * p, x.device, x.dtype)
    with torch.inference_mode():
        out, k, v = model.prefill_with_cache(x, mask)
        _assert_close(out, _reference_step(ref, x, mask, kv, length), p, atol)
        cache = model.new_cache(batch * 3, 16, "cpu")
        cache.load_prefix(k, v)
        state = out.state
        for step in range(decode_steps):
            nxt = 100 + torch.randn(batch, 3, p, generator=torch.Generator().manual_seed(step))
            out = model.decode(cache, nxt, state, torch.tensor(length // p + step))
            state = out.state
            x = torch.cat([x, nxt], -1)
            mask = torch.cat([mask, torch.ones(batch, 3, p, dtype=torch.bool)], -1)
            _assert_close(out, _reference_step(ref, x, mask, kv, length), p, atol)


@pytest.mark.parametrize("fused", [False, True], ids=["unembed", "fused-head"])
def test_tiny_prefill_and_decode_match_toto_ts(tiny_config, fused):
    """Our weights loaded into toto-ts (unpacked SwiGLU keys): every mixture parameter within 1e-5, with the
    unembedding run as in toto-ts and folded into the head (what the forecaster runs)."""
    model = init_weights(TotoModel(tiny_config), seed=3).eval()
    ref = reference_backbone(model)
    if fused:
        model.fuse_head()
    _prefill_and_decode(model, ref, batch=2, length=320, decode_steps=3, atol=1e-5)


def test_weights_from_toto_ts_load_into_ours(tiny_config):
    """The other direction: a toto-ts backbone's state dict (unpacked keys) loads strictly and agrees."""
    torch.manual_seed(0)
    ref = reference_backbone(init_weights(TotoModel(tiny_config), seed=11))
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.01 * torch.randn_like(p))  # weights that exist only in toto-ts's module
    _prefill_and_decode(model_from_reference(ref, tiny_config), ref, batch=1, length=256, decode_steps=1, atol=1e-5)


@pytest.mark.slow
def test_base_config_matches_toto_ts():
    model = init_weights(TotoModel(TotoConfig.base()), seed=0).eval()
    sizes = {name: count_parameters(getattr(model.model, name))
             for name in ("patch_embed", "transformer", "unembed", "output_distribution")}
    assert count_parameters(model) == 151_306_080
    assert sizes == {"patch_embed": 49_920, "transformer": 113_384_448, "unembed": 37_797_888,
                     "output_distribution": 73_824}
    ref = reference_backbone(model)
    _prefill_and_decode(model, ref, batch=1, length=512, decode_steps=1, atol=1e-4)
    _prefill_and_decode(model.fuse_head(), ref, batch=1, length=512, decode_steps=1, atol=1e-4)


def test_long_horizon_sample_statistics_match_toto_ts(tiny_model):
    """h=128 (two decode patches): per-step quantiles of 1024 paths agree with toto-ts's sampler."""
    x, mask = random_series(2, 3, 200, seed=4, pad=0)
    fc = TotoForecaster(tiny_model, compile="eager")
    ref = reference_backbone(tiny_model)
    theirs = reference_forecast(ref, x.numpy(), mask.numpy(), 128, 1024, samples_per_batch=256, seed=0)
    from marketcast.forecast.base import ContextBatch

    values = np.zeros((2, 200, 5))
    values[:, :, [3, 1, 2]] = x.numpy().transpose(0, 2, 1)
    ours = fc.forecast(ContextBatch(values=values, mask=np.ones((2, 200), bool)), 128, 1024, seed=0).samples
    assert ours.shape == theirs.shape == (2, 3, 1024, 128)
    q = np.array([0.1, 0.25, 0.5, 0.75, 0.9])
    qa, qb = np.quantile(ours, q, axis=2), np.quantile(theirs, q, axis=2)  # [5, B, V, H]
    spread = qb[-1] - qb[0]  # the reference's P10-P90 width per step
    err = np.abs(qa - qb) / spread
    assert np.median(err) < 0.05, np.median(err)
    assert np.quantile(err, 0.95) < 0.2, np.quantile(err, 0.95)
