"""Chronos-2 (Amazon, ``chronos-forecasting`` 2.3) through its official package, behind the Forecaster protocol.

Each window's close/high/low go in as one multivariate task (three variates of one group, so Chronos-2's group
attention forecasts them jointly: Ansari et al. 2025, "Chronos-2: From Univariate to Universal Forecasting",
arXiv:2510.15821, section 3), every window of a call through ``Chronos2Pipeline.predict`` in chunks, with the
masked left padding given as NaN (the model's missing-value input). Its 21 quantile levels
(0.01, 0.05, 0.1 .. 0.9 step 0.05, 0.95, 0.99) ride along in ``Forecast.quantiles``; sample paths are drawn from
them by :func:`marketcast.forecast.copula.joint_paths`.

The model's quantile heads are not constrained to be monotone (random weights cross them everywhere, trained
ones now and then): the adapter sorts each window's knots, the rearrangement of Chernozhukov, Fernández-Val and
Galichon (2010, Econometrica 78(3)). Whatever the outcome, it never raises the quantile loss summed over the
levels: swapping a crossed pair (levels a < b, knots q_a > q_b) changes that sum by (a - b)(q_a - q_b) < 0.
``meta["quantile_crossings"]`` says how often it had to. The package runs eager: there is no compiled path here.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path

import numpy as np
import torch

from marketcast.errors import ModelLoadError, first_line
from marketcast.forecast.adapters.common import FIELDS, QuantileAdapter
from marketcast.forecast.adapters.extras import require
from marketcast.forecast.base import ContextBatch, masked_prices
from marketcast.forecast.hub import Checkpoint, register
from marketcast.runtime.devices import torch_device, torch_dtype

DEFAULT_REPO = "amazon/chronos-2"
# The public checkpoint's 21 training levels (its config.json ``chronos_config.quantiles``).
QUANTILES = (0.01, 0.05, *(round(0.05 * i, 2) for i in range(2, 19)), 0.95, 0.99)
CHUNK = 256  # windows per pipeline batch (3 series each)
RANDOM = re.compile(r"^random(?::tiny)?$")
# The public checkpoint's forecasting settings with a tiny transformer: for plumbing tests and benchmarks.
TINY = {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 2, "num_heads": 4, "dropout_rate": 0.0}
CHRONOS_CONFIG = {"context_length": 8192, "input_patch_size": 16, "input_patch_stride": 16,
                  "output_patch_size": 16, "quantiles": list(QUANTILES), "use_reg_token": True,
                  "use_arcsinh": True, "max_output_patches": 64, "time_encoding_scale": 8192}
NAME = "Chronos-2"


def _chronos2():
    """The package's ``chronos.chronos2`` module, or one line naming the extra."""
    return require("chronos.chronos2", "chronos", "chronos2")


def tiny_config(**overrides):
    """A ``Chronos2CoreConfig`` with the public checkpoint's patching and quantiles and a tiny transformer."""
    config = {**TINY, **overrides}
    return _chronos2().Chronos2CoreConfig(**config, chronos_config=dict(CHRONOS_CONFIG),
                                          architectures=["Chronos2Model"])


def random_model(seed: int = 0, config=None):
    """A randomly initialised ``Chronos2Model`` (reproducible from ``seed``; the global RNG is left alone)."""
    module = _chronos2()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return module.Chronos2Model(config if config is not None else tiny_config()).eval()


def _check_config(folder: Path) -> None:
    """Refuse, in one line, a folder whose config.json is not a Chronos-2 model (Toto's, Kronos's, Chronos-Bolt's)."""
    path = folder / "config.json"
    try:
        config = json.loads(path.read_text())
    except FileNotFoundError:
        raise ModelLoadError(f"{path}: not found; --weights for chronos2 is a folder holding config.json and "
                             "model.safetensors of a Chronos-2 checkpoint") from None
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{path}: unreadable ({first_line(exc)}); download the checkpoint again") from None
    arch = (config.get("architectures") or [None])[0] if isinstance(config, dict) else None
    if not isinstance(config, dict) or "chronos_config" not in config or arch != "Chronos2Model":
        raise ModelLoadError(f"{path}: not a Chronos-2 checkpoint (architectures={arch!r}); pass a folder or repo "
                             f"of Chronos-2 weights such as {DEFAULT_REPO}, or pick the --model those weights are for")


