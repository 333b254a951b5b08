"""The Toto backbone (patch embedding, time-/space-wise transformer, unembedding, Student-T mixture head).

Parameter names follow the public checkpoint (``model.`` prefix, fused SwiGLU ``mlp.0.w12``/``mlp.0.w3``), so
``Datadog/Toto-Open-Base-1.0``'s ``model.safetensors`` loads with ``strict=True``.

Two entry points, both with static shapes: :meth:`TotoModel.prefill` runs a whole (padded) context and
returns the mixture parameters of the next patch plus the time-wise keys/values; :meth:`TotoModel.decode`
appends one patch per sequence through a :class:`StaticKVCache`. Only the last patch's output is ever
needed, so after the last time-wise layer the network runs on that patch alone (the unembedding is a
quarter of the parameters).

Rotary embeddings match toto-ts 0.2.0 exactly, including its xPos quirk: the xPos scale is centred on
``max_position // 2`` of the positions in the current call, so a decode step at position ``p`` uses centre
``p // 2`` (computed from the position tensor here, never from a Python int).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from marketcast.forecast.checkpoint import build_empty
from marketcast.forecast.toto.config import TotoConfig
from marketcast.forecast.toto.kv_cache import StaticKVCache
from marketcast.forecast.toto.scaler import ScalerState, causal_patch_scale, scale_next_patch

XPOS_SCALE_BASE = 512
ROPE_THETA = 10000


class MixtureParams(NamedTuple):
    """Student-T mixture per step, float32 ``[rows, variates, steps, components]``."""

    logits: torch.Tensor
    df: torch.Tensor
    loc: torch.Tensor
    scale: torch.Tensor

    def index(self, rows: torch.Tensor) -> "MixtureParams":
        return MixtureParams(*(t.index_select(0, rows) for t in self))


class StepOutput(NamedTuple):
    params: MixtureParams
    loc: torch.Tensor  # scaler loc/scale of the last input patch [rows, variates] (de-normalises params)
    scale: torch.Tensor
    state: ScalerState


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-8) -> None:
        super().__init__()
        self.eps = eps
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps) * self.scale


class SwiGLU(nn.Module):
    """xFormers' packed layout: ``w12`` gives (gate, value), ``w3`` projects back."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w12 = nn.Linear(dim, 2 * hidden)
        self.w3 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, value = self.w12(x).chunk(2, dim=-1)
        return self.w3(F.silu(gate) * value)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.wQKV = nn.Linear(dim, 3 * dim)
        self.wO = nn.Linear(dim, dim)

    def qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``x`` ``[n, seq, dim]`` -> q, k, v ``[n, heads, seq, head_dim]``; toto packs features as
        (qkv, head_dim, heads)."""
        n, s, _ = x.shape
        qkv = self.wQKV(x).view(n, s, 3, self.head_dim, self.heads).permute(2, 0, 4, 1, 3).contiguous()
        return qkv[0], qkv[1], qkv[2]  # one copy here beats strided element-wise ops in rotary/attention

    def out(self, o: torch.Tensor) -> torch.Tensor:
        n, h, s, d = o.shape
        return self.wO(o.transpose(1, 2).reshape(n, s, h * d))


class Layer(nn.Module):
    def __init__(self, cfg: TotoConfig, axis: str) -> None:
        super().__init__()
        self.axis = axis
        self.norm1 = RMSNorm(cfg.embed_dim)
        self.norm2 = RMSNorm(cfg.embed_dim)
        self.attention = Attention(cfg.embed_dim, cfg.num_heads)
        self.mlp = nn.Sequential(SwiGLU(cfg.embed_dim, cfg.mlp_hidden_dim))

    def space(self, x: torch.Tensor) -> torch.Tensor:
        """Bidirectional attention across variates at each patch; ``x`` ``[B, V, N, d]``."""
        b, v, n, d = x.shape
        h = self.norm1(x).transpose(1, 2).reshape(b * n, v, d)
        q, k, val = self.attention.qkv(h)
        o = self.attention.out(F.scaled_dot_product_attention(q, k, val))
        x = x + o.view(b, n, v, d).transpose(1, 2)
        return x + self.mlp(self.norm2(x))


class Rotary(nn.Module):
    """Interleaved rotary embedding with toto-ts's time-aware xPos scaling (no parameters)."""

    def __init__(self, head_dim: int) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.register_buffer("inv_freq", None, persistent=False)
        self.register_buffer("xscale", None, persistent=False)
        self.reset_buffers(None)

    def reset_buffers(self, device: torch.device | str | None) -> None:
        """(Re)compute the frequency tables on ``device`` (not in checkpoints; after a meta-device build)."""
        d = self.head_dim
        arange = torch.arange(0, d, 2, device=device)
        self.inv_freq = 1.0 / (ROPE_THETA ** (arange[: d // 2].float() / d))
        self.xscale = (arange + 0.4 * d) / (1.4 * d)

    def tables(self, positions: torch.Tensor, center: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Query (cos, sin) and key (cos, sin) ``[seq, head_dim]`` with the xPos scale (keys: 1/scale) folded
        in, for float positions and their xPos centre; folding keeps the per-element work on q/k to 3 ops."""
        freqs = (positions[:, None] * self.inv_freq[None, :]).repeat_interleave(2, dim=-1)
        power = (positions - center) / XPOS_SCALE_BASE
        scale = self.xscale ** power[:, None]
        scale = torch.cat((scale, scale), dim=-1)
        cos, sin = freqs.cos(), freqs.sin()
        return cos * scale, sin * scale, cos / scale, sin / scale

    @staticmethod
    def apply(t: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        pairs = t.float().unflatten(-1, (-1, 2))
        rotated = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)
        return (t.float() * cos + rotated * sin).to(t.dtype)


class MixtureHead(nn.Module):
    def __init__(self, dim: int, k: int) -> None:
        super().__init__()
        self.df = nn.Linear(dim, k)
        self.loc_proj = nn.Linear(dim, k)
        self.scale_proj = nn.Linear(dim, k)
        self.mixture_weights = nn.Linear(dim, k)

    def projections(self) -> list[nn.Linear]:
        """In the order :meth:`activate` expects their outputs."""
        return [self.mixture_weights, self.df, self.loc_proj, self.scale_proj]

    def forward(self, h: torch.Tensor) -> MixtureParams:
        h = h.to(self.df.weight.dtype)
        return self.activate(torch.cat([lin(h) for lin in self.projections()], dim=-1))

    @staticmethod
    def activate(raw: torch.Tensor) -> MixtureParams:
        """Raw ``[..., 4K]`` projections (logits, df, loc, scale) -> constrained mixture parameters."""
        logits, df, loc, scale = raw.float().chunk(4, dim=-1)
        eps = torch.finfo(torch.float32).eps
        return MixtureParams(logits=logits, df=2.0 + F.softplus(df).clamp_min(eps), loc=loc,
                             scale=F.softplus(scale).clamp_min(eps))


class PatchEmbed(nn.Module):
    def __init__(self, patch: int, dim: int) -> None:
        super().__init__()
        self.projection = nn.Linear(patch, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projection(x)


class Transformer(nn.Module):
    def __init__(self, cfg: TotoConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Layer(cfg, axis) for axis in cfg.layer_axes())


class Backbone(nn.Module):
    def __init__(self, cfg: TotoConfig) -> None:
        super().__init__()
        self.patch_embed = PatchEmbed(cfg.patch_size, cfg.embed_dim)
        self.transformer = Transformer(cfg)
        self.unembed = nn.Linear(cfg.embed_dim, cfg.embed_dim * cfg.patch_size)
        self.output_distribution = MixtureHead(cfg.embed_dim, cfg.k_components)


class TotoModel(nn.Module):
    """Toto-Open-Base-1.0 compatible model; ``state_dict`` keys equal the public checkpoint's."""

    def __init__(self, config: TotoConfig) -> None:
        super().__init__()
        self.config = config
        self.model = Backbone(config)
        self.rotary = Rotary(config.head_dim)
        self.register_buffer("fused_head_weight", None, persistent=False)  # set by fuse_head()
        self.register_buffer("fused_head_bias", None, persistent=False)
        axes = config.layer_axes()
        self.time_layers = [i for i, a in enumerate(axes) if a == "time"]
        self.last_time = self.time_layers[-1] if self.time_layers else -1

    @property
    def layers(self) -> nn.ModuleList:
        return self.model.transformer.layers

    @property
    def compute_dtype(self) -> torch.dtype:
        return self.model.unembed.weight.dtype

    def set_precision(self, dtype: torch.dtype) -> "TotoModel":
        """Weights and activations in ``dtype``; the mixture head always stays float32."""
        self.to(dtype)
        self.model.output_distribution.float()
        self.rotary.float()
        self.fused_head_weight = self.fused_head_bias = None
        return self

    @torch.no_grad()
    def fuse_head(self) -> "TotoModel":
        """Fold the unembedding into the mixture projections (both linear): one float32 ``[P * 4K, d]`` matrix.

        Why: the unembedding is a quarter of the parameters and 30% of a decode step's FLOPs, but the head
        only needs ``4K`` numbers per step, so ``W_head @ W_unembed[p]`` (computed once, in float64) gives
        the same parameters with an 8x smaller matmul. Call again after changing weights.
        """
        p, d = self.config.patch_size, self.config.embed_dim
        head = self.model.output_distribution.projections()
        w_head = torch.cat([lin.weight for lin in head]).double()  # [4K, d]
        b_head = torch.cat([lin.bias for lin in head]).double()
        w_un = self.model.unembed.weight.double().view(p, d, d)  # [P, d_out, d_in]
        b_un = self.model.unembed.bias.double().view(p, d)
        self.fused_head_weight = torch.einsum("kd,pde->pke", w_head, w_un).reshape(-1, d).float()
        self.fused_head_bias = (b_un @ w_head.T + b_head).reshape(-1).float()
        return self

    def _head(self, h_last: torch.Tensor) -> MixtureParams:
        """``[R, V, d]`` hidden state of the last patch -> mixture parameters of the next patch's steps."""
        r, v, d = h_last.shape
        if self.fused_head_weight is not None:
            raw = F.linear(h_last.float(), self.fused_head_weight, self.fused_head_bias)
            return MixtureHead.activate(raw.view(r, v, self.config.patch_size, -1))
        out = self.model.unembed(h_last).view(r, v, self.config.patch_size, d)
        return self.model.output_distribution(out)

    def prefill(self, x: torch.Tensor, mask: torch.Tensor) -> StepOutput:
        """The next patch's mixture for a context, without keeping keys/values (horizons of one patch)."""
        return self._prefill(x, mask, keep_kv=False)[0]

    def prefill_with_cache(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[StepOutput, torch.Tensor, torch.Tensor]:
        """:meth:`prefill` plus the time-wise keys/values ``[time_layers, B * V, heads, T // patch, head_dim]``."""
        return self._prefill(x, mask, keep_kv=True)

    def _prefill(self, x: torch.Tensor, mask: torch.Tensor, keep_kv: bool) -> tuple[StepOutput, torch.Tensor, torch.Tensor]:
        """``x`` float32 ``[B, V, T]`` (T a multiple of the patch size, left padding masked out by ``mask``).

        Returns the next patch's mixture, the scaler loc/scale of the last patch, the running scaler state and
        (``keep_kv``) the keys/values of every time-wise layer.
        """
        cfg = self.config
        b, v, t = x.shape
        n = t // cfg.patch_size
        scaled, loc, scale, state = causal_patch_scale(
            x, mask, cfg.patch_size, cfg.min_scale, cfg.scale_factor_exponent, cfg.stabilize_with_global)
        h = self.model.patch_embed(scaled.view(b, v, n, cfg.patch_size).to(self.compute_dtype))
        positions = torch.arange(n, device=x.device, dtype=torch.float32)
        q_cos, q_sin, k_cos, k_sin = self.rotary.tables(positions, torch.tensor(float((n - 1) // 2), device=x.device))
        keys, values = [], []
        if self.last_time < 0:
            h = h[:, :, -1:]
        for i, layer in enumerate(self.layers):
            if layer.axis == "space":
                h = layer.space(h)
                continue
            att = layer.attention
            q, k, val = att.qkv(layer.norm1(h).reshape(b * v, -1, cfg.embed_dim))
            q, k = Rotary.apply(q, q_cos, q_sin), Rotary.apply(k, k_cos, k_sin)
            if keep_kv:
                keys.append(k)
                values.append(val)
            if i == self.last_time:  # only the last patch matters from here on
                o = F.scaled_dot_product_attention(q[:, :, -1:], k, val)
                h = h[:, :, -1:]
            else:
                o = F.scaled_dot_product_attention(q, k, val, is_causal=True)
            h = h + att.out(o).view(b, v, -1, cfg.embed_dim)
            h = h + layer.mlp(layer.norm2(h))
        params = self._head(h[:, :, -1])
        if keys:
            kv_k, kv_v = torch.stack(keys), torch.stack(values)
        else:
            kv_k = kv_v = torch.zeros(0, device=x.device, dtype=self.compute_dtype)
        return StepOutput(params, loc[..., -1], scale[..., -1], state), kv_k, kv_v

    def decode(self, cache: StaticKVCache, x: torch.Tensor, state: ScalerState, pos: torch.Tensor) -> StepOutput:
        """Append one sampled patch ``x`` float32 ``[R, V, P]`` at patch position ``pos`` (0-d int64 tensor)."""
        cfg = self.config
        r, v, p = x.shape
        scaled, loc, scale, new_state = scale_next_patch(x, state, cfg.min_scale)
        h = self.model.patch_embed(scaled.to(self.compute_dtype))[:, :, None]
        position = pos.to(torch.float32).reshape(1)
        q_cos, q_sin, k_cos, k_sin = self.rotary.tables(position, torch.div(position, 2, rounding_mode="floor"))
        valid = cache.valid(pos)[None, :]  # [1 query, length] broadcast over rows and heads
        slot = 0
        for layer in self.layers:
            if layer.axis == "space":
                h = layer.space(h)
                continue
            att = layer.attention
            q, k, val = att.qkv(layer.norm1(h).reshape(r * v, 1, cfg.embed_dim))
            q, k = Rotary.apply(q, q_cos, q_sin), Rotary.apply(k, k_cos, k_sin)
            cache.write(slot, pos, k, val)
            o = F.scaled_dot_product_attention(q, cache.keys(slot), cache.values(slot), attn_mask=valid)
            slot += 1
            h = h + att.out(o).view(r, v, 1, cfg.embed_dim)
            h = h + layer.mlp(layer.norm2(h))
        return StepOutput(self._head(h[:, :, 0]), loc, scale, new_state)

    def new_cache(self, rows: int, length_patches: int, device: torch.device | str) -> StaticKVCache:
        return StaticKVCache(max(1, len(self.time_layers)), rows, self.config.num_heads, length_patches,
                             self.config.head_dim, self.compute_dtype, device)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def init_weights(model: TotoModel, seed: int) -> TotoModel:
    """Deterministic random init in place (PyTorch's default Linear bounds under a fixed seed, RMSNorm
    scales 1): every parameter is written, so the model may come from ``to_empty``."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear):
                bound = 1.0 / math.sqrt(module.in_features)
                module.weight.uniform_(-bound, bound, generator=g)
                module.bias.uniform_(-bound, bound, generator=g)
            elif isinstance(module, RMSNorm):
                module.scale.fill_(1.0)
    return model


def random_model(config: TotoConfig, seed: int) -> TotoModel:
    """A CPU model with :func:`init_weights`' weights, allocated once (no default init to overwrite)."""
    model = build_empty(lambda: TotoModel(config)).to_empty(device="cpu")
    model.rotary.reset_buffers("cpu")
    return init_weights(model, seed).eval()
