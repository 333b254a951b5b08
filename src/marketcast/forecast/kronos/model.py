"""Kronos: a decoder-only transformer over hierarchical (s1, s2) tokens with a calendar embedding.

Three entry points share one set of layers: :meth:`Kronos.decode_s1` / :meth:`Kronos.decode_s2` (upstream's
full-window API, used for equivalence checks), :meth:`Kronos.prefill` (full window, fills a static cache)
and :meth:`Kronos.step` (one token: :meth:`Kronos.step_s1`, draw s1, :meth:`Kronos.step_s2`, draw s2; fixed
shapes, what gets compiled).
"""

from __future__ import annotations

import torch
from torch import nn

from marketcast.forecast.kronos.config import KronosConfig
from marketcast.forecast.kronos.kv_cache import StaticCache
from marketcast.forecast.kronos.layers import (
    DependencyAwareLayer,
    DualHead,
    HierarchicalEmbedding,
    RMSNorm,
    TemporalEmbedding,
    TransformerBlock,
    attention_mask,
    rotary_table,
)
from marketcast.forecast.kronos.sampling import sample


class Kronos(nn.Module):
    def __init__(self, cfg: KronosConfig) -> None:
        super().__init__()
        self.config = cfg
        d = cfg.d_model
        self.embedding = HierarchicalEmbedding(cfg.s1_bits, cfg.s2_bits, d)
        self.time_emb = TemporalEmbedding(d, cfg.learn_te)
        self.transformer = nn.ModuleList(TransformerBlock(d, cfg.n_heads, cfg.ff_dim) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(d)
        self.dep_layer = DependencyAwareLayer(d)
        self.head = DualHead(cfg.s1_bits, cfg.s2_bits, d)

    def rotary(self, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The angle table every self-attention layer uses (they all share ``head_dim``), built in float32
        (half-precision positions would drift) and cast to the model's dtype."""
        cos, sin = rotary_table(self.transformer[0].self_attn.rotary.inv_freq.float(), length)
        dtype = self.head.proj_s1.weight.dtype
        return cos.to(dtype), sin.to(dtype)

    def _embed(self, s1, s2, stamp):
        x = self.embedding(s1, s2)
        return x if stamp is None else x + self.time_emb(stamp)

    def _window(self, s1, s2, stamp, valid, cos, sin):
        """Full causal pass: normed hidden states ``[B, T, d]`` and each layer's rotated keys/values."""
        t = s1.shape[1]
        mask = attention_mask(valid)
        x, keys, values = self._embed(s1, s2, stamp), [], []
        for layer in self.transformer:
            x, k, v = layer(x, cos[:t], sin[:t], mask)
            keys.append(k)
            values.append(v)
        return self.norm(x), keys, values

    # upstream-compatible full-window API
    def decode_s1(self, s1, s2, stamp=None, valid=None):
        """s1 logits ``[B, T, 2**s1_bits]`` and the context ``[B, T, d]`` (upstream ``decode_s1``)."""
        context, _, _ = self._window(s1, s2, stamp, valid, *self.rotary(s1.shape[1]))
        return self.head.proj_s1(context), context

    def decode_s2(self, context, s1_ids, valid=None):
        """s2 logits ``[B, T, 2**s2_bits]`` given sampled ``s1_ids`` ``[B, 1]`` (upstream ``decode_s2``)."""
        k, v = self.dep_layer.keys_values(context)
        mask = None if valid is None else valid[:, None, None, :]
        sibling = self.embedding.emb_s1(s1_ids)
        return self.head.proj_s2(self.dep_layer(context, sibling, k, v, mask))

    # cached decoding
    @torch.no_grad()
    def prefill(self, s1, s2, stamp, valid, cos, sin, cache: StaticCache, rows: torch.Tensor | None = None):
        """Run the window ``[U, T]`` once, write positions ``0..T-1`` of ``cache``; last-position s1 logits
        ``[N, V1]`` and context ``[N, 1, d]``. ``rows`` ``[N]`` (optional) says which of the ``U`` windows
        each cache row holds, so the sample paths of one series share a single pass over its context."""
        t = s1.shape[1]
        valid = valid if valid is not None else torch.ones_like(s1, dtype=torch.bool)
        context, keys, values = self._window(s1, s2, stamp, valid, cos, sin)
        dep_k, dep_v = self.dep_layer.keys_values(context)
        last = context[:, t - 1 : t]
        if rows is not None:
            keys, values = [k.index_select(0, rows) for k in keys], [v.index_select(0, rows) for v in values]
            dep_k, dep_v, valid, last = (x.index_select(0, rows) for x in (dep_k, dep_v, valid, last))
        cache.write_prefix(keys, values, dep_k, dep_v, valid)
        last = last.contiguous()  # fixed strides for the compiled s2 step
        return self.head.proj_s1(last[:, 0]), last

    def step_s1(self, s1, s2, stamp, pos, cos, sin, k, v, dep_k, dep_v, valid):
        """The newest token ``[N, 1]`` at position ``pos`` (1-element int64 tensor) against the cache.

        Mutates the caches in place (``index_copy_``); every shape is fixed by the cache, so this compiles once.
        """
        valid.index_fill_(1, pos, True)
        mask = valid[:, None, None, :]
        cos_p, sin_p = cos.index_select(0, pos), sin.index_select(0, pos)
        x = self._embed(s1, s2, stamp)
        for i, layer in enumerate(self.transformer):
            x = layer.step(x, cos_p, sin_p, k[i], v[i], pos, mask)
        context = self.norm(x)
        new_k, new_v = self.dep_layer.keys_values(context)
        dep_k.index_copy_(2, pos, new_k)
        dep_v.index_copy_(2, pos, new_v)
        return self.head.proj_s1(context[:, 0]), context

    def step_s2(self, context, s1_ids, dep_k, dep_v, valid):
        """s2 logits ``[N, V2]`` for the sampled ``s1_ids`` ``[N, 1]``, attending the cached dependency keys."""
        sibling = self.embedding.emb_s1(s1_ids)
        x2 = self.dep_layer(context, sibling, dep_k, dep_v, valid[:, None, None, :])
        return self.head.proj_s2(x2[:, 0])

    def draw(self, logits, context, knobs, noise, dep_k, dep_v, valid):
        """Sample s1 from ``logits``, then s2 given it: ``[2, N]`` token ids (uniforms ``noise`` ``[N, V1 + V2]``)."""
        v1 = logits.shape[-1]
        s1 = sample(logits, knobs, noise[:, :v1])
        s2 = sample(self.step_s2(context, s1[:, None], dep_k, dep_v, valid), knobs, noise[:, v1:])
        return torch.stack([s1, s2])

    def step(self, tokens, stamp, pos, noise, knobs, cos, sin, k, v, dep_k, dep_v, valid):
        """One whole decode step on the static cache: the newest ``tokens`` ``[2, N, 1]`` at ``pos`` in, the
        next (s1, s2) written back into ``tokens``. One graph, so a CUDA-graph replay is the entire step."""
        logits, context = self.step_s1(tokens[0], tokens[1], stamp, pos, cos, sin, k, v, dep_k, dep_v, valid)
        tokens.copy_(self.draw(logits, context, knobs, noise, dep_k, dep_v, valid)[:, :, None])
