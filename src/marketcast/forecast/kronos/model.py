"""Kronos: a decoder-only transformer over hierarchical (s1, s2) tokens with a calendar embedding.

Two ways through one set of layers: the full window (:meth:`Kronos.decode_s1` / :meth:`Kronos.decode_s2`,
upstream's API, and :meth:`Kronos.context`, which also returns every layer's keys/values) and one new token
of many sample paths per window against that window's shared context (:meth:`Kronos.step_paths` and
:meth:`Kronos.s2_logits_paths`; fixed shapes, what the decode step compiles).
"""

from __future__ import annotations

import torch
from torch import nn

from marketcast.forecast.kronos.attention import attention_mask, rotary_table
from marketcast.forecast.kronos.config import KronosConfig
from marketcast.forecast.kronos.layers import (
    DependencyAwareLayer,
    DualHead,
    HierarchicalEmbedding,
    RMSNorm,
    TemporalEmbedding,
    TransformerBlock,
)


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

    def rotary_at(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin ``[1, head_dim]`` at position ``pos`` (a 1-element int64 tensor), as :meth:`rotary` rows."""
        inv = self.transformer[0].self_attn.rotary.inv_freq.float()
        angles = pos.float()[:, None] * inv[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        dtype = self.head.proj_s1.weight.dtype
        return angles.cos().to(dtype), angles.sin().to(dtype)

    def _embed(self, s1, s2, stamp):
        x = self.embedding(s1, s2)
        return x if stamp is None else x + self.time_emb(stamp)

    def window_pass(self, s1, s2, stamp, mask):
        """Full causal pass over ``[B, T]`` tokens (``mask`` from :func:`attention_mask`, None = all real):
        normed hidden states ``[B, T, d]`` and each layer's rotated keys/values."""
        cos, sin = self.rotary(s1.shape[1])
        x, keys, values = self._embed(s1, s2, stamp), [], []
        for layer in self.transformer:
            x, k, v = layer(x, cos, sin, mask)
            keys.append(k)
            values.append(v)
        return self.norm(x), keys, values

    # upstream-compatible full-window API
    def decode_s1(self, s1, s2, stamp=None, valid=None):
        """s1 logits ``[B, T, 2**s1_bits]`` and the context ``[B, T, d]`` (upstream ``decode_s1``)."""
        context, _, _ = self.window_pass(s1, s2, stamp, attention_mask(valid))
        return self.head.proj_s1(context), context

    def decode_s2(self, context, s1_ids, valid=None):
        """s2 logits ``[B, T, 2**s2_bits]`` given sampled ``s1_ids`` ``[B, 1]`` (upstream ``decode_s2``)."""
        k, v = self.dep_layer.keys_values(context)
        mask = None if valid is None else valid[:, None, None, :]
        sibling = self.embedding.emb_s1(s1_ids)
        return self.head.proj_s2(self.dep_layer(context, sibling, k, v, mask))

    # sample paths over a shared context
    def step_paths(self, s1, s2, stamp, pos, ctx, paths, new_mask):
        """The newest tokens ``[U, S]`` of S paths per window at rotary position ``pos``, their keys written
        at ``paths.slot``: s1 logits ``[U, S, V1]`` and the normed hidden state ``[U, S, d]`` (whose
        dependency keys are written too). ``ctx``/``paths``: :class:`~.kv_cache.ContextCache`/``PathCache``."""
        cos, sin = self.rotary_at(pos)
        x = self._embed(s1, s2, stamp)[:, :, None]  # [U, S, 1, d]
        for i, layer in enumerate(self.transformer):
            x = layer.step_shared(x, cos, sin, ctx.k[i], ctx.v[i], ctx.mask, paths.k[i], paths.v[i], new_mask,
                                  paths.slot)
        context = self.norm(x)[:, :, 0]
        dep_k, dep_v = self.dep_layer.keys_values(context)  # [U, heads, S, head_dim]: S as the token axis
        paths.dep_k.index_copy_(3, paths.slot, dep_k[:, :, :, None])
        paths.dep_v.index_copy_(3, paths.slot, dep_v[:, :, :, None])
        return self.head.proj_s1(context), context

    def s2_logits_paths(self, context, s1_ids, ctx, paths, new_mask):
        """s2 logits ``[U, S, V2]`` for the sampled ``s1_ids`` ``[U, S]`` after :meth:`step_paths`."""
        sibling = self.embedding.emb_s1(s1_ids)
        x2 = self.dep_layer.step_shared(context, sibling, ctx.dep_k, ctx.dep_v, ctx.mask, paths.dep_k, paths.dep_v,
                                        new_mask)
        return self.head.proj_s2(x2)
