"""Toto 2.0 in one readable file: u-μP scaled patch embedding, alternating time / variate attention and a
9-quantile head, weight-compatible with Datadog's ``toto-2`` checkpoints (same state-dict keys).

u-μP (Blake et al. 2024, "u-μP: The Unit-Scaled Maximal Update Parametrization", arXiv:2407.17465) keeps
weights at unit scale and puts the width factors into the forward pass. At inference only the forward scales
matter, and they are constants:

* a hidden linear multiplies its output (bias included) by ``1/sqrt(fan_in)``, a readout linear by ``1/fan_in``;
* unit-scaled SiLU multiplies ``silu(x)`` by :data:`SILU_SCALE` (unit_scaling's empirical model of the swish
  output std at ``mult=1``: a log-interpolation between 2 and ``sqrt(2 / (1 - 1/pi))`` at ``alpha=0.8``);
* a residual join with weight ``tau`` is ``residual * tau / sqrt(1 + tau^2) + skip / sqrt(1 + tau^2)``, with
  per-layer ``tau`` from the u-μP transformer rule (Appendix G), stored in the checkpoint as buffers;
* attention scores use ``1/d_head`` instead of ``1/sqrt(d_head)``.

:meth:`Toto2Model.fold_scales` bakes those constants into the weights once after loading, so the forecasting
graph is plain linears; the unfolded path is kept for the equivalence tests.

Forecasting is one pass by default (:meth:`Toto2Model.quantiles`): the context patches and ``horizon`` masked
placeholder patches run through the stack together and the output at position ``i`` predicts patch ``i + 1``.
toto-2 2.0.0's ``Toto2Model.forecast`` also has block decoding (``decode_block_size``: blocks of patches with the
medians fed back, the scaler re-run and a KV cache over the time layers). It is off by default there
(``forecast``: 0, ``Toto2GluonTSModelConfig``: None), its README ran every leaderboard result in one pass and
suggests blocks for horizons of ~1000+ steps, and it changes nothing unless the horizon exceeds the block.
:meth:`Toto2Model.decode_quantiles` reproduces it, with one static cache buffer per time layer, so a whole
decode compiles into one graph per shape bucket.

Three things the reference computes and throws away are skipped: the last placeholder patch (its output
predicts nothing asked for); after the last time-attention layer, every position whose output is not read; and
in that layer, the queries of the positions it does not read (keys and values still cover every position). The
published layouts (:meth:`Toto2Config.size`) have one variate layer, the last: it runs on the read positions
only. On CPU in float32 the forecaster sends the linears, ~75% of the time, to oneDNN (:func:`onednn_linear`).
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from marketcast.forecast.toto2.config import QUANTILES, Toto2Config

SILU_SCALE = math.exp(0.8 * math.log((2 / (1 - 1 / math.pi)) ** 0.5) + 0.2 * math.log(2.0))
SOFTPLUS_SCALE = 0.52103  # unit-scaled softplus output std at N(0, 1) input; per-dim scale divides it back out
MIN_SCALE = 1e-6  # the causal scaler's floor
ROPE_BASE, ROPE_FRACTION, XPOS_BASE = 10000, 0.5, 256


def tau_rule(index: int, layers: int, residual_mult: float, attn_ratio: float) -> float:
    """u-μP residual weight of sub-layer ``index`` (even: attention, odd: MLP) of ``layers`` sub-layers."""
    alpha_mlp = residual_mult * (2 / (1 + attn_ratio**2)) ** 0.5
    alpha_attn = attn_ratio * alpha_mlp
    n_attn, n_mlp = (index + 1) // 2, index // 2
    alpha = alpha_attn if index % 2 == 0 else alpha_mlp
    return alpha / (layers / 2 + n_attn * alpha_attn**2 + n_mlp * alpha_mlp**2) ** 0.5


@torch.library.custom_op("marketcast::toto2_onednn_linear", mutates_args=())
def onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
    """``F.linear`` as one oneDNN fp32 inner product (IEEE fp32, no reduced-precision math).

    ATen sends fp32 linears on CPU to MKL's sgemm. On this project's 2-core AMD EPYC (Zen 5) box oneDNN ran the
    22M projections 1.3x (idle) to 2x (cores shared) faster one by one, and the whole compiled 22M model 1.9x
    faster (benchmarks/toto2_bench.py, "aten-linear" row). A custom op, so inductor calls it as one extern kernel
    and still fuses the elementwise work around it; no autograd: inference only.
    """
    flat = x.reshape(-1, x.shape[-1]).contiguous()
    out = torch.ops.mkldnn._linear_pointwise(flat, weight.contiguous(), bias, "none", [], "")
    return out.view(*x.shape[:-1], weight.shape[0])


@onednn_linear.register_fake
def _onednn_linear_shape(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


def onednn_usable(device: torch.device, dtype: torch.dtype) -> bool:
    """oneDNN linears pay off for float32 on CPU (bfloat16 linears already run on oneDNN there)."""
    return (device.type == "cpu" and dtype == torch.float32 and torch.backends.mkldnn.is_available()
            and torch.backends.mkldnn.enabled and hasattr(torch.ops.mkldnn, "_linear_pointwise"))  # private op


class ScaledLinear(nn.Linear):
    """``F.linear(x, W, b) * scale``: u-μP's forward factor (1 after :meth:`fold`)."""

    def __init__(self, fan_in: int, fan_out: int, bias: bool, readout: bool = False) -> None:
        super().__init__(fan_in, fan_out, bias)
        self.scale = 1.0 / fan_in if readout else fan_in**-0.5
        self.onednn = False  # Toto2Model.use_onednn: inference only (the op has no backward)

    def reset_parameters(self) -> None:  # unit-scaled init: N(0, 1) weights, zero bias
        nn.init.normal_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    @torch.no_grad()
    def fold(self, weight_factor: float = 1.0, bias_factor: float | None = None) -> None:
        """Multiply the weights by ``scale * weight_factor`` (bias by ``scale * bias_factor``)."""
        self.weight.mul_(self.scale * weight_factor)
        if self.bias is not None:
            self.bias.mul_(self.scale * (weight_factor if bias_factor is None else bias_factor))
        self.scale = 1.0

    def forward(self, x: torch.Tensor, rows: slice | None = None) -> torch.Tensor:
        """``rows``: only those output features (a slice of the weight's rows), e.g. the queries of ``in_proj``."""
        weight, bias = self.weight, self.bias
        if rows is not None:
            weight, bias = weight[rows], None if bias is None else bias[rows]
        y = onednn_linear(x, weight, bias) if self.onednn else F.linear(x, weight, bias)
        return y if self.scale == 1.0 else y * self.scale


