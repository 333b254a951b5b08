"""TimesFM 2.5 (Google, 200M, PyTorch) through its official package ``timesfm`` (the ``timesfm`` extra).

TimesFM is univariate, so close, high and low are three series per window and every window of a call goes to
the package's own ``TimesFM_2p5_200M_torch.forecast`` as one list of ``B*3`` series. Left padding is trimmed
(the package left-pads each series with zeros and masks them itself, to ``max_context``). The forecast flags
are the ones the TimesFM README recommends for 2.5 (https://github.com/google-research/timesfm, "normalize_inputs,
use_continuous_quantile_head, force_flip_invariance, infer_is_positive, fix_quantile_crossing"), so the nine
quantiles 0.1..0.9 arrive sorted. Output column 0 is the mean: dropped (the median is the 0.5 quantile).

``max_context`` is the batch's context length rounded up to the 32-bar patch (the same for a window alone or in
a batch, so its forecast does not depend on its neighbours); contexts beyond the model's 16384-step limit keep
their last bars, as the package does. Runs eagerly: the package's ``torch.compile`` of ``forward`` is not used.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch

from marketcast.errors import ConfigError
from marketcast.forecast.adapters.common import FIELDS, QuantileAdapter, fill_random, package_version
from marketcast.forecast.adapters.extras import require
from marketcast.forecast.base import ContextBatch, masked_prices
from marketcast.forecast.hub import Checkpoint, register
from marketcast.forecast.quantiles import NINE
from marketcast.runtime.devices import torch_device, torch_dtype

NAME = "timesfm"
LABEL = "TimesFM 2.5"
DEFAULT_REPO = "google/timesfm-2.5-200m-pytorch"
PATCH, OUTPUT_PATCH, CONTEXT_LIMIT, QUANTILE_HEAD = 32, 128, 16384, 1024  # TimesFM_2p5_200M_Definition
CHUNK_ROWS = 192  # series per package batch: 64 windows, a few hundred MB of activations at 512 bars
FLAGS = dict(normalize_inputs=True, use_continuous_quantile_head=True, force_flip_invariance=True,
             infer_is_positive=True, fix_quantile_crossing=True)


def package():
    """The ``timesfm`` module, or one line naming the extra."""
    return require("timesfm", "timesfm", NAME)


def _empty_model(tfm_module):
    """The package's wrapper around a module built on the meta device (no 200M-parameter init to throw away)."""
    with torch.device("meta"):
        tfm = tfm_module.TimesFM_2p5_200M_torch(torch_compile=False)
    return tfm


def load_model(weights: str | None, device: torch.device, seed: int = 0):
    """(package model, source) for ``--weights``: None/"auto" (the public repo), a folder or repo id holding
    ``model.safetensors``, or ``random`` (the fixed 200M architecture with seeded random weights)."""
    from marketcast.forecast.checkpoint import load_strict, read_safetensors, resolve_folder

    tfm_module = package()
    tfm = _empty_model(tfm_module)
    if str(weights or "").lower() == "random":
        tfm.model.to_empty(device=torch.device("cpu"))
        fill_random(tfm.model, seed)
        source = f"random:200m(seed={seed})"  # the architecture is fixed: the real one
    else:
        repo = DEFAULT_REPO if weights in (None, "auto") else str(weights)
        folder = resolve_folder(repo, LABEL)
        path = folder / "model.safetensors"
        state = read_safetensors(path, "cpu")
        load_strict(tfm.model, state, str(path), LABEL)
        source = str(folder)
    tfm.model.to(device).eval().requires_grad_(False)
    tfm.model.device, tfm.model.device_count = device, 1  # the package picks cuda:0 and every GPU by itself
    return tfm, source


def locate(weights: str | None) -> str:
    """Where ``--weights`` would load from (:func:`load_model`'s resolution, no tensor read): the folder, or
    ``random``; weights that are not here raise the loader's own line."""
    from marketcast.forecast.checkpoint import resolve_folder

    if str(weights or "").lower() == "random":
        return "random"
    return str(resolve_folder(DEFAULT_REPO if weights in (None, "auto") else str(weights), LABEL))


