"""Same weights as the vendored upstream (kronos_finance._vendor.kronos_model, upstream 67b630e): identical
codes, logits within 1e-5, and identical greedy paths from the shared-context decoder vs upstream's full
recompute (sliding window, context buckets and the de-tokenizer's window included)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from marketcast.forecast.kronos import KronosForecaster
from marketcast.forecast.kronos.kv_cache import ContextCache, PathCache
from marketcast.forecast.kronos.sampling import SamplingParams
from marketcast.runtime.rng import window_streams
from tests.kronos.conftest import random_stamps


def test_tokenizer_codes_and_reconstruction(tiny_tokenizer, upstream, bars):
    _, ref_tok = upstream
    s1, s2 = tiny_tokenizer.encode(bars)
    ref_s1, ref_s2 = ref_tok.encode(bars, half=True)
    assert torch.equal(s1, ref_s1) and torch.equal(s2, ref_s2)
    with torch.no_grad():
        ref = ref_tok.decode([s1, s2], half=True)
    torch.testing.assert_close(tiny_tokenizer.decode(s1, s2), ref, rtol=0, atol=1e-5)


def test_logits_match_upstream(tiny_model, tiny_tokenizer, upstream, bars):
    ref_model, _ = upstream
    s1, s2 = tiny_tokenizer.encode(bars)
    stamp = random_stamps(*s1.shape)
    sibling = torch.randint(0, 16, (s1.shape[0], 1), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        logits, context = tiny_model.decode_s1(s1, s2, stamp)
        ref_logits, ref_context = ref_model.decode_s1(s1, s2, stamp.float())
        torch.testing.assert_close(logits, ref_logits, rtol=0, atol=1e-5)
        torch.testing.assert_close(tiny_model.decode_s2(context, sibling), ref_model.decode_s2(ref_context, sibling),
                                   rtol=0, atol=1e-5)


def test_shared_context_steps_match_full_window(tiny_model, tiny_tokenizer, bars):
    """Two paths per window over a context cached once: each path's s1/s2 logits at position p equal the
    full-window logits at p, and the de-tokenizer run on the new tokens against its cached context prefix
    equals decoding the whole sequence (the cache is exact, not an approximation)."""
    s1, s2 = tiny_tokenizer.encode(bars)
    stamp = random_stamps(*s1.shape)
    t, paths_per_window = 15, 2
    ctx = ContextCache.allocate(tiny_model, tiny_tokenizer, 3, t, "cpu", torch.float32)
    paths = PathCache.allocate(tiny_model, 3, paths_per_window, 8, "cpu", torch.float32)
    both = lambda a: a[:, None].expand(3, paths_per_window, *a.shape[1:])  # noqa: E731
    with torch.no_grad():
        context, keys, values = tiny_model.window_pass(s1[:, :t], s2[:, :t], stamp[:, :t], None)
        dep_k, dep_v = tiny_model.dep_layer.keys_values(context)
        for dst, src in zip([*ctx.k, *ctx.v, ctx.dep_k, ctx.dep_v], [*keys, *values, dep_k, dep_v]):
            dst.copy_(src)
        ctx.mask.fill_(True)
        full_logits, full_context = tiny_model.decode_s1(s1, s2, stamp)
        for p in range(t, 20):
            paths.slot.fill_(p - t)
            new_mask = (paths.slots <= paths.slot)[None]
            logits, step_context = tiny_model.step_paths(both(s1[:, p]), both(s2[:, p]), stamp[:, p:p + 1],
                                                         torch.tensor([p]), ctx, paths, new_mask)
            torch.testing.assert_close(logits, both(full_logits[:, p]), rtol=0, atol=1e-5)
        ids = torch.tensor([[1], [5], [9]])
        ref_s2 = tiny_model.decode_s2(full_context, ids)[:, -1]
        torch.testing.assert_close(tiny_model.s2_logits_paths(step_context, both(ids[:, 0]), ctx, paths, new_mask),
                                   both(ref_s2), rtol=0, atol=1e-5)
        dec_k, dec_v = tiny_tokenizer.decoder_prefix(s1[:, :t], s2[:, :t], None)
        new_bars = tiny_tokenizer.decode_paths(both(s1[:, t:]), both(s2[:, t:]), dec_k, dec_v,
                                               torch.ones(3, 1, 1, t, dtype=torch.bool))
    torch.testing.assert_close(new_bars, both(tiny_tokenizer.decode(s1, s2)[:, t:]), rtol=0, atol=1e-5)


def test_left_padding_is_masked(tiny_model, tiny_tokenizer, bars):
    """A left-padded, masked window gives the unpadded window's next-token logits (RoPE is relative)."""
    s1, s2 = tiny_tokenizer.encode(bars)
    stamp = random_stamps(*s1.shape)
    pad = 6
    ps1, ps2 = (torch.cat([t[:, :1].expand(-1, pad), t], 1) for t in (s1, s2))
    pstamp = torch.cat([stamp[:, :1].expand(-1, pad, -1), stamp], 1)
    valid = torch.cat([torch.zeros(3, pad, dtype=torch.bool), torch.ones(3, 20, dtype=torch.bool)], 1)
    with torch.no_grad():
        logits, _ = tiny_model.decode_s1(s1, s2, stamp)
        padded, _ = tiny_model.decode_s1(ps1, ps2, pstamp, valid)
    torch.testing.assert_close(padded[:, -1], logits[:, -1], rtol=0, atol=1e-4)
    x = torch.cat([bars[:, :1].expand(-1, pad, -1), bars], 1)
    codes = tiny_tokenizer.encode(x, valid)
    assert torch.equal(codes[0][:, pad:], s1) and torch.equal(codes[1][:, pad:], s2)


