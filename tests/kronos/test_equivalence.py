"""Same weights as the vendored upstream (kronos_finance._vendor.kronos_model, upstream 67b630e): identical
codes, logits within 1e-5, and identical greedy paths from the KV-cached decoder vs upstream's full recompute."""

from __future__ import annotations

import torch

from marketcast.forecast.kronos.decode import CachedDecoder
from marketcast.forecast.kronos.pipeline import KronosPipeline
from marketcast.forecast.kronos.sampling import SamplingParams
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


def test_prefill_and_step_match_full_window(tiny_model, tiny_tokenizer, bars):
    """Cached step at position p == full-window logits at p (the cache is exact, not an approximation)."""
    s1, s2 = tiny_tokenizer.encode(bars)
    stamp = random_stamps(*s1.shape)
    dec = CachedDecoder(tiny_model, None)
    cos, sin = tiny_model.rotary(dec.window)
    cache = dec._cache(s1.shape[0], "cpu", torch.float32)
    with torch.no_grad():
        full_logits, full_context = tiny_model.decode_s1(s1, s2, stamp)
        logits, _ = tiny_model.prefill(s1[:, :15], s2[:, :15], stamp[:, :15], torch.ones(3, 15, dtype=torch.bool),
                                       cos, sin, cache)
        torch.testing.assert_close(logits, full_logits[:, 14], rtol=0, atol=1e-5)
        for p in range(15, 20):
            logits, context = tiny_model.step_s1(s1[:, p : p + 1], s2[:, p : p + 1], stamp[:, p : p + 1],
                                                 torch.tensor([p]), cos, sin, *cache.step_args())
            torch.testing.assert_close(logits, full_logits[:, p], rtol=0, atol=1e-5)
        ids = torch.tensor([[1], [5], [9]])
        ref_s2 = tiny_model.decode_s2(full_context, ids)[:, -1]
        torch.testing.assert_close(tiny_model.step_s2(context, ids, cache.dep_k, cache.dep_v, cache.valid), ref_s2,
                                   rtol=0, atol=1e-5)


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


def test_greedy_paths_match_upstream_including_re_prefill(tiny_model, tiny_tokenizer, upstream, bars):
    """top_k=1: our KV-cached decode reproduces upstream's auto_regressive_inference exactly; context 20 +
    horizon 20 > max_context 32, so the sliding-window re-prefill is exercised (steps 13..19)."""
    from kronos_finance._vendor.kronos_model.kronos import auto_regressive_inference

    ref_model, ref_tok = upstream
    t, h, samples = 20, 20, 2
    stamp = random_stamps(3, t + h)
    with torch.no_grad():
        ref = auto_regressive_inference(ref_tok, ref_model, bars, stamp[:, :t].float(), stamp[:, t:].float(),
                                        32, h, clip=5, T=1.0, top_k=1, top_p=1.0, sample_count=samples)[:, -h:]
    decoder = CachedDecoder(tiny_model, None)
    pipe = KronosPipeline(tiny_model, tiny_tokenizer, decoder, max_rows=8)
    s1, s2 = tiny_tokenizer.encode(bars.clamp(-5, 5))
    rows = torch.arange(3 * samples) // samples  # each series' sample paths share one prefill of its context
    valid = torch.ones(3 * samples, t, dtype=torch.bool)
    out = decoder.generate(s1, s2, stamp, valid[:3], h, SamplingParams(1.0, 1, 1.0), torch.Generator().manual_seed(0),
                           rows=rows)
    assert out.re_prefills == h - (32 - t) - 1
    z = pipe.detokenize(s1[rows], s2[rows], valid, out.s1, out.s2).reshape(3, samples, h, 6).mean(1)
    torch.testing.assert_close(z, torch.as_tensor(ref), rtol=0, atol=1e-5)


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
