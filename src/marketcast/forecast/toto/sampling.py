"""Drawing from the Student-T mixture for every window x sample x variate x step in one vectorised call.

Every value uses exactly three uniforms: one picks the component (inverse CDF of the mixture weights, a
``searchsorted`` over the K cumulative weights) and two give a Student-T variate by Bailey's polar method in
closed form, ``T = cos(2 pi U1) * sqrt(df * (U2 ** (-2 / df) - 1))``. The uniforms are counter-based
(:mod:`marketcast.runtime.rng`): a pure function of the window's stream, the patch step and the value's
counter ``((sample * V + variate) * P + t) * 3 + j``, so a window's paths do not depend on which windows
share the batch, on bucket padding, on chunking, or on the device. Everything here compiles into the graph
of the step that produced the mixture (no host round trip, no generator).
"""

from __future__ import annotations

import math

import torch

from marketcast.forecast.toto.model import MixtureParams, StepOutput
from marketcast.runtime.rng import step_streams, uniforms


def sample_mixture(params: MixtureParams, u: torch.Tensor) -> torch.Tensor:
    """Values ``[..., M]`` from mixtures ``[..., K]`` and uniforms ``u`` ``[3, ..., M]`` (component, T angle,
    T radius); the leading dims of ``params`` and ``u`` are equal, ``M`` draws share each mixture."""
    k = params.logits.shape[-1]
    cdf = torch.softmax(params.logits.float(), dim=-1).cumsum(-1).contiguous()
    comp = torch.searchsorted(cdf, u[0].contiguous()).clamp_max(k - 1)  # = count(cdf < u), as inverse CDF
    df, loc, scale = (t.float().gather(-1, comp) for t in params[1:])
    t = torch.cos(2 * math.pi * u[1]) * torch.sqrt(df * (u[2] ** (-2.0 / df) - 1.0))
    return loc + scale * t


def clean_feedback(x: torch.Tensor) -> torch.Tensor:
    """toto-ts replaces non-finite or huge samples by 0 before feeding them back; so do we."""
    bad = ~torch.isfinite(x) | (x.abs() >= torch.finfo(x.dtype).max / 2)
    return torch.where(bad, torch.zeros_like(x), x)


def _counters(sample: torch.Tensor, variate: torch.Tensor, t: torch.Tensor, variates: int, patch: int) -> torch.Tensor:
    """``[3, ...]`` counters of the three uniforms of each (sample, variate, time step), broadcast together."""
    base = ((sample * variates + variate) * patch + t) * 3
    return torch.stack([base, base + 1, base + 2])


def draw_first(out: StepOutput, streams: torch.Tensor, samples: int, steps: int, patch: int) -> torch.Tensor:
    """The first patch's ``steps`` values for ``samples`` paths of every window: ``[B, V, samples, steps]``
    absolute prices; ``streams`` ``[B]`` are the windows' (step 0 is mixed in here)."""
    b, v = out.loc.shape
    params = MixtureParams(*(p[:, :, :steps] for p in out.params))  # [B, V, steps, K]
    ar = lambda n: torch.arange(n, device=streams.device)  # noqa: E731
    counters = _counters(ar(samples).view(1, 1, -1), ar(v).view(-1, 1, 1), ar(steps).view(1, -1, 1), v, patch)
    u = uniforms(step_streams(streams, 0).view(1, b, 1, 1, 1), counters[:, None])  # [3, B, V, steps, samples]
    draw = sample_mixture(params, u)
    values = clean_feedback(out.loc[:, :, None, None] + out.scale[:, :, None, None] * draw)
    return values.transpose(2, 3).contiguous()  # [B, V, samples, steps]


def draw_next(out: StepOutput, streams: torch.Tensor, sample_ids: torch.Tensor, step: torch.Tensor,
              patch: int) -> torch.Tensor:
    """One patch per row from a decode step's mixture: ``[R, V, P]`` absolute prices. ``streams`` and
    ``sample_ids`` ``[R]`` say whose path each row is; ``step`` (0-d int64) is the patch being drawn."""
    r, v = out.loc.shape
    ar = lambda n: torch.arange(n, device=streams.device)  # noqa: E731
    counters = _counters(sample_ids.view(-1, 1, 1), ar(v).view(1, -1, 1), ar(patch).view(1, 1, -1), v, patch)
    u = uniforms(step_streams(streams, step).view(1, r, 1, 1, 1), counters[..., None])  # [3, R, V, P, 1]
    draw = sample_mixture(out.params, u)[..., 0]
    return clean_feedback(out.loc[:, :, None] + out.scale[:, :, None] * draw)
