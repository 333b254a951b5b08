"""Toto's causal patch std-mean scaler, as a full-context pass and as a one-patch incremental step.

Statistics are computed in float64 like the reference (Welford-style running mean and M2 over the real
bars only; padding has weight 0). Each patch is normalised by the running mean/std at its last step, and
the std is clamped to ``[global * 10**-e, global * 10**e]`` where ``global`` is the std of the whole
context. Decoding carries the running sums (``ScalerState``) instead of re-reading the history, so a
decode step has a fixed shape; the context's global bounds stay fixed, as toto-ts's ``prefix_length`` does.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class ScalerState(NamedTuple):
    """Running statistics per (row, variate) at the end of the last patch seen, all float64."""

    count: torch.Tensor  # sum of weights
    total: torch.Tensor  # sum of weighted values
    m2: torch.Tensor  # Welford second moment
    mean: torch.Tensor  # causal mean at the last step
    lo: torch.Tensor  # clamp bounds for the std (from the context's global std)
    hi: torch.Tensor

    def index(self, rows: torch.Tensor) -> "ScalerState":
        return ScalerState(*(t.index_select(0, rows) for t in self))


def _bounds(x: torch.Tensor, w: torch.Tensor, min_scale: float, exponent: float) -> tuple[torch.Tensor, torch.Tensor]:
    denom = w.sum(-1, keepdim=True).clamp_min(1.0)
    gmean = torch.nan_to_num((w * x).sum(-1, keepdim=True) / denom)
    gvar = (((x - gmean) * w) ** 2).sum(-1, keepdim=True) / denom
    gscale = torch.sqrt(gvar + min_scale)
    # toto-ts compares against a float32 tensor(min_scale); keep its exact value
    floor = torch.tensor(min_scale, dtype=torch.float32, device=x.device).to(torch.float64)
    return torch.maximum(floor, gscale * 10.0 ** (-exponent)), gscale * 10.0**exponent


def causal_patch_scale(
    x: torch.Tensor, mask: torch.Tensor, patch: int, min_scale: float = 0.1, exponent: float = 10.0,
    stabilize: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, ScalerState]:
    """``x`` ``[B, V, T]`` (T a multiple of ``patch``), ``mask`` True for real values.

    Returns the scaled values (``x``'s dtype), per-patch loc and scale ``[B, V, T // patch]`` (``x``'s dtype)
    and the running state after the last step.
    """
    dtype = x.dtype
    xd = x.to(torch.float64)
    w = mask.to(torch.float64)
    wx = w * xd
    count = torch.cumsum(w, -1)
    denom = count.clamp_min(1.0)
    mean = torch.cumsum(wx, -1) / denom
    shifted = torch.cat([torch.zeros_like(mean[..., :1]), mean[..., :-1]], -1)
    m2 = torch.cumsum((xd - shifted) * (xd - mean) * w, -1)
    std = torch.sqrt(m2 / torch.clamp(denom - 1.0, min=1.0) + min_scale)
    if stabilize:
        lo, hi = _bounds(xd, w, min_scale, exponent)
        std = torch.clamp(std, min=lo, max=hi)
    else:
        lo = torch.full_like(std[..., :1], min_scale)
        hi = torch.full_like(std[..., :1], float("inf"))
    loc = mean.to(dtype)[..., patch - 1 :: patch]
    scale = std.to(dtype)[..., patch - 1 :: patch]
    scaled = (x - loc.repeat_interleave(patch, -1)) / scale.repeat_interleave(patch, -1)
    state = ScalerState(count[..., -1], torch.cumsum(wx, -1)[..., -1], m2[..., -1], mean[..., -1], lo[..., 0], hi[..., 0])
    return scaled, loc, scale, state


def scale_next_patch(
    x: torch.Tensor, state: ScalerState, min_scale: float = 0.1
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, ScalerState]:
    """Append one fully observed patch ``x`` ``[R, V, P]`` to the running statistics.

    Returns the scaled patch, its loc and scale ``[R, V]`` (``x``'s dtype) and the new state.
    """
    dtype = x.dtype
    xd = x.to(torch.float64)
    steps = torch.arange(1, x.shape[-1] + 1, device=x.device, dtype=torch.float64)
    count = state.count[..., None] + steps
    total = state.total[..., None] + torch.cumsum(xd, -1)
    mean = total / count.clamp_min(1.0)
    shifted = torch.cat([state.mean[..., None], mean[..., :-1]], -1)
    m2 = state.m2[..., None] + torch.cumsum((xd - shifted) * (xd - mean), -1)
    std = torch.sqrt(m2[..., -1] / torch.clamp(count[..., -1] - 1.0, min=1.0) + min_scale)
    std = torch.clamp(std, min=state.lo, max=state.hi)
    loc32, scale32 = mean[..., -1].to(dtype), std.to(dtype)
    scaled = (x - loc32[..., None]) / scale32[..., None]
    new = ScalerState(count[..., -1], total[..., -1], m2[..., -1], mean[..., -1], state.lo, state.hi)
    return scaled, loc32, scale32, new
