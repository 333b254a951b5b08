"""What the adapters share: the forecaster around a package's quantiles (sorted knots, paths drawn from them, the
meta every forecast records), seeded random weights for the packages' own modules, and their versions."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from marketcast.errors import ConfigError
from marketcast.forecast.base import ContextBatch, Forecast
from marketcast.forecast.copula import joint_paths
from marketcast.runtime.devices import torch_device, torch_dtype

FIELDS = ("close", "high", "low")


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


class QuantileAdapter:
    """A forecaster around a package that predicts quantiles: :meth:`quantiles` is the native output (sorted,
    :func:`rearrange`), :meth:`forecast` adds paths drawn from them (:mod:`marketcast.forecast.copula`).

    A subclass sets ``name`` (the registry's), ``label`` (what errors say), ``quantile_levels``, and implements
    :meth:`raw_quantiles` (``[B, 3, K, H]`` as the package returns them) and :meth:`package_meta`. The packages run
    eagerly: a requested compile mode is recorded in the meta, not applied.
    """

    name: str
    label: str
    fields = FIELDS
    paths = "copula"  # marginal quantiles joined by the context's copula (marketcast.forecast.copula), not joint draws
    quantile_levels: Sequence[float]

    def __init__(self, *, device: str | torch.device = "cpu", dtype: str = "float32", compile: str | None = None,
                 source: str = "", chunk: int = 256) -> None:
        self.device = torch_device(device, self.label)
        self.dtype_name, self.dtype = dtype, torch_dtype(dtype, self.label)
        self.requested_compile = None if compile in (None, "eager") else compile
        self.source, self.chunk = source, max(1, int(chunk))
        self.crossings = 0.0  # of the latest call: the share of adjacent knots the package returned out of order

    def raw_quantiles(self, batch: ContextBatch, horizon: int) -> np.ndarray:
        raise NotImplementedError

    def package_meta(self, batch: ContextBatch) -> dict:
        """What this package adds to a forecast's meta (its version, flags, backend)."""
        return {}

    def quantiles(self, batch: ContextBatch, horizon: int) -> np.ndarray:
        """``[B, 3, K, horizon]`` float64 quantiles at :attr:`quantile_levels` of close/high/low, sorted."""
        if horizon < 1:
            raise ConfigError(f"{self.label} needs horizon >= 1, got {horizon}")
        q, self.crossings = rearrange(self.raw_quantiles(batch, horizon))
        return q

    def forecast(self, batch: ContextBatch, horizon: int, num_samples: int, seed: int = 0) -> Forecast:
        """Sample paths ``[B, 3, num_samples, horizon]`` drawn from the quantiles, joined by the context's copula
        (:func:`~marketcast.forecast.copula.joint_paths`; keyed on each window, so a window's paths do not depend on
        its batch); the quantiles ride along in ``Forecast.quantiles``."""
        if num_samples < 1:
            raise ConfigError(f"{self.label} needs num_samples >= 1, got {num_samples}")
        levels = tuple(self.quantile_levels)
        q = self.quantiles(batch, horizon)
        paths, joint = joint_paths(q, levels, batch, seed, num_samples)
        meta = {
            "model": self.name, "source": self.source, "dtype": self.dtype_name, "device": str(self.device),
            "num_samples_used": num_samples, "samples_per_batch_used": num_samples,
            "quantile_levels": list(levels), **joint, "quantile_crossings": self.crossings, **self.package_meta(batch),
            "compile_mode": None, "compile_backend": None, "compiled": False,
            "fallback_reason": (f"the {self.name} adapter runs the package eagerly (compile "
                                f"{self.requested_compile!r} not applied)") if self.requested_compile else None,
        }
        return Forecast(samples=paths, fields=FIELDS, meta=meta, quantiles=q, quantile_levels=levels)
