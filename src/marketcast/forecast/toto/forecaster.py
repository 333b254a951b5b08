"""TotoForecaster: close/high/low as three variates of one series, sampled with at most one model pass
per patch of horizon.

Horizon <= one patch: a single prefill over the context gives the mixture of the next 64 steps and every
sample is drawn from it (toto-ts instead re-runs the identical context once per sample). Longer horizons:
the context is prefilled once, its keys/values are broadcast into a static cache for ``samples_per_batch``
sample paths per window, and each decode step feeds one sampled patch back, as toto-ts does.
"""

from __future__ import annotations

import logging
import math
import os
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils._pytree import tree_map

from marketcast.runtime.steps import CompiledSteps
from marketcast.errors import ConfigError
from marketcast.forecast.base import INPUT_FIELDS, ContextBatch, Forecast
from marketcast.forecast.checkpoint import resolve_folder
from marketcast.forecast.toto.buckets import cache_slots, context_patches, pow2_at_least, pow2_at_most
from marketcast.forecast.toto.config import TotoConfig
from marketcast.forecast.toto.kv_cache import StaticKVCache
from marketcast.forecast.toto.loading import DEFAULT_REPO, load_checkpoint, load_weights
from marketcast.forecast.toto.model import MixtureParams, TotoModel, init_weights
from marketcast.forecast.toto.sampling import clean_feedback, sample_mixture, uniforms
from marketcast.forecast.toto.scaler import ScalerState

log = logging.getLogger("marketcast.toto")

FIELDS = ("close", "high", "low")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
DEFAULT_SAMPLES_PER_BATCH = {"cpu": 256, "cuda": 1024}
MIN_SAMPLES_PER_BATCH = 8  # OOM policy floors
MIN_SAMPLES = 32


def _dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise ConfigError(f"Toto dtype {name!r} is not supported; use one of {', '.join(DTYPES)}")
    return DTYPES[name]


def _device(name: str | torch.device) -> torch.device:
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise ConfigError(f"Toto device {name!r} is not a torch device; use cpu or cuda[:N]") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"Toto device {name!r} requested but CUDA is not available; use --device cpu")
    return device


def _contiguous(tree):
    """Fresh row-major copies, so every call of a sealed graph sees identical strides (no stride guards fail)."""
    return tree_map(lambda t: t.clone(memory_format=torch.contiguous_format), tree)


@dataclass
class _Plan:
    """How one forecast call is cut into compiled steps."""

    windows: int  # real windows
    window_bucket: int  # prefill rows (power of two)
    patches: int  # context patches after padding
    steps: int  # patches of horizon
    samples: int
    per_batch: int  # samples per window per decode call (power of two)
    group: int  # windows per decode call (power of two)


