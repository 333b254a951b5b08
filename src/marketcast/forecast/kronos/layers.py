"""Kronos building blocks, inference-only, with upstream's module and parameter names.

Every attention takes its rotary angles from the caller (one table per model, computed once for the
whole window) and returns its rotated keys/values, so the same code serves the full-window pass over a
context and the new tokens of many sample paths attending that context (``*_shared``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from marketcast.forecast.kronos.attention import attend, attend_shared, rotate


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return h.type_as(x) * self.weight


class FeedForward(nn.Module):
    """SwiGLU: ``w2(silu(w1 x) * w3 x)``."""

    def __init__(self, d_model: int, ff_dim: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(d_model, ff_dim, bias=False)
        self.w3 = nn.Linear(d_model, ff_dim, bias=False)
        self.w2 = nn.Linear(ff_dim, d_model, bias=False)
        self.register_buffer("w13", None, persistent=False)  # set by fuse()

    @torch.no_grad()
    def fuse(self) -> None:
        """Stack ``w1``/``w3`` into one matrix: one GEMM instead of two (see :func:`fuse_projections`)."""
        self.w13 = torch.cat([self.w1.weight, self.w3.weight])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.w13 is None:
            return self.w2(F.silu(self.w1(x)) * self.w3(x))
        gate, value = F.linear(x, self.w13).chunk(2, dim=-1)
        return self.w2(F.silu(gate) * value)


class Rotary(nn.Module):
    """Holds ``inv_freq`` (a checkpoint key); the angle table is built by :func:`rotary_table`."""

    def __init__(self, head_dim: int) -> None:
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim)))


class _Projections(nn.Module):
    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.rotary = Rotary(self.head_dim)
        self.register_buffer("qkv_weight", None, persistent=False)  # set by fuse()
        self.register_buffer("qkv_bias", None, persistent=False)

    @torch.no_grad()
    def fuse(self) -> None:
        """Stack the q/k/v projections into one matrix: one GEMM instead of three (or two for k/v)."""
        self.qkv_weight = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
        self.qkv_bias = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])

    def heads(self, proj: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)

    def _fused(self, x: torch.Tensor, first: int) -> tuple[torch.Tensor, ...]:
        """Projections ``first..2`` of (q, k, v) from the stacked matrix, as ``[B, heads, T, head_dim]``."""
        b, t, d = x.shape
        y = F.linear(x, self.qkv_weight[first * d:], self.qkv_bias[first * d:])
        return tuple(y.view(b, t, 3 - first, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4))

    def qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self.qkv_weight is None:
            return self.heads(self.q_proj, x), self.heads(self.k_proj, x), self.heads(self.v_proj, x)
        return self._fused(x, 0)

    def kv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.qkv_weight is None:
            return self.heads(self.k_proj, x), self.heads(self.v_proj, x)
        return self._fused(x, 1)

    def merge(self, o: torch.Tensor) -> torch.Tensor:
        b, _, t, _ = o.shape
        return self.out_proj(o.transpose(1, 2).reshape(b, t, self.n_heads * self.head_dim))

    def path_heads(self, x: torch.Tensor, parts: str = "qkv") -> tuple[torch.Tensor, ...]:
        """``x`` ``[U, S, L, d]`` (L new tokens of S paths per window) -> each of ``parts`` as
        ``[U, heads, S, L, head_dim]``."""
        weight = self.qkv_weight if self.qkv_weight is not None else torch.cat(
            [self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
        bias = self.qkv_bias if self.qkv_bias is not None else torch.cat(
            [self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])
        d, first = x.shape[-1], "qkv".index(parts[0])
        y = F.linear(x, weight[first * d:(first + len(parts)) * d], bias[first * d:(first + len(parts)) * d])
        y = y.view(*x.shape[:-1], len(parts), self.n_heads, self.head_dim)
        return tuple(y.permute(3, 0, 4, 1, 2, 5))

    def merge_paths(self, o: torch.Tensor) -> torch.Tensor:
        """``[U, heads, S, L, head_dim]`` -> ``[U, S, L, d]`` through ``out_proj``."""
        u, h, s, length, hd = o.shape
        return self.out_proj(o.permute(0, 2, 3, 1, 4).reshape(u, s, length, h * hd))


class SelfAttention(_Projections):
    """Causal self-attention with RoPE; ``mask`` (bool, True = may attend) replaces plain causality."""

    def forward(self, x, cos, sin, mask=None):
        q, k, v = self.qkv(x)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if mask is None:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.merge(o), k, v

    def step_shared(self, x, cos, sin, ctx_k, ctx_v, ctx_mask, new_k, new_v, new_mask, slot=None):
        """New tokens ``x`` ``[U, S, L, d]`` of S paths per window over the shared context and their own new
        keys. With ``slot`` (one token per path) its keys/values are written into ``new_k``/``new_v``
        ``[U, heads, S, M, head_dim]`` at that slot first; without, the L tokens attend each other."""
        q, k, v = self.path_heads(x)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if slot is not None:
            new_k.index_copy_(3, slot, k)
            new_v.index_copy_(3, slot, v)
            k, v = new_k, new_v
        return self.merge_paths(attend_shared(q, ctx_k, ctx_v, ctx_mask, k, v, new_mask))


class TransformerBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, ff_dim: int) -> None:
        super().__init__()
        self.norm1 = RMSNorm(d_model)
        self.self_attn = SelfAttention(d_model, n_heads)
        self.norm2 = RMSNorm(d_model)
        self.ffn = FeedForward(d_model, ff_dim)

    def forward(self, x, cos, sin, mask=None):
        attn, k, v = self.self_attn(self.norm1(x), cos, sin, mask)
        x = x + attn
        return x + self.ffn(self.norm2(x)), k, v

    def step_shared(self, x, cos, sin, ctx_k, ctx_v, ctx_mask, new_k, new_v, new_mask, slot=None):
        """:meth:`SelfAttention.step_shared` inside the block (``x`` ``[U, S, L, d]``)."""
        x = x + self.self_attn.step_shared(self.norm1(x), cos, sin, ctx_k, ctx_v, ctx_mask, new_k, new_v, new_mask,
                                           slot)
        return x + self.ffn(self.norm2(x))


class DependencyAwareLayer(nn.Module):
    """s2 conditioning: the sampled s1 embedding queries the transformer output (4 heads, as upstream).

    Upstream builds the rotary angles from the query length, which is 1 at inference, so queries and keys
    are rotated by position 0 (the identity); no rotation is applied here and keys/values can be cached.
    """

    def __init__(self, d_model: int, n_heads: int = 4) -> None:
        super().__init__()
        self.cross_attn = _Projections(d_model, n_heads)
        self.norm = RMSNorm(d_model)

    def keys_values(self, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.cross_attn.kv(context)

    def forward(self, hidden, sibling, k, v, mask=None):
        a = self.cross_attn
        o = attend(a.heads(a.q_proj, sibling), k, v, mask)
        return self.norm(hidden + a.merge(o))

    def step_shared(self, hidden, sibling, ctx_k, ctx_v, ctx_mask, new_k, new_v, new_mask):
        """``hidden``/``sibling`` ``[U, S, d]``: one query per path over the shared context's dependency
        keys and the path's own (``[U, heads, S, M, head_dim]``)."""
        a = self.cross_attn
        (q,) = a.path_heads(sibling[:, :, None], "q")
        o = attend_shared(q, ctx_k, ctx_v, ctx_mask, new_k, new_v, new_mask)
        return self.norm(hidden + a.merge_paths(o)[:, :, 0])