class RMSNorm(nn.Module):
    """RMS normalisation over the last dim (float32 statistics), with an optional weight."""

    def __init__(self, dim: int, eps: float, weight: bool) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim)) if weight else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = (x.float().pow(2).mean(-1, keepdim=True) + self.eps).sqrt().to(x.dtype)
        x = x / rms
        return x if self.weight is None else x * self.weight


class PerDimScale(nn.Module):
    """Learned positive per-dimension query scale ``softplus(p) / log 2`` (1 at ``p = 0``)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.per_dim_scale = nn.Parameter(torch.zeros(dim))

    def factor(self) -> torch.Tensor:
        # unit-scaled softplus (x 1/0.52103), then per_dim_scale's output scale (x 0.52103): kept as two steps
        return F.softplus(self.per_dim_scale) * (1 / SOFTPLUS_SCALE) / math.log(2.0)


class ResidualMLP(nn.Module):
    """``silu`` MLP plus a linear skip joined with ``tau = 1``: the patch embedding and the output head."""

    def __init__(self, fan_in: int, hidden: int, fan_out: int, readout: bool) -> None:
        super().__init__()
        self.linear1 = ScaledLinear(fan_in, hidden, True)
        self.linear2 = ScaledLinear(hidden, fan_out, True, readout)
        self.skip_proj = ScaledLinear(fan_in, fan_out, True, readout)
        self.act_scale, self.join = SILU_SCALE, 1 / 2**0.5

    def fold(self) -> None:
        self.linear1.fold()
        self.linear2.fold(self.act_scale * self.join, self.join)
        self.skip_proj.fold(self.join)
        self.act_scale = self.join = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.silu(self.linear1(x))
        if self.act_scale != 1.0:
            h = h * self.act_scale
        h, skip = self.linear2(h), self.skip_proj(x)
        return h + skip if self.join == 1.0 else h * self.join + skip * self.join


class Rope:
    """Rotary tables for the first half of each head (interleaved pairs) with xPos scaling (Sun et al. 2022,
    "A Length-Extrapolatable Transformer"): queries times ``s^+1``, keys times ``s^-1``."""

    def __init__(self, head_dim: int, length: int, full_length: int, xpos: bool, device, dtype,
                 start: int = 0) -> None:
        """Positions ``start .. start + length - 1``; xPos centres on ``full_length // 2`` (toto-2: one past the
        largest position of the call, trimmed positions included)."""
        width = int(head_dim * ROPE_FRACTION)
        self.width = width
        theta = 1.0 / torch.pow(ROPE_BASE, torch.arange(0, width, 2, dtype=torch.float32, device=device) / width)
        pos = torch.arange(start, start + length, dtype=torch.float32, device=device)
        angles = (pos[:, None] * theta[None, :]).repeat_interleave(2, -1)
        self.cos, self.sin = angles.cos().to(dtype), angles.sin().to(dtype)
        self.q_scale = self.k_scale = None
        if xpos:
            base = (torch.arange(0, width, 2, device=device).float() + 0.4 * width) / (1.4 * width)
            center = full_length // 2  # toto-2 centres on the full (untrimmed) sequence
            power = (pos - center) / XPOS_BASE
            scale = (base ** power[:, None]).repeat_interleave(2, -1)
            self.q_scale, self.k_scale = (scale**1.0).to(dtype), (scale**-1.0).to(dtype)

    @staticmethod
    def _turn(x: torch.Tensor) -> torch.Tensor:
        pairs = x.unflatten(-1, (-1, 2))
        return torch.stack((-pairs[..., 1], pairs[..., 0]), -1).flatten(-2)

    def apply(self, x: torch.Tensor, scale: torch.Tensor | None, rows: slice) -> torch.Tensor:
        w = self.width
        rot = x[..., :w]
        rot = self.cos[rows] * rot + self.sin[rows] * self._turn(rot)
        if scale is not None:
            rot = rot * scale[rows]
        return torch.cat((rot, x[..., w:]), -1)


class Attention(nn.Module):
    """Grouped-query self-attention; time layers use rotary positions, variate layers none."""

    def __init__(self, c: Toto2Config) -> None:
        super().__init__()
        self.c = c
        self.sizes = (c.qk_dim * c.num_heads, c.qk_dim * c.num_groups, c.v_dim * c.num_groups)
        self.in_proj = ScaledLinear(c.d_model, sum(self.sizes), c.attn_bias)
        self.out_proj = ScaledLinear(c.v_dim * c.num_heads, c.d_model, c.attn_bias)
        if c.qk_norm:
            self.q_norm = RMSNorm(c.qk_dim, c.norm_eps, c.qk_norm_include_weight)
            self.k_norm = RMSNorm(c.qk_dim, c.norm_eps, c.qk_norm_include_weight)
        if c.per_dim_scale:
            self._pds = PerDimScale(c.qk_dim)
        self.pds_folded = False

    @torch.no_grad()
    def fold(self, out_factor: float) -> None:
        c = self.c
        if c.per_dim_scale and not c.qk_norm:  # q * r per head dim == scaling the query rows of in_proj
            r = (self._pds.factor().double() * SOFTPLUS_SCALE).float().repeat(c.num_heads)
            rows = torch.cat([r, torch.ones(sum(self.sizes[1:]), device=r.device)])
            self.in_proj.weight.mul_(rows[:, None])
            if self.in_proj.bias is not None:
                self.in_proj.bias.mul_(rows)
            self.pds_folded = True
        self.in_proj.fold()
        self.out_proj.fold(out_factor)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, rope: Rope | None, queries: int,
                cache: tuple[torch.Tensor, torch.Tensor, int] | None = None) -> torch.Tensor:
        """``x`` ``[N, S, d]``; the last ``queries`` positions attend (keys: all); ``mask`` bool (True = attend).

        ``cache`` ``(keys, values, start)``: ``x`` holds positions ``start ..``; their keys and values are written
        there and the queries attend to every cached position up to the last one of ``x`` (block decoding).
        """
        c = self.c
        n, s, _ = x.shape
        if queries < s and type(self.in_proj) is ScaledLinear:  # (a LoRA wrapper computes every row)
            nq = self.sizes[0]  # project queries only where they are read
            q = self.in_proj(x[:, s - queries:], slice(0, nq))
            k, v = self.in_proj(x, slice(nq, None)).split(self.sizes[1:], -1)
        else:
            q, k, v = self.in_proj(x).split(self.sizes, -1)
            q = q[:, s - queries:]
        q = q.unflatten(-1, (c.num_heads, c.qk_dim)).transpose(1, 2)
        k = k.unflatten(-1, (c.num_groups, c.qk_dim)).transpose(1, 2)
        v = v.unflatten(-1, (c.num_groups, c.v_dim)).transpose(1, 2)
        if c.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        if c.per_dim_scale and not self.pds_folded:
            q = (q * self._pds.factor().to(q.dtype)) * SOFTPLUS_SCALE
        if rope is not None:
            q = rope.apply(q, rope.q_scale, slice(s - queries, s))
            k = rope.apply(k, rope.k_scale, slice(0, s))
        if cache is not None:
            keys, values, start = cache
            keys[:, :, start:start + s], values[:, :, start:start + s] = k, v
            k, v = keys[:, :, :start + s], values[:, :, :start + s]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0 / c.qk_dim,
                                             enable_gqa=c.heads_per_group > 1)
        return self.out_proj(out.transpose(1, 2).flatten(-2))


class FeedForward(nn.Module):
    """SwiGLU without u-μP activation scaling: ``fc2(a * silu(b))`` with ``[a | b] = fc1(x)``."""

    def __init__(self, c: Toto2Config) -> None:
        super().__init__()
        self.fc1 = ScaledLinear(c.d_model, 2 * c.d_ff, c.mlp_bias)
        self.fc2 = ScaledLinear(c.d_ff, c.d_model, c.mlp_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.fc1(x).chunk(2, -1)
        return self.fc2(a * F.silu(b))


class Layer(nn.Module):
    """Pre-norm attention and SwiGLU blocks, each joined to the stream with its u-μP ``tau``."""

    def __init__(self, c: Toto2Config, index: int, variate: bool) -> None:
        super().__init__()
        self.variate = variate
        self.attn = Attention(c)
        self.ffn = FeedForward(c)
        self.norm1 = RMSNorm(c.d_model, c.norm_eps, c.norm_include_weight)
        self.norm2 = RMSNorm(c.d_model, c.norm_eps, c.norm_include_weight)
        depth = 2 * c.num_layers
        self.register_buffer("attn_tau", torch.tensor(tau_rule(2 * index, depth, c.residual_mult,
                                                               c.residual_attn_ratio)))
        self.register_buffer("mlp_tau", torch.tensor(tau_rule(2 * index + 1, depth, c.residual_mult,
                                                              c.residual_attn_ratio)))
        self.skips: tuple[float, float] | None = None  # (attn, mlp) skip weights once folded

    @staticmethod
    def _weights(tau: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        denom = (1 + tau**2) ** 0.5
        return tau / denom, 1 / denom

    @torch.no_grad()
    def fold(self) -> None:
        (a_attn, b_attn), (a_mlp, b_mlp) = self._weights(self.attn_tau), self._weights(self.mlp_tau)
        self.attn.fold(float(a_attn))
        self.ffn.fc1.fold()
        self.ffn.fc2.fold(float(a_mlp))
        self.skips = (float(b_attn), float(b_mlp))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, rope: Rope | None, queries: int,
                cache: tuple[torch.Tensor, torch.Tensor, int] | None = None) -> torch.Tensor:
        skip = x[:, x.shape[1] - queries:]
        h = self.attn(self.norm1(x), mask, rope, queries, cache)
        if self.skips is None:
            (a, b), (a2, b2) = self._weights(self.attn_tau), self._weights(self.mlp_tau)
            x = a * h + b * skip
            return a2 * self.ffn(self.norm2(x)) + b2 * x
        x = h + skip * self.skips[0]
        return self.ffn(self.norm2(x)) + x * self.skips[1]


class Transformer(nn.Module):
    """The layer stack and final norm (module names follow the checkpoint's keys: ``transformer.layers.N``)."""

    def __init__(self, c: Toto2Config) -> None:
        super().__init__()
        variate = c.variate_layers()
        self.layers = nn.ModuleList(Layer(c, i, v) for i, v in enumerate(variate))
        self.last_time = max([i for i, v in enumerate(variate) if not v] or [-1])  # the last time-attention layer
        self.out_norm = RMSNorm(c.d_model, c.norm_eps, c.norm_include_weight)


class QuantileHead(nn.Module):
    """Residual MLP to ``patch x 9`` quantile values (keys ``output_head.param_projection.proj.*``)."""

    def __init__(self, c: Toto2Config) -> None:
        super().__init__()
        self.param_projection = nn.Module()
        self.param_projection.proj = ResidualMLP(c.d_model, 4 * c.d_model, c.patch_size * len(QUANTILES), True)


class Toto2Model(nn.Module):
    """Toto 2.0's network; :meth:`quantiles` turns context windows into the 9 quantiles of the horizon."""

    def __init__(self, config: Toto2Config) -> None:
        super().__init__()
        self.config = config
        c = config
        self.patch_proj = ResidualMLP(2 * c.patch_size, 4 * c.d_model, c.d_model, False)
        self.transformer = Transformer(c)
        self.output_head = QuantileHead(c)
        self.folded = False
        self.dtype = torch.float32

    def fold_scales(self) -> "Toto2Model":
        """Bake every constant u-μP factor into the weights (inference only; the state dict changes)."""
        if not self.folded:
            self.patch_proj.fold()
            self.output_head.param_projection.proj.fold()
            for layer in self.transformer.layers:
                layer.fold()
            self.folded = True
        return self

    def use_onednn(self, enabled: bool = True) -> "Toto2Model":
        """Route every linear through :func:`onednn_linear` (inference only: that op has no backward)."""
        for module in self.modules():
            if isinstance(module, ScaledLinear):
                module.onednn = enabled
        return self

    def set_precision(self, dtype: torch.dtype) -> "Toto2Model":
        """Run the network in ``dtype``; scaler statistics stay float64/float32 and the head's output float32."""
        self.dtype = dtype
        for module in self.modules():
            for name, p in list(module.named_parameters(recurse=False)):
                p.data = p.data.to(dtype)
        return self

    # --- the scaler -----------------------------------------------------------------------------------

    def _stats(self, x: torch.Tensor, mask: torch.Tensor, min_obs: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Causal mean / std (float64 Welford sums, Bessel-corrected) at the end of each context patch, plus one
        last column for the horizon (the whole context): ``[B, V, patches + 1]`` float32 each.

        Leading patches with fewer than ``min_obs`` observations so far take the mean / std of the first
        ``min_obs`` observations instead (toto-2's ``scaler_fallback_min_obs``; 0 = off).
        """
        p = self.config.patch_size
        xd, md = x.double(), mask.double()
        count = md.cumsum(-1)
        n = count.clamp_min(1)
        loc = (xd * md).cumsum(-1) / n
        prev = torch.cat([torch.zeros_like(loc[..., :1]), loc[..., :-1]], -1)
        m2 = ((xd - prev) * (xd - loc) * md).cumsum(-1)
        scale = (m2 / (n - 1).clamp(min=1)).sqrt().clamp(min=MIN_SCALE)
        ends = slice(p - 1, None, p)
        loc, scale = loc[..., ends].float(), scale[..., ends].float()
        loc, scale = torch.cat([loc, loc[..., -1:]], -1), torch.cat([scale, scale[..., -1:]], -1)
        if min_obs > 0:
            first = (count <= min_obs) & mask
            k = first.sum(-1, keepdim=True).clamp(min=1)
            donor_loc = (x * first).sum(-1, keepdim=True) / k
            donor_var = (((x - donor_loc) * first) ** 2).sum(-1, keepdim=True) / (k - 1).clamp(min=1)
            donor_scale = donor_var.sqrt().clamp(min=MIN_SCALE)
            seen = mask.unflatten(-1, (-1, p)).sum(-1).cumsum(-1)
            below = torch.cat([seen, seen[..., -1:]], -1) < min_obs
            loc = torch.where(below, donor_loc.expand_as(loc), loc)
            scale = torch.where(below, donor_scale.expand_as(scale), scale)
        return loc, scale

    # --- forecasting ----------------------------------------------------------------------------------

    def quantiles(self, x: torch.Tensor, mask: torch.Tensor, series_ids: torch.Tensor, num_patches: int,
                  min_obs: int = 0, cap_k: float = 0.0) -> torch.Tensor:
        """``[9, B, V, num_patches * patch]`` float32 quantiles (sorted) of the patches after the context.

        ``x``/``mask`` ``[B, V, T]`` with ``T`` a multiple of the patch size; mask False = unobserved (the last
        patch counts as observed, as in toto-2). ``series_ids`` ``[B, V]``: variates attend across each other
        only within one id. ``cap_k > 0`` clips each quantile to the context range widened by ``cap_k`` last
        scales (toto-2's ``quantile_real_cap_k``).
        """
        c, p = self.config, self.config.patch_size
        b, nvar, t = x.shape
        ctx = t // p
        mask = torch.cat([mask[..., :t - p], torch.ones_like(mask[..., t - p:])], -1)
        loc, scale = self._stats(x, mask, min_obs)
        z = (x - loc[..., :ctx].repeat_interleave(p, -1)) / scale[..., :ctx].repeat_interleave(p, -1)
        z = torch.where(mask, z, torch.zeros_like(z)).asinh()
        patches = torch.cat([z.unflatten(-1, (ctx, p)), (~mask).to(x.dtype).unflatten(-1, (ctx, p))], -1)
        h = self.patch_proj(patches.to(self.dtype))  # [B, V, ctx, d]
        # Placeholder patches (unobserved zeros) for all but the last horizon patch: all the same embedding.
        blank = torch.cat([torch.zeros(p, device=x.device), torch.ones(p, device=x.device)]).to(self.dtype)
        h = torch.cat([h, self.patch_proj(blank).expand(b, nvar, num_patches - 1, -1)], -2)
        unseen = mask.unflatten(-1, (ctx, p)).sum(-1) == 0  # [B, V, ctx]
        unseen = torch.cat([unseen, torch.zeros_like(unseen[..., :1]).expand(b, nvar, num_patches - 1)], -1)
        h = self._stack(h.flatten(0, 1), unseen, series_ids, num_patches, ctx + num_patches)
        out = self.output_head.param_projection.proj(h).float()  # [B*V, num_patches, P * 9]
        q = out.unflatten(-1, (p, len(QUANTILES))).view(b, nvar, num_patches, p, -1).permute(4, 0, 1, 2, 3)
        loc_h, scale_h = loc[..., -1:, None], scale[..., -1:, None]  # [B, V, 1, 1]
        real = q.sinh() * scale_h + loc_h  # [9, B, V, patches, P]
        real = self._finite(real)
        if cap_k > 0:
            seen_x = x[..., :t]
            hi = torch.where(mask, seen_x, torch.full_like(seen_x, -torch.inf)).amax(-1, keepdim=True)
            lo = torch.where(mask, seen_x, torch.full_like(seen_x, torch.inf)).amin(-1, keepdim=True)
            width = cap_k * scale[..., ctx - 1:ctx]
            hi = (torch.nan_to_num(hi, neginf=0.0) + width)[..., None]
            lo = (torch.nan_to_num(lo, posinf=0.0) - width)[..., None]
            real = torch.minimum(torch.maximum(real, lo), hi)
        return real.sort(0).values.flatten(-2)

    def decode_quantiles(self, x: torch.Tensor, mask: torch.Tensor, series_ids: torch.Tensor, num_patches: int,
                         block: int, min_obs: int = 0, cap_k: float = 0.0) -> torch.Tensor:
        """:meth:`quantiles` by blocks of ``block`` patches, as toto-2's ``forecast(decode_block_size=block *
        patch)``: each block's medians become observed values, the causal scaler runs again, and the next block
        attends to the cached keys/values of the time layers instead of recomputing the context.

        Kept exactly as toto-2 2.0.0 does it: cached keys keep the xPos centre of the call that wrote them; a
        decode call's positions take the group ids of the first context patches (``base_gids[..., :L]``), which
        only matters when the context starts unobserved; the last placeholder of a call is skipped (nothing reads
        it, and toto-2 rewinds its cache entry). The KV cache is one static ``[B*V, groups, context + horizon
        patches, d]`` buffer per time layer and every offset is a Python int of the shape bucket, so the whole loop
        compiles into one graph (gpt-fast's static cache, without its per-token step: blocks are few).
        """
        c, p = self.config, self.config.patch_size
        block = max(1, int(block))
        if block >= num_patches:
            return self.quantiles(x, mask, series_ids, num_patches, min_obs, cap_k)
        b, nvar, t = x.shape
        ctx, dev, n = t // p, x.device, b * nvar
        mask = torch.cat([mask[..., :t - p], torch.ones_like(mask[..., t - p:])], -1)
        full_x = torch.cat([x, x.new_zeros(b, nvar, num_patches * p)], -1)
        full_m = torch.cat([mask, mask.new_zeros(b, nvar, num_patches * p)], -1)
        unseen = mask.unflatten(-1, (ctx, p)).sum(-1) == 0
        gids = series_ids[..., None].long().expand(b, nvar, max(ctx + num_patches, 2 * block)).clone()
        gids[..., :ctx] = torch.where(unseen, torch.full_like(gids[..., :ctx], -1), gids[..., :ctx])
        size = ctx + num_patches
        caches = {i: (torch.zeros(n, c.num_groups, size, c.qk_dim, dtype=self.dtype, device=dev),
                      torch.zeros(n, c.num_groups, size, c.v_dim, dtype=self.dtype, device=dev))
                  for i, layer in enumerate(self.transformer.layers) if not layer.variate}
        valid = torch.ones(n, size, dtype=torch.bool, device=dev)
        valid[:, :ctx] = (gids[..., :ctx] != -1).flatten(0, 1)
        blank = torch.cat([torch.zeros(p, device=dev), torch.ones(p, device=dev)]).to(self.dtype)
        blank = self.patch_proj(blank)
        out = torch.empty(len(QUANTILES), b, nvar, num_patches, p, dtype=torch.float32, device=dev)
        context_h = lo = hi = None
        done = 0
        while done < num_patches:
            step = min(block, num_patches - done)
            loc, scale = self._stats(full_x, full_m, min_obs)  # per patch, [B, V, ctx + num_patches + 1]
            if context_h is None:
                z = (x - loc[..., :ctx].repeat_interleave(p, -1)) / scale[..., :ctx].repeat_interleave(p, -1)
                z = torch.where(mask, z, torch.zeros_like(z)).asinh()
                patches = torch.cat([z.unflatten(-1, (ctx, p)), (~mask).to(x.dtype).unflatten(-1, (ctx, p))], -1)
                context_h = self.patch_proj(patches.to(self.dtype))
                if cap_k > 0:
                    hi = torch.where(mask, x, torch.full_like(x, -torch.inf)).amax(-1, keepdim=True)
                    lo = torch.where(mask, x, torch.full_like(x, torch.inf)).amin(-1, keepdim=True)
                    width = cap_k * scale[..., ctx - 1:ctx]
                    hi = (torch.nan_to_num(hi, neginf=0.0) + width)[..., None]
                    lo = (torch.nan_to_num(lo, posinf=0.0) - width)[..., None]
            pending = blank.expand(b, nvar, step - 1, -1)
            if done == 0:
                h, g, start = torch.cat([context_h, pending], -2), gids[..., :ctx + step - 1], 0
            else:
                first = ctx + done - block  # the previous block's patches, now observed medians
                seg = full_x[..., first * p:(ctx + done) * p]
                z = ((seg - loc[..., first:ctx + done].repeat_interleave(p, -1))
                     / scale[..., first:ctx + done].repeat_interleave(p, -1)).asinh()
                patches = torch.cat([z.unflatten(-1, (block, p)), torch.zeros_like(z).unflatten(-1, (block, p))], -1)
                h = torch.cat([self.patch_proj(patches.to(self.dtype)), pending], -2)
                g, start = gids[..., :block + step - 1], first
            h = self._decode_stack(h.flatten(0, 1), g, start, ctx + done + step, step, caches, valid)
            q = self.output_head.param_projection.proj(h).float()  # [B*V, step, P * 9]
            q = q.unflatten(-1, (p, len(QUANTILES))).view(b, nvar, step, p, -1).permute(4, 0, 1, 2, 3)
            cols = slice(ctx + done, ctx + done + step)
            real = self._finite(q.sinh() * scale[..., cols, None] + loc[..., cols, None])
            if lo is not None:
                real = torch.minimum(torch.maximum(real, lo), hi)
            real = real.sort(0).values  # [9, B, V, step, P]
            out[..., done:done + step, :] = real
            if done + step < num_patches:
                span = slice(t + done * p, t + (done + step) * p)
                full_x[..., span] = real[QUANTILES.index(0.5)].flatten(-2).to(full_x.dtype)
                full_m[..., span] = True
            done += step
        return out.flatten(-2)

    def _decode_stack(self, h: torch.Tensor, gids: torch.Tensor, start: int, end: int, keep: int,
                      caches: dict, valid: torch.Tensor) -> torch.Tensor:
        """:meth:`_stack` for one block-decoding call: ``h`` ``[B*V, S, d]`` holds positions ``start ..``, the
        time layers write their keys/values to ``caches`` and attend to everything cached before them; the
        first call (``start == 0``) masks as :meth:`_stack` does, later ones causally over ``valid`` keys."""
        c = self.config
        b, nvar, s = gids.shape
        last_time = self.transformer.last_time
        rope = Rope(c.qk_dim, s, end, c.use_xpos, h.device, self.dtype, start)
        flat = gids.flatten(0, 1)
        keys_at = torch.arange(start + s, device=h.device)
        var_mask = (gids.permute(0, 2, 1).reshape(b * s, nvar, 1) == gids.permute(0, 2, 1).reshape(b * s, 1, nvar))
        var_mask = var_mask[:, None]
        for i, layer in enumerate(self.transformer.layers):
            queries = s if i < last_time or (i == last_time and keep == s) else keep
            if layer.variate:
                h = self._variate(layer, h, var_mask, b, nvar, s)
            else:
                at = torch.arange(start + s - queries, start + s, device=h.device)
                mask = keys_at[None, :] <= at[:, None]  # [queries, keys]
                if start == 0:
                    mask = mask & (flat[:, s - queries:, None] == flat[:, None, :])
                else:
                    mask = mask & valid[:, None, :start + s]
                h = layer(h, mask[:, None] if mask.dim() == 3 else mask, rope, queries, (*caches[i], start))
        h = h[:, h.shape[1] - keep:]
        return self.transformer.out_norm(h)

    @staticmethod
    def _variate(layer, h: torch.Tensor, var_mask: torch.Tensor, b: int, nvar: int, s: int) -> torch.Tensor:
        """A variate layer over ``h`` ``[B*V, width, d]`` (the last ``width`` of ``s`` positions): the variates of
        one position attend to each other within a series id (``var_mask`` ``[B*S, 1, V, V]``)."""
        width = h.shape[1]
        mask = var_mask if width == s else var_mask.view(b, s, 1, nvar, nvar)[:, s - width:].flatten(0, 1)
        v = h.view(b, nvar, width, -1).transpose(1, 2).reshape(b * width, nvar, -1)
        v = layer(v, mask, None, nvar)
        return v.view(b, width, nvar, -1).transpose(1, 2).reshape(b * nvar, width, -1)

    @staticmethod
    def _finite(v: torch.Tensor) -> torch.Tensor:
        """+/-inf (sinh overflow) -> the largest / smallest finite value of the same patch."""
        top = torch.where(v.isfinite(), v, torch.full_like(v, -torch.inf)).amax(-1, keepdim=True)
        bottom = torch.where(v.isfinite(), v, torch.full_like(v, torch.inf)).amin(-1, keepdim=True)
        return torch.where(v == torch.inf, top, torch.where(v == -torch.inf, bottom, v))

    def _stack(self, h: torch.Tensor, unseen: torch.Tensor, series_ids: torch.Tensor, keep: int,
               full_length: int) -> torch.Tensor:
        """The layers over ``h`` ``[B*V, S, d]``; returns the last ``keep`` positions after the final norm.

        Time layers: causal, and an unobserved context patch and an observed one never see each other.
        Variate layers: variates attend within one series id (unobserved patches form their own group).
        Layers after the last time layer only compute the ``keep`` positions that are read.
        """
        c = self.config
        b, nvar = unseen.shape[:2]
        s = h.shape[1]
        layers = list(self.transformer.layers)
        last_time = self.transformer.last_time
        causal = torch.ones(s, s, dtype=torch.bool, device=h.device).tril()
        flat = unseen.flatten(0, 1)  # [B*V, S]
        time_mask = (causal & (flat[:, :, None] == flat[:, None, :]))[:, None]
        gid = torch.where(unseen, torch.full_like(unseen, -1, dtype=torch.long),
                          series_ids[..., None].long().expand(b, nvar, s))
        gid = gid.permute(0, 2, 1).reshape(b * s, nvar)
        var_mask = (gid[:, :, None] == gid[:, None, :])[:, None]  # [B*S, 1, V, V]
        rope = Rope(c.qk_dim, s, full_length, c.use_xpos, h.device, self.dtype)
        for i, layer in enumerate(layers):
            if i < last_time or (i == last_time and keep == s):
                queries = s
            else:
                queries = keep
            if layer.variate:
                h = self._variate(layer, h, var_mask, b, nvar, s)
            else:
                mask = time_mask if queries == s else time_mask[:, :, s - queries:]
                h = layer(h, mask, rope, queries)
        h = h[:, h.shape[1] - keep:]
        return self.transformer.out_norm(h)


def random_model(config: Toto2Config, seed: int = 0) -> Toto2Model:
    """Random unit-scaled weights (N(0, 1) linears, zero biases, zero per-dim scales), reproducible from ``seed``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Toto2Model(config)
    return model.eval()