class TotoForecaster:
    """Forecaster protocol for Toto; build it with :meth:`from_pretrained` or :meth:`from_config`.

    The constructor takes ownership of ``model``: it is moved to ``device`` and cast to ``dtype`` in place.
    """

    name = "toto"
    fields = FIELDS

    def __init__(self, model: TotoModel, *, device: str | torch.device = "cpu", dtype: str = "float32",
                 compile: str | None = None, backend: str = "inductor", samples_per_batch: int | None = None,
                 source: str = "") -> None:
        self.device = _device(device)
        self.dtype_name = dtype
        self.model = model.eval().requires_grad_(False).to(self.device).set_precision(_dtype(dtype)).fuse_head()
        self.config = model.config
        self.source = source
        self.samples_per_batch = int(samples_per_batch or DEFAULT_SAMPLES_PER_BATCH.get(self.device.type, 256))
        mode = None if compile in (None, "eager") else compile
        key = dict(self.config.cache_key(), dtype=dtype, device=str(self.device))
        self.steps = CompiledSteps("toto", mode, self.device, key, backend)
        self._caches: dict[tuple, StaticKVCache] = {}

    # --- construction -------------------------------------------------------------------------------

    @classmethod
    def from_pretrained(cls, name_or_folder: str | os.PathLike = DEFAULT_REPO, *, device: str = "cpu",
                        dtype: str = "float32", compile: str | None = None, local_files_only: bool | None = None,
                        cache_dir: str | os.PathLike | None = None, **kwargs) -> "TotoForecaster":
        """Load ``config.json`` + ``model.safetensors`` from a folder or a Hugging Face repo (cache first)."""
        folder = resolve_folder(name_or_folder, "Toto", local_files_only, cache_dir)
        config, state = load_checkpoint(folder)
        model = TotoModel(config)
        load_weights(model, state, str(folder / "model.safetensors"))
        return cls(model, device=device, dtype=dtype, compile=compile, source=str(folder), **kwargs)

    @classmethod
    def from_config(cls, config: TotoConfig | None = None, *, seed: int = 0, device: str = "cpu",
                    dtype: str = "float32", compile: str | None = None, **kwargs) -> "TotoForecaster":
        """Random weights (reproducible from ``seed``): for tests and benchmarks, not for forecasting."""
        model = init_weights(TotoModel(config or TotoConfig.base()), seed)
        return cls(model, device=device, dtype=dtype, compile=compile, source=f"random(seed={seed})", **kwargs)

    def compile_guards(self):
        """The compile wrappers (one per step function and bucket) for the stress harness."""
        return self.steps.compile_guards()

    # --- forecasting --------------------------------------------------------------------------------

    def forecast(self, batch: ContextBatch, horizon: int, num_samples: int, seed: int = 0) -> Forecast:
        if horizon < 1 or num_samples < 1:
            raise ConfigError(f"Toto needs horizon >= 1 and num_samples >= 1, got {horizon} and {num_samples}")
        x, mask = self._inputs(batch)
        samples, per_batch = num_samples, self.samples_per_batch
        while True:
            try:
                paths, plan = self._sample(x, mask, horizon, samples, per_batch, seed)
                break
            except torch.OutOfMemoryError:
                if self.device.type == "cuda":
                    torch.cuda.empty_cache()
                if per_batch > MIN_SAMPLES_PER_BATCH:
                    per_batch = max(MIN_SAMPLES_PER_BATCH, per_batch // 2)
                elif samples > MIN_SAMPLES:
                    samples = max(MIN_SAMPLES, samples // 2)
                else:
                    raise
                log.warning("toto: out of memory, retrying with num_samples=%d samples_per_batch=%d",
                            samples, per_batch)
        values = paths[:, :, :, :horizon].to(torch.float64).cpu().numpy()
        meta = {
            "model": "toto", "source": self.source, "dtype": self.dtype_name, "device": str(self.device),
            "num_samples_used": plan.samples, "samples_per_batch_used": plan.per_batch,
            "decode_steps": plan.steps - 1, "context_patches": plan.patches,
            "compile_mode": self.steps.mode, "compile_backend": self.steps.backend, "compiled": self.steps.compiled,
            "fallback_reason": self.steps.fallback_reason,
        }
        return Forecast(samples=values, fields=FIELDS, meta=meta)

    def _inputs(self, batch: ContextBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """``[B, 3, T]`` float32 close/high/low and their mask; padding is zero like toto-ts's ``pad_array``."""
        cols = [INPUT_FIELDS.index(f) for f in FIELDS]
        values = np.asarray(batch.values, dtype=np.float64)[:, :, cols].transpose(0, 2, 1)
        mask = np.broadcast_to(np.asarray(batch.mask, dtype=bool)[:, None, :], values.shape)
        values = np.where(mask, values, 0.0)
        if not np.isfinite(values).all():
            raise ConfigError("Toto input has NaN or infinite close/high/low values inside the context; "
                              "clean the bars")
        return torch.as_tensor(values, dtype=torch.float32), torch.as_tensor(np.ascontiguousarray(mask))

    def _plan(self, x: torch.Tensor, horizon: int, samples: int, per_batch: int) -> _Plan:
        b = x.shape[0]
        steps = math.ceil(horizon / self.config.patch_size)
        per = min(pow2_at_least(samples), pow2_at_most(per_batch))
        group = min(pow2_at_least(b), max(1, pow2_at_most(max(1, per_batch // per))))
        return _Plan(b, pow2_at_least(b), context_patches(x.shape[-1], self.config.patch_size), steps,
                     samples, per if steps > 1 else samples, group)

    @torch.inference_mode()
    def _sample(self, x, mask, horizon, samples, per_batch, seed) -> tuple[torch.Tensor, _Plan]:
        plan = self._plan(x, horizon, samples, per_batch)
        p = self.config.patch_size
        width = plan.patches * p
        rows = plan.window_bucket
        xs = torch.zeros((rows, x.shape[1], width), dtype=torch.float32)
        ms = torch.zeros((rows, x.shape[1], width), dtype=torch.bool)
        xs[: plan.windows, :, width - x.shape[-1]:] = x
        ms[: plan.windows, :, width - x.shape[-1]:] = mask
        xs[plan.windows:], ms[plan.windows:] = xs[0], ms[0]  # bucket padding rows: copies of window 0
        xs, ms = xs.to(self.device), ms.to(self.device)
        bucket = (rows, plan.patches)
        out = torch.empty((plan.windows, x.shape[1], samples, plan.steps * p), dtype=torch.float32,
                          device=self.device)
        if plan.steps == 1:
            first = self.steps.call("prefill", bucket, self.model.prefill, xs, ms)
            for i in range(plan.windows):
                steps_needed = min(horizon, p)
                u = uniforms(seed, i, 0, (samples, x.shape[1], p), self.device)[:, :, :steps_needed]
                params = MixtureParams(*(t[i, :, :steps_needed] for t in first.params))
                draw = sample_mixture(params, u)  # [S, V, h]
                out[i, :, :, :steps_needed] = clean_feedback(
                    first.loc[i, :, None] + first.scale[i, :, None] * draw).transpose(0, 1)
            return out, plan
        first, k, v = self.steps.call("prefill_kv", bucket, self.model.prefill_with_cache, xs, ms)
        for start in range(0, plan.windows, plan.group):
            self._decode_group(first, k, v, plan, start, seed, out)
        return out, plan

    def _cache(self, rows: int, slots: int) -> StaticKVCache:
        """One persistent cache per (rows, slots) bucket: same buffers every call, so no new guards."""
        key = (rows, slots)
        if key not in self._caches:
            self._caches[key] = self.model.new_cache(rows, slots, self.device)
        return self._caches[key]

    def _decode_group(self, first, k, v, plan: _Plan, start: int, seed: int, out: torch.Tensor) -> None:
        """Sample paths for windows ``start .. start + group`` (group padded with the first of them)."""
        p, nvar, per, g = self.config.patch_size, out.shape[1], plan.per_batch, plan.group
        idx = [min(start + j, plan.windows - 1) for j in range(g)]
        real = [j for j in range(g) if start + j < plan.windows]
        sel = torch.tensor(idx, device=self.device)
        rows = g * per
        cache = self._cache(rows * nvar, cache_slots(plan.patches, plan.steps - 1))
        # window-major rows: (window, sample) sequences, each with nvar variates
        def spread(t: torch.Tensor) -> torch.Tensor:  # [g, ...] -> [g * per, ...]
            return t.unsqueeze(1).expand(g, per, *t.shape[1:]).reshape(rows, *t.shape[1:])

        def spread_kv(t: torch.Tensor) -> torch.Tensor:  # [L, B*V, H, n, d] -> view [L, g, per, V, H, n, d]
            lt, _, h, n, d = t.shape
            t = t.view(lt, -1, nvar, h, n, d).index_select(1, sel)
            return t.unsqueeze(2).expand(lt, g, per, nvar, h, n, d)

        k_rows, v_rows = spread_kv(k), spread_kv(v)
        # the first patch's mixture is shared by a window's samples: a sample axis of size 1 broadcasts
        params0 = MixtureParams(*(t.index_select(0, sel).unsqueeze(1) for t in first.params))
        loc0, scale0 = first.loc.index_select(0, sel).unsqueeze(1), first.scale.index_select(0, sel).unsqueeze(1)
        state0 = ScalerState(*(spread(t.index_select(0, sel)) for t in first.state))
        for s0 in range(0, plan.samples, per):
            n = min(per, plan.samples - s0)
            cache.load_prefix(k_rows, v_rows)
            params, loc, scale, state = params0, loc0, scale0, state0
            for step in range(plan.steps):
                patch = torch.empty((g, per, nvar, p), dtype=torch.float32, device=self.device)
                for j in range(g):
                    u = uniforms(seed, idx[j], step, (plan.samples, nvar, p), self.device)[s0: s0 + per]
                    if u.shape[0] < per:  # last chunk: unused rows get neutral draws
                        u = torch.cat([u, torch.full((per - u.shape[0], nvar, p, 3), 0.5, device=self.device)])
                    draw = sample_mixture(MixtureParams(*(t[j] for t in params)), u)
                    patch[j] = clean_feedback(loc[j][:, :, None] + scale[j][:, :, None] * draw)
                for j in real:
                    out[start + j, :, s0: s0 + n, step * p:(step + 1) * p] = patch[j, :n].transpose(0, 1)
                if step + 1 == plan.steps:
                    break
                pos = torch.tensor(plan.patches + step, device=self.device)
                x_in, state_in, pos = _contiguous((patch.view(rows, nvar, p), state, pos))
                res = self.steps.call("decode", (rows * nvar, cache.length), self.model.decode, cache,
                                      x_in, state_in, pos)
                params = MixtureParams(*(t.view(g, per, *t.shape[1:]) for t in res.params))
                loc, scale, state = res.loc.view(g, per, nvar), res.scale.view(g, per, nvar), res.state


def create(*, weights: str | None = None, device: str = "cpu", dtype: str = "float32",
           compile: str | None = None, seed: int = 0) -> TotoForecaster:
    """Registry factory: weights None/"auto" = Datadog/Toto-Open-Base-1.0, a folder, or "random". ``compile``
    None reads the compile settings (mode and ``TOTO_COMPILE_BACKEND``)."""
    from marketcast.runtime.settings import load_settings

    settings = load_settings()
    if compile is None:
        compile = settings.mode_for("toto", str(device))
    options = dict(device=device, dtype=dtype, compile=compile, backend=settings.toto_backend)
    if weights == "random":
        message = ("toto: weights='random' uses randomly initialised Toto-Open-Base-1.0 weights; its forecasts "
                   "are meaningless (use it for speed and plumbing tests only)")
        warnings.warn(message, stacklevel=2)
        log.warning(message)
        return TotoForecaster.from_config(TotoConfig.base(), seed=seed, **options)
    return TotoForecaster.from_pretrained(DEFAULT_REPO if weights in (None, "auto") else weights, **options)