class TimesFMForecaster(QuantileAdapter):
    """Forecaster protocol for TimesFM 2.5 (:class:`~marketcast.forecast.adapters.common.QuantileAdapter`)."""

    name, label, quantile_levels = NAME, LABEL, NINE

    def __init__(self, tfm, *, device: str | torch.device = "cpu", dtype: str = "float32",
                 compile: str | None = None, source: str = "", chunk: int = CHUNK_ROWS) -> None:
        super().__init__(device=device, dtype=dtype, compile=compile, source=source, chunk=chunk)
        self.tfm = tfm

    def _config(self, context: int, horizon: int, rows: int):
        """The package's ForecastConfig for this call: patch-rounded context and horizon, ``rows`` per batch."""
        max_horizon = math.ceil(horizon / OUTPUT_PATCH) * OUTPUT_PATCH
        if max_horizon > QUANTILE_HEAD:
            raise ConfigError(f"{LABEL} forecasts at most {QUANTILE_HEAD} steps with its quantile head; got "
                              f"horizon {horizon}: lower --horizon")
        max_context = min(math.ceil(context / PATCH) * PATCH, (CONTEXT_LIMIT - max_horizon) // PATCH * PATCH)
        batches = math.ceil(rows / self.chunk)
        per_batch = math.ceil(rows / batches)  # even batches: the package pads the last one with dummy series
        return package().ForecastConfig(max_context=max_context, max_horizon=max_horizon,
                                        per_core_batch_size=per_batch, **FLAGS)

    @torch.inference_mode()
    def raw_quantiles(self, batch: ContextBatch, horizon: int) -> np.ndarray:
        """``[B, 3, 9, horizon]`` float64 quantiles (levels 0.1..0.9) of close/high/low (sorted by the package)."""
        values, mask = masked_prices(batch, FIELDS, LABEL)  # [B, 3, T]
        b, f, t = values.shape
        series = [values[i, j][mask[i, j]] for i in range(b) for j in range(f)]  # left padding trimmed
        self.tfm.compile(self._config(t, horizon, len(series)))
        autocast = torch.autocast(self.device.type, dtype=self.dtype, enabled=self.dtype != torch.float32)
        with autocast:
            _, q = self.tfm.forecast(horizon, series)  # [B*3, H, 10]: mean, then 0.1 .. 0.9
        q = np.asarray(q, dtype=np.float64)[:, :horizon, 1:]
        return q.reshape(b, f, horizon, len(NINE)).transpose(0, 1, 3, 2).copy()

    def package_meta(self, batch: ContextBatch) -> dict:
        return {"package": f"timesfm {package_version('timesfm')}", "forecast_flags": dict(FLAGS),
                "max_context": self.tfm.forecast_config.max_context, "mean": "dropped (the median is q0.5)"}


def create(*, weights: str | None = None, device: str = "cpu", dtype: str = "float32",
           compile: str | None = None, seed: int = 0) -> TimesFMForecaster:
    """Registry factory: weights None/"auto" = google/timesfm-2.5-200m-pytorch (HF cache or hub), a folder
    holding model.safetensors, a repo id, or ``random``."""
    dev = torch_device(device, LABEL)
    torch_dtype(dtype, LABEL)
    tfm, source = load_model(weights, dev, seed)
    if source.startswith("random"):
        warnings.warn(f"{NAME}: weights={weights!r} uses randomly initialised TimesFM 2.5 weights (the fixed 200M "
                      "architecture); its forecasts are meaningless (use it for speed and plumbing tests only)",
                      stacklevel=2)
    return TimesFMForecaster(tfm, device=dev, dtype=dtype, compile=compile, source=source)


register(Checkpoint(NAME, NAME, {"": DEFAULT_REPO}, "auto", files=("model.safetensors",)))
