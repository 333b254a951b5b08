"""TotoForecaster: close/high/low as three variates of one series, sampled with at most one model pass
per patch of horizon, for every window of a call at once.

Horizon <= one patch: one compiled call per chunk of windows prefills the context and draws every sample of
every window from the mixture of the next patch (toto-ts instead re-runs the identical context once per
sample). Longer horizons: the prefill also returns the context's keys/values, which are broadcast into a
static cache for a group of (windows x sample paths); each decode step is one compiled call that feeds the
last patch back and draws the next one. Chunks and groups are sized from a memory budget
(:mod:`marketcast.forecast.toto.plan`); randomness is counter-based and keyed by each window's last
timestamp, so a window's paths do not depend on the rest of the batch.
"""

from __future__ import annotations

import logging
import os
import warnings

import numpy as np
import torch
from torch.utils._pytree import tree_map

from marketcast.errors import ConfigError
from marketcast.forecast.base import ContextBatch, Forecast, masked_prices
from marketcast.forecast.toto.config import TotoConfig
from marketcast.forecast.toto.graphs import decode_draw, prefill_draw, prefill_kv_draw
from marketcast.forecast.toto.kv_cache import StaticKVCache
from marketcast.forecast.toto.loading import DEFAULT_REPO, load_pretrained
from marketcast.forecast.toto.model import TotoModel, random_model
from marketcast.forecast.toto.plan import Plan, make_plan, min_budget
from marketcast.forecast.toto.scaler import ScalerState
from marketcast.forecast.warmup import CUDA_GRAPH_RUNS, synthetic_batch, timed_warmup
from marketcast.runtime.devices import torch_device, torch_dtype
from marketcast.runtime.memory import memory_budget, with_oom_backoff
from marketcast.runtime.precision import tf32
from marketcast.runtime.rng import window_streams
from marketcast.runtime.shapes import pow2_at_least
from marketcast.runtime.steps import CompiledSteps
from marketcast.runtime.transfer import HostSink

log = logging.getLogger("marketcast.toto")

FIELDS = ("close", "high", "low")
MIN_SAMPLES_PER_BATCH = 8  # OOM policy floors
MIN_SAMPLES = 32


def _dtype(name: str) -> torch.dtype:
    return torch_dtype(name, "Toto")


def _device(name: str | torch.device) -> torch.device:
    return torch_device(name, "Toto")


def _contiguous(tree):
    """Fresh row-major copies, so every call of a sealed graph sees identical strides (no stride guards fail)."""
    return tree_map(lambda t: t.clone(memory_format=torch.contiguous_format), tree)