@pytest.mark.parametrize("t,h", [(20, 20), (20, 13), (17, 8), (32, 1)],
                         ids=["sliding-window", "detok-window-drops-one", "padded-context-bucket", "full-context-h1"])
def test_greedy_paths_match_upstream(tiny_model, tiny_tokenizer, upstream, t, h):
    """top_k=1: our paths reproduce upstream's auto_regressive_inference (max_context 32). 20 + 20 slides the
    window from step 13 (7 re-prefills); 20 + 13 makes the de-tokenizer's window drop one context token;
    17 bars are left-padded to the 32-token context bucket; 32 + 1 decodes from a full window."""
    from kronos_finance._vendor.kronos_model.kronos import auto_regressive_inference

    ref_model, ref_tok = upstream
    x = torch.randn(3, t, 6, generator=torch.Generator().manual_seed(t))
    stamp = random_stamps(3, t + h, seed=h)
    with torch.no_grad():
        ref = auto_regressive_inference(ref_tok, ref_model, x, stamp[:, :t].float(), stamp[:, t:].float(), 32, h,
                                        clip=5, T=1.0, top_k=1, top_p=1.0, sample_count=2)[:, -h:]
    pipeline = KronosForecaster(tiny_model, tiny_tokenizer).pipeline
    z, info = pipeline.sample_normalised(x.clamp(-5, 5).numpy(), np.ones((3, t), bool), stamp[:, :t].numpy(),
                                         stamp[:, t:].numpy(), 2, SamplingParams(1.0, 1, 1.0),
                                         window_streams(0, np.arange(3)))
    assert info.re_prefills == max(0, t + h - 1 - 32)
    assert z.shape == (3, 2, h, 6) and np.array_equal(z[:, 0], z[:, 1])  # greedy: both paths equal
    np.testing.assert_allclose(z[:, 0], np.asarray(ref), rtol=0, atol=1e-5)


def test_stacked_projections_change_nothing(bars):
    """fuse_projections (one GEMM for q/k/v and for the SwiGLU gate/value) gives the same codes and logits,
    and keeps the checkpoint keys. Fresh modules: the shared fixtures may already be fused by a forecaster."""
    from marketcast.forecast.kronos import Kronos, KronosTokenizer, from_config
    from marketcast.forecast.kronos.layers import fuse_projections
    from tests.kronos.conftest import TINY_MODEL, TINY_TOKENIZER

    tiny_model = from_config(Kronos, TINY_MODEL, seed=1)
    tiny_tokenizer = from_config(KronosTokenizer, TINY_TOKENIZER, seed=2)
    model = fuse_projections(from_config(Kronos, TINY_MODEL, seed=1))
    tok = fuse_projections(from_config(KronosTokenizer, TINY_TOKENIZER, seed=2))
    assert all(m.qkv_weight is None for m in tiny_model.modules() if hasattr(m, "qkv_weight"))
    assert model.state_dict().keys() == tiny_model.state_dict().keys()
    s1, s2 = tiny_tokenizer.encode(bars)
    f1, f2 = tok.encode(bars)
    assert torch.equal(s1, f1) and torch.equal(s2, f2)
    torch.testing.assert_close(tok.decode(s1, s2), tiny_tokenizer.decode(s1, s2), rtol=0, atol=1e-6)
    stamp = random_stamps(*s1.shape)
    with torch.no_grad():
        ref_logits, ref_context = tiny_model.decode_s1(s1, s2, stamp)
        logits, context = model.decode_s1(s1, s2, stamp)
        ids = torch.tensor([[1], [5], [9]])
        torch.testing.assert_close(logits, ref_logits, rtol=0, atol=1e-6)
        torch.testing.assert_close(model.decode_s2(context, ids), tiny_model.decode_s2(ref_context, ids), rtol=0,
                                   atol=1e-6)
