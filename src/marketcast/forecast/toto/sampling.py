"""Drawing from the Student-T mixture with a fixed number of uniforms per value.

Every sampled value uses exactly three uniforms: one picks the component (inverse CDF of the mixture
weights) and two give a Student-T variate by Bailey's polar method in closed form,
``T = cos(2 pi U1) * sqrt(df * (U2 ** (-2 / df) - 1))``. Because the randomness consumed does not depend on
the parameters, a window's uniforms can be generated up front from its own seeded generator: its paths do
not depend on which other windows share the batch, how samples are chunked, or the horizon requested.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from marketcast.forecast.toto.model import MixtureParams


def window_generator(seed: int, key: int, step: int, device: torch.device) -> torch.Generator:
    """A generator for (seed, window key, patch step), independent of batch composition."""
    state = np.random.SeedSequence([int(seed) & 0xFFFFFFFFFFFFFFFF, int(key), int(step)]).generate_state(2, np.uint32)
    g = torch.Generator(device=device)
    g.manual_seed(int(state[0]) << 31 ^ int(state[1]))
    return g


def uniforms(seed: int, key: int, step: int, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """``shape + (3,)`` float32 uniforms in (0, 1] for one window and patch step."""
    g = window_generator(seed, key, step, device)
    return 1.0 - torch.rand((*shape, 3), generator=g, device=device, dtype=torch.float32)


def sample_mixture(params: MixtureParams, u: torch.Tensor) -> torch.Tensor:
    """One value per element of ``params``' leading shape ``[..., K]`` from uniforms ``u`` ``[..., 3]``."""
    k = params.logits.shape[-1]
    full = (*u.shape[:-1], k)  # params broadcast over leading sample dimensions
    cdf = torch.softmax(params.logits.float(), dim=-1).cumsum(-1)
    comp = (u[..., :1] > cdf).sum(-1, keepdim=True).clamp_max(k - 1)
    df, loc, scale = (t.float().expand(full).gather(-1, comp)[..., 0] for t in params[1:])
    t = torch.cos(2 * math.pi * u[..., 1]) * torch.sqrt(df * (u[..., 2] ** (-2.0 / df) - 1.0))
    return loc + scale * t


def clean_feedback(x: torch.Tensor) -> torch.Tensor:
    """toto-ts replaces non-finite or huge samples by 0 before feeding them back; so do we."""
    bad = ~torch.isfinite(x) | (x.abs() >= torch.finfo(x.dtype).max / 2)
    return torch.where(bad, torch.zeros_like(x), x)
