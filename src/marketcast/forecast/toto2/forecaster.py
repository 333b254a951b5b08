"""Toto2Forecaster: close/high/low as three variates of one series, every window of a call in one batched pass
per chunk (no per-window or per-sample loop), nine quantiles out; sample paths drawn from them on request.

One compiled step per (rows, context patches, horizon patches) bucket: rows are padded to a power of two and the
context is left-padded (masked) to whole patches, so new windows, contexts within a patch and horizons within a
patch reuse the graph. Defaults follow toto-2's GluonTS predictor: leading patches with fewer than 8
observations borrow the first 8 observations' mean/std, and quantiles are clipped to the context range widened
by 10^4 scales.
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np
import torch

from marketcast.errors import ConfigError
from marketcast.forecast.base import ContextBatch, Forecast, masked_prices
from marketcast.forecast.copula import joint_paths
from marketcast.forecast.toto2.config import QUANTILES, Toto2Config
from marketcast.forecast.toto2.loading import DEFAULT_REPO, load_model, load_pretrained
from marketcast.forecast.toto2.model import Toto2Model, onednn_usable, random_model
from marketcast.forecast.warmup import CUDA_GRAPH_RUNS, synthetic_batch, timed_warmup
from marketcast.runtime.devices import torch_device, torch_dtype
from marketcast.runtime.shapes import pow2_at_least
from marketcast.runtime.steps import CompiledSteps

FIELDS = ("close", "high", "low")
MIN_OBS, CAP_K = 8, 1e4  # toto-2's Toto2GluonTSModelConfig defaults
# Windows per model call. GPU: large, for big matmuls, and small enough for any card. CPU: 32 windows (1,632
# rows of 512) keep each layer's activations (the 2,736-wide SwiGLU input: 18 MB) inside the L3 cache instead
# of streaming ~140 MB buffers through memory: 256 windows ran 1.45 s, 64 1.1-1.3 s, 32 1.09 s, 16 1.12 s
# (22M, ctx 512, h 64, compiled, 2-core EPYC; benchmarks/toto2_bench.py).
CHUNK, CPU_CHUNK = 256, 32


def _dtype(name: str) -> torch.dtype:
    return torch_dtype(name, "Toto 2.0")


def _device(name: str | torch.device) -> torch.device:
    return torch_device(name, "Toto 2.0")


def _quantile_step(model: Toto2Model, x, mask, ids, num_patches: int, min_obs: int, cap_k: float):
    return model.quantiles(x, mask, ids, num_patches, min_obs, cap_k)


def _decode_step(model: Toto2Model, x, mask, ids, num_patches: int, block: int, min_obs: int, cap_k: float):
    return model.decode_quantiles(x, mask, ids, num_patches, block, min_obs, cap_k)


class Toto2Forecaster:
    """Forecaster protocol for Toto 2.0; :meth:`quantiles` is the native output, :meth:`forecast` adds paths.

    The constructor takes ownership of ``model``: moved to ``device``, its u-μP scales folded into the
    weights, cast to ``dtype``. ``chunk`` caps the windows of one model call (default :data:`CPU_CHUNK` on CPU,
    :data:`CHUNK` elsewhere). ``onednn`` (default: float32 on CPU) runs the linears on oneDNN instead of MKL
    (:func:`~marketcast.forecast.toto2.model.onednn_linear`). ``decode_block`` (steps, a multiple of the patch;
    default None: one pass, toto-2's default) forecasts horizons longer than it block by block, as toto-2's
    ``decode_block_size`` (:meth:`~marketcast.forecast.toto2.model.Toto2Model.decode_quantiles`).
    """

    name = "toto2"
    fields = FIELDS
    paths = "copula"  # marginal quantiles joined by the context's copula (marketcast.forecast.copula)
    quantile_levels = QUANTILES

    def __init__(self, model: Toto2Model, *, device: str | torch.device = "cpu", dtype: str = "float32",
                 compile: str | None = None, backend: str = "inductor", chunk: int | None = None, source: str = "",
                 min_obs: int = MIN_OBS, cap_k: float = CAP_K, onednn: bool | None = None,
                 decode_block: int | None = None) -> None:
        self.device = _device(device)
        self.dtype_name = dtype
        model = model.eval().requires_grad_(False).to(self.device)
        self.model = model.fold_scales().set_precision(_dtype(dtype))
        usable = onednn_usable(self.device, torch.float32)  # a CPU with oneDNN
        self.onednn = onednn_usable(self.device, _dtype(dtype)) if onednn is None else bool(onednn) and usable
        self.model.use_onednn(self.onednn)
        self.config: Toto2Config = model.config
        self.source = source
        if chunk is None:
            chunk = CPU_CHUNK if self.device.type == "cpu" else CHUNK
        self.chunk = max(1, int(chunk))
        self.min_obs, self.cap_k = int(min_obs), float(cap_k)
        p = self.config.patch_size
        if decode_block is not None and (decode_block < p or decode_block % p):
            raise ConfigError(f"Toto 2.0 decode_block {decode_block} is not a positive multiple of the patch size "
                              f"{p}; pass e.g. {24 * p} (toto-2's example) or None for one pass")
        self.decode_block = None if decode_block is None else decode_block // p  # in patches
        mode = None if compile in (None, "eager") else compile
        self.steps = CompiledSteps("toto2", mode, self.device, backend)

    @classmethod
    def from_pretrained(cls, name_or_folder: str | os.PathLike = DEFAULT_REPO, *, device: str = "cpu",
                        **kwargs) -> "Toto2Forecaster":
        """``config.json`` + ``model.safetensors`` from a folder or a Hugging Face repo id (HF cache first)."""
        model, folder = load_pretrained(name_or_folder, _device(device))
        return cls(model, device=device, source=str(folder), **kwargs)

    @classmethod
    def from_config(cls, config: Toto2Config | None = None, *, seed: int = 0, **kwargs) -> "Toto2Forecaster":
        """Random weights (reproducible from ``seed``): for tests and benchmarks, not for forecasting."""
        model = random_model(config or Toto2Config.size("22m"), seed)
        return cls(model, source=f"random(seed={seed})", **kwargs)

    def compile_guards(self):
        return self.steps.compile_guards()

    def warmup(self, context: int, horizon: int, num_samples: int = 1, batch_size: int = 1) -> float:
        """Compile every graph a ``forecast`` of ``batch_size`` windows of ``context`` bars needs; seconds taken."""
        runs = CUDA_GRAPH_RUNS if self.device.type == "cuda" and self.steps.mode is not None else 1
        sync = torch.cuda.synchronize if self.device.type == "cuda" else None
        return timed_warmup(self.forecast, synthetic_batch(batch_size, context, horizon), horizon, num_samples,
                            runs, sync)

    # --- forecasting --------------------------------------------------------------------------------

    def _inputs(self, batch: ContextBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """``[B, 3, T]`` float32 close/high/low (zeros where masked) and the mask."""
        values, mask = masked_prices(batch, FIELDS, "Toto 2.0")
        return torch.as_tensor(values, dtype=torch.float32), torch.as_tensor(mask)

    @torch.inference_mode()
    def quantiles(self, batch: ContextBatch, horizon: int) -> np.ndarray:
        """``[B, 3, 9, horizon]`` float64 quantiles (levels :data:`QUANTILES`) of close/high/low."""
        if horizon < 1:
            raise ConfigError(f"Toto 2.0 needs horizon >= 1, got {horizon}")
        x, mask = self._inputs(batch)
        b, nvar, t = x.shape
        p = self.config.patch_size
        width = math.ceil(t / p) * p
        num_patches = math.ceil(horizon / p)
        out = np.empty((b, nvar, len(QUANTILES), horizon), dtype=np.float64)
        for start in range(0, b, self.chunk):
            n = min(self.chunk, b - start)
            rows = pow2_at_least(n)
            pick = torch.arange(start, start + rows).clamp_max(start + n - 1)
            xs = torch.zeros((rows, nvar, width), dtype=torch.float32)
            ms = torch.zeros((rows, nvar, width), dtype=torch.bool)
            xs[:, :, width - t:], ms[:, :, width - t:] = x[pick], mask[pick]
            ids = torch.zeros((rows, nvar), dtype=torch.long, device=self.device)
            if self.decode_block is not None and num_patches > self.decode_block:
                q = self.steps.call("decode", (rows, width // p, num_patches, self.decode_block), _decode_step,
                                    self.model, xs.to(self.device), ms.to(self.device), ids, num_patches,
                                    self.decode_block, self.min_obs, self.cap_k)
            else:
                q = self.steps.call("quantiles", (rows, width // p, num_patches), _quantile_step, self.model,
                                    xs.to(self.device), ms.to(self.device), ids, num_patches, self.min_obs,
                                    self.cap_k)
            out[start:start + n] = q[..., :n, :, :horizon].permute(1, 2, 0, 3).double().cpu().numpy()
        return out

    def forecast(self, batch: ContextBatch, horizon: int, num_samples: int, seed: int = 0) -> Forecast:
        """Sample paths ``[B, 3, num_samples, horizon]`` drawn from the quantiles and joined by the context's
        copula (see :mod:`marketcast.forecast.copula`); the quantiles themselves ride along in ``Forecast.quantiles``."""
        if num_samples < 1:
            raise ConfigError(f"Toto 2.0 needs num_samples >= 1, got {num_samples}")
        q = self.quantiles(batch, horizon)  # [B, 3, 9, H]
        paths, joint = joint_paths(q, QUANTILES, batch, seed, num_samples)
        meta = {
            "model": "toto2", "source": self.source, "dtype": self.dtype_name, "device": str(self.device),
            "num_samples_used": num_samples, "samples_per_batch_used": num_samples,
            "quantile_levels": list(QUANTILES), **joint,
            "compile_mode": self.steps.mode, "compile_backend": self.steps.backend, "compiled": self.steps.compiled,
            "fallback_reason": self.steps.fallback_reason,
        }
        return Forecast(samples=paths, fields=FIELDS, meta=meta, quantiles=q, quantile_levels=QUANTILES)


def create(*, weights: str | None = None, device: str = "cpu", dtype: str = "float32",
           compile: str | None = None, seed: int = 0) -> Toto2Forecaster:
    """Registry factory: weights None/"auto" = Datadog/Toto-2.0-22m (HF cache), a folder, a repo id, or
    ``random`` / ``random:4m`` / ``random:22m``. Compile follows Toto's settings (TOTO_COMPILE...)."""
    from marketcast.runtime.compile_settings import load_settings

    settings = load_settings()
    if compile is None:
        compile = settings.mode_for("toto", str(device))
    model, source = load_model(weights, _device(device), seed)
    if source.startswith("random"):
        warnings.warn(f"toto2: weights={weights!r} uses randomly initialised Toto 2.0 weights; its forecasts are "
                      "meaningless (use it for speed and plumbing tests only)", stacklevel=2)
    return Toto2Forecaster(model, device=device, dtype=dtype, compile=compile, backend=settings.toto_backend,
                           source=source)