class TotoForecaster:
    """Forecaster protocol for Toto; build it with :meth:`from_pretrained` or :meth:`from_config`.

    The constructor takes ownership of ``model``: it is moved to ``device`` and cast to ``dtype`` in place.
    ``samples_per_batch`` caps the sample paths of one decode call (None: as many as ``memory_budget``
    bytes allow, see :func:`marketcast.runtime.memory.memory_budget`); ``tf32`` allows TF32 matrix
    multiplies for float32 on CUDA.
    """

    name = "toto"
    fields = FIELDS
    paths = "joint"  # close/high/low drawn by the model (marketcast.forecast.paths)

    def __init__(self, model: TotoModel, *, device: str | torch.device = "cpu", dtype: str = "float32",
                 compile: str | None = None, backend: str = "inductor", samples_per_batch: int | None = None,
                 memory_budget: int | None = None, tf32: bool = False, source: str = "") -> None:
        self.device = _device(device)
        self.dtype_name = dtype
        self.model = model.eval().requires_grad_(False).to(self.device).set_precision(_dtype(dtype)).fuse_head()
        self.config = model.config
        self.source = source
        self.samples_per_batch = samples_per_batch
        self.memory_budget = memory_budget
        self.tf32 = tf32
        mode = None if compile in (None, "eager") else compile
        self.steps = CompiledSteps("toto", mode, self.device, backend)
        self._caches: dict[tuple, StaticKVCache] = {}

    # --- construction -------------------------------------------------------------------------------

    @classmethod
    def from_pretrained(cls, name_or_folder: str | os.PathLike = DEFAULT_REPO, *, device: str = "cpu",
                        dtype: str = "float32", compile: str | None = None, local_files_only: bool | None = None,
                        cache_dir: str | os.PathLike | None = None, **kwargs) -> "TotoForecaster":
        """Load ``config.json`` + ``model.safetensors`` from a folder or a Hugging Face repo (cache first),
        built on the meta device and filled straight from the file on ``device`` (no random init)."""
        model, folder = load_pretrained(name_or_folder, _device(device), local_files_only, cache_dir)
        return cls(model, device=device, dtype=dtype, compile=compile, source=str(folder), **kwargs)

    @classmethod
    def from_config(cls, config: TotoConfig | None = None, *, seed: int = 0, device: str = "cpu",
                    dtype: str = "float32", compile: str | None = None, **kwargs) -> "TotoForecaster":
        """Random weights (reproducible from ``seed``): for tests and benchmarks, not for forecasting."""
        model = random_model(config or TotoConfig.base(), seed)
        return cls(model, device=device, dtype=dtype, compile=compile, source=f"random(seed={seed})", **kwargs)

    def compile_guards(self):
        """The compile wrappers (one per step function and bucket) for the stress harness."""
        return self.steps.compile_guards()

    def warmup(self, context: int, horizon: int, num_samples: int, batch_size: int = 1) -> float:
        """Compile (and on CUDA record) every graph a ``forecast`` of ``batch_size`` windows of ``context``
        bars needs; returns the seconds it took. Later calls of those shapes never compile."""
        runs = CUDA_GRAPH_RUNS if self.device.type == "cuda" and self.steps.mode is not None else 1
        sync = torch.cuda.synchronize if self.device.type == "cuda" else None
        return timed_warmup(self.forecast, synthetic_batch(batch_size, context, horizon), horizon, num_samples,
                            runs, sync)

    # --- forecasting --------------------------------------------------------------------------------

    def forecast(self, batch: ContextBatch, horizon: int, num_samples: int, seed: int = 0) -> Forecast:
        if horizon < 1 or num_samples < 1:
            raise ConfigError(f"Toto needs horizon >= 1 and num_samples >= 1, got {horizon} and {num_samples}")
        x, mask = self._inputs(batch)
        streams = window_streams(seed, batch.window_keys())
        itemsize = _dtype(self.dtype_name).itemsize
        floor = min_budget(self.config, x.shape[-1], horizon, itemsize, x.shape[1], MIN_SAMPLES_PER_BATCH)
        budget = max(floor, memory_budget(self.device, self.memory_budget))

        def run(budget: int, samples: int) -> tuple[np.ndarray, Plan]:
            plan = make_plan(self.config, windows=x.shape[0], length=x.shape[-1], horizon=horizon, samples=samples,
                             budget=budget, itemsize=itemsize, variates=x.shape[1],
                             samples_per_batch=self.samples_per_batch)
            return self._sample(x, mask, streams, horizon, plan), plan

        with tf32(self.tf32, self.device):
            values, plan = with_oom_backoff(run, budget, num_samples, min_budget=floor, min_samples=MIN_SAMPLES,
                                            log=log, name="toto")
        meta = {
            "model": "toto", "source": self.source, "dtype": self.dtype_name, "device": str(self.device),
            "num_samples_used": plan.samples, "samples_per_batch_used": plan.per,
            "decode_steps": plan.steps - 1, "context_patches": plan.patches,
            "prefill_windows": plan.chunk, "decode_windows": plan.group,
            "compile_mode": self.steps.mode, "compile_backend": self.steps.backend, "compiled": self.steps.compiled,
            "fallback_reason": self.steps.fallback_reason,
        }
        return Forecast(samples=values, fields=FIELDS, meta=meta)

    def _inputs(self, batch: ContextBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """``[B, 3, T]`` float32 close/high/low and their mask; padding is zero like toto-ts's ``pad_array``."""
        values, mask = masked_prices(batch, FIELDS, "Toto")
        return torch.as_tensor(values, dtype=torch.float32), torch.as_tensor(mask)

    def _chunk(self, x, mask, streams, start: int, n: int, rows: int, width: int):
        """Windows ``start .. start + n`` left-padded to ``width`` steps, on the device, with ``rows - n``
        bucket padding rows (copies of the first window, discarded)."""
        pick = torch.arange(start, start + rows).clamp_max(start + n - 1)
        pick[n:] = start
        xs = torch.zeros((rows, x.shape[1], width), dtype=torch.float32)
        ms = torch.zeros((rows, x.shape[1], width), dtype=torch.bool)
        xs[:, :, width - x.shape[-1]:] = x[pick]
        ms[:, :, width - x.shape[-1]:] = mask[pick]
        return xs.to(self.device), ms.to(self.device), streams[pick].to(self.device)

    @torch.inference_mode()
    def _sample(self, x, mask, streams, horizon: int, plan: Plan) -> np.ndarray:
        """Sample paths ``[B, V, samples, horizon]`` (float64, host) following ``plan``."""
        b, nvar = x.shape[0], x.shape[1]
        out = np.empty((b, nvar, plan.samples, horizon), dtype=np.float64)
        sink = HostSink(out, self.device)
        width = plan.patches * self.config.patch_size
        for start in range(0, b, plan.chunk):
            n = min(plan.chunk, b - start)
            rows = pow2_at_least(n)
            xs, ms, st = self._chunk(x, mask, streams, start, n, rows, width)
            if plan.steps == 1:
                bucket = (rows, plan.patches, plan.sample_bucket, plan.draw_steps)
                values = self.steps.call("prefill", bucket, prefill_draw, self.model, xs, ms, st,
                                         plan.sample_bucket, plan.draw_steps)
                sink.put(slice(start, start + n), values[:n, :, :plan.samples, :horizon])
                continue
            bucket = (rows, plan.patches, plan.sample_bucket)
            first, state, k, v = self.steps.call("prefill_kv", bucket, prefill_kv_draw, self.model, xs, ms, st,
                                                 plan.sample_bucket)
            for w0 in range(0, n, plan.group):
                self._decode_group(first, state, k, v, st, plan, w0, min(plan.group, n - w0), horizon, sink, start)
        sink.flush()
        return out

    def _cache(self, rows: int, slots: int) -> StaticKVCache:
        """One persistent cache per (rows, slots) bucket: same buffers every call, so no new guards."""
        key = (rows, slots)
        if key not in self._caches:
            self._caches[key] = self.model.new_cache(rows, slots, self.device)
        return self._caches[key]

    def _decode_group(self, first, state: ScalerState, k, v, streams, plan: Plan, w0: int, real: int,
                      horizon: int, sink: HostSink, offset: int) -> None:
        """All paths of windows ``w0 .. w0 + real`` of a prefilled chunk into ``sink`` (at ``offset + w0``);
        the group is padded to ``plan.group`` windows with copies of its last window."""
        p, nvar, g, per = self.config.patch_size, first.shape[1], plan.group, plan.per
        rows = g * per
        idx = torch.arange(w0, w0 + g, device=self.device).clamp_max(w0 + real - 1)
        cache = self._cache(rows * nvar, plan.slots)
        lt, _, heads, n, d = k.shape  # [layers, chunk * V, heads, patches, head_dim]
        k_rows, v_rows = (t.view(lt, -1, nvar, heads, n, d).index_select(1, idx).unsqueeze(2)
                          .expand(lt, g, per, nvar, heads, n, d) for t in (k, v))
        state_g = ScalerState(*(t.index_select(0, idx) for t in state))
        state_rows = ScalerState(*(t.unsqueeze(1).expand(g, per, nvar).reshape(rows, nvar) for t in state_g))
        stream_rows = streams.index_select(0, idx).repeat_interleave(per)
        first_g = first.index_select(0, idx)  # [g, V, sample_bucket, P]
        windows = slice(offset + w0, offset + w0 + real)
        for s0 in range(0, plan.samples, per):
            m = min(per, plan.samples - s0)
            cache.load_prefix(k_rows, v_rows)
            paths = torch.empty((g, nvar, per, plan.steps * p), dtype=torch.float32, device=self.device)
            patch = first_g[:, :, s0:s0 + per]
            paths[..., :p] = patch
            patch = patch.permute(0, 2, 1, 3).reshape(rows, nvar, p)
            sample_ids = torch.arange(s0, s0 + per, device=self.device).repeat(g)
            st = state_rows
            for step in range(1, plan.steps):
                pos, step_t = (torch.tensor(i, device=self.device) for i in (plan.patches + step - 1, step))
                patch, st = _contiguous((patch, st))
                patch, st = self.steps.call("decode", (rows * nvar, plan.slots), decode_draw, self.model, cache, patch,
                                            st, pos, stream_rows, sample_ids, step_t)
                paths[..., step * p:(step + 1) * p] = patch.view(g, per, nvar, p).permute(0, 2, 1, 3)
            sink.put((windows, slice(None), slice(s0, s0 + m)), paths[:real, :, :m, :horizon])


def create(*, weights: str | None = None, device: str = "cpu", dtype: str = "float32",
           compile: str | None = None, seed: int = 0) -> TotoForecaster:
    """Registry factory: weights None/"auto" = Datadog/Toto-Open-Base-1.0, a folder, or "random". ``compile``
    None reads the compile settings (mode and ``TOTO_COMPILE_BACKEND``)."""
    from marketcast.runtime.compile_settings import load_settings

    settings = load_settings()
    if compile is None:
        compile = settings.mode_for("toto", str(device))
    options = dict(device=device, dtype=dtype, compile=compile, backend=settings.toto_backend)
    if weights == "random":
        message = ("toto: weights='random' uses randomly initialised Toto-Open-Base-1.0 weights; its forecasts "
                   "are meaningless (use it for speed and plumbing tests only)")
        warnings.warn(message, stacklevel=2)
        return TotoForecaster.from_config(TotoConfig.base(), seed=seed, **options)
    return TotoForecaster.from_pretrained(DEFAULT_REPO if weights in (None, "auto") else weights, **options)
