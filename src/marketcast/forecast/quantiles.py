"""Sample paths from a model's quantiles, for code that needs paths rather than quantiles (Toto 2.0, Chronos-2,
TimesFM 2.5 and TiRex predict quantiles, not samples).

The quantile function is linear between the knots (monotone because the knots are sorted) and exponential beyond
the outer ones. With levels ``l_0 < ... < l_K`` and knots ``q_0 <= ... <= q_K``: below ``q_0``
``x = q_0 - b_lo * ln(l_0 / u)`` with ``b_lo = l_0 * (q_1 - q_0) / (l_1 - l_0)``, above ``q_K``
``x = q_K + b_hi * ln((1 - l_K) / (1 - u))`` with ``b_hi = (1 - l_K) * (q_K - q_{K-1}) / (l_K - l_{K-1})``. The
exponential (Laplace-type) tail's scale makes the density continuous at the outer knots, so each tail keeps its
mass (``l_0``, ``1 - l_K``) with a mean excess of ``b``: wider than a Gaussian fit through the same knots when the
outer gaps widen, and never unbounded in variance. For Toto 2.0's nine levels 0.1 .. 0.9, ``b`` is simply the
outer knot gap.

Effect on CRPS: the samples' CRPS converges (as ``1/num_samples``) to the CRPS of this interpolated distribution,
not to the quantile loss over the knots that GIFT-Eval reports; the two differ only through the tails and the
linear pieces, which the quantile loss does not see (it scores the knots alone). :func:`sample_paths` draws
close/high/low comonotone at each step (one uniform per path and step) and independent across steps; the
forecasters join the fields by the context's copula instead (:mod:`marketcast.forecast.copula`), through this
same quantile function.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from marketcast.runtime.rng import uniforms, window_streams

NINE = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # Toto 2.0's, TimesFM's and TiRex's quantile levels


def quantile_function(q: torch.Tensor, u: torch.Tensor, levels: Sequence[float] = NINE) -> torch.Tensor:
    """Values at probabilities ``u`` of the distribution with knots ``q`` at ``levels``.

    ``q`` ``[..., K, H]`` sorted along the knot axis; ``u`` ``[..., S, H]`` in (0, 1) -> ``[..., S, H]``.
    """
    lv = torch.tensor(tuple(levels), dtype=q.dtype, device=q.device)
    k = len(lv)
    if k < 2:
        raise ValueError(f"need at least two quantile levels, got {tuple(levels)}")
    j = (torch.searchsorted(lv, u.contiguous(), right=True) - 1).clamp(0, k - 2)  # segment [l_j, l_j+1)
    l_lo, l_hi = lv[j], lv[j + 1]
    q_lo, q_hi = torch.gather(q, -2, j), torch.gather(q, -2, j + 1)
    frac = ((u - l_lo) / (l_hi - l_lo)).clamp(0, 1)
    inner = q_lo + frac * (q_hi - q_lo)
    low_mass, high_mass = lv[0], 1 - lv[-1]
    b_lo = low_mass * (q[..., 1:2, :] - q[..., :1, :]) / (lv[1] - lv[0])
    b_hi = high_mass * (q[..., -1:, :] - q[..., -2:-1, :]) / (lv[-1] - lv[-2])
    upper = q[..., -1:, :] + b_hi * torch.log(high_mass / (1 - u).clamp_min(1e-12))
    lower = q[..., :1, :] - b_lo * torch.log(low_mass / u.clamp_min(1e-12))
    out = torch.where(u > lv[-1], upper, inner)
    return torch.where(u < lv[0], lower, out)


def tail_quantile(q10: float, q20: float, p: float) -> float:
    """The lower tail's value at ``p < 0.1`` for the nine levels (tests, docs): ``q10 - (q20 - q10) * ln(0.1/p)``."""
    return q10 - (q20 - q10) * math.log(NINE[0] / p)


def sample_paths(quantiles: np.ndarray, levels: Sequence[float], keys: np.ndarray, seed: int,
                 num_samples: int) -> np.ndarray:
    """``[B, F, num_samples, H]`` float64 paths from ``[B, F, K, H]`` quantiles at ``levels``.

    One counter-based uniform per window, path and step (keyed on the window, :mod:`marketcast.runtime.rng`), shared
    by the fields: a window's paths do not depend on which windows share the batch.
    """
    q = torch.as_tensor(np.asarray(quantiles, dtype=np.float64))
    b, f, _, h = q.shape
    streams = window_streams(seed, keys)  # [B]
    counters = torch.arange(num_samples * h, dtype=torch.int64).view(1, num_samples, h)
    u = uniforms(streams.view(-1, 1, 1), counters).double()  # [B, S, H]
    return quantile_function(q, u[:, None].expand(-1, f, -1, -1), levels).numpy()


def value_at(quantiles: np.ndarray, levels: Sequence[float], q: float) -> np.ndarray:
    """The distribution's quantile at probability ``q`` in (0, 1) from knots ``[..., K, H]`` at ``levels`` ->
    ``[..., H]`` float64: :func:`quantile_function` (linear between knots, fitted exponential tails), and the
    knot itself, bit for bit, when ``q`` is one of ``levels`` (the point forecasts and bands read the model's
    own quantiles, not an interpolation of them)."""
    levels = tuple(float(v) for v in levels)
    knots = np.asarray(quantiles, dtype=np.float64)
    if knots.ndim < 2 or knots.shape[-2] != len(levels):
        raise ValueError(f"quantiles of shape {knots.shape} do not hold {len(levels)} levels on axis -2")
    if not 0.0 < q < 1.0:
        raise ValueError(f"probability {q!r} is outside (0, 1)")
    hit = [i for i, v in enumerate(levels) if abs(v - q) <= 1e-12]
    if hit:
        return knots[..., hit[0], :].copy()
    u = torch.full((*knots.shape[:-2], 1, knots.shape[-1]), float(q), dtype=torch.float64)
    return quantile_function(torch.as_tensor(knots), u, levels)[..., 0, :].numpy()
