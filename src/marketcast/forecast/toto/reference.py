"""Bridges to the reference implementation ``toto-ts`` (optional; imported only by tests and benchmarks).

Builds toto-ts's ``TotoBackbone`` with our weights and runs its ``TotoForecaster`` on the same close/high/low
layout we use, so equivalence tests and the benchmark compare like with like.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from marketcast.forecast.toto.loading import to_unpacked_keys
from marketcast.forecast.toto.model import TotoModel


def reference_backbone(model: TotoModel):
    """toto-ts ``TotoBackbone`` (PyTorch attention/SwiGLU, no xFormers) holding ``model``'s weights."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from toto.model.backbone import TotoBackbone

    config = dict(model.config.to_dict(), use_memory_efficient_attention=False)
    config = {k: v for k, v in config.items() if k in TotoBackbone.__init__.__code__.co_varnames}
    ref = TotoBackbone(**config)
    state = {k.removeprefix("model."): v.float() for k, v in model.state_dict().items()}
    ref.load_state_dict(to_unpacked_keys(state), strict=True)
    return ref.eval()


def model_from_reference(ref, config) -> TotoModel:
    """The reverse direction: our model with a toto-ts backbone's weights (unpacked keys convert on load)."""
    from marketcast.forecast.toto.loading import load_weights

    model = TotoModel(config)
    load_weights(model, {f"model.{k}": v for k, v in ref.state_dict().items()}, "toto-ts backbone")
    return model.eval()


def reference_forecast(ref, x: np.ndarray, mask: np.ndarray, horizon: int, num_samples: int,
                       samples_per_batch: int, seed: int = 0) -> np.ndarray:
    """toto-ts samples ``[B, V, S, H]`` for ``x`` ``[B, V, T]`` (mask True = real), seeded via torch."""
    from toto.data.util.dataset import MaskedTimeseries
    from toto.inference.forecaster import TotoForecaster as RefForecaster

    device = next(ref.parameters()).device
    series = torch.as_tensor(np.where(mask, x, 0.0), dtype=torch.float32, device=device)
    padding = torch.as_tensor(mask, device=device)
    inputs = MaskedTimeseries(
        series=series, padding_mask=padding, id_mask=torch.zeros_like(series, dtype=torch.int),
        timestamp_seconds=torch.zeros_like(series, dtype=torch.int),
        time_interval_seconds=torch.full(series.shape[:2], 86400, dtype=torch.int, device=device),
        num_exogenous_variables=0)
    torch.manual_seed(seed)
    with torch.inference_mode():
        out = RefForecaster(ref).forecast(inputs, horizon, num_samples=num_samples,
                                          samples_per_batch=samples_per_batch, use_kv_cache=True)
    return out.samples.permute(0, 1, 3, 2).double().cpu().numpy()