class HierarchicalEmbedding(nn.Module):
    def __init__(self, s1_bits: int, s2_bits: int, d_model: int) -> None:
        super().__init__()
        self.d_model = d_model
        self.emb_s1 = nn.Embedding(2**s1_bits, d_model)
        self.emb_s2 = nn.Embedding(2**s2_bits, d_model)
        self.fusion_proj = nn.Linear(2 * d_model, d_model)

    def forward(self, s1: torch.Tensor, s2: torch.Tensor) -> torch.Tensor:
        scale = math.sqrt(self.d_model)
        return self.fusion_proj(torch.cat([self.emb_s1(s1) * scale, self.emb_s2(s2) * scale], dim=-1))


class FixedEmbedding(nn.Module):
    """Frozen sinusoidal table (upstream's ``learn_te=False``; stored in checkpoints as ``emb.weight``)."""

    def __init__(self, size: int, d_model: int) -> None:
        super().__init__()
        pos = torch.arange(size).float()[:, None]
        div = (torch.arange(0, d_model, 2).float() * -(math.log(10000.0) / d_model)).exp()
        w = torch.zeros(size, d_model)
        w[:, 0::2], w[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        self.emb = nn.Embedding(size, d_model)
        self.emb.weight = nn.Parameter(w, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.emb(x)


# calendar features in the order the stamp tensor carries them, with their table sizes
TIME_FEATURES = (("minute", 60), ("hour", 24), ("weekday", 7), ("day", 32), ("month", 13))


class TemporalEmbedding(nn.Module):
    def __init__(self, d_model: int, learn_te: bool) -> None:
        super().__init__()
        make = nn.Embedding if learn_te else FixedEmbedding
        for name, size in TIME_FEATURES:
            setattr(self, f"{name}_embed", make(size, d_model))

    def forward(self, stamp: torch.Tensor) -> torch.Tensor:
        """``stamp`` ``[..., 5]`` integer minute, hour, weekday, day, month."""
        s = stamp.long()
        minute, hour, weekday, day, month = (getattr(self, f"{n}_embed")(s[..., i]) for i, (n, _) in
                                             enumerate(TIME_FEATURES))
        return hour + weekday + day + month + minute  # upstream's summation order


class DualHead(nn.Module):
    def __init__(self, s1_bits: int, s2_bits: int, d_model: int) -> None:
        super().__init__()
        self.proj_s1 = nn.Linear(d_model, 2**s1_bits)
        self.proj_s2 = nn.Linear(d_model, 2**s2_bits)


def fuse_projections(module: nn.Module) -> nn.Module:
    """Stack the q/k/v and SwiGLU gate/value weights of every layer in ``module`` (in place, returns it).

    Why: a decode step multiplies a handful of rows, so each GEMM costs a kernel launch, not FLOPs; stacking
    removes three of the seven per transformer block. The stacked copies are float buffers outside the
    ``state_dict`` (checkpoints keep upstream's keys) that follow ``.to()``; call again after changing weights.
    """
    for m in module.modules():
        if isinstance(m, (FeedForward, _Projections)):
            m.fuse()
    return module


def init_weights(module: nn.Module, d_model: int) -> None:
    """Upstream Kronos init for random weights: xavier-normal linears, N(0, d^-1/2) embeddings."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_normal_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding) and m.weight.requires_grad:
            nn.init.normal_(m.weight, mean=0.0, std=d_model**-0.5)