def load_pretrained(source: str | os.PathLike, device: torch.device, dtype: torch.dtype):
    """(model, folder): a folder or a repo id (HF cache first, the hub only when online), loaded by the
    package's own ``Chronos2Model.from_pretrained`` and refused when a tensor is missing or left over."""
    from marketcast.forecast.checkpoint import resolve_folder

    module = _chronos2()
    folder = resolve_folder(source, NAME)
    _check_config(folder)
    from transformers.utils import logging as hf_logging

    # transformers' progress bars and load report would go to stderr around our one line: we report ourselves
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        model, info = module.Chronos2Model.from_pretrained(str(folder), dtype=dtype, output_loading_info=True)
    except Exception as exc:  # transformers raises many types for a bad file: OSError, ValueError, RuntimeError
        raise ModelLoadError(f"{folder}: the Chronos-2 checkpoint does not load ({type(exc).__name__}: "
                             f"{first_line(exc, 160)})") from None
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    bad = [(kind, keys) for kind in ("missing_keys", "unexpected_keys", "mismatched_keys")
           if (keys := list(info.get(kind) or []))]
    if bad:
        kind, keys = bad[0]
        raise ModelLoadError(f"{folder}: {len(keys)} {kind.replace('_', ' ')} e.g. {keys[0]!r}; config.json and "
                             "model.safetensors are not one Chronos-2 checkpoint")
    return model.to(device).eval(), folder


def locate(weights: str | None) -> str:
    """Where ``--weights`` would load from (:func:`load_pretrained`'s resolution and config check, no tensor
    read): the folder, or ``random``; weights that are not here raise the loader's own line."""
    from marketcast.forecast.checkpoint import resolve_folder

    if RANDOM.match(str(weights or "")):
        return "random"
    folder = resolve_folder(DEFAULT_REPO if weights in (None, "auto") else str(weights), NAME)
    _check_config(folder)
    return str(folder)


class Chronos2Forecaster(QuantileAdapter):
    """Forecaster protocol for Chronos-2 (:class:`~marketcast.forecast.adapters.common.QuantileAdapter`).

    ``model`` is a ``chronos.chronos2.Chronos2Model``; the constructor moves it to ``device`` and ``dtype``.
    """

    name, label, quantile_levels = "chronos2", NAME, QUANTILES

    def __init__(self, model, *, device: str | torch.device = "cpu", dtype: str = "float32",
                 compile: str | None = None, chunk: int = CHUNK, source: str = "") -> None:
        super().__init__(device=device, dtype=dtype, compile=compile, source=source, chunk=chunk)
        self.model = model.to(device=self.device, dtype=self.dtype).eval().requires_grad_(False)
        self.pipeline = _chronos2().Chronos2Pipeline(model=self.model)
        levels = tuple(float(q) for q in self.pipeline.quantiles)
        if len(levels) != len(QUANTILES) or not np.allclose(levels, QUANTILES):
            raise ModelLoadError(f"{source or 'Chronos-2 model'}: quantile levels {levels} are not Chronos-2's 21 "
                                 f"levels {QUANTILES}; this adapter reads the public checkpoint's layout")

    def _inputs(self, batch: ContextBatch) -> torch.Tensor:
        """``[B, 3, T]`` float32 close/high/low, NaN where masked (Chronos-2 reads NaN as missing)."""
        values, mask = masked_prices(batch, FIELDS, NAME)
        return torch.as_tensor(np.where(mask, values, np.nan), dtype=torch.float32)

    def raw_quantiles(self, batch: ContextBatch, horizon: int) -> np.ndarray:
        """``[B, 3, 21, horizon]`` float64: the pipeline's quantiles as it returns them (not sorted)."""
        x = self._inputs(batch)
        out = np.empty((x.shape[0], len(FIELDS), len(QUANTILES), horizon), dtype=np.float64)
        with warnings.catch_warnings():
            # horizons past the checkpoint's 1,024 steps: the package unrolls and says so once per call
            warnings.filterwarnings("ignore", message="We recommend keeping prediction length")
            for start in range(0, x.shape[0], self.chunk):
                part = x[start:start + self.chunk]
                preds = self.pipeline.predict(part, prediction_length=horizon, batch_size=len(FIELDS) * len(part))
                out[start:start + len(part)] = torch.stack(preds).double().numpy()  # [n, 3, 21, H]
        return out

    def package_meta(self, batch: ContextBatch) -> dict:
        return {"multivariate": "close/high/low as one group"}


def create(*, weights: str | None = None, device: str = "cpu", dtype: str = "float32",
           compile: str | None = None, seed: int = 0) -> Chronos2Forecaster:
    """Registry factory: weights None/"auto" = amazon/chronos-2 (HF cache, or the hub when online), a folder, a
    repo id, or ``random`` (a tiny random-init model). ``compile`` is accepted and recorded; the model runs eager."""
    _chronos2()  # the missing extra is the first thing said
    torch_dev, torch_dt = torch_device(device, NAME), torch_dtype(dtype, NAME)
    if RANDOM.match(str(weights or "")):
        model, source = random_model(seed), f"random:tiny(seed={seed})"
        warnings.warn(f"chronos2: weights={weights!r} uses a tiny randomly initialised Chronos-2; its forecasts are "
                      "meaningless (use it for speed and plumbing tests only)", stacklevel=2)
    else:
        model, folder = load_pretrained(DEFAULT_REPO if weights in (None, "auto") else str(weights), torch_dev,
                                        torch_dt)
        source = str(folder)
    return Chronos2Forecaster(model, device=torch_dev, dtype=dtype, compile=compile, source=source)


register(Checkpoint("chronos2", "chronos2", {"": DEFAULT_REPO}, "auto"))
