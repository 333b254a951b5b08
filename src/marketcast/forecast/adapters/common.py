"""What the adapters share: sorted knots, seeded random weights for the packages' own modules, their versions."""

from __future__ import annotations

import math

import numpy as np
import torch


def fill_random(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Every parameter drawn from one seeded generator (no global RNG): matrices uniform with variance
    1/fan_in, biases N(0, 0.1^2)-scale, other vectors (norm scales) near 1. TimesFM initialises its RMSNorm
    scales to 0, which would zero every block; random weights must let each parameter reach the output."""
    gen = torch.Generator().manual_seed(int(seed))
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.ndim >= 2:
                bound = math.sqrt(3.0 / p.shape[-1])
                value = torch.empty(p.shape).uniform_(-bound, bound, generator=gen)
            elif name.endswith("bias") or name.endswith("bias_"):
                value = torch.empty(p.shape).uniform_(-0.17, 0.17, generator=gen)
            else:
                value = torch.empty(p.shape).uniform_(0.83, 1.17, generator=gen)
            p.copy_(value.to(p.dtype))
    return module


def package_version(dist: str) -> str:
    """The installed version of distribution ``dist`` (what a forecast's meta records), or ``unknown``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "unknown"


def rearrange(raw: np.ndarray) -> tuple[np.ndarray, float]:
    """``[B, F, K, H]`` knots sorted along the levels, and the share of adjacent knot pairs that were out of order.

    Sorting is the rearrangement of Chernozhukov, Fernández-Val & Galichon (2010, "Quantile and probability curves
    without crossing", Econometrica 78(3)): it never raises the quantile loss summed over the levels, whatever the
    outcome. The packages' quantile heads are not constrained to be monotone (random ones cross often)."""
    return np.sort(raw, axis=2), float((np.diff(raw, axis=2) < 0).mean())
