"""The functions the forecaster compiles: each is one graph (one CUDA graph under ``reduce-overhead``) that
runs the model *and* draws from the mixture it produced, so no sampler kernel is launched from Python.

Shapes depend only on the bucket the forecaster picked (windows, context patches, samples, steps, decode
rows, cache slots); positions and step indices are 0-d tensors, never Python numbers.
"""

from __future__ import annotations

import torch

from marketcast.forecast.toto.kv_cache import StaticKVCache
from marketcast.forecast.toto.model import TotoModel
from marketcast.forecast.toto.sampling import draw_first, draw_next
from marketcast.forecast.toto.scaler import ScalerState


def prefill_draw(model: TotoModel, x: torch.Tensor, mask: torch.Tensor, streams: torch.Tensor, samples: int,
                 steps: int) -> torch.Tensor:
    """Horizon <= one patch: the context once, then ``samples`` paths of ``steps`` values per window and
    variate, ``[B, V, samples, steps]``."""
    out = model.prefill(x, mask)
    return draw_first(out, streams, samples, steps, model.config.patch_size)


def prefill_kv_draw(model: TotoModel, x: torch.Tensor, mask: torch.Tensor, streams: torch.Tensor,
                    samples: int) -> tuple[torch.Tensor, ScalerState, torch.Tensor, torch.Tensor]:
    """Longer horizons: the first patch of every path ``[B, V, samples, P]``, the scaler state after the
    context and the time-wise keys/values to seed the decode cache."""
    out, k, v = model.prefill_with_cache(x, mask)
    patch = model.config.patch_size
    return draw_first(out, streams, samples, patch, patch), out.state, k, v


def decode_draw(model: TotoModel, cache: StaticKVCache, patch: torch.Tensor, state: ScalerState,
                pos: torch.Tensor, streams: torch.Tensor, sample_ids: torch.Tensor,
                step: torch.Tensor) -> tuple[torch.Tensor, ScalerState]:
    """Feed every row's last patch ``[R, V, P]`` at patch position ``pos``, draw its next patch (patch
    number ``step`` of the horizon): the new patch and scaler state."""
    out = model.decode(cache, patch, state, pos)
    return draw_next(out, streams, sample_ids, step, model.config.patch_size), out.state
